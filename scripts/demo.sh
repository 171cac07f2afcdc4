#!/usr/bin/env bash
# The demo: makes a small corpus of real photos (crops of Debian's wallpapers), runs
# the ImageNet training pipeline on it with a local data worker (throughput and
# per-stage costs), then trains a small PyTorch model for a few steps fed by two
# data worker processes under `goldminer run`. Assumes scripts/build.sh has built ./build.
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
echo "== goldminer run: 2 data worker processes feed a PyTorch training loop (20 steps)"
build/cmd/goldminer run --backend local --pipeline "$demo/pipeline.json" --workers 2 --epochs 3 -- \
  /usr/bin/python3 examples/train/train.py --epochs 3 --steps 20
echo
echo "Batches (.npy, loadable with numpy.load) and keys.tsv are in $demo/batches"
echo "Pipeline file: $demo/pipeline.json (see: man -l man/goldminer-pipeline.5)"
