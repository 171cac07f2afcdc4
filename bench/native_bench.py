#!/usr/bin/python3
"""Benchmark: an unchanged script's ImageFolder under `goldminer run --offload
native`, images per CPU-second of the DataLoader's workers, beside stock, the
exact offload and the same pipeline written as a pipeline file, in one run.

The script (plain torch, written here): torchvision's ImageFolder over real photos
(make_corpus.py), RandomResizedCrop(224), RandomHorizontalFlip, ToTensor,
Normalize; batch 64, 2 workers, persistent, shuffled by a seeded generator, E
epochs. Each configuration runs from a process of its own, which reads the CPU of
every process below it once they ended (RUSAGE_CHILDREN); the script reports its
own process's CPU (RUSAGE_SELF), and the workers' CPU is the difference: stock's
DataLoader workers; under `goldminer run --workers 2`, the data workers, their
virtual workers and the coordinator (all that the offload costs outside the
trainer's process). The pipeline file (examples/imagenet/pipeline.json over the
same corpus) runs in `goldminer worker --local --threads 1`, whose own count of
CPU seconds gives its images per CPU-second. Each figure is of the epochs after
the first, what a long training run pays for each image: the run of E epochs
less the same run of one (what starting costs, whatever the images: the Python
hosts' torch import, the virtual workers' fork and imports, the data workers'
start); the first epoch's extra CPU over a later one is reported beside it, in
CPU-seconds. Rounds alternate the ways; medians and ratios to stock.

usage: native_bench.py [--build build] [--python /usr/bin/python3] [--images 512]
                       [--epochs 3] [--rounds 3]   (epochs: at least 2)
"""
import json
import os
import statistics
import subprocess
import sys

from bench_util import IMAGE_LOADER, image_corpus, image_script_args, run_measured, write_script

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SCRIPT = r'''
import json, resource, sys, time
''' + IMAGE_LOADER + r'''
epochs = int(sys.argv[2])
images, start = 0, time.monotonic()  # 0 epochs: the loader starts no worker
for e in range(epochs):
    for x, y in loader:
        images += x.shape[0]
wall = time.monotonic() - start
del loader
me = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"images": images, "wall_s": wall, "trainer_cpu_s": me.ru_utime + me.ru_stime}))
'''

# native-cut: --offload-cut on, the uint8 crops to the trainer, which widens them
# (ToTensor's scaling, Normalize) as a worker on another node would have it do.
WAYS = ("stock", "exact", "native", "native-cut")


def steady(got, first):
    """Images per CPU-second of the epochs after the first (the run of E epochs
    less that of one), and the first epoch's CPU beyond a later one's."""
    images = got["images"] - first["images"]
    cpu = got["workers_cpu_s"] - first["workers_cpu_s"]
    got["images_per_cpu_s"] = images / cpu
    got["start_cpu_s"] = first["workers_cpu_s"] - first["images"] / got["images_per_cpu_s"]
    return got


def run(script, corpus, args, way):
    return steady(run_once(script, corpus, args, way, args.epochs),
                  run_once(script, corpus, args, way, 1))


def run_once(script, corpus, args, way, epochs):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDMINER_")}
    env["PYTHONPATH"] = ""
    argv = [args.python, script, corpus, str(epochs)]
    if way != "stock":
        argv = [os.path.join(args.build, "cmd", "goldminer"), "run", "--no-db", "--no-progress",
                "--workers", "2", "--offload", way.split("-")[0], "--offload-cut",
                "on" if way == "native-cut" else "auto", "--"] + argv
    got, used = run_measured(way, argv, env)
    got["workers_cpu_s"] = used["cpu_s"] - got["trainer_cpu_s"]
    got["images_per_s"] = got["images"] / max(got["wall_s"], 1e-9)
    return got


def pipeline_file(corpus, args):
    return steady(pipeline_file_once(corpus, args, args.epochs),
                  pipeline_file_once(corpus, args, 1))


def pipeline_file_once(corpus, args, epochs):
    with open(os.path.join(ROOT, "examples", "imagenet", "pipeline.json")) as f:
        spec = json.load(f)
    spec["source"]["root"] = os.path.abspath(corpus)
    path = os.path.join(args.build, "bench", "native_pipeline.json")
    with open(path, "w") as f:
        json.dump(spec, f, indent=1)
    out = subprocess.run([os.path.join(args.build, "cmd", "goldminer"), "worker", "--local",
                          "--pipeline", path, "--threads", "1", "--epochs", str(epochs),
                          "--json", "--no-progress"], check=True, capture_output=True, text=True)
    j = json.loads(out.stdout.strip().splitlines()[-1])
    return {"images": j["samples"], "workers_cpu_s": j["cpu_s"],
            "images_per_s": j["samples_per_s"]}


def main():
    args = image_script_args(__doc__, ROOT)
    if args.epochs < 2:
        sys.exit("native_bench.py: --epochs must be at least 2 (the figures are of the epochs "
                 "after the first)")
    corpus = image_corpus(args.build, args.images)
    script = write_script(args.build, "native_script.py", SCRIPT)
    results = {w: [] for w in WAYS + ("file",)}
    for r in range(args.rounds):
        for way in WAYS:
            got = run(script, corpus, args, way)
            results[way].append(got)
            print(f"round {r + 1}: {way}: {got['images_per_cpu_s']:.0f} images per worker "
                  f"CPU-second, {got['images_per_s']:.0f} images/s", file=sys.stderr)
        got = pipeline_file(corpus, args)
        results["file"].append(got)
        print(f"round {r + 1}: pipeline file: {got['images_per_cpu_s']:.0f} images per "
              f"CPU-second", file=sys.stderr)
    version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    print(f"{args.images} images, {args.epochs} epochs, ImageNet train transform, batch 64, "
          f"2 DataLoader workers, 2 data workers, torch {version}, {args.rounds} rounds, "
          f"medians (ratio to stock):")
    print("| figure | stock | exact | ratio | native | ratio | native, cut | ratio "
          "| pipeline file | ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key, label in (("images_per_cpu_s", "images per worker CPU-second, after epoch 1"),
                       ("start_cpu_s", "the first epoch's extra worker CPU-seconds"),
                       ("images_per_s", "images/s (2 cores, trainer included)")):
        a = statistics.median(x[key] for x in results["stock"])
        digits = 2 if key == "start_cpu_s" else 0
        cells = []
        for way in ("exact", "native", "native-cut", "file"):
            b = statistics.median(x[key] for x in results[way])
            cells.append(f"{b:.{digits}f} | {b / a:.2f}x")
        print(f"| {label} | {a:.{digits}f} | " + " | ".join(cells) + " |")
    file_ = statistics.median(x["images_per_cpu_s"] for x in results["file"])
    for way in ("native", "native-cut"):
        native = statistics.median(x["images_per_cpu_s"] for x in results[way])
        print(f"{way} / pipeline file, images per CPU-second: {native / file_:.2f}")
    trainer = {w: statistics.median(x["trainer_cpu_s"] / x["images"] * 1000 for x in results[w])
               for w in WAYS}
    print("the trainer's own CPU, ms per image: " +
          ", ".join(f"{w} {trainer[w]:.2f}" for w in WAYS))


if __name__ == "__main__":
    main()
