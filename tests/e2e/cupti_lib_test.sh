#!/usr/bin/env bash
# End-to-end: libgoldminer_cupti.so, the CUPTI injection library of `goldminer
# profile`, is built wherever CUPTI is installed (a build that silently skipped it
# fails here), exports InitializeInjection and nothing else, needs libcupti but not
# libcuda, and loads and runs in a process without an NVIDIA driver: it never
# fails the process, and its log says why no activity will come.
#
# Without a driver, libcupti loads (it opens libcuda.so.1 lazily), takes the buffer
# callbacks and gives timestamps, but refuses the timestamp callback and every
# activity kind with CUPTI_ERROR_UNKNOWN (999). Under CUDA_INJECTION64_PATH the
# library is only ever loaded by the driver itself, so that case is this direct
# dlopen, which is what this test does.
source "$(dirname "$0")/lib.sh"

LIB=$BUILD/profiler/cupti/libgoldminer_cupti.so
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"; }
mode=$(cache_value GOLDMINER_CUPTI | tr '[:lower:]' '[:upper:]')
if [[ $mode == OFF || $mode == 0 || $mode == FALSE || $mode == NO ]]; then
  echo "skip: configured with GOLDMINER_CUPTI=$mode"
  done_suite
  exit 0
fi

# Where a CUPTI installation would make the configuration build the library.
headers=()
for root in "$(cache_value CUDAToolkit_ROOT)" "${CUDAToolkit_ROOT:-}" "${CUDA_HOME:-}" /usr/local/cuda; do
  [[ -n $root ]] || continue
  for h in "$root/include/cupti.h" "$root/extras/CUPTI/include/cupti.h"; do
    [[ -f $h ]] && headers+=("$h")
  done
done
if [[ ! -f $LIB ]]; then
  if (( ${#headers[@]} > 0 )); then
    fail "CUPTI is installed (${headers[0]}) but $LIB was not built: see the line" \
         "'CUPTI injection library: ...' of the cmake configuration for why"
  fi
  echo "skip: no CUPTI on this machine (no cupti.h under /usr/local/cuda or CUDAToolkit_ROOT)"
  done_suite
  exit 0
fi
ok "the injection library was built ($LIB)"

exports=$(nm -D --defined-only "$LIB" | awk '{print $3}' | sort -u | tr '\n' ' ')
[[ $exports == "InitializeInjection " ]] || fail "exports only InitializeInjection, got: $exports"
ok "exports InitializeInjection and nothing else"

needed=$(objdump -p "$LIB" | awk '/NEEDED/ {print $2}' | tr '\n' ' ')
[[ $needed == *libcupti.so* ]] || fail "links libcupti, NEEDED: $needed"
[[ $needed != *libcuda.so* ]] || fail "must not link libcuda (the driver loads the library), NEEDED: $needed"
[[ $needed != *libstdc++* ]] || fail "libstdc++ is linked in statically, NEEDED: $needed"
ok "needs libcupti, not libcuda nor libstdc++ ($needed)"

ldd "$LIB" >"$T/ldd" 2>&1 || { cat "$T/ldd" >&2; fail "ldd $LIB"; }
if grep -q "not found" "$T/ldd"; then cat "$T/ldd" >&2; fail "every dependency resolves (RPATH to libcupti)"; fi
expect_in "$T/ldd" "libcupti.so" "libcupti resolves through the RPATH"

# Loads the library in a fresh process, calls InitializeInjection as the driver
# would, prints "<pid> <return value>" and exits normally (atexit handlers run).
call_init() {
  "$PY" -c 'import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1])
print(os.getpid(), lib.InitializeInjection(), lib.InitializeInjection())' "$LIB"
}

mkdir -p "$T/cwd"
(cd "$T/cwd" && unset GOLDMINER_PROFILE_DIR && call_init) >"$T/out" 2>"$T/err" \
  || { cat "$T/err" >&2; fail "InitializeInjection without GOLDMINER_PROFILE_DIR"; }
read -r _ rc1 rc2 <"$T/out"
[[ $rc1 == 1 && $rc2 == 1 ]] || fail "InitializeInjection returns 1, got: $(cat "$T/out")"
[[ -z $(find "$T" -name 'gpu.*.log') ]] || fail "no GOLDMINER_PROFILE_DIR: no log is written"
ok "without GOLDMINER_PROFILE_DIR it does nothing and returns 1"

mkdir -p "$T/prof"
GOLDMINER_PROFILE_DIR=$T/prof call_init >"$T/out" 2>"$T/err" \
  || { cat "$T/err" >&2; fail "InitializeInjection with GOLDMINER_PROFILE_DIR did not crash the process"; }
read -r pid rc1 rc2 <"$T/out"
[[ $rc1 == 1 && $rc2 == 1 ]] || fail "InitializeInjection returns 1 (twice), got: $(cat "$T/out")"
ok "with GOLDMINER_PROFILE_DIR the process runs on and exits 0"
log=$T/prof/gpu.$pid.log
[[ -f $log ]] || fail "the log is $log; the directory holds: $(ls "$T/prof")"
echo "--- $log"; cat "$log"
[[ $(head -n 1 "$log") == "# goldminer gpu log 1 pid=$pid" ]] || fail "header of $log"
ok "the log starts with its header"
[[ $(grep -c '^# goldminer gpu log' "$log") == 1 ]] || fail "a second call writes no second header"
ok "a second InitializeInjection changes nothing"
grep -qE '^# clock=(monotonic|cupti)$' "$log" || fail "the log says which clock it uses"
ok "the log names its clock"
# Every line is one of the format's (profiler/gpu_log.h).
bad=$(grep -vE '^(# .*|C [0-9]+ [0-9]+|[KMS] [0-9]+ [0-9]+ .*|D [0-9]+|E .*)$' "$log" || true)
[[ -z $bad ]] || fail "lines outside the log format: $bad"
ok "every line is in the GPU log format"

if "$PY" -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null; then
  # A driver (a GPU machine): CUPTI works outside cuInit too.
  expect_in "$log" "# clock=monotonic" "with a driver the monotonic timestamp callback is taken"
  grep -qE '^C [0-9]+ [0-9]+$' "$log" || fail "with a driver the start clock pair is written"
  ok "with a driver the clock pairs are written"
else
  expect_in "$log" "E cuptiActivityEnable(CONCURRENT_KERNEL) failed: CUPTI_ERROR_" \
    "without a driver the refused activity kind is an E line naming CUPTI's error"
  expect_in "$log" "E no GPU activity will be recorded: CUPTI enabled no activity kind (libcuda.so.1, the NVIDIA driver, is not loaded in this process)" \
    "without a driver an E line says why no activity will come"
fi

GOLDMINER_PROFILE_DIR=$T/absent/dir call_init >"$T/out" 2>"$T/err" \
  || { cat "$T/err" >&2; fail "an unwritable GOLDMINER_PROFILE_DIR does not fail the process"; }
read -r _ rc1 _ <"$T/out"
[[ $rc1 == 1 ]] || fail "InitializeInjection returns 1 with an unwritable directory"
expect_in "$T/err" "goldminer: cannot create the GPU activity log $T/absent/dir/gpu." \
  "an unwritable profile directory is a warning on stderr, training goes on"

done_suite
