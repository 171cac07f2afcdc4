#!/usr/bin/python3
"""Benchmark: an unchanged PyTorch script's DataLoader, stock beside goldminer's
virtual workers (goldminer/offload.py, GOLDMINER_OFFLOAD=local), in one run.

The script (written here, plain torch, with torch_peer.py's dataset of real
photos: PIL decode, RandomResizedCrop(224), RandomHorizontalFlip, ToTensor,
Normalize; batch 64, shuffle with a seeded generator) runs E epochs with N workers, with and
without persistent_workers. For each run it reports:
  - images/s over the epochs (first batch of the run excluded);
  - the trainer's own CPU per batch (the main process only: what the program pays
    to receive batches);
  - the epoch boundary: from the last batch of an epoch to the first of the next
    (median over the run's boundaries; a new iterator each epoch unless persistent);
  - the first batch of the run (workers start: the host's torch import for
    goldminer, a fork for stock);
  - whether both gave the same batches (SHA-256 of each).
Three ways, in rounds that alternate them: stock; goldminer's virtual workers on
the trainer's host ("local": the mechanism's own cost); and under `goldminer run
--workers W` with no pipeline file (its default --offload exact) ("workers": each virtual worker a
process under a data worker, its batches over the data plane: on this host, each
result's buffers in a memfd the trainer maps), and the same with --offload
elastic ("elastic": tasks seeded on their own, handed to any virtual worker).
Medians and ratios to stock are printed. On one machine the data workers share the trainer's cores,
so "workers" measures the transport's cost, not an offload's gain.

usage: offload_bench.py [--build build] [--images 512] [--epochs 4] [--workers 2]
                        [--data-workers 2] [--rounds 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HOOK_DIR = os.path.join(ROOT, "python", "goldminer", "_profile_hook")

SCRIPT = r'''
import hashlib, json, os, resource, statistics, sys, time
root, workers, epochs, persistent = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
sys.path.insert(0, sys.argv[5])  # bench/: the peer's dataset, a module outside the script's folder
import torch
from torch_peer import Folder

g = torch.Generator()
g.manual_seed(1)
loader = torch.utils.data.DataLoader(Folder(root, 0), batch_size=64, shuffle=True, generator=g,
                                     num_workers=workers, persistent_workers=persistent)
h = hashlib.sha256()
times, boundaries, images = [], [], 0
cpu0 = resource.getrusage(resource.RUSAGE_SELF)
start = time.monotonic()
for e in range(epochs):
    for n, (x, y) in enumerate(loader):
        now = time.monotonic()
        if n == 0 and times:
            boundaries.append(now - times[-1])
        times.append(now)
        images += x.shape[0]
        h.update(x.numpy().tobytes()); h.update(y.numpy().tobytes())
cpu1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
first = times[0] - start
steady = (images - 64) / (times[-1] - times[0])
print(json.dumps({"images_per_s": steady, "first_batch_s": first,
                  "boundary_s": statistics.median(boundaries) if boundaries else 0,
                  "trainer_cpu_ms_per_batch": 1000 * cpu / len(times),
                  "batches": len(times), "digest": h.hexdigest()}))
'''


MODES = ("stock", "local", "workers", "elastic")


def run(script, corpus, args, persistent, mode):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDMINER_")}
    env["PYTHONPATH"] = HOOK_DIR if mode == "local" else ""
    argv = [sys.executable, script, corpus, str(args.workers), str(args.epochs),
            "1" if persistent else "0", HERE]
    if mode == "local":
        env["GOLDMINER_OFFLOAD"] = "local"
    elif mode in ("workers", "elastic"):  # the unchanged script, no pipeline file
        argv = [os.path.join(args.build, "cmd", "goldminer"), "run", "--no-db", "--no-progress",
                "--workers", str(args.data_workers),
                "--offload", "exact" if mode == "workers" else "elastic", "--"] + argv
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        sys.exit(f"the script failed ({mode}):\n{out.stderr}")
    if mode != "stock" and "runs on stock local workers" in out.stderr:
        sys.exit(f"goldminer fell back to stock workers ({mode}):\n{out.stderr}")
    return json.loads([line for line in out.stdout.strip().splitlines()
                       if line.startswith("{")][-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--data-workers", type=int, default=2,
                    help="goldminer data workers for the \"workers\" mode")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    corpus = os.path.join(args.build, "bench", f"corpus-{args.images}")
    subprocess.run([sys.executable, os.path.join(HERE, "make_corpus.py"), corpus,
                    "--count", str(args.images)], check=True)
    script = os.path.join(args.build, "bench", "offload_script.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    results = {}
    for r in range(args.rounds):
        for persistent in (False, True):
            for mode in MODES:
                got = run(script, corpus, args, persistent, mode)
                results.setdefault((persistent, mode), []).append(got)
                print(f"round {r + 1}: persistent={persistent} {mode}: "
                      f"{got['images_per_s']:.0f} images/s, "
                      f"boundary {got['boundary_s'] * 1000:.0f} ms", file=sys.stderr)
    print(f"{args.images} images, {args.epochs} epochs, {args.workers} DataLoader workers, "
          f"{args.data_workers} data workers, {args.rounds} rounds, medians (ratio: to stock):")
    print("| persistent_workers | figure | stock | local | ratio | workers | ratio | elastic | "
          "ratio |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for persistent in (False, True):
        stock = results[(persistent, "stock")]
        for key, label, fmt in (("images_per_s", "images/s", "%.0f"),
                                ("trainer_cpu_ms_per_batch", "trainer CPU ms/batch", "%.1f"),
                                ("boundary_s", "epoch boundary s", "%.3f"),
                                ("first_batch_s", "first batch s", "%.2f")):
            a = statistics.median(x[key] for x in stock)
            cells = []
            for mode in MODES[1:]:
                b = statistics.median(x[key] for x in results[(persistent, mode)])
                cells.append(f"{fmt % b} | {(b / a if a else float('nan')):.2f}x")
            print(f"| {persistent} | {label} | {fmt % a} | " + " | ".join(cells) + " |")
        same = ["yes" if all(x["digest"] == y["digest"] for x, y in
                             zip(stock, results[(persistent, mode)])) else "NO"
                for mode in MODES[1:3]]
        # Elastic mode seeds each batch on its own: not stock's batches, but the
        # same in every round.
        elastic = results[(persistent, "elastic")]
        again = "yes" if len({x["digest"] for x in elastic}) == 1 else "NO"
        print(f"| {persistent} | same batches | | | {same[0]} | | {same[1]} | | "
              f"as stock: no (own seeds); every round alike: {again} |")

if __name__ == "__main__":
    main()
