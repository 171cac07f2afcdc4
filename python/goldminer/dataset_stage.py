"""Serve a map-style dataset (e.g. a PyTorch Dataset) as a goldminer `exec` stage.

    python3 -m goldminer.dataset_stage mymodule:make_dataset

calls `make_dataset()` once; the result needs only __getitem__. For each request
the stage answers dataset[sample["index"]] (use a "range" source so that the
index is the dataset position):
  - a tuple or list (x, y): tensor = x, label = int(y);
  - any other value x: tensor = x, label unchanged.
x may be a numpy array, a PIL image (converted to uint8 HWC; modes other than L
and RGB become RGB) or a torch tensor (detached, moved to the CPU; a 3-D torch
tensor is taken as CHW, the torchvision convention). Other dtypes are converted
to the four the wire carries (see goldminer.stage). torch is imported only by
the dataset itself: this module never imports it.

The frame format is described in goldminer/stage.py.
"""

import sys

import numpy as np

from goldminer import stage as _stage


def _is_torch_tensor(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _is_pil_image(x):
    return type(x).__module__.startswith("PIL.") and hasattr(x, "mode") and hasattr(x, "size")


def to_array(x):
    """Returns (numpy array, layout) for a dataset item's value."""
    if _is_torch_tensor(x):
        a = x.detach().cpu().numpy()
        return a, "chw" if a.ndim == 3 else "none"
    if _is_pil_image(x):
        if x.mode not in ("L", "RGB"):
            x = x.convert("RGB")
        a = np.asarray(x, dtype=np.uint8)
        return (a[:, :, None] if a.ndim == 2 else a), "hwc"
    return np.asarray(x), "none"


def make_handler(dataset):
    """The stage function serving `dataset`."""

    def fn(sample):
        item = dataset[sample["index"]]
        if isinstance(item, (tuple, list)):
            if len(item) != 2:
                raise ValueError(f"dataset item {sample['index']} has {len(item)} parts; "
                                 "expected (x, y) or a single value")
            x, y = item
            sample["label"] = int(y)
        else:
            x = item
        sample["tensor"], sample["layout"] = to_array(x)
        return sample

    return fn


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python3 -m goldminer.dataset_stage MODULE:FACTORY", file=sys.stderr)
        return 2
    factory = _stage.load(argv[0])
    return _stage.serve(make_handler(factory()))


if __name__ == "__main__":
    sys.exit(main())
