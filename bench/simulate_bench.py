#!/usr/bin/python3
"""Benchmark: `goldminer simulate` on the shipped trace (Alibaba's v2023 pod and node
lists, 7,255 tasks replayed), each policy on its own, at full size and at the
paper's 64 GPUs, in rounds. For each it reports the median wall time, events per
second (from the command's own count) and the peak resident memory of the process,
and the same for the three policies in one run. One core: the simulator is single
threaded. The peer figure is Alibaba's own v2020 simulator as its authors report
it (about 52 s for 20,000 jobs): printed beside ours as a reference, not run here.

usage: simulate_bench.py [--build build] [--rounds 5]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "data", "alibaba-gpu-v2023")
CASES = (("full size", []), ("64 GPUs, load 4", ["--gpus", "64", "--load", "4"]))
POLICIES = ("static", "job", "cluster", "static,job,cluster")


def run_once(goldminer, args, policy, out):
    argv = [goldminer, "simulate", "--trace", os.path.join(DATA, "openb_pod_list_default.csv"),
            "--nodes", os.path.join(DATA, "openb_node_list_gpu_node.csv"), "--policy", policy,
            "-o", out, *args]
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate()
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"simulate failed ({policy} {args}):\n{err}")
    events = int(re.search(r"(\d+) events in", err).group(1))
    return wall, events


def peak_rss_mb(goldminer, args, policy, out):
    """The peak resident memory of one run (getrusage of its process)."""
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
        os.execv(goldminer, [goldminer, "simulate", "--trace",
                             os.path.join(DATA, "openb_pod_list_default.csv"), "--nodes",
                             os.path.join(DATA, "openb_node_list_gpu_node.csv"), "--policy",
                             policy, "-o", out, *args])
    _, status, usage = os.wait4(pid, 0)
    if status != 0:
        sys.exit(f"simulate failed ({policy} {args})")
    return usage.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    goldminer = os.path.join(args.build, "cmd", "goldminer")
    with tempfile.TemporaryDirectory(prefix="goldminer-simulate-bench-") as tmp:
        out = os.path.join(tmp, "sim.json")
        rows = []
        for name, case in CASES:
            for policy in POLICIES:
                walls, events = [], 0
                for _ in range(args.rounds):
                    wall, events = run_once(goldminer, case, policy, out)
                    walls.append(wall)
                wall = statistics.median(walls)
                rows.append((name, policy, wall, events, events / wall,
                             peak_rss_mb(goldminer, case, policy, out)))
                print(f"{name} {policy}: {wall:.3f} s", file=sys.stderr)
    print(f"goldminer simulate, shipped trace (7,255 tasks), {args.rounds} rounds, medians "
          f"(wall: the whole command, reading the CSVs and writing sim.json included):")
    print("| cluster | policy | wall s | events | events/s | peak RSS MB |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name, policy, wall, events, rate, rss in rows:
        print(f"| {name} | {policy} | {wall:.3f} | {events} | {rate:,.0f} | {rss:.1f} |")
    print("Reference, not run here: Alibaba's v2020 simulator, about 52 s for 20,000 jobs "
          "(its authors' figure): about 385 jobs/s.")


if __name__ == "__main__":
    main()
