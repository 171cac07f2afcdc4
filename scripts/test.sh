#!/usr/bin/env bash
# Runs every test: the format check, the clang build with the thread-safety
# analysis, unit, end-to-end and Python tests (ctest), and a short run of each fuzz
# target, printing each phase's seconds. Assumes scripts/build.sh has built ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
timings=()
phase() {  # phase NAME COMMAND...: runs it, and notes its seconds
  local name=$1 start=$SECONDS status=0
  shift
  echo "== $name"
  "$@" || status=$?
  timings+=("$name $((SECONDS - start)) s")
  return "$status"
}
phase "format (clang-format)" bash scripts/format_check.sh
# The clang check and the fuzz targets' build need only CPU, while ctest's tests
# wait on daemons, sockets and sleeps for about a quarter of its time (vmstat:
# 25% idle over a 1,029 s ctest on 2 cores). So they run beside ctest at the
# lowest priority (nice 19: the tests keep their CPU), in that idle time; their
# output follows ctest's, and what they took past ctest's end is said. setsid
# makes them a process group to end on exit; where the kernel groups a session's
# processes for the scheduler (sched_autogroup), the new session's group is set
# to nice 19 too, or it would get half the CPUs whatever its processes' nice.
beside_log=$(mktemp)
# shellcheck disable=SC2016
setsid nice -n 19 bash -c 'set -e; start=$SECONDS
  [[ -w /proc/self/autogroup ]] && echo 19 >/proc/self/autogroup 2>/dev/null || true
  bash scripts/clang_check.sh build
  echo "clang_check: $((SECONDS - start)) s"
  bash scripts/fuzz.sh --build
  echo "fuzz build: $((SECONDS - start)) s in all"' >"$beside_log" 2>&1 &
beside=$!
trap 'kill -- -"$beside" 2>/dev/null || true; rm -f "$beside_log"' EXIT
# failed_tails: the last lines of each failed test's output, again at the end:
# where a log keeps only its tail (CI's), the reason a test failed is then in it.
failed_tails() {
  awk '/^[0-9]+\/[0-9]+ Testing: / {name = $3; n = 0; out = 0; next}
       /^<end of output>$/ {out = 0; next}
       out {lines[n++] = $0; next}
       /^Output:$/ {out = 1; getline; next}
       /^Test Failed|^Test Not Run/ {
         print "== the end of " name "'"'"'s output (" n " lines):"
         for (i = (n > 60 ? n - 60 : 0); i < n; i++) print lines[i]
       }' build/Testing/Temporary/LastTest.log 2>/dev/null || true
}
ctest_status=0
phase "ctest (unit, end-to-end, python)" ctest --test-dir build --output-on-failure -j "$(nproc)" ||
  ctest_status=$?
if [[ $ctest_status -ne 0 ]]; then
  failed_tails
  exit "$ctest_status"
fi
echo "== clang -Wthread-safety, then the fuzz targets' build (begun beside ctest)"
waited=$SECONDS
beside_status=0
wait "$beside" || beside_status=$?
cat "$beside_log"
timings+=("clang check and fuzz build past ctest $((SECONDS - waited)) s")
[[ $beside_status -eq 0 ]] || { echo "test.sh: the clang check or the fuzz build failed (above)" >&2; exit 1; }
phase "fuzz targets" bash scripts/fuzz.sh "${GOLDMINER_FUZZ_SECONDS:-15}"
summary=""
for t in "${timings[@]}"; do summary+="${summary:+; }$t"; done
echo "== test.sh: $summary; $SECONDS s in all"
