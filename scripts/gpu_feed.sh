#!/usr/bin/env bash
# GPU feed benchmark (bench/gpu_feed.py) as one prepared call on a machine with an
# NVIDIA GPU: ResNet-50 images/s fed (a) from a batch resident on the GPU, (b) by
# torch's DataLoader, (c) by goldminer, with the targets (c) >= 90% of (a) and
# (c) >= 2.5x (b) reported (not enforced).
#
# Usage (from the repository root):
#   bash scripts/gpu_feed.sh --pack DIR   (on the build machine, before) copies into
#            DIR (an ignored path such as build-gpu-feed/, to name in the device
#            tool's carry; it and the source tree must stay under 64 MiB):
#            goldminer and the client library from BUILD (default ./build),
#            stripped; the shared libraries they load, but glibc's own, in DIR/lib,
#            found through a DT_RPATH of $ORIGIN/../lib (needs patchelf); and a
#            prebuilt corpus DIR/corpus-N (N = $GPU_FEED_IMAGES, default 512, ~27 MB)
#            made by bench/make_corpus.py, whose Debian photo packages the GPU
#            machine does not have. About 50 MB in all.
#   OUT=/some/dir BUILD=DIR bash scripts/gpu_feed.sh   (on the GPU machine, one call,
#            about 3-4 minutes, at most ~5) runs bench/gpu_feed.py with the python3
#            that has torch with CUDA, over DIR/corpus-N (or, with no packed corpus,
#            one made there by make_corpus.py when its photos exist).
#     OUT    where results go (default: a new temporary directory, printed):
#            gpu_feed.log (all output), summary.txt (the table), env.txt
#            (nvidia-smi, torch, CPUs) and gpu_feed.json (every figure).
#     GPU_FEED_ARGS  more flags for gpu_feed.py (they win over the defaults below).
#     GPU_FEED_PY    the python3 to use (default: the first with torch seeing CUDA);
#            with GPU_FEED_ARGS="--device cpu --model resnet18 --batch 16 --steps 3
#            --warmup 1 --rounds 1 --image-size 64" it tries this script on a CPU.
# When the build rejects the "on": "device" stage key (gpu_feed.py exits 3), the
# run is made again with --cpu-tail. Every step is time-boxed with `timeout`.
# Exit status: 0 when the benchmark completed (whatever the targets), 1 otherwise.
set -uo pipefail

# shellcheck source=scripts/device_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_lib.sh"  # REPO, BUILD, pack_build, start_output

# --pack DIR: what the GPU machine needs and may lack, in BUILD's layout.
if [[ ${1:-} == --pack ]]; then
  dir=${2:?usage: gpu_feed.sh --pack DIR}
  if ! command -v patchelf >/dev/null; then
    echo "gpu_feed.sh --pack: needs patchelf (apt-get install -y patchelf)"
    exit 1
  fi
  pack_build "$dir"
  mkdir -p "$dir/lib" || exit 1
  # Every shared library ldd resolves for them, but glibc's and the compiler's
  # runtime (any Linux has those, and a second copy in one process would clash).
  libs=$(ldd "$BUILD/cmd/goldminer" "$BUILD/client/libgoldminer_client.so" |
    awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
  for lib in $libs; do
    case $(basename "$lib") in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|\
      librt.so*|libresolv.so*|libutil.so*) ;;
      *) cp -L "$lib" "$dir/lib/" || exit 1 ;;
    esac
  done
  # A DT_RPATH (not RUNPATH) also serves the libraries' own dependencies.
  # shellcheck disable=SC2016  # $ORIGIN is for the dynamic loader, not the shell
  for f in "$dir/cmd/goldminer" "$dir"/client/libgoldminer_client.so*; do
    patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$f" || exit 1
  done
  if ldd "$dir/cmd/goldminer" "$dir/client/libgoldminer_client.so" | grep -q "not found"; then
    echo "gpu_feed.sh --pack: unresolved libraries:"; ldd "$dir/cmd/goldminer" | grep "not found"
    exit 1
  fi
  "$dir/cmd/goldminer" --version || exit 1
  # The corpus: made here, where the photos are (make_corpus.py is deterministic).
  n=${GPU_FEED_IMAGES:-512}
  for old in "$dir"/corpus-*; do
    [[ -d $old && $old != "$dir/corpus-$n" ]] && rm -rf "$old"
  done
  timeout 600 /usr/bin/python3 "$REPO/bench/make_corpus.py" "$dir/corpus-$n" --count "$n" || exit 1
  echo "libraries in $dir/lib: $(find "$dir/lib" -type f | wc -l) ($(du -sh "$dir/lib" | cut -f1))"
  du -sh "$dir/corpus-$n"; du -sh "$dir"
  mb=$(du -sm "$dir" | cut -f1)
  (( mb <= 56 )) || echo "gpu_feed.sh --pack: warning: $dir is $mb MB; with the source tree" \
    "it may pass the 64 MiB a carried tree may have (lower GPU_FEED_IMAGES)"
  exit 0
