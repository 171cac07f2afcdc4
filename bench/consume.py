#!/usr/bin/python3
"""A trainer that only consumes: iterates goldminer.Loader for one epoch as fast
as batches come and prints one JSON line {images, seconds, images_per_s,
data_wait_s, batches, cpu_s, same_host_batches}: cpu_s is this process's CPU time,
all threads (the client's receive threads included), what feeding costs the
trainer. Used by dataplane_bench.py under `goldminer run`."""
import json
import time

import goldminer

t0, c0 = time.perf_counter(), time.process_time()
loader = goldminer.Loader(epochs=1)
n = 0
for batch in loader:
    n += len(batch["key"])
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
stats = loader.stats()
print(json.dumps({"images": n, "seconds": dt, "images_per_s": n / dt,
                  "data_wait_s": stats["data_wait_s"], "batches": stats["batches"], "cpu_s": cpu,
                  "same_host_batches": stats["same_host_batches"]}))
