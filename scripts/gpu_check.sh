#!/usr/bin/env bash
# GPU check of `goldminer profile`: the CUPTI injection library, the GPU activity
# log and the GPU figures of profile.json, on a machine with an NVIDIA GPU.
#
# Usage (from the repository root, one call, about 2-5 minutes):
#   OUT=/some/dir BUILD=./build bash scripts/gpu_check.sh
#   bash scripts/gpu_check.sh --pack DIR   (on the build machine, before) copies
#            what the check needs from BUILD (default ./build), stripped, into DIR
#            (a few MB, e.g. build-gpu/, ignored by git, small enough to carry):
#            then run the check there with BUILD=DIR.
#     BUILD  a build directory made elsewhere or here (default ./build): it needs
#            cmd/goldminer and client/libgoldminer_client.so; when they are missing
#            and cmake exists, the script builds them (time-boxed).
#     OUT    where results go (default: a new temporary directory, printed).
#     GPU_CHECK_CUPTI=carried|local   which libgoldminer_cupti.so to use: the one
#            in BUILD, or one compiled here with g++ against this machine's CUPTI
#            (default: BUILD's when its libcupti resolves and the driver is new
#            enough for it, else local).
#
# Needs: the NVIDIA driver, nvcc (CUDA toolkit with CUPTI), g++, python3 (json only;
# numpy for the exec-stage pipeline; torch with CUDA for the torch case, else it is
# skipped). What it does, each step time-boxed with `timeout`:
#   1. builds tests/gpu/cuda_trainer.cu with nvcc (a trainer over the client C ABI:
#      per step, a batch from goldminer, cudaMemcpy HtoD, a --kernel-ms spin kernel,
#      synchronize), and the injection library when needed;
#   2. smoke: runs the trainer alone under CUDA_INJECTION64_PATH (it exits at
#      gm_client_open, after its calibration kernel) and checks the GPU log;
#   3. `goldminer profile` of the CUDA trainer fed fast (busy high, stall ~0), the
#      same without CUPTI (overhead), starved by a slow pipeline (stall high), and
#      of tests/gpu/torch_cuda_train.py (an unmodified torch program, starved);
#   4. checks the figures in each profile.json and prints PASS/FAIL lines and the
#      key numbers. $OUT gets: gpu_check.log (all output), summary.txt, env.txt,
#      <case>.json, <case>_trace.json, <case>.out/.err, <case>_logs/ (the gpu.*.log
#      and steps.*.log the trainer left; a wrapper keeps them) and <case>_gpu_head.txt.
# Exit status: 0 when every check passed, 1 otherwise.
set -uo pipefail

# shellcheck source=scripts/device_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_lib.sh"  # REPO, BUILD, pack_build, start_output

# --pack DIR: goldminer, the client library (as real files, no links) and the
# injection library, stripped, in BUILD's layout.
if [[ ${1:-} == --pack ]]; then
  dir=${2:?usage: gpu_check.sh --pack DIR}
  pack_build "$dir"
  mkdir -p "$dir/profiler/cupti" || exit 1
  cupti=$BUILD/profiler/cupti/libgoldminer_cupti.so
  [[ -f $cupti ]] && strip --strip-unneeded -o "$dir/profiler/cupti/libgoldminer_cupti.so" "$cupti"
  du -sh "$dir"
  exit 0
fi
start_output gpu_check

passes=0
fails=0
say() { echo; echo "== $*"; }
pass() { passes=$((passes + 1)); echo "PASS: $*" | tee -a "$OUT/summary.txt"; }
fail() { fails=$((fails + 1)); echo "FAIL: $*" | tee -a "$OUT/summary.txt"; }
info() { echo "INFO: $*" | tee -a "$OUT/summary.txt"; }
finish() {
  echo
  echo "gpu_check: $passes passed, $fails failed; results in $OUT"
  echo "gpu_check: $passes passed, $fails failed" >>"$OUT/summary.txt"
  exit $((fails > 0 ? 1 : 0))
}
PYJ=$(command -v python3 || echo /usr/bin/python3)  # json only

