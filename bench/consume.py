#!/usr/bin/python3
"""A trainer that only consumes: iterates goldminer.Loader for `--epochs` epochs
(default 1) as fast as batches come and prints one JSON line {images, seconds,
images_per_s, data_wait_s, batches, cpu_s, same_host_batches, batch_s,
boundary_s, after_first_images_per_s}: cpu_s is this process's CPU time, all threads (the client's receive
threads included), what feeding costs the trainer; batch_s the median wait
between two batches of an epoch, boundary_s the median wait from an epoch's last
batch to the next epoch's first; after_first_images_per_s the rate from the
first batch on (the run's start left out). Used by dataplane_bench.py under `goldminer run`."""
import argparse
import json
import statistics
import time

import goldminer

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=1)
args = ap.parse_args()
t0, c0 = time.perf_counter(), time.process_time()
loader = goldminer.Loader(epochs=args.epochs)
n = 0
first = None  # when the first batch came, and its images
last, last_epoch = t0, None
inside, boundaries = [], []
for batch in loader:
    now = time.perf_counter()
    if last_epoch is not None:
        (inside if batch["epoch"] == last_epoch else boundaries).append(now - last)
    last, last_epoch = now, batch["epoch"]
    if first is None:
        first = (now, len(batch["key"]))
    n += len(batch["key"])
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
stats = loader.stats()
print(json.dumps({"images": n, "seconds": dt, "images_per_s": n / dt,
                  "data_wait_s": stats["data_wait_s"], "batches": stats["batches"], "cpu_s": cpu,
                  "same_host_batches": stats["same_host_batches"],
                  "batch_s": statistics.median(inside) if inside else None,
                  "boundary_s": statistics.median(boundaries) if boundaries else None,
                  "after_first_images_per_s":
                      (n - first[1]) / (last - first[0]) if first and last > first[0] else None}))
