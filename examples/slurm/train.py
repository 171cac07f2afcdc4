#!/usr/bin/env python3
"""A small PyTorch training script with its own DataLoader: no goldminer in it.

The job scripts beside it (one_node.sbatch, hetjob.sbatch) run it unchanged under
`goldminer run`, which moves its DataLoader's worker processes onto goldminer's data
workers. Replace it with your own script; nothing in it is needed by goldminer.

Images under ROOT (class = parent directory) go through PIL decode,
RandomResizedCrop(64), RandomHorizontalFlip and ToTensor, in batches of 8, into a
tiny CNN on the GPU when there is one (else the CPU). After each epoch it prints one
JSON line: the epoch, the samples it trained on, how many distinct ones (the dataset
returns each sample's index for that count), and the mean loss.
"""
import argparse
import glob
import json
import os

import torch
from PIL import Image
from torch import nn
from torchvision import transforms


class Folder(torch.utils.data.Dataset):
    def __init__(self, root):
        self.files = sorted(glob.glob(os.path.join(root, "**", "*.jpg"), recursive=True))
        if not self.files:
            raise SystemExit(f"train.py: no .jpg files under {root}")
        classes = sorted({os.path.basename(os.path.dirname(f)) for f in self.files})
        self.label = {c: i for i, c in enumerate(classes)}
        self.tf = transforms.Compose([
            transforms.RandomResizedCrop(64), transforms.RandomHorizontalFlip(),
            transforms.ToTensor()])

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with Image.open(self.files[i]) as im:
            x = self.tf(im.convert("RGB"))
        return x, self.label[os.path.basename(os.path.dirname(self.files[i]))], i


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="directory of .jpg files, one sub-directory per class")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=3, help="DataLoader num_workers")
    args = ap.parse_args()
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Sequential(
        nn.Conv2d(3, 8, 5, stride=4), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(),
        nn.Linear(8 * 16, 2)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = torch.utils.data.DataLoader(Folder(args.root), batch_size=8, shuffle=True,
                                         num_workers=args.workers)
    for epoch in range(args.epochs):
        seen, losses = [], []
        for x, y, index in loader:
            loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))
            seen += index.tolist()
        print(json.dumps({"epoch": epoch, "samples": len(seen), "distinct": len(set(seen)),
                          "loss": sum(losses) / len(losses)}), flush=True)


if __name__ == "__main__":
    main()