say "environment (repo $REPO, build $BUILD, out $OUT)"
{
  uname -a; cat /etc/os-release 2>/dev/null | head -2
  timeout 30 nvidia-smi 2>&1 | head -20
  command -v nvcc && timeout 30 nvcc --version | tail -2
  command -v g++ && g++ --version | head -1
  command -v cmake && cmake --version | head -1
} 2>&1 | tee "$OUT/env.txt"
# Pythons: one with numpy runs the exec stage; one with torch + CUDA the torch case.
NUMPY_PY=
TORCH_PY=
for p in $(printf '%s\n' /usr/bin/python3 "$(command -v python3 || true)" | awk 'NF && !seen[$0]++'); do
  [[ -x $p ]] || continue
  versions=$(timeout 120 "$p" -c 'import sys; print(sys.version.split()[0], end=" ")
try:
    import numpy; print("numpy", numpy.__version__, end=" ")
except Exception as e: print("numpy: none", end=" ")
try:
    import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())
except Exception as e: print("torch: none")' 2>&1 | tail -1)
  echo "$p: $versions" | tee -a "$OUT/env.txt"
  [[ -z $NUMPY_PY && $versions == *"numpy "[0-9]* ]] && NUMPY_PY=$p
  [[ -z $TORCH_PY && $versions == *" True" ]] && TORCH_PY=$p
done
DRIVER_CUDA=$(grep -oE 'CUDA Version: [0-9]+' "$OUT/env.txt" | grep -oE '[0-9]+$' | head -1)
if [[ -z $DRIVER_CUDA ]]; then
  fail "nvidia-smi shows no driver/GPU (see env.txt): nothing to check"
  finish
fi
info "driver supports CUDA $DRIVER_CUDA.x"
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
[[ -n $NVCC ]] || { fail "no nvcc (CUDA toolkit) on PATH or in /usr/local/cuda/bin"; finish; }
CUDA_ROOT=$(cd "$(dirname "$NVCC")/.." && pwd)

# --- 1. goldminer, the client library, the injection library, the trainer ---------
GM=$BUILD/cmd/goldminer
CLIENT=$BUILD/client/libgoldminer_client.so
if [[ ! -x $GM || ! -f $CLIENT ]] && command -v cmake >/dev/null; then
  say "building goldminer in $BUILD (cmake; at most 6 minutes)"
  timeout 360 bash -c "cmake -S '$REPO' -B '$BUILD' -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGOLDMINER_TESTS=OFF -DGOLDMINER_BENCH=OFF -DCUDAToolkit_ROOT='$CUDA_ROOT' >/dev/null && \
    cmake --build '$BUILD' -j \$(nproc) --target goldminer goldminer_client" 2>&1 | tail -20
fi
[[ -x $GM ]] || { fail "no goldminer binary at $GM (carry ./build, or have cmake here)"; finish; }
for f in "$GM" "$CLIENT"; do
  if ldd "$f" 2>&1 | grep -q "not found"; then
    ldd "$f" | grep "not found"
    fail "$f lacks shared libraries on this machine (above)"
    finish
  fi
done
pass "goldminer and libgoldminer_client.so load here"
export GOLDMINER_PYTHONPATH=$REPO/python GOLDMINER_CLIENT_LIB=$CLIENT

cupti_inc=
cupti_lib=
for d in "$CUDA_ROOT/include" "$CUDA_ROOT/extras/CUPTI/include" /usr/local/cuda/include \
         /usr/local/cuda/extras/CUPTI/include; do
  [[ -f $d/cupti_activity.h ]] && { cupti_inc=$d; break; }
done
for d in "$CUDA_ROOT/lib64" "$CUDA_ROOT/lib" "$CUDA_ROOT/extras/CUPTI/lib64" \
         "$CUDA_ROOT/targets/x86_64-linux/lib" /usr/local/cuda/extras/CUPTI/lib64; do
  [[ -e $d/libcupti.so ]] && { cupti_lib=$d; break; }
done
info "this machine's CUPTI: headers ${cupti_inc:-none}, library ${cupti_lib:-none}"

