#!/usr/bin/python3
"""Benchmark: what measuring costs. goldminer profile's instrumentation beside its peer.

(a) Trainer side: the same PyTorch loop over a torch DataLoader (in-memory tensors,
    batch 64, a small matmul per step, so that per-step costs show) run
      - plain,
      - with goldminer profile's import hook recording every DataLoader __next__
        (what `goldminer profile -- python3 train.py` does), and
      - under torch.profiler.profile (CPU activity), the peer a PyTorch user would
        reach for to see DataLoader time.
    Prints median step time and each instrument's cost per step (microseconds) and
    as a share of this deliberately tiny step. Target: the hook costs under 10 us
    per step, i.e. under 1% of a 1 ms training step (real steps are longer).
(b) Pipeline side: `goldminer profile --pipeline` on the ImageNet pipeline over
    the benchmark corpus reports its own per-stage timing overhead (timed vs
    untimed runs), and where the process CPU went: the stages' share, the reader's,
    the batcher's, the stage threads' hand-off, and what none of them accounts for
    (starting and joining threads). The medians over rounds are printed. These
    shares depend on the CPU (the stages were 77-78% of it on one fresh machine of
    the development kind, over 80% on another), so they are figures here, not test
    bounds.
Rounds alternate the variants; medians are printed.

usage: profile_bench.py [--build build] [--steps 2000] [--rounds 5] [--images 500]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"

LOOP = r'''
import json, os, sys, time
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch
torch.set_num_threads(1)
mode, steps = sys.argv[1], int(sys.argv[2])
data = torch.utils.data.TensorDataset(torch.randn(steps * 64, 16), torch.zeros(steps * 64))
loader = torch.utils.data.DataLoader(data, batch_size=64)
w = torch.randn(16, 16)
def loop():
    t0, n = time.perf_counter(), 0
    for x, _ in loader:
        (x @ w).sum()
        n += 1
    return time.perf_counter() - t0, n
if mode == "torch.profiler":
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        seconds, n = loop()
    names = {e.name for e in prof.events()}
    assert any("DataLoader" in k for k in names), "torch.profiler saw no DataLoader event"
else:
    seconds, n = loop()
print(json.dumps({"seconds": seconds, "steps": n}))
'''


def run_loop(mode, steps, profile_dir):
    env = dict(os.environ)
    env.pop("GOLDMINER_PROFILE_DIR", None)
    if mode == "goldminer hook":
        env["PYTHONPATH"] = os.path.join(ROOT, "python", "goldminer", "_profile_hook")
        env["GOLDMINER_PROFILE_DIR"] = profile_dir
    out = subprocess.run([PY, "-c", LOOP, mode, str(steps)], env=env, check=True,
                         capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["seconds"] / r["steps"]


def hook_recorded(profile_dir, steps):
    lines = 0
    for name in os.listdir(profile_dir):
        with open(os.path.join(profile_dir, name)) as f:
            lines += sum(1 for line in f if line.startswith("S "))
    return lines


def trainer_side(steps, rounds):
    modes = ["plain", "goldminer hook", "torch.profiler"]
    per_step = {m: [] for m in modes}
    for r in range(rounds):
        for m in modes:
            with tempfile.TemporaryDirectory() as d:
                per_step[m].append(run_loop(m, steps, d))
                if m == "goldminer hook":
                    assert hook_recorded(d, steps) == steps, "the hook must record every step"
        print(f"  round {r + 1}/{rounds}: " + ", ".join(
            f"{m} {per_step[m][-1] * 1e6:.1f} us/step" for m in modes), file=sys.stderr)
    base = statistics.median(per_step["plain"])
    print(f"(a) trainer loop, {steps} steps of batch 64, {rounds} rounds, medians")
    print(f"  {'variant':<16} {'us/step':>9} {'cost us/step':>13} {'cost':>7}")
    for m in modes:
        med = statistics.median(per_step[m])
        print(f"  {m:<16} {med * 1e6:9.1f} {(med - base) * 1e6:13.1f} {(med / base - 1) * 100:6.1f}%")
    hook = statistics.median(per_step["goldminer hook"]) - base
    peer = statistics.median(per_step["torch.profiler"]) - base
    if hook > 0:
        print(f"  torch.profiler costs {peer / hook:.1f}x what the goldminer hook costs per step")
    print(f"  goldminer hook: {hook * 1e6:.1f} us per step, {hook / 1e-3 * 100:.2f}% of a 1 ms step "
          f"(target: under 1%)")


def pipeline_side(build, images, rounds):
    corpus = os.path.join(ROOT, build, "bench", "corpus")
    if not os.path.isdir(corpus):
        subprocess.run([PY, os.path.join(HERE, "make_corpus.py"), corpus, "--count", str(images)],
                       check=True)
    with tempfile.TemporaryDirectory() as d:
        pipeline = os.path.join(os.path.dirname(corpus), "pipeline.json")
        with open(os.path.join(ROOT, "examples", "imagenet", "pipeline.json")) as f:
            doc = json.load(f)
        with open(pipeline, "w") as f:
            json.dump(doc, f)
        overheads, rates = [], []
        parts = ("stage", "reader", "batcher", "queue")
        shares = {k: [] for k in parts + ("unaccounted",)}
        for _ in range(rounds):
            out = os.path.join(d, "p.json")
            subprocess.run([os.path.join(ROOT, build, "cmd", "goldminer"), "-q", "profile",
                            "--pipeline", pipeline, "--samples", "256", "--no-db", "-o", out],
                           check=True, stdout=subprocess.DEVNULL)
            with open(out) as f:
                p = json.load(f)["pipeline"]
            overheads.append(p["instrumentation_overhead"])
            rates.append(p["runs"][0]["samples_per_s"])
            total = p["cpu_s_per_sample"]
            for k in parts:
                shares[k].append(p[k + "_cpu_s_per_sample"] / total)
            shares["unaccounted"].append(1 - sum(shares[k][-1] for k in parts))
    print(f"(b) pipeline stage timing, ImageNet pipeline, 256 samples x 3 pairs, {rounds} rounds")
    print(f"  overhead median {statistics.median(overheads) * 100:.2f}% "
          f"(per round: {', '.join(f'{o * 100:.1f}%' for o in overheads)}); "
          f"1 thread {statistics.median(rates):.0f} samples/s")
    print("  share of the process CPU (median): " + ", ".join(
        f"{k} {statistics.median(v) * 100:.1f}%" for k, v in shares.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--images", type=int, default=500)
    args = ap.parse_args()
    trainer_side(args.steps, args.rounds)
    pipeline_side(args.build, args.images, args.rounds)


if __name__ == "__main__":
    main()
