#!/usr/bin/python3
"""The same small training loop with PyTorch's own DataLoader: no goldminer in it.

This is the program a user has before moving anything. `goldminer profile` runs it
unchanged and measures how long its loop waits on its DataLoader:

    goldminer profile --steps 20 -- /usr/bin/python3 examples/train/torch_train.py \\
        build/demo/corpus --workers 1

Images under ROOT (class = parent directory) go through PIL decode,
RandomResizedCrop(224), RandomHorizontalFlip, ToTensor and Normalize, batch 64,
into a tiny CNN on CPU. Prints one JSON line at the end: steps, samples, loss at
the first and last step, seconds.
"""
import argparse
import glob
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
from PIL import Image  # noqa: E402
from torch import nn  # noqa: E402
from torchvision import transforms  # noqa: E402

torch.set_num_threads(1)


class Folder(torch.utils.data.Dataset):
    def __init__(self, root):
        self.files = sorted(glob.glob(os.path.join(root, "**", "*.jpg"), recursive=True))
        if not self.files:
            raise SystemExit(f"torch_train.py: no .jpg files under {root}")
        classes = sorted({os.path.basename(os.path.dirname(f)) for f in self.files})
        self.label = {c: i for i, c in enumerate(classes)}
        self.tf = transforms.Compose([
            transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with Image.open(self.files[i]) as im:
            x = self.tf(im.convert("RGB"))
        return x, self.label[os.path.basename(os.path.dirname(self.files[i]))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="directory of .jpg files, one sub-directory per class")
    ap.add_argument("--steps", type=int, default=0, help="training steps (0: all epochs)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1, help="DataLoader num_workers")
    ap.add_argument("--classes", type=int, default=32)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 5, stride=4), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(),
        nn.Linear(8 * 16, args.classes))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = torch.utils.data.DataLoader(Folder(args.root), batch_size=64, shuffle=True,
                                         num_workers=args.workers)
    losses, samples, steps, t0 = [], 0, 0, time.perf_counter()
    for _ in range(args.epochs):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y % args.classes)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))
            samples += x.shape[0]
            steps += 1
            if steps == args.steps:
                break
        if steps == args.steps:
            break
    print(json.dumps({"steps": steps, "samples": samples, "first_loss": losses[0],
                      "last_loss": losses[-1], "seconds": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