# Compiles the injection library against this machine's CUPTI, as
# profiler/cupti/CMakeLists.txt does (newest record structs of the header).
build_local_cupti() {
  [[ -n $cupti_inc && -n $cupti_lib ]] || { echo "no CUPTI headers/library here"; return 1; }
  local h=$cupti_inc/cupti_activity.h defs=() kind n
  for kind in Kernel Memcpy Memset; do
    n=$(grep -oE "^} CUpti_Activity${kind}[0-9]+;" "$h" | grep -oE '[0-9]+' | sort -n | tail -1)
    [[ -n $n ]] || { echo "no CUpti_Activity${kind}N in $h"; return 1; }
    defs+=("-DGM_CUPTI_$(echo "$kind" | tr a-z A-Z)_RECORD=CUpti_Activity${kind}$n")
  done
  grep -qE 'cuptiActivityRegisterTimestampCallback *\(' "$h" && defs+=(-DGM_CUPTI_HAS_TIMESTAMP_CALLBACK=1)
  grep -qE 'cuptiActivityFlushPeriod *\(' "$h" && defs+=(-DGM_CUPTI_HAS_FLUSH_PERIOD=1)
  echo "g++ ${defs[*]}"
  timeout 180 "${CXX:-g++}" -std=c++17 -O2 -shared -fPIC -fvisibility=hidden -pthread \
    -I"$REPO" -isystem "$cupti_inc" -isystem "$CUDA_ROOT/include" "${defs[@]}" \
    "$REPO/profiler/cupti/injection.cc" "$REPO/profiler/cupti/record_format.cc" \
    -o "$WORK/libgoldminer_cupti.so" -L"$cupti_lib" -lcupti -ldl -Wl,-rpath,"$cupti_lib" \
    -Wl,--version-script="$REPO/profiler/cupti/exports.map" -static-libstdc++ -static-libgcc
}

carried=$BUILD/profiler/cupti/libgoldminer_cupti.so
carried_ok=
if [[ -f $carried ]]; then
  ldd "$carried" | grep -E "cupti|not found" | sed 's/^/  carried: /'
  carried_major=$(objdump -p "$carried" 2>/dev/null | grep -oE 'libcupti\.so\.[0-9]+' | head -1 | grep -oE '[0-9]+$')
  if ! ldd "$carried" | grep -q "not found" && [[ -n $carried_major ]] && \
     (( carried_major <= DRIVER_CUDA )); then
    carried_ok=1
  fi
fi
choice=${GPU_CHECK_CUPTI:-$([[ -n $carried_ok ]] && echo carried || echo local)}
if [[ $choice == carried ]]; then
  CUPTI_LIB=$carried
else
  say "building libgoldminer_cupti.so against this machine's CUPTI"
  if build_local_cupti; then CUPTI_LIB=$WORK/libgoldminer_cupti.so; else CUPTI_LIB=$carried; fi
fi
[[ -f $CUPTI_LIB ]] || { fail "no usable libgoldminer_cupti.so (carried: $carried)"; finish; }
export GOLDMINER_CUPTI_LIB=$CUPTI_LIB
cp "$CUPTI_LIB" "$OUT/libgoldminer_cupti.so.used"
info "injection library: $CUPTI_LIB ($choice); $(ldd "$CUPTI_LIB" | grep cupti | xargs)"
exports=$(nm -D --defined-only "$CUPTI_LIB" | awk '{print $3}' | tr '\n' ' ')
[[ $exports == "InitializeInjection " ]] && pass "the injection library exports only InitializeInjection" \
  || fail "the injection library exports: $exports"

say "building tests/gpu/cuda_trainer.cu"
TRAINER=$WORK/cuda_trainer
nvcc_trainer() {
  timeout 240 "$NVCC" -O2 "$@" -I"$REPO/include" "$REPO/tests/gpu/cuda_trainer.cu" -o "$TRAINER" \
    -L"$(dirname "$CLIENT")" -lgoldminer_client -Xlinker -rpath -Xlinker "$(dirname "$CLIENT")"
}
nvcc_trainer -arch=native || nvcc_trainer || { fail "nvcc could not build the CUDA trainer"; finish; }
pass "built the CUDA trainer"

# --- 2. smoke: the library in a CUDA process, without goldminer profile ------------
say "smoke: the trainer alone under CUDA_INJECTION64_PATH"
mkdir -p "$OUT/smoke_logs"
GOLDMINER_PROFILE_DIR=$OUT/smoke_logs CUDA_INJECTION64_PATH=$CUPTI_LIB \
  timeout 120 env -u GOLDMINER_ADDR "$TRAINER" --kernel-ms 5 >"$OUT/smoke.out" 2>&1
