#!/usr/bin/python3
"""A trainer for the end-to-end tests of `goldminer profile` and `goldminer run`.

It reads batches with goldminer.Loader (GOLDMINER_ADDR, RANK, WORLD_SIZE from `run`)
and "trains" on each by sleeping --step-ms milliseconds: no CPU, like a step that
waits for the GPU. Its data waits are what the client's step log records when
$GOLDMINER_PROFILE_DIR is set.

  --step-ms MS       sleep per batch (default 0)
  --epochs E         epochs to read (default 1)
  --steps N          stop after N batches and exit 0 (default: every batch of the epochs)
  --exit-at-once     exit 0 before reading anything (not even connecting)
  --crash-after K    raise an exception after K batches: exit 1
  --never-read       connect, then sleep until killed

At a normal end it prints "sleep_trainer: STEPS steps, SAMPLES samples".
"""
import argparse
import sys
import time

import goldminer


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--step-ms", type=float, default=0.0)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--exit-at-once", action="store_true")
    parser.add_argument("--crash-after", type=int, default=None)
    parser.add_argument("--never-read", action="store_true")
    return parser.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    if args.exit_at_once:
        return 0
    loader = goldminer.Loader(epochs=args.epochs)
    if args.never_read:
        loader.stats()  # connects
        while True:
            time.sleep(3600)
    steps = samples = 0
    batches = iter(loader)
    while args.steps is None or steps < args.steps:
        batch = next(batches, None)  # no batch past --steps: each read is a step
        if batch is None:
            break
        time.sleep(args.step_ms / 1000.0)
        steps += 1
        samples += len(batch["key"])
        if args.crash_after is not None and steps >= args.crash_after:
            raise RuntimeError("sleep_trainer: crashing after %d steps, as asked" % steps)
    loader.close()
    print("sleep_trainer: %d steps, %d samples" % (steps, samples), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