fi

start_output gpu_feed
BUDGET=290  # seconds for everything below; each step gets at most what is left
left() { echo $((BUDGET - SECONDS > 10 ? BUDGET - SECONDS : 10)); }
fail() { echo "FAIL: $*" | tee -a "$OUT/summary.txt"; exit 1; }

echo "== environment (repo $REPO, build $BUILD, out $OUT)"
{
  uname -a; head -2 /etc/os-release 2>/dev/null
  timeout 30 nvidia-smi 2>&1 | head -20
  echo "cpus: $(nproc) (os.cpu_count: $(python3 -c 'import os; print(os.cpu_count())' 2>&1))"
  echo "ulimit -n: $(ulimit -n); /dev/shm: $(df -h /dev/shm 2>/dev/null | tail -1)"
} 2>&1 | tee "$OUT/env.txt"
# The python3 whose torch sees CUDA (the GPU machine's plain python3 has it).
PY=
candidates=$(printf '%s\n' "$(command -v python3 || true)" /usr/bin/python3 |
  awk 'NF && !seen[$0]++')
for p in $candidates; do
  [[ -x $p ]] || continue
  versions=$(timeout 120 "$p" -c 'import sys; print(sys.version.split()[0], end=" ")
try:
    import torch, torchvision, PIL, numpy
    print("torch", torch.__version__, "cuda", torch.version.cuda, "torchvision",
          torchvision.__version__, "Pillow", PIL.__version__, "numpy", numpy.__version__,
          "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
          torch.cuda.is_available())
except Exception as e: print("torch stack:", e)' 2>&1 | tail -1)
  echo "$p: $versions" | tee -a "$OUT/env.txt"
  [[ -z $PY && $versions == *" True" ]] && PY=$p
done
PY=${GPU_FEED_PY:-$PY}
[[ -n $PY ]] || fail "no python3 here imports torch with CUDA (see env.txt)"

GM=$BUILD/cmd/goldminer
[[ -x $GM ]] || fail "no goldminer binary at $GM (pack one with --pack DIR and run with BUILD=DIR)"
for f in "$GM" "$BUILD/client/libgoldminer_client.so"; do
  if ldd "$f" 2>&1 | grep -q "not found"; then
    ldd "$f" | grep "not found"
    fail "$f lacks shared libraries on this machine (above)"
  fi
done
echo "goldminer: $("$GM" --version 2>&1)" | tee -a "$OUT/env.txt"

# The corpus: the packed one, else made here (needs Pillow and make_corpus.py's photos).
corpus=$(find "$BUILD/" -maxdepth 1 -name 'corpus-*' -type d 2>/dev/null | head -1)
if [[ -n $corpus ]]; then
  corpus_args=(--corpus "$corpus")
  echo "corpus: $corpus ($(find "$corpus" -name '*.jpg' | wc -l) images," \
    "$(du -sh "$corpus" | cut -f1))"
else
  corpus_args=(--images 512)
  echo "corpus: none packed in $BUILD; gpu_feed.py makes one with make_corpus.py"
fi

# Sized for the H200 machine (16 CPUs, ~4300 images/s on resident batches): a round
# is ~30-40 s (3 feeds of 10+100 steps of 128 images, and two goldminer/torch
# start-ups), 3 rounds. GPU_FEED_ARGS is split into words on purpose (several flags).
# shellcheck disable=SC2086
bench() {
  echo
  echo "== $PY bench/gpu_feed.py $*"
  timeout -k 10 "$(left)" "$PY" "$REPO/bench/gpu_feed.py" --goldminer "$GM" "${corpus_args[@]}" \
    --rounds 3 --steps 100 --warmup 10 --json "$OUT/gpu_feed.json" "$@" \
    ${GPU_FEED_ARGS:-} \
    2>&1 | tee "$WORK/bench.out"
  return "${PIPESTATUS[0]}"
}
bench
rc=$?
tail_used="device"
if [[ $rc == 3 ]]; then
  echo "gpu_feed.py: the build rejects \"on\": \"device\"; again with --cpu-tail"
  bench --cpu-tail
  rc=$?
  tail_used="workers (--cpu-tail: this build rejects \"on\")"
fi
{
  echo "gpu_feed.py exit $rc after $SECONDS s; to_tensor+normalize on the $tail_used"
  sed -n '/ medians (images\/s)$/,$p' "$WORK/bench.out"
} >>"$OUT/summary.txt"
[[ $rc == 124 || $rc == 137 ]] && fail "gpu_feed.py ran past its time box ($BUDGET s in all)"
[[ $rc == 0 ]] || fail "gpu_feed.py exited $rc (see gpu_feed.log)"
echo
echo "gpu_feed: done in $SECONDS s; results in $OUT"
cat "$OUT/summary.txt"
exit 0