echo "smoke exit $? (2 expected: no coordinator)"; cat "$OUT/smoke.out"
smoke_log=$(ls "$OUT"/smoke_logs/gpu.*.log 2>/dev/null | head -1)
if [[ -n $smoke_log ]]; then
  head -20 "$smoke_log"
  grep -q '^# clock=monotonic$' "$smoke_log" && pass "smoke: the timestamp callback was taken (clock=monotonic)" \
    || fail "smoke: clock is not monotonic: $(grep '^# clock\|^E' "$smoke_log" | head -5 | xargs)"
  grep -q '^K .*Spin' "$smoke_log" && pass "smoke: the calibration kernel is in the log" \
    || fail "smoke: no Spin kernel in $smoke_log"
  (( $(grep -c '^C ' "$smoke_log") >= 2 )) && pass "smoke: clock pairs at start and exit (atexit flush ran)" \
    || fail "smoke: fewer than 2 C lines"
  grep -q '^E ' "$smoke_log" && fail "smoke: errors: $(grep '^E ' "$smoke_log" | head -3 | xargs)"
else
  fail "smoke: no gpu.*.log written: the driver did not load $CUPTI_LIB (or it failed early)"
fi

# --- 3. profiles -----------------------------------------------------------------------
cat >"$WORK/keep_logs.sh" <<'SH'
#!/usr/bin/env bash
# Runs the trainer as a child, passes SIGTERM on, and keeps the profile directory's
# logs in $KEEP_LOGS once the trainer has ended (profile removes its directory).
"$@" &
child=$!
trap 'kill -TERM $child 2>/dev/null' TERM
while :; do
  wait $child; rc=$?
  kill -0 $child 2>/dev/null || break
