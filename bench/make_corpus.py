#!/usr/bin/python3
"""Builds a corpus of ImageNet-sized JPEG crops from real photos shipped by Debian.

Photos come from the packages lomiri-wallpapers-16.04 (/usr/share/backgrounds) and
palapeli-data (/usr/share/palapeli). Each output image is a random crop of one photo,
resized so its short side is 400-500 px, saved as JPEG (quality 90, 4:2:0): about
60 KB, close to ImageNet's training images. Images land in OUT/<photo>/NNNNNN.jpg,
so the parent directory is the class label (one class per photo). Deterministic for --seed.

usage: make_corpus.py OUT --count N [--seed S] [--quality Q]
"""
import argparse
import glob
import os
import random
import sys

from PIL import Image

PHOTO_GLOBS = ["/usr/share/backgrounds/*.jpg", "/usr/share/palapeli/*/*.jpg"]


def photos():
    found = sorted(p for g in PHOTO_GLOBS for p in glob.glob(g))
    if not found:
        sys.exit("make_corpus.py: no photos found under /usr/share/backgrounds or "
                 "/usr/share/palapeli; install them with: apt-get install -y "
                 "lomiri-wallpapers-16.04 palapeli-data")
    return found


def crop_one(img, rng):
    w, h = img.size
    aspect = rng.choice([4 / 3, 3 / 4, 1.0, 3 / 2])
    frac = rng.uniform(0.35, 1.0)
    cw = min(w, int(w * frac))
    ch = min(h, int(cw / aspect))
    cw = min(cw, int(ch * aspect))
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    crop = img.crop((x, y, x + cw, y + ch))
    short = rng.randint(400, 500)
    scale = short / min(cw, ch)
    return crop.resize((max(1, round(cw * scale)), max(1, round(ch * scale))), Image.BILINEAR)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quality", type=int, default=90)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    sources = photos()
    done_marker = os.path.join(args.out, f".complete-{args.count}-{args.seed}-{args.quality}")
    if os.path.exists(done_marker):
        print(f"corpus {args.out}: {args.count} images (already made)")
        return
    per_photo = [args.count // len(sources) + (i < args.count % len(sources))
                 for i in range(len(sources))]
    made = 0
    for path, n in zip(sources, per_photo):
        stem = os.path.splitext(os.path.basename(path))[0]
        outdir = os.path.join(args.out, stem)
        os.makedirs(outdir, exist_ok=True)
        with Image.open(path) as im:
            im = im.convert("RGB")
            if min(im.size) > 1600:  # speeds up cropping big photos; crops stay >= 400 px
                s = 1600 / min(im.size)
                im = im.resize((round(im.size[0] * s), round(im.size[1] * s)), Image.BILINEAR)
            for i in range(n):
                crop_one(im, rng).save(os.path.join(outdir, f"{i:06d}.jpg"), "JPEG",
                                       quality=args.quality, subsampling=2)
                made += 1
        if sys.stderr.isatty():
            print(f"\rmaking corpus: {made}/{args.count}", end="", file=sys.stderr)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    open(done_marker, "w").close()
    print(f"corpus {args.out}: {made} images from {len(sources)} photos")


if __name__ == "__main__":
    main()
