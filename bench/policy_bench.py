#!/usr/bin/python3
"""Benchmark: the pool's policy (cluster) against per-job scaling (job) and CPUs as
asked (static) in `goldminer simulate`, over many draws of the cluster, at loads 1
to 8, on both of the trace's node lists. For each setting it prints the mean over
the draws of average JCT static / cluster and job / cluster (above 1: the pool
completes jobs sooner), with the standard error of job / cluster, and a summary:
the range, how many settings are better, equal (within 0.05%) and worse, and how
many are worse by two standard errors or more. The peers are the other two
policies of the same replay, on the same draws.

The shipped trace by default; --variants DIR replays every pod list in DIR as
well (alibaba/clusterdata's cluster-trace-gpu-v2023 has 20 that carry times:
cpu0..cpu300, gpushare20..100, gpuspec05..33), e.g. after
  git -C clusterdata show HEAD:cluster-trace-gpu-v2023/pod_csv/openb_pod_list_cpu250.csv

usage: policy_bench.py [--build build] [--draws 8] [--loads 1,2,4,8]
                       [--variants DIR] [--node-cpus-per-gpu C] [--jobs 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "data", "alibaba-gpu-v2023")
NODE_LISTS = ("gpu_node", "all_node")


def traces(variants):
    out = [os.path.join(DATA, "openb_pod_list_default.csv")]
    if variants:
        for name in sorted(os.listdir(variants)):
            path = os.path.join(variants, name)
            if name.endswith(".csv") and name != "openb_pod_list_default.csv":
                with open(path) as f:
                    if "creation_time" in f.readline():  # the multigpu lists have no times
                        out.append(path)
    return out


def replay(goldminer, tmp, trace, nodes, load, seed, extra):
    out = os.path.join(tmp, f"{os.path.basename(trace)}.{nodes}.{load}.{seed}.json")
    argv = [goldminer, "simulate", "--trace", trace, "--nodes",
            os.path.join(DATA, f"openb_node_list_{nodes}.csv"), "--gpus", "64", "--load",
            str(load), "--seed", str(seed), "-o", out, *extra]
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"simulate failed ({' '.join(argv[2:])}):\n{proc.stderr}")
    with open(out) as f:
        jct = {p["policy"]: p["jct_mean_s"] for p in json.load(f)["policies"]}
    os.unlink(out)
    return jct["static"] / jct["cluster"], jct["job"] / jct["cluster"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--draws", type=int, default=8, help="seeds 1..N of each setting")
    ap.add_argument("--loads", default="1,2,4,8")
    ap.add_argument("--variants", help="a folder of the trace's other pod lists")
    ap.add_argument("--node-cpus-per-gpu", type=float, default=0,
                    help="the what-if of GPU nodes short of CPUs (0: as listed)")
    ap.add_argument("--jobs", type=int, default=2, help="replays at once")
    a = ap.parse_args()
    goldminer = os.path.join(a.build, "cmd", "goldminer")
    if not os.access(goldminer, os.X_OK):
        sys.exit(f"{goldminer}: not built (cmake --build {a.build})")
    if a.draws < 2:
        sys.exit("--draws: at least 2 (a standard error needs two)")
    loads = [float(x) for x in a.loads.split(",")]
    extra = ["--node-cpus-per-gpu", str(a.node_cpus_per_gpu)] if a.node_cpus_per_gpu else []
    settings = [(t, n, load) for t in traces(a.variants) for n in NODE_LISTS for load in loads]
    runs = [(s, seed) for s in settings for seed in range(1, a.draws + 1)]
    print(f"policy_bench: {len(settings)} settings x {a.draws} draws = {len(runs)} replays "
          f"(64 GPUs drawn each){' with --node-cpus-per-gpu %g' % a.node_cpus_per_gpu if extra else ''}",
          file=sys.stderr)
    results = {}
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(a.jobs) as ex:
        futures = [(s, ex.submit(replay, goldminer, tmp, *s, seed, extra)) for s, seed in runs]
        for done, (s, f) in enumerate(futures, 1):
            results.setdefault(s, []).append(f.result())
            if done % 100 == 0:
                print(f"policy_bench: {done}/{len(runs)}", file=sys.stderr)
    print(f"{'trace':16s} {'nodes':8s} {'load':>4s} {'static/cluster':>14s} "
          f"{'job/cluster':>11s} {'se':>6s}")
    job, static, worse_2se = [], [], 0
    for (trace, nodes, load), v in results.items():
        sc = statistics.mean(x[0] for x in v)
        jc = statistics.mean(x[1] for x in v)
        se = statistics.stdev(x[1] for x in v) / len(v) ** 0.5
        name = os.path.basename(trace).removeprefix("openb_pod_list_").removesuffix(".csv")
        print(f"{name:16s} {nodes:8s} {load:4g} {sc:14.3f} {jc:11.3f} {se:6.3f}")
        job.append(jc)
        static.append(sc)
        worse_2se += jc < 0.9995 and jc + 2 * se < 1  # worse, beyond its draws' noise
    print(f"{len(job)} settings: static/cluster {min(static):.2f} to {max(static):.2f}; "
          f"job/cluster {min(job):.3f} to {max(job):.3f}, better in "
          f"{sum(x >= 1.0005 for x in job)}, equal in {sum(0.9995 <= x < 1.0005 for x in job)}, "
          f"worse in {sum(x < 0.9995 for x in job)} ({worse_2se} by two standard errors)")


if __name__ == "__main__":
    main()
