#!/usr/bin/env bash
# Runs every test: unit and end-to-end tests (ctest), Python tests, and a short
# run of each fuzz target. Assumes scripts/build.sh has built ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== ctest (unit and end-to-end)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
echo "== python tests"
PYTHONPATH="$PWD/python" /usr/bin/python3 -m unittest discover -s tests/python -t . -v 2>&1 | tail -n 5
echo "== fuzz targets"
bash scripts/fuzz.sh "${GOLDMINER_FUZZ_SECONDS:-15}"
