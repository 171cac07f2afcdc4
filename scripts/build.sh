#!/usr/bin/env bash
# Configures and builds goldminer in ./build (warnings are errors). Usage: build.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGOLDMINER_WERROR=ON >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
