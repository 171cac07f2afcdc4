#!/usr/bin/env bash
# The demo: makes a small corpus of real photos (crops of Debian's wallpapers), runs
# the ImageNet training pipeline on it with a local data worker (throughput and
# per-stage costs), profiles a plain PyTorch program with its own DataLoader, plans
# data workers for it from its DataLoader workers' CPU per sample and runs it
# unchanged with its DataLoader's workers on them (run --plan), profiles
# the same loop fed by goldminer (profile.json, runs.db, a trace), plans the workers
# for this machine from that profile (plan.json, job.sbatch), then trains it for a
# few steps fed by the planned data worker processes under `goldminer run --plan`.
# Assumes scripts/build.sh has built ./build.
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
echo "== goldminer profile: an unmodified PyTorch program with its own DataLoader (1 loader process)"
build/cmd/goldminer profile --steps 6 --warmup-steps 2 --db "$demo/runs.db" -o "$demo/profile-torch.json" -- \
  /usr/bin/python3 examples/train/torch_train.py "$demo/corpus" --workers 1 --epochs 2
echo
echo "== goldminer plan: data workers for that program, from its DataLoader workers' CPU per sample"
build/cmd/goldminer plan --profile "$demo/profile-torch.json" --db "$demo/runs.db" \
  -o "$demo/plan-torch.json"
echo
echo "== goldminer run --plan: the same program unchanged, its DataLoader's 2 workers on the planned data workers"
build/cmd/goldminer run --plan "$demo/plan-torch.json" --db "$demo/runs.db" --no-progress -- \
  /usr/bin/python3 examples/train/torch_train.py "$demo/corpus" --workers 2 --steps 6
echo
echo "== goldminer profile: the ImageNet pipeline, and the same loop fed by 2 data workers"
build/cmd/goldminer profile --pipeline "$demo/pipeline.json" --samples 256 --steps 10 --warmup-steps 3 \
  --epochs 3 --db "$demo/runs.db" -o "$demo/profile.json" --trace "$demo/trace.json" -- \
  /usr/bin/python3 examples/train/train.py --epochs 3 --steps 0
echo
echo "== goldminer plan: how many workers this machine can give the loop, and what to expect"
build/cmd/goldminer plan --profile "$demo/profile.json" --db "$demo/runs.db" -o "$demo/plan.json" \
  --sbatch "$demo/job.sbatch" -- /usr/bin/python3 examples/train/train.py --epochs 3 --steps 20
echo
echo "== goldminer run --plan: the planned data worker processes feed a PyTorch training loop (20 steps)"
build/cmd/goldminer run --plan "$demo/plan.json" --epochs 3 --db "$demo/runs.db"
echo
echo "== goldminer report: the run and the pipeline's profile as one HTML page"
build/cmd/goldminer report --db "$demo/runs.db" --run latest --profile latest -o "$demo/report.html"
build/cmd/goldminer report --db "$demo/runs.db" --run latest --format text
echo
echo "Batches (.npy, loadable with numpy.load) and keys.tsv are in $demo/batches"
echo "Pipeline file: $demo/pipeline.json (see: man -l man/goldminer-pipeline.5)"
echo "Profiles: $demo/profile.json and $demo/profile-torch.json (man -l man/goldminer-profile.1),"
echo "  also recorded in $demo/runs.db; trace: $demo/trace.json (open it in ui.perfetto.dev)"
echo "Plans: $demo/plan.json (and the job script $demo/job.sbatch), $demo/plan-torch.json (man -l man/goldminer-plan.1)"
echo "Report: $demo/report.html (open it in a browser; man -l man/goldminer-report.1)"
