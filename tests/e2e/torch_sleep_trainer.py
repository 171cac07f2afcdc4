#!/usr/bin/python3
"""A plain PyTorch trainer for the end-to-end tests of `goldminer profile -- python3 ...`.

It knows nothing of goldminer: a map-style Dataset whose __getitem__ burns
--item-ms milliseconds of CPU (a busy loop, not a sleep: pre-processing) feeds a
torch DataLoader, and the training loop sleeps --step-ms per batch (no CPU, like a
step that waits for the GPU). The profiler's import hook records its data waits.

  --items N          dataset length (default 64)
  --item-ms MS       CPU milliseconds per item (default 0)
  --step-ms MS       sleep per batch (default 0)
  --batch-size B     DataLoader batch_size (default 8; the last batch may be partial)
  --num-workers W    DataLoader num_workers (default 0)
  --steps N          stop after N batches (default: one whole epoch)
  --own-log FILE     append "PID STEP NS" per step: the trainer's own measure of
                     the step's compute, as tests/e2e/sleep_trainer.py does

At the end it prints "torch_sleep_trainer: STEPS steps, SAMPLES samples".
"""
import argparse
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class BusyDataset(Dataset):
    """Item i: a float tensor [4] full of i and the label i, after item_ms of CPU."""

    def __init__(self, items, item_ms):
        self.items = items
        self.item_s = item_ms / 1000.0

    def __len__(self):
        return self.items

    def __getitem__(self, i):
        end = time.thread_time() + self.item_s  # this thread's CPU time
        x = 0
        while time.thread_time() < end:
            x += 1
        return torch.full((4,), float(i)), i


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--item-ms", type=float, default=0.0)
    parser.add_argument("--step-ms", type=float, default=0.0)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--own-log", default=None)
    return parser.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    loader = DataLoader(BusyDataset(args.items, args.item_ms), batch_size=args.batch_size,
                        num_workers=args.num_workers)
    own = os.open(args.own_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if args.own_log else None
    steps = samples = 0
    batches = iter(loader)
    got = None
    while args.steps is None or steps < args.steps:
        if own is not None and got is not None:
            os.write(own, b"%d %d %d\n" % (os.getpid(), steps - 1, time.monotonic_ns() - got))
        batch = next(batches, None)  # no batch past --steps: each read is a step
        got = time.monotonic_ns()
        if batch is None:
            break
        time.sleep(args.step_ms / 1000.0)
        steps += 1
        samples += len(batch[1])
    print("torch_sleep_trainer: %d steps, %d samples" % (steps, samples), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
