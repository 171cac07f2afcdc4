#!/usr/bin/python3
"""Benchmark: what the shuffle costs. The ImageNet training pipeline over the
benchmark corpus (crops of real photos, sorted by class on disk) through
`goldminer worker --local` with all cores:
  - in source order (no "shuffle" key): files read in path order,
  - "shuffle": true: each epoch a permutation of all files (random reads),
beside torch's DataLoader with shuffle=False and shuffle=True on the same images (its
peer: the same choice made in PyTorch). Runs alternate for --rounds rounds; medians
of images/s and the shuffled/in-order ratio of each are printed.

usage: shuffle_bench.py [--build build] [--images 1000] [--rounds 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

from pipeline_bench import run_json  # this folder is on sys.path when run as a script

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    work = os.path.join(args.build, "bench")
    corpus = os.path.join(work, "corpus")
    subprocess.run([PY, os.path.join(HERE, "make_corpus.py"), corpus, "--count", str(args.images)],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(ROOT, "examples", "imagenet", "pipeline.json")) as f:
        doc = json.load(f)
    pipelines = {}
    for name, shuffle in (("in order", None), ("shuffled", True)):
        d = dict(doc)
        d.pop("shuffle", None)
        if shuffle:
            d["shuffle"] = True
        path = os.path.join(work, "shuffle-%s.json" % name.replace(" ", "-"))
        with open(path, "w") as f:
            json.dump(d, f)
        pipelines[name] = path
    gm = os.path.join(args.build, "cmd", "goldminer")
    rates = {k: [] for k in ("goldminer in order", "goldminer shuffled", "torch in order",
                             "torch shuffled")}
    for r in range(args.rounds):
        for name, path in pipelines.items():
            j = run_json([gm, "-q", "worker", "--local", "--pipeline", path, "--threads", str(cores),
                          "--json", "--no-progress"])
            rates["goldminer " + name].append(j["samples_per_s"])
        for name, flag in (("in order", ["--no-shuffle"]), ("shuffled", [])):
            j = run_json([PY, os.path.join(HERE, "torch_peer.py"), corpus, "--workers", str(cores)]
                         + flag)
            rates["torch " + name].append(j["images_per_s"])
        print("round %d/%d: %s" % (r + 1, args.rounds, ", ".join(
            "%s %.0f" % (k, v[-1]) for k, v in rates.items())), file=sys.stderr)
    med = {k: statistics.median(v) for k, v in rates.items()}
    print("images/s, %d images, %d cores, %d rounds, medians" % (args.images, cores, args.rounds))
    print("  %-10s %12s %12s %8s" % ("", "in order", "shuffled", "ratio"))
    for who in ("goldminer", "torch"):
        a, b = med[who + " in order"], med[who + " shuffled"]
        print("  %-10s %12.0f %12.0f %7.2fx" % (who, a, b, b / a))
    print("  goldminer / torch, shuffled: %.2fx" % (med["goldminer shuffled"] / med["torch shuffled"]))


if __name__ == "__main__":
    main()
