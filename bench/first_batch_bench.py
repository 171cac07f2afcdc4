#!/usr/bin/python3
"""Benchmark: the first batch of an unchanged script and of each of its epochs, and
the memory of its largest process, stock beside `goldminer run`, in one run.

The script (plain torch, written here) holds its dataset in memory: a uint8 numpy
array of --megabytes MB (150 by default), one row a sample; a DataLoader with 2
workers, batch 32, a new iterator each epoch (persistent_workers=False), E epochs.
It prints, per epoch, the seconds from the start of its loop to its first batch
(the run's first batch: the workers start; a later epoch's: stock forks its
workers again, goldminer's virtual workers take the dataset from their host,
which kept it since the first epoch) and the whole run's seconds. The runner
starts each configuration from a process of its own and reads the largest
resident set of every process below it (RUSAGE_CHILDREN's maxrss: the trainer,
its workers, goldminer's data workers and their virtual workers). Then it takes
one batch of a persistent loader and ends with it alive: the runner times the
program's end, from the script's last line to the end of every process of the
run.

Two ways, in rounds that alternate them: stock, and `goldminer run --workers 2`
(no pipeline: the data workers serve the DataLoader; on this host, so the data
workers share the trainer's cores and memory). Medians and ratios to stock.

usage: first_batch_bench.py [--build build] [--megabytes 150] [--epochs 3] [--rounds 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench_util import run_measured

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SCRIPT = r'''
import json, sys, time
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

megabytes, epochs = int(sys.argv[1]), int(sys.argv[2])

class InMemory(Dataset):
    def __init__(self):
        rows = megabytes * 1000
        self.data = np.random.default_rng(0).integers(0, 255, (rows, 1000), dtype=np.uint8)
    def __len__(self):
        return 256
    def __getitem__(self, i):
        return torch.from_numpy(self.data[i * 37 % len(self.data)].copy())

dataset = InMemory()
loader = DataLoader(dataset, batch_size=32, num_workers=2)
firsts = []
start = time.monotonic()
for epoch in range(epochs):
    t = time.monotonic()
    for n, batch in enumerate(loader):
        if n == 0:
            firsts.append(time.monotonic() - t)
run_s = time.monotonic() - start
# The program's end with a loader alive: a persistent one, its iterator mid-epoch.
alive = iter(DataLoader(dataset, batch_size=32, num_workers=2, persistent_workers=True))
next(alive)
print(json.dumps({"first_batch_s": firsts, "run_s": run_s, "end_at": time.time()}))
'''

# Runs argv and prints the largest resident set (KiB) of any process below it.
MODES = ("stock", "goldminer")


def run(script, args, mode):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDMINER_")}
    env["PYTHONPATH"] = ""
    argv = [args.python, script, str(args.megabytes), str(args.epochs)]
    if mode == "goldminer":
        argv = [os.path.join(args.build, "cmd", "goldminer"), "run", "--no-db", "--no-progress",
                "--workers", "2", "--"] + argv
    got, used = run_measured(mode, argv, env)
    got["end_s"] = time.time() - got["end_at"]  # the measuring process's own exit included
    got["max_rss_mb"] = used["maxrss_kib"] / 1024
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python", default="/usr/bin/python3", help="the script's interpreter")
    ap.add_argument("--megabytes", type=int, default=150)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    script = os.path.join(args.build, "bench", "first_batch_script.py")
    os.makedirs(os.path.dirname(script), exist_ok=True)
    with open(script, "w") as f:
        f.write(SCRIPT)
    results = {m: [] for m in MODES}
    for r in range(args.rounds):
        for mode in MODES:
            got = run(script, args, mode)
            results[mode].append(got)
            firsts = ", ".join(f"{s:.2f}" for s in got["first_batch_s"])
            print(f"round {r + 1}: {mode}: first batches {firsts} s, run {got['run_s']:.2f} s, "
                  f"end {got['end_s']:.2f} s, largest process {got['max_rss_mb']:.0f} MB",
                  file=sys.stderr)
    version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    print(f"{args.megabytes} MB in-memory dataset, {args.epochs} epochs, 2 DataLoader workers, "
          f"torch {version}, {args.rounds} rounds, medians (ratio or difference to stock):")
    print("| figure | stock | goldminer run | vs stock |")
    print("| --- | ---: | ---: | ---: |")
    rows = [(f"epoch {e + 1} first batch s", lambda x, e=e: x["first_batch_s"][e], "%.2f", "diff")
            for e in range(args.epochs)]
    rows += [("whole run s", lambda x: x["run_s"], "%.2f", "ratio"),
             ("program end s", lambda x: x["end_s"], "%.2f", "diff"),
             ("largest process MB", lambda x: x["max_rss_mb"], "%.0f", "ratio")]
    for label, pick, fmt, how in rows:
        a = statistics.median(pick(x) for x in results["stock"])
        b = statistics.median(pick(x) for x in results["goldminer"])
        vs = f"{b - a:+.2f} s" if how == "diff" else f"{b / a:.2f}x"
        print(f"| {label} | {fmt % a} | {fmt % b} | {vs} |")


if __name__ == "__main__":
    main()