done
mkdir -p "$KEEP_LOGS" && cp "$GOLDMINER_PROFILE_DIR"/*.log "$KEEP_LOGS"/ 2>/dev/null
exit $rc
SH
chmod +x "$WORK/keep_logs.sh"

cat >"$WORK/fast.json" <<'JSON'
{"version": 1, "name": "gpu-check-fast", "source": {"type": "range", "count": 1000000},
 "stages": [], "batch": {"size": 32}, "seed": 1}
JSON
if [[ -n $NUMPY_PY ]]; then
  # 25 ms of sleep per sample in one Python process: a batch of 8 every 200 ms.
  printf 'import time\ndef slow(sample):\n    time.sleep(0.025)\n    return sample\n' >"$WORK/slow_stage.py"
  cat >"$WORK/slow.json" <<JSON
{"version": 1, "name": "gpu-check-slow", "source": {"type": "range", "count": 1000000},
 "stages": [{"op": "exec", "cmd": ["$NUMPY_PY", "-m", "goldminer.stage", "slow_stage:slow"],
             "processes": 1}],
 "batch": {"size": 8}, "seed": 1}
JSON
else
  # No numpy for an exec stage: big JPEG work in one thread instead.
  mkdir -p "$WORK/photos"
  for i in 0 1 2 3 4 5; do cp "$REPO/tests/data/engine/photo$i.jpg" "$WORK/photos/"; done
  cat >"$WORK/slow.json" <<'JSON'
{"version": 1, "name": "gpu-check-slow", "source": {"type": "files", "root": "photos", "pattern": "*.jpg"},
 "stages": [{"op": "decode_jpeg", "fast": false}, {"op": "resize", "size": [2048, 2048]},
            {"op": "color_jitter", "brightness": 0.4, "contrast": 0.4, "saturation": 0.4},
            {"op": "resize", "size": [1024, 1024]}, {"op": "to_tensor"}],
 "batch": {"size": 8}, "seed": 1}
JSON
fi
info "slow pipeline: $(grep -o '"op": "[a-z_]*"' "$WORK/slow.json" | xargs) (python for exec: ${NUMPY_PY:-none})"

# profile_case NAME TIMEOUT_S PROFILE_FLAGS... -- TRAINER...
profile_case() {
  local name=$1 limit=$2; shift 2
  local flags=()
  while [[ $1 != -- ]]; do flags+=("$1"); shift; done
  shift
  say "profile $name: goldminer profile ${flags[*]} -- $*"
  local start=$SECONDS
  (cd "$WORK" && timeout -k 15 "$limit" "$GM" profile "${flags[@]}" --no-db \
     -o "$OUT/$name.json" --trace "$OUT/${name}_trace.json" \
     -- env KEEP_LOGS="$OUT/${name}_logs" "$WORK/keep_logs.sh" "$@") \
    >"$OUT/$name.out" 2>"$OUT/$name.err"
  local rc=$?
  echo "exit $rc after $((SECONDS - start)) s"; tail -n 25 "$OUT/$name.out"; tail -n 8 "$OUT/$name.err"
  for log in "$OUT/${name}_logs"/gpu.*.log; do
    [[ -f $log ]] || continue
    { echo "--- $log ($(wc -l <"$log") lines; by tag: $(cut -c1 "$log" | sort | uniq -c | xargs))"
      head -12 "$log"; echo "..."; tail -6 "$log"; } >>"$OUT/${name}_gpu_head.txt"
  done
  [[ -f $OUT/${name}_gpu_head.txt ]] && cat "$OUT/${name}_gpu_head.txt"
  [[ $rc == 0 ]] && pass "$name: goldminer profile exited 0" || fail "$name: goldminer profile exited $rc"
  [[ -f $OUT/$name.json ]]
}

# check NAME DESCRIPTION PYTHON_CONDITION (over p = profile.json, t = p['trainer'], g = t['gpu']);
# returns 1 when it failed.
check() {
  "$PYJ" - "$OUT/$1.json" "$3" <<'PY' && pass "$1: $2" || { fail "$1: $2 [$3]"; return 1; }
import json, sys
p = json.load(open(sys.argv[1])); t = p.get("trainer", {}); g = t.get("gpu", {})
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}

numbers() {
  "$PYJ" - "$OUT/$1.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
p = json.load(open(sys.argv[1])); t = p.get("trainer", {}); g = t.get("gpu", {})
print("NUMBERS %s: steps=%s step_ms=%.2f wait_ms=%.2f compute_ms=%.2f stall=%.3f | gpu available=%s "
      "busy=%.3f stall=%.3f records=%s dropped=%s devices=%s reason=%r | verdict=%s exit=%r" % (
      sys.argv[1].split("/")[-1], t.get("steps"), 1000 * t.get("step_s_median", 0),
      1000 * t.get("wait_s_median", 0), 1000 * t.get("compute_s_median", 0),
      t.get("stall_fraction", -1), g.get("available"), g.get("busy_fraction", -1),
      g.get("stall_fraction", -1), g.get("records"), g.get("dropped_records"), g.get("devices"),
      g.get("reason"), p.get("verdict"), t.get("exit")))
PY
}

# The kept logs: a clean log, flushed at the stop, on the step log's clock.
check_logs() {
  local name=$1 log
  log=$(ls -S "$OUT/${name}_logs"/gpu.*.log 2>/dev/null | head -1)
  [[ -n $log ]] || { fail "$name: no gpu.*.log kept (see ${name}.err)"; return; }
  grep -q '^# clock=monotonic$' "$log" && pass "$name: GPU log on the monotonic clock" \
    || fail "$name: GPU log clock: $(grep '^# clock' "$log")"
  grep -q '^E ' "$log" && fail "$name: GPU log errors: $(grep '^E ' "$log" | head -3 | xargs)" \
    || pass "$name: no E lines in the GPU log"
  if grep -q '^# signal=15$' "$log"; then pass "$name: flushed on SIGTERM (# signal=15)"
  else info "$name: no '# signal=15' (the trainer exited by itself or handles SIGTERM)"; fi
  (( $(grep -c '^C ' "$log") >= 2 )) && pass "$name: closing clock pair written" \
    || fail "$name: fewer than 2 C lines: the last buffers were not flushed"
  "$PYJ" - "$log" "$OUT/${name}_logs" <<'PY' && pass "$name: kernels lie inside the trainer's steps (same clock)" \
    || fail "$name: kernel times do not overlap the step log's times"
import glob, sys
ks = [l.split() for l in open(sys.argv[1]) if l.startswith("K ")]
ss = [l.split() for f in glob.glob(sys.argv[2] + "/steps.*.log") for l in open(f) if l.startswith("S ")]
if not ks or not ss:
    print("kernels:", len(ks), "steps:", len(ss)); sys.exit(1)
lo, hi = min(int(s[1]) for s in ss), max(int(s[2]) for s in ss)
inside = sum(1 for k in ks if lo <= int(k[1]) <= hi + 10**9)
print("kernels %d, inside the steps' span %d (span %.2f s)" % (len(ks), inside, (hi - lo) / 1e9))
sys.exit(0 if inside >= 0.8 * len(ks) else 1)
PY
}

if profile_case fast 240 --pipeline "$WORK/fast.json" --samples 256 --warmup 32 --steps 40 \
     --warmup-steps 3 --workers 2 -- "$TRAINER" --kernel-ms 20 --copy-bytes 4194304; then
  numbers fast
  if check fast "40 steps measured" "t['steps'] >= 40" &&
     check fast "GPU figures available" "g['available']"; then
    check fast "kernel + memcpy records for every step" "g['records'] >= 2 * t['steps']"
    check fast "no dropped records" "g['dropped_records'] == 0"
    check fast "GPU busy most of the time when fed fast" "g['busy_fraction'] >= 0.8"
    check fast "GPU stall near 0 when fed fast" "g['stall_fraction'] <= 0.1"
    check fast "trainer stall near 0 when fed fast" "t['stall_fraction'] <= 0.1"
    check fast "step time ~ the kernel's 20 ms" "0.019 <= t['compute_s_median'] <= 0.03"
    check fast "verdict compute-bound" "p['verdict'] == 'compute-bound'"
  fi
  check_logs fast
fi

if profile_case fast_nocupti 240 --pipeline "$WORK/fast.json" --samples 256 --warmup 32 --steps 40 \
     --warmup-steps 3 --workers 2 --no-cupti -- "$TRAINER" --kernel-ms 20 --copy-bytes 4194304; then
  numbers fast_nocupti
  check fast_nocupti "no GPU figures without CUPTI, with a reason" "not g['available'] and g['reason']"
  [[ -f $OUT/fast.json ]] && "$PYJ" - "$OUT/fast.json" "$OUT/fast_nocupti.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
a, b = (json.load(open(f))["trainer"]["step_s_median"] for f in sys.argv[1:3])
if a > 0 and b > 0:
    print("INFO: CUPTI overhead on the median step: %.2f ms with, %.2f ms without (%+.1f%%)"
          % (1000 * a, 1000 * b, 100 * (a - b) / b))
PY
fi

if profile_case starved 300 --pipeline "$WORK/slow.json" --samples 16 --warmup 0 --steps 15 \
     --warmup-steps 3 --workers 1 --threads-per-worker 1 -- "$TRAINER" --kernel-ms 2; then
  numbers starved
  if check starved "15 steps measured" "t['steps'] >= 15" &&
     check starved "GPU figures available" "g['available'] and g['records'] > 0"; then
    check starved "GPU mostly idle when starved" "g['busy_fraction'] <= 0.3"
    check starved "GPU stall large when starved" "g['stall_fraction'] >= 0.5"
    check starved "trainer stall large when starved" "t['stall_fraction'] >= 0.5"
    check starved "verdict input-bound" "p['verdict'] == 'input-bound'"
  fi
  check_logs starved
fi

if [[ -z $TORCH_PY ]]; then
  info "torch case skipped: no python3 here imports torch with CUDA"
elif profile_case torch 300 --steps 20 --warmup-steps 3 -- "$TORCH_PY" \
       "$REPO/tests/gpu/torch_cuda_train.py" --item-ms 5 --batch-size 8; then
  numbers torch
  if check torch "steps from the torch DataLoader" "t['source'] == 'torch' and t['steps'] >= 15" &&
     check torch "GPU figures available" "g['available'] and g['records'] > 0"; then
    check torch "GPU stall large (slow DataLoader)" "g['stall_fraction'] >= 0.4"
    check torch "GPU busy fraction below 0.6" "g['busy_fraction'] <= 0.6"
    check torch "trainer stall large" "t['stall_fraction'] >= 0.4"
  fi
  check_logs torch
fi

finish
