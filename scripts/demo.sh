#!/usr/bin/env bash
# The demo: makes a small corpus of real photos (crops of Debian's wallpapers), then
# runs the ImageNet training pipeline on it with a local data worker and prints the
# throughput and the per-stage costs. Assumes scripts/build.sh has built ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
demo=build/demo
mkdir -p "$demo"
/usr/bin/python3 bench/make_corpus.py "$demo/corpus" --count "${GOLDMINER_DEMO_IMAGES:-500}"
cp examples/imagenet/pipeline.json "$demo/pipeline.json"
echo
echo "== goldminer worker --local: the ImageNet pipeline on $(nproc) cores"
build/cmd/goldminer worker --local --pipeline "$demo/pipeline.json" --epochs 2 --digest
echo
echo "== the first 128 samples again, written out as .npy batches"
build/cmd/goldminer worker --local --pipeline "$demo/pipeline.json" --limit 128 --no-progress \
  --out "$demo/batches" | head -n 1
echo
echo "Batches (.npy, loadable with numpy.load) and keys.tsv are in $demo/batches"
echo "Pipeline file: $demo/pipeline.json (see: man -l man/goldminer-pipeline.5)"
