#!/usr/bin/python3
"""A plain PyTorch CUDA trainer for scripts/gpu_check.sh (`goldminer profile -- ...`).

It knows nothing of goldminer: a map-style Dataset that sleeps --item-ms per item
(a slow loader) feeds a torch DataLoader, and each step copies the batch to the GPU
and multiplies two --size x --size float32 matrices --matmuls times, then
synchronizes. With the defaults a step waits ~40 ms for data and computes a few
ms, so the GPU is mostly idle, stalled on data. Signals keep their default action:
`goldminer profile` stops it with SIGTERM.

  --item-ms MS       sleep per item (default 5)
  --batch-size B     DataLoader batch_size (default 8)
  --num-workers W    DataLoader num_workers (default 0)
  --size N           matrix size (default 4096)
  --matmuls K        matrix products per step (default 4)
  --steps N          stop after N steps (default: until stopped)

Exit 3 when torch has no CUDA device.
"""
import argparse
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    """Item i: a float tensor [256] full of i and the label i, after item_ms of sleep."""

    def __init__(self, item_ms):
        self.item_s = item_ms / 1000.0

    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        time.sleep(self.item_s)
        return torch.full((256,), float(i)), i


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--item-ms", type=float, default=5.0)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--matmuls", type=int, default=4)
    parser.add_argument("--steps", type=int, default=None)
    return parser.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("torch_cuda_train: torch sees no CUDA device", file=sys.stderr)
        return 3
    device = torch.device("cuda")
    a = torch.randn(args.size, args.size, device=device)
    b = torch.randn(args.size, args.size, device=device)
    loader = DataLoader(SlowDataset(args.item_ms), batch_size=args.batch_size,
                        num_workers=args.num_workers)
    steps = 0
    begin = time.monotonic()
    for x, _ in loader:
        x = x.to(device)
        for _ in range(args.matmuls):
            c = a @ b
        torch.cuda.synchronize()
        steps += 1
        if steps % 10 == 0:
            print("torch_cuda_train: %d steps, %.1f ms per step, checksum %.3g"
                  % (steps, 1000 * (time.monotonic() - begin) / steps,
                     float(c[0, 0]) + float(x.sum())), flush=True)
        if args.steps is not None and steps >= args.steps:
            break
    print("torch_cuda_train: %d steps" % steps, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
