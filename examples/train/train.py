#!/usr/bin/python3
"""A small PyTorch training loop fed by goldminer's data workers.

Run it under `goldminer run`, which starts the workers and tells the trainer where
they are (GOLDMINER_ADDR, GOLDMINER_SECRET_FILE, PYTHONPATH):

    goldminer run --pipeline examples/imagenet/pipeline.json --workers 2 -- \\
        /usr/bin/python3 examples/train/train.py --steps 20

The model is a tiny CNN on CPU; what matters is the input side: the batches arrive
normalized, CHW float32, labelled, ready for the model, and the loop measures how
long it waited for them. Prints one JSON line at the end: steps, samples, loss at
the first and last step, and the loader's statistics (data_wait_s, ...).
"""
import argparse
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from goldminer.torch import GoldminerDataset  # noqa: E402

torch.set_num_threads(1)


def model_for(classes):
    return nn.Sequential(
        nn.Conv2d(3, 8, 5, stride=4), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(),
        nn.Linear(8 * 16, classes))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="training steps (0: one epoch)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--classes", type=int, default=32)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = model_for(args.classes)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = GoldminerDataset(epochs=args.epochs)
    losses, samples, steps, t0 = [], 0, 0, time.perf_counter()
    for batch in data:
        x, y = batch["image"], batch["label"].clamp(min=0) % args.classes
        if x.dtype == torch.uint8:  # a pipeline without normalize: scale here
            x = x.float() / 255
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        samples += x.shape[0]
        steps += 1
        if steps == args.steps:
            break
    print(json.dumps({"steps": steps, "samples": samples, "first_loss": losses[0],
                      "last_loss": losses[-1], "seconds": time.perf_counter() - t0,
                      "input_shape": list(x.shape), "loader": data.stats()}))


if __name__ == "__main__":
    main()
