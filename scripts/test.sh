#!/usr/bin/env bash
# Runs every test: the format check, the clang build with the thread-safety
# analysis, unit, end-to-end and Python tests (ctest), and a short run of each fuzz
# target, printing each phase's seconds. Assumes scripts/build.sh has built ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
timings=()
phase() {  # phase NAME COMMAND...: runs it, and notes its seconds
  local name=$1 start=$SECONDS
  shift
  echo "== $name"
  "$@"
  timings+=("$name $((SECONDS - start)) s")
}
phase "format (clang-format)" bash scripts/format_check.sh
phase "clang -Wthread-safety" bash scripts/clang_check.sh build
phase "ctest (unit, end-to-end, python)" ctest --test-dir build --output-on-failure -j "$(nproc)"
phase "fuzz targets" bash scripts/fuzz.sh "${GOLDMINER_FUZZ_SECONDS:-15}"
summary=""
for t in "${timings[@]}"; do summary+="${summary:+; }$t"; done
echo "== test.sh: $summary; $SECONDS s in all"
