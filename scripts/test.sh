#!/usr/bin/env bash
# Runs every test: the format check, the clang build with the thread-safety
# analysis, unit, end-to-end and Python tests (ctest), and a short run of each fuzz
# target. Assumes scripts/build.sh has built ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== format (clang-format)"
bash scripts/format_check.sh
echo "== clang -Wthread-safety"
bash scripts/clang_check.sh build
echo "== ctest (unit, end-to-end, python)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
echo "== fuzz targets"
bash scripts/fuzz.sh "${GOLDMINER_FUZZ_SECONDS:-15}"
