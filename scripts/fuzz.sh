#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) in ./build-fuzz and runs
# each for SECONDS (default 15) from its seed corpus. Fails on the first crash.
# Usage: fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-15}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGOLDMINER_FUZZ=ON >/dev/null
cmake --build build-fuzz -j "$(nproc)"
for target in build-fuzz/tests/fuzz/fuzz_*; do
  name=$(basename "$target")
  work=$(mktemp -d)
  case $name in
    fuzz_jpeg) seeds=tests/data/images ;;  # the JPEG fixtures, good and bad
    *) seeds=tests/fuzz/corpus/${name#fuzz_} ;;
  esac
  [[ -d $seeds ]] || seeds=
  echo "fuzz: $name for ${seconds}s${seeds:+ (seeds: $seeds)}"
  if ! "$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$work/" "$work" $seeds >"$work/log" 2>&1; then
    tail -n 40 "$work/log"
    echo "fuzz: $name FAILED; crashing input kept in $work" >&2
    exit 1
  fi
  grep -E "^Done|#[0-9]+.*DONE" "$work/log" | tail -n 1 || true
  rm -rf "$work"
done
