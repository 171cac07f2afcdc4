#!/usr/bin/python3
"""Benchmark: the cut of an unchanged script's ImageFolder (goldminer run
--offload-cut): the bytes of each batch that cross to the trainer, and what the
trainer's part costs it, beside stock and the uncut offload, in one run.

The script (plain torch, written here): torchvision's ImageFolder over real photos
(make_corpus.py), RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize;
batch 64, 2 workers, persistent, shuffled by a seeded generator, E epochs. For each
run it reports images/s (the first batch left out), the trainer process's own CPU
per batch (what it pays to receive batches, and with the cut to widen them), the
bytes of a batch's images as they reached the trainer's process (uint8 with the
cut, float32 without: read at goldminer._cut.finish_cut), and a SHA-256 over
every batch. Stock's run also gives the pipeline's CPU per batch (its workers'
CPU, RUSAGE_CHILDREN once they ended), against which the cut's added trainer CPU
is put. Three ways, in rounds that alternate them: stock, `goldminer run --workers
2 --offload-cut off`, and `--offload-cut on` (on this host the cut's automatic mode
would not cut: the batches come in shared memory; "on" cuts as a worker on another
node would). Medians and ratios to stock.

usage: cut_bench.py [--build build] [--images 512] [--epochs 3] [--rounds 3]
"""
import json
import os
import statistics
import subprocess
import sys

from bench_util import IMAGE_LOADER, image_corpus, image_script_args, write_script

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SCRIPT = r'''
import gc, hashlib, json, resource, statistics, sys, time

epochs = int(sys.argv[2])
received = []
try:
    from goldminer import _cut
    finish = _cut.finish_cut
    def spy(batch, cut, pin):
        received.append(batch[0].element_size() * batch[0].nelement())
        return finish(batch, cut, pin)
    _cut.finish_cut = spy
except ImportError:  # stock
    _cut = None
''' + IMAGE_LOADER + r'''h = hashlib.sha256()
times, images, sizes = [], 0, []
cpu0 = resource.getrusage(resource.RUSAGE_SELF)
for e in range(epochs):
    for x, y in loader:
        times.append(time.monotonic())
        images += x.shape[0]
        sizes.append(x.element_size() * x.nelement())
        h.update(x.numpy().tobytes()); h.update(y.numpy().tobytes())
cpu1 = resource.getrusage(resource.RUSAGE_SELF)
del loader
gc.collect()
children = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
print(json.dumps({"images_per_s": (images - 64) / (times[-1] - times[0]),
                  "trainer_cpu_ms_per_batch": 1000 * cpu / len(times),
                  "workers_cpu_ms_per_batch": 1000 * (children.ru_utime + children.ru_stime)
                  / len(times),
                  "image_kb_per_batch": statistics.median(received or sizes) / 1024,
                  "digest": h.hexdigest()}))
'''

MODES = ("stock", "off", "on")


def run(script, corpus, args, mode):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDMINER_")}
    env["PYTHONPATH"] = ""
    argv = [args.python, script, corpus, str(args.epochs)]
    if mode != "stock":
        argv = [os.path.join(args.build, "cmd", "goldminer"), "run", "--no-db", "--no-progress",
                "--workers", "2", "--offload-cut", mode, "--"] + argv
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        sys.exit(f"the script failed ({mode}):\n{out.stderr}")
    return json.loads([line for line in out.stdout.strip().splitlines()
                       if line.startswith("{")][-1])


def main():
    args = image_script_args(__doc__, ROOT)
    corpus = image_corpus(args.build, args.images)
    script = write_script(args.build, "cut_script.py", SCRIPT)
    results = {m: [] for m in MODES}
    for r in range(args.rounds):
        for mode in MODES:
            got = run(script, corpus, args, mode)
            results[mode].append(got)
            print(f"round {r + 1}: {mode}: {got['images_per_s']:.0f} images/s, trainer "
                  f"{got['trainer_cpu_ms_per_batch']:.1f} ms CPU/batch, "
                  f"{got['image_kb_per_batch']:.0f} KiB of images/batch", file=sys.stderr)
    version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    print(f"{args.images} images, {args.epochs} epochs, batch 64, 2 DataLoader workers, "
          f"2 data workers, torch {version}, {args.rounds} rounds, medians (ratio to stock):")
    print("| figure | stock | cut off | ratio | cut on | ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for key, label, fmt in (("images_per_s", "images/s", "%.0f"),
                            ("trainer_cpu_ms_per_batch", "trainer CPU ms/batch", "%.1f"),
                            ("image_kb_per_batch", "image KiB/batch to the trainer", "%.0f")):
        a = statistics.median(x[key] for x in results["stock"])
        cells = []
        for mode in MODES[1:]:
            b = statistics.median(x[key] for x in results[mode])
            cells.append(f"{fmt % b} | {b / a:.2f}x")
        print(f"| {label} | {fmt % a} | " + " | ".join(cells) + " |")
    same = ["yes" if all(x["digest"] == y["digest"] for x, y in
                         zip(results["stock"], results[mode])) else "NO" for mode in MODES[1:]]
    print(f"| same batches as stock | | {same[0]} | | {same[1]} | |")
    pipeline = statistics.median(x["workers_cpu_ms_per_batch"] for x in results["stock"])
    added = statistics.median(x["trainer_cpu_ms_per_batch"] for x in results["on"]) - \
        statistics.median(x["trainer_cpu_ms_per_batch"] for x in results["off"])
    print(f"The pipeline (stock's workers): {pipeline:.0f} ms CPU per batch; the cut adds "
          f"{added:.1f} ms of trainer CPU per batch, {100 * added / pipeline:.1f}% of it.")


if __name__ == "__main__":
    main()
