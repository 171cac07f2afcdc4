#!/usr/bin/python3
"""Benchmark: goldminer's worker engine vs PyTorch's DataLoader, same images, one run.

Builds (once) a corpus of ImageNet-sized crops of real photos, then runs the ImageNet
training pipeline (decode, RandomResizedCrop 224, flip, normalize, CHW float32,
batch 64) through
  - goldminer worker --local, with 1 thread and with all cores,
  - torch DataLoader + torchvision, with num_workers=0 (1 core) and = all cores, on
    each torch given (--peer-python; default Debian's /usr/bin/python3, torch 1.13,
    and .venv-torch2's torch 2.x when installed: scripts/install-torch2.sh), and on
    torch 2.x also with torchvision's v2 transforms,
  - libjpeg-turbo full decode alone on one core (the per-core ceiling),
alternating the runs for --rounds rounds, and prints medians and ratios: images/s
(wall clock) and images per CPU-second (all threads and worker processes counted;
"1 core" runs of goldminer use one stage thread plus its reader and batcher).

usage: pipeline_bench.py [--build build] [--images 2000] [--rounds 3] [--json OUT]
                         [--peer-python PYTHON]...
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_json(cmd):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--peer-python", action="append",
                    help="an interpreter whose torch runs the peer (repeatable)")
    args = ap.parse_args()
    pythons = args.peer_python or [p for p in ("/usr/bin/python3",
                                               os.path.join(ROOT, ".venv-torch2", "bin", "python"))
                                   if os.access(p, os.X_OK)]
    peers = []  # (label, argv prefix)
    for python in pythons:
        version = subprocess.run([python, "-c", "import torch, torchvision; "
                                  "print(torch.__version__.split('+')[0], "
                                  "torchvision.__version__.split('+')[0])"],
                                 check=True, stdout=subprocess.PIPE, text=True).stdout.split()
        peers.append((f"torch {version[0]}", [python]))
        if int(version[1].split(".")[1]) >= 16 or int(version[1].split(".")[0]) > 0:
            peers.append((f"torch {version[0]} v2", [python, "--v2"]))
    cores = os.cpu_count() or 1
    work = os.path.join(args.build, "bench")
    corpus = os.path.join(work, f"corpus-{args.images}")
    subprocess.run([sys.executable, os.path.join(HERE, "make_corpus.py"), corpus,
                    "--count", str(args.images)], check=True)
    pipeline = os.path.join(work, "pipeline.json")
    with open(os.path.join(ROOT, "examples", "imagenet", "pipeline.json")) as f:
        spec = json.load(f)
    spec["source"]["root"] = os.path.abspath(corpus)
    with open(pipeline, "w") as f:
        json.dump(spec, f, indent=1)
    gm = os.path.join(args.build, "cmd", "goldminer")
    decode = os.path.join(args.build, "bench", "decode_baseline")
    peer = os.path.join(HERE, "torch_peer.py")

    runs = {"gm1": [], "gmN": [], "dec": [], "gm_cpu": []}
    for label, _ in peers:
        runs.update({f"{label}|1": [], f"{label}|N": [], f"{label}|cpu": []})
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds} ...", file=sys.stderr)
        for threads, key in ((1, "gm1"), (cores, "gmN")):
            j = run_json([gm, "worker", "--local", "--pipeline", pipeline, "--threads",
                          str(threads), "--json", "--no-progress"])
            runs[key].append(j["samples_per_s"])
            runs["gm_cpu"].append(j["samples"] / j["cpu_s"])
        for label, argv in peers:
            for workers, key in ((0, f"{label}|1"), (cores, f"{label}|N")):
                j = run_json([argv[0], peer, corpus, "--workers", str(workers), *argv[1:]])
                runs[key].append(j["images_per_s"])
                runs[f"{label}|cpu"].append(j["images_per_cpu_s"])
        runs["dec"].append(run_json([decode, corpus, "--rounds", "1"])["median_images_per_s"])

    med = {k: statistics.median(v) for k, v in runs.items()}
    print()
    print(f"ImageNet pipeline, {args.images} images (~{du_kb(corpus)} KB each), "
          f"batch 64, {args.rounds} rounds, medians (images/s; ratio: goldminer / peer)")
    head = f"{'':26}{'goldminer':>10}" + "".join(f"{label:>24}" for label, _ in peers)
    print(head)
    for name, gm_key, peer_key in (("1 core", "gm1", "1"), (f"{cores} cores", "gmN", "N"),
                                   ("per CPU-second (all runs)", "gm_cpu", "cpu")):
        cells = "".join(f"{med[f'{label}|{peer_key}']:14.1f} ({med[gm_key] / med[f'{label}|{peer_key}']:5.2f}x)"
                        for label, _ in peers)
        print(f"{name:26}{med[gm_key]:10.1f}{cells}")
    print(f"libjpeg-turbo full decode alone, 1 core: {med['dec']:.1f} images/s; "
          f"goldminer's whole pipeline per core reaches {100 * med['gm1'] / med['dec']:.0f}% of it")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "medians": med, "cores": cores, "images": args.images,
                       "peers": [label for label, _ in peers]}, f, indent=1)


def du_kb(d):
    total = n = 0
    for base, _, files in os.walk(d):
        for f in files:
            if f.endswith(".jpg"):
                total += os.path.getsize(os.path.join(base, f))
                n += 1
    return round(total / max(n, 1) / 1024)


if __name__ == "__main__":
    main()
