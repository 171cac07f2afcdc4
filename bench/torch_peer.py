#!/usr/bin/python3
"""The peer: PyTorch's DataLoader with torchvision transforms on the same images.

Runs the ImageNet training pipeline (PIL decode, RandomResizedCrop(224),
RandomHorizontalFlip, ToTensor, Normalize, batch 64) over the JPEGs under ROOT
(class = parent directory) and prints one JSON object: images, seconds,
images_per_s, cpu_s (this process and its worker processes), images_per_cpu_s,
num_workers. torch runs with one intra-op thread per process.

The DataLoader shuffles (shuffle=True) unless --no-shuffle is given. With --v2, the
transforms are torchvision's v2 (torchvision 0.16 and later: RandomResizedCrop with
antialias, RandomHorizontalFlip, ToImage, ToDtype(float32, scale), Normalize), the
ones torch 2.x users write today.

usage: torch_peer.py ROOT --workers N [--limit N] [--no-shuffle] [--v2]
"""
import argparse
import glob
import json
import os
import resource
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
from PIL import Image  # noqa: E402
from torchvision import transforms  # noqa: E402

torch.set_num_threads(1)


def v2_transforms():
    """The same pipeline in torchvision's v2 transforms; SystemExit where there are none."""
    try:
        from torchvision.transforms import v2
    except ImportError:
        raise SystemExit("torch_peer.py --v2: this torchvision has no transforms.v2 "
                         "(0.16 and later have it)") from None
    return v2.Compose([
        v2.RandomResizedCrop(224, antialias=True),
        v2.RandomHorizontalFlip(),
        v2.ToImage(),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])


class Folder(torch.utils.data.Dataset):
    def __init__(self, root, limit, v2=False):
        self.files = sorted(glob.glob(os.path.join(root, "**", "*.jpg"), recursive=True))
        if limit:
            self.files = self.files[:limit]
        classes = sorted({os.path.basename(os.path.dirname(f)) for f in self.files})
        self.label = {c: i for i, c in enumerate(classes)}
        self.tf = v2_transforms() if v2 else transforms.Compose([
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ])

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        f = self.files[i]
        with Image.open(f) as im:
            x = self.tf(im.convert("RGB"))
        return x, self.label[os.path.basename(os.path.dirname(f))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--no-shuffle", action="store_true")
    ap.add_argument("--v2", action="store_true", help="torchvision's v2 transforms")
    args = ap.parse_args()
    ds = Folder(args.root, args.limit, args.v2)
    loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=not args.no_shuffle,
                                         num_workers=args.workers)
    def cpu():
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    t0, c0 = time.perf_counter(), cpu()
    n = 0
    for x, _ in loader:
        n += x.shape[0]
    dt = time.perf_counter() - t0
    del loader  # joins the worker processes, so their CPU time is counted
    cpu_s = cpu() - c0
    print(json.dumps({"images": n, "seconds": dt, "images_per_s": n / dt, "cpu_s": cpu_s,
                      "images_per_cpu_s": n / cpu_s, "num_workers": args.workers,
                      "torch": torch.__version__, "v2": args.v2}))


if __name__ == "__main__":
    main()
