#!/usr/bin/python3
"""A trainer beside a malicious worker, for tests/e2e/flood_test.sh.

It starts tests/e2e/flood_worker.py (ARGS...) against its own run, reads EPOCHS
epochs with goldminer.Loader, and samples its own resident memory from its first
batch to the end. Writes OUT (JSON): {"epochs": [[key, ...], ...],
"rss_before_kib", "max_rss_kib", "flood": the flood worker's JSON line}, or
{"error": message} (exit status 3) when the loader fails.

usage: flood_trainer.py OUT EPOCHS FLOOD_ARGS...
"""
import json
import os
import subprocess
import sys
import threading
import time

import goldminer

HERE = os.path.dirname(os.path.abspath(__file__))


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    out, epochs, flood_args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    seen = [[] for _ in range(epochs)]
    samples, stop = [], threading.Event()
    flood = None
    try:
        # First, so that it registers while most of the epoch's splits are to be made.
        flood = subprocess.Popen([sys.executable, os.path.join(HERE, "flood_worker.py")] + flood_args,
                                 stdout=subprocess.PIPE, text=True)
        loader = goldminer.Loader(epochs=epochs)
        rss_before = None
        for batch in loader:
            seen[batch["epoch"]].extend(batch["key"])
            if rss_before is None:
                rss_before = rss_kib()
                sampler = threading.Thread(daemon=True, target=lambda: [samples.append(rss_kib()) or time.sleep(0.02)
                                                           for _ in iter(stop.is_set, True)])
                sampler.start()
        loader.close()
    except Exception as e:  # noqa: BLE001 - the test reads the message
        with open(out, "w") as f:
            json.dump({"error": str(e)}, f)
        stop.set()
        if flood:
            flood.kill()
        sys.exit(3)
    stop.set()
    sampler.join()
    line, _ = flood.communicate(timeout=120)
    with open(out, "w") as f:
        json.dump({"epochs": seen, "rss_before_kib": rss_before, "max_rss_kib": max(samples + [rss_kib()]),
                   "flood": json.loads(line.strip().splitlines()[-1]) if line.strip() else None}, f)


if __name__ == "__main__":
    main()
