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
  --fake-gpu-ms MS   a test double of libgoldminer_cupti.so, for machines without a
                     GPU: when CUDA_INJECTION64_PATH is set (the profile asked for
                     GPU activity), write $GOLDMINER_PROFILE_DIR/gpu.<pid>.log as the
                     injection library would, with one "kernel" of MS milliseconds
                     at the start of each step (profiler/gpu_log.h)
  --own-log FILE     append "PID STEP NS" per step: the trainer's own measure of
                     step STEP's compute (from the return of one read to the start
                     of the next), for tests that check the profile against it

At a normal end it prints "sleep_trainer: STEPS steps, SAMPLES samples".
"""
import argparse
import os
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
    parser.add_argument("--fake-gpu-ms", type=float, default=None)
    parser.add_argument("--own-log", default=None)
    return parser.parse_args(argv)


class OwnLog:
    """The trainer's own measure of each step's compute (--own-log)."""

    def __init__(self, path):
        self.fd = None if path is None else os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.step = 0
        self.got = None

    def read(self):
        """Call when a read returns."""
        self.got = time.monotonic_ns()

    def reading(self):
        """Call when the next read starts: ends the step that `read` began."""
        if self.got is None:
            return
        if self.fd is not None:
            os.write(self.fd, b"%d %d %d\n" % (os.getpid(), self.step, time.monotonic_ns() - self.got))
        self.step += 1
        self.got = None


class FakeGpuLog:
    """Writes what libgoldminer_cupti.so writes for one kernel per step."""

    def __init__(self, kernel_ms):
        directory = os.environ.get("GOLDMINER_PROFILE_DIR")
        self.fd = None
        if kernel_ms is None or not directory or not os.environ.get("CUDA_INJECTION64_PATH"):
            return
        self.kernel_ns = int(kernel_ms * 1e6)
        path = os.path.join(directory, "gpu.%d.log" % os.getpid())
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self.fd, b"# goldminer gpu log 1 pid=%d\n# clock=monotonic\n" % os.getpid())

    def kernel(self):
        if self.fd is not None:
            start = time.monotonic_ns()
            os.write(self.fd, b"K %d %d 0 7 1 fake_step_kernel\n" % (start, start + self.kernel_ns))


def main(argv):
    args = parse_args(argv)
    if args.exit_at_once:
        return 0
    loader = goldminer.Loader(epochs=args.epochs)
    if args.never_read:
        loader.stats()  # connects
        while True:
            time.sleep(3600)
    gpu = FakeGpuLog(args.fake_gpu_ms)
    own = OwnLog(args.own_log)
    steps = samples = 0
    batches = iter(loader)
    while args.steps is None or steps < args.steps:
        own.reading()
        batch = next(batches, None)  # no batch past --steps: each read is a step
        own.read()
        if batch is None:
            break
        gpu.kernel()
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
