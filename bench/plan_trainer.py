#!/usr/bin/python3
"""A trainer for the plan benchmark: consumes goldminer.Loader batches, optionally
"computing" for --step-s seconds per batch (a sleep: a trainer with a known demand),
and prints one JSON line with the steady-state rate: samples per second between
batch --skip and the last one (start-up and the pipeline's fill are left out).

Under `goldminer profile` it is stopped after its steps (nothing is printed then);
under `goldminer run` it runs --epochs epochs."""
import argparse
import json
import time

import goldminer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--step-s", type=float, default=0.0)
    ap.add_argument("--skip", type=int, default=5, help="batches not measured at start")
    args = ap.parse_args()
    loader = goldminer.Loader(epochs=args.epochs)
    batches = samples = 0
    t0 = None
    for batch in loader:
        batches += 1
        if batches == args.skip:
            t0 = time.perf_counter()
        elif t0 is not None:
            samples += len(batch["key"])
        if args.step_s > 0:
            time.sleep(args.step_s)
    dt = time.perf_counter() - t0 if t0 is not None else 0.0
    print(json.dumps({"batches": batches, "samples": samples, "seconds": dt,
                      "samples_per_s": samples / dt if dt > 0 else 0.0,
                      "data_wait_s": loader.stats()["data_wait_s"]}), flush=True)


if __name__ == "__main__":
    main()
