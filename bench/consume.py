#!/usr/bin/python3
"""A trainer that only consumes: iterates goldminer.Loader for one epoch as fast
as batches come and prints one JSON line {images, seconds, images_per_s,
data_wait_s}. Used by dataplane_bench.py under `goldminer run`."""
import json
import time

import goldminer

t0 = time.perf_counter()
loader = goldminer.Loader(epochs=1)
n = 0
for batch in loader:
    n += len(batch["key"])
dt = time.perf_counter() - t0
print(json.dumps({"images": n, "seconds": dt, "images_per_s": n / dt,
                  "data_wait_s": loader.stats()["data_wait_s"]}))
