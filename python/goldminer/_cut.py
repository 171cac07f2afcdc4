"""The cut of an offloaded DataLoader (goldminer.offload, GOLDMINER_OFFLOAD_CUT,
`goldminer run --offload-cut`): an ImageFolder whose transform ends in ToTensor
(and Normalize) is sent as uint8 from virtual workers whose batches cross TCP,
and widened by the trainer as it receives each batch (finish_cut), with the same
operations: a quarter of the bytes, the same batches. Also the native mode's
plan (goldminer._native), which is cut alike.

torch and torchvision are the program's: imported where used, once its
DataLoader is being served, never by importing this module.
"""

import os
import sys

from goldminer import _native
from goldminer._offload_config import SAID, say

# `goldminer run --offload-cut auto|off`: where a dataset's transform ends in steps
# that only widen the data, the virtual workers send the samples before them
# (uint8) and the trainer applies them as it receives each batch. "on" cuts on the
# trainer's host too (tests, benchmarks).
CUT_ENV = "GOLDMINER_OFFLOAD_CUT"
CUT_MODES = ("auto", "off", "on")


def _mode():
    """$GOLDMINER_OFFLOAD_CUT ("auto" when unset), or None: off, or not a mode."""
    mode = os.environ.get(CUT_ENV, "") or "auto"
    return None if mode not in CUT_MODES or mode == "off" else mode


def cut_plan(loader):
    """Where `loader`'s batches can be cut, or None: {"at": the index in
    dataset.transform.transforms of the first widening step, "dtype", "mean",
    "std" (None without a Normalize), "mode"}. Only where the trainer's part
    gives stock's bytes exactly: a torchvision ImageFolder (DatasetFolder, its
    own __getitem__ and PIL loader) whose transform is a Compose that ends in
    ToTensor(), or PILToTensor() then ConvertImageDtype(a float), then at most a
    Normalize, batched by the default collate_fn."""
    mode = _mode()
    if mode is None:
        return None
    folder = sys.modules.get("torchvision.datasets.folder")
    T = sys.modules.get("torchvision.transforms")
    if folder is None or T is None or not loader._auto_collation:
        return None
    from torch.utils.data._utils.collate import default_collate  # torch: the program's
    ds = loader.dataset
    if loader.collate_fn is not default_collate or not isinstance(ds, folder.DatasetFolder) or \
            type(ds).__getitem__ is not folder.DatasetFolder.__getitem__ or \
            ds.loader not in (folder.default_loader, folder.pil_loader):
        return None
    import torchvision  # the program's, imported by it (folder above)
    if torchvision.get_image_backend() != "PIL" or type(ds.transform) is not T.Compose:
        return None
    steps = list(ds.transform.transforms)
    import torch  # the program's
    for at, step in enumerate(steps):
        if type(step) is T.ToTensor:
            tail, dtype = steps[at + 1:], torch.get_default_dtype()
        elif type(step) is T.PILToTensor and at + 1 < len(steps) and \
                type(steps[at + 1]) is T.ConvertImageDtype and steps[at + 1].dtype.is_floating_point:
            tail, dtype = steps[at + 2:], steps[at + 1].dtype
        else:
            continue
        if not tail:
            return {"at": at, "dtype": dtype, "mean": None, "std": None, "mode": mode}
        if len(tail) == 1 and type(tail[0]) is T.Normalize:
            return {"at": at, "dtype": dtype, "mean": list(map(float, tail[0].mean)),
                    "std": list(map(float, tail[0].std)), "mode": mode}
        return None
    return None


def native_plan(loader):
    """goldminer._native.plan() of `loader`, or None: then why is said once."""
    try:
        return _native.plan(loader)
    except _native.NotNative as e:
        if SAID.first(("native", id(loader))):
            say(f"DataLoader of {type(loader.dataset).__name__} runs in exact mode, not "
                f"native: {e}")
        return None


def native_cut(native):
    """The cut of a native plan (as cut_plan's): the workers' batches are uint8
    where it is on, and the trainer widens them; None under --offload-cut off."""
    mode = _mode()
    if mode is None:
        return None
    import torch  # the program's
    return {"at": None, "dtype": torch.float32, "mean": native["mean"], "std": native["std"],
            "mode": mode}


def finish_cut(batch, cut, pin):
    """The trainer's part of a cut batch: its images (uint8, as the virtual worker
    sent them) through the steps it left, the same operations as stock's, so the
    same bytes; a batch a worker did not cut (float already) is left as it is."""
    import torch  # the program's
    if not (isinstance(batch, (list, tuple)) and batch and isinstance(batch[0], torch.Tensor)
            and batch[0].dtype == torch.uint8):
        return batch
    # In place on the one new tensor (stock's ops and values, a third of the passes
    # over memory of out-of-place ones).
    images = batch[0].to(dtype=cut["dtype"])
    images.div_(255)
    if cut["mean"] is not None:
        from torchvision.transforms import functional as F  # the program's (a Normalize)
        images = F.normalize(images, cut["mean"], cut["std"], inplace=True)
    if pin:
        images = images.pin_memory()
    return type(batch)([images, *batch[1:]])
