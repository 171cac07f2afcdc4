"""`goldminer run --offload native`: a DataLoader whose dataset and transform
goldminer recognises is made by the native engine's ops (libgoldminer_native.so,
include/goldminer/native.h) in its virtual workers, in place of the dataset's
Python code.

Recognised (plan()): a torchvision ImageFolder or DatasetFolder with its own
__getitem__, the default (PIL) loader, no target_transform, JPEG files only,
alone or inside a Subset or a ConcatDataset (nested, each folder's transform
giving the same stages), batched by the default collate_fn; its transform a
transforms.Compose of

    RandomResizedCrop(size, scale, ratio)   bilinear, antialiased (PIL's)
    Resize(size)                            an int (the shorter side) or (h, w);
                                            bilinear, antialiased; no max_size
    CenterCrop(size)
    RandomHorizontalFlip(p)
    ToTensor(), or PILToTensor() then ConvertImageDtype(torch.float32), last,
    then at most a Normalize(mean, std)

whose output has one size for every sample (the last crop's or an (h, w)
Resize's). Anything else is not, and plan() raises NotNative naming the first
step that is not and why; the DataLoader then runs as --offload exact does.

What differs from stock (said in the run's first line, and in man
goldminer-run): the random draws (crop boxes, flips) come from goldminer's
per-sample generator, seeded by (the iterator's base seed, the sample's index,
the stage), not from torch's, so the batches are not stock's bit for bit; a
sample is the same whichever worker makes it. With a RandomResizedCrop the
engine decodes only the crop's region, at the smallest DCT scale that still
gives the crop's size (its speed), so those pixels are not PIL's either; without
one the decode is PIL's, and the deterministic steps match torchvision's to the
bit in uint8 and within float32 rounding after Normalize
(tests/python/test_native.py).

The trainer keeps the sampler, the order, collate's output format and pin_memory;
the plan travels in the dataset's place (job["native"] says so), and the
virtual worker makes each batch
with one call: the indices' files in, a [B, C, H, W] tensor out, and the labels.
"""

import ctypes
import functools
import json
import os

from goldminer._client_lib import find_library


class NotNative(Exception):
    """Why a DataLoader is not run native: the step or the dataset, and why."""


@functools.lru_cache(maxsize=None)
def library():
    """libgoldminer_native.so, loaded and declared at the first call that
    succeeds; the same library after it."""
    lib = ctypes.CDLL(find_library("libgoldminer_native.so", "worker", "GOLDMINER_NATIVE_LIB",
                                   "goldminer_native"))
    c = ctypes
    lib.gm_native_abi_version.restype = c.c_int
    lib.gm_native_last_error.restype = c.c_char_p
    lib.gm_native_open.argtypes = [c.c_char_p, c.POINTER(c.c_void_p)]
    lib.gm_native_open.restype = c.c_int
    lib.gm_native_batch.argtypes = [c.c_void_p, c.POINTER(c.c_char_p), c.POINTER(c.c_uint64),
                                    c.c_size_t, c.c_uint64, c.c_uint64, c.c_void_p, c.c_size_t,
                                    c.POINTER(c.c_int64)]
    lib.gm_native_batch.restype = c.c_int
    lib.gm_native_close.argtypes = [c.c_void_p]
    lib.gm_native_close.restype = None
    return lib


def _error():
    return library().gm_native_last_error().decode(errors="replace")


class Ops:
    """The ops of a list of pipeline.json stages, for making batches."""

    def __init__(self, stages):
        # Held for __del__, which may run while the interpreter tears this module down.
        self._lib = library()
        handle = ctypes.c_void_p()
        if self._lib.gm_native_open(json.dumps(stages).encode(), ctypes.byref(handle)) != 0:
            raise ValueError(f"the native stages do not build: {_error()}")
        self._handle = handle

    def __del__(self):
        if getattr(self, "_handle", None):
            self._lib.gm_native_close(self._handle)
            self._handle = None

    def batch(self, paths, indices, seed, shape, dtype, out=None):
        """A torch tensor [len(paths), *shape] of `dtype` (torch.uint8 or
        torch.float32): sample i made from paths[i] with the randomness of
        (seed, indices[i]); in `out` when given (that shape and dtype). ValueError
        names the file and the step that failed."""
        import torch
        if out is None:
            out = torch.empty((len(paths), *shape), dtype=dtype)
        sample_bytes = out[0].numel() * out.element_size() if len(paths) else 0
        c_paths = (ctypes.c_char_p * len(paths))(*[os.fsencode(p) for p in paths])
        c_indices = (ctypes.c_uint64 * len(indices))(*indices)
        got = (ctypes.c_int64 * 3)()
        if self._lib.gm_native_batch(self._handle, c_paths, c_indices, len(paths),
                                     seed & (2**64 - 1), 0, out.data_ptr(), sample_bytes,
                                     got) != 0:
            raise ValueError(_error())
        return out


def _size(size, what):
    """torchvision's size argument as pipeline.json's: an int, or [h, w]."""
    if isinstance(size, int):
        return size
    if isinstance(size, (list, tuple)) and len(size) == 1 and isinstance(size[0], int):
        return [size[0], size[0]]
    if isinstance(size, (list, tuple)) and len(size) == 2 and all(isinstance(v, int) for v in size):
        return [size[0], size[1]]
    raise NotNative(f"{what}: size {size!r} is not an int or (height, width)")


def _bilinear(step, what):
    from torchvision.transforms import InterpolationMode
    mode = getattr(step, "interpolation", InterpolationMode.BILINEAR)
    if mode not in (InterpolationMode.BILINEAR, 2):
        raise NotNative(f"{what}: interpolation {getattr(mode, 'name', mode)} (goldminer "
                        f"resamples bilinear only)")
    if getattr(step, "antialias", True) is False:
        raise NotNative(f"{what}: antialias=False (goldminer resamples as PIL does, "
                        f"antialiased)")


def _stages(steps):
    """(stages for the uint8 cut, stages to the end, [C, H, W], mean, std) of a
    Compose's steps; NotNative names the first step that is not recognised."""
    import torch
    from torchvision import transforms as T
    stages = [{"op": "decode_jpeg", "fast": False}]
    size = None  # [h, w] once one is fixed
    at = 0
    while at < len(steps):
        step = steps[at]
        what = f"transform step {at} ({type(step).__name__})"
        kind = type(step)
        if kind is T.RandomResizedCrop:
            _bilinear(step, what)
            s = _size(step.size, what)
            size = [s, s] if isinstance(s, int) else s
            stages.append({"op": "random_resized_crop", "size": size,
                           "scale": [float(v) for v in step.scale],
                           "ratio": [float(v) for v in step.ratio]})
        elif kind is T.Resize:
            _bilinear(step, what)
            if getattr(step, "max_size", None) is not None:
                raise NotNative(f"{what}: max_size={step.max_size} (not an op of goldminer's)")
            s = _size(step.size, what)
            size = None if isinstance(s, int) else s
            stages.append({"op": "resize", "size": s})
        elif kind is T.CenterCrop:
            s = _size(step.size, what)
            size = [s, s] if isinstance(s, int) else s
            stages.append({"op": "center_crop", "size": size})
        elif kind is T.RandomHorizontalFlip:
            stages.append({"op": "flip", "p": float(step.p)})
        elif kind is T.ToTensor or (kind is T.PILToTensor and at + 1 < len(steps) and
                                    type(steps[at + 1]) is T.ConvertImageDtype and
                                    steps[at + 1].dtype == torch.float32):
            rest = steps[at + (1 if kind is T.ToTensor else 2):]
            if kind is T.ToTensor and torch.get_default_dtype() != torch.float32:
                raise NotNative(f"{what}: torch's default dtype is "
                                f"{torch.get_default_dtype()}, not float32")
            mean = std = None
            if len(rest) == 1 and type(rest[0]) is T.Normalize and not rest[0].inplace:
                mean = [float(v) for v in rest[0].mean]
                std = [float(v) for v in rest[0].std]
            elif rest:
                where = len(steps) - len(rest)
                raise NotNative(f"transform step {where} ({type(rest[0]).__name__}): only a "
                                f"Normalize may follow ToTensor")
            if size is None:
                raise NotNative("the samples' size is not fixed: end the geometric steps "
                                "with a crop or a Resize to (height, width)")
            # A random crop's pixels are decoded at the smallest DCT scale that
            # still gives its size, and only its region (the engine's speed);
            # without one, in full as PIL does, for torchvision's values.
            stages[0]["fast"] = any(s["op"] == "random_resized_crop" for s in stages)
            cut = stages + [{"op": "to_tensor", "layout": "CHW", "dtype": "uint8"}]
            full = list(stages)
            if mean is not None:
                full.append({"op": "normalize", "mean": mean, "std": std})
            full.append({"op": "to_tensor", "layout": "CHW", "dtype": "float32"})
            return cut, full, [3, *size], mean, std
        elif kind is T.Lambda:
            raise NotNative(f"{what}: a Lambda (its code is the program's own)")
        else:
            raise NotNative(f"{what}: not one of goldminer's ops")
        at += 1
    raise NotNative("the transform does not end in ToTensor (or PILToTensor and "
                    "ConvertImageDtype(torch.float32)), then at most a Normalize")


def _folder_samples(ds, folder, where):
    """The (path, label) samples of what `ds` is made of, in its index order, and
    the DatasetFolders whose transforms make them; NotNative says why not."""
    from torch.utils.data import ConcatDataset, Subset
    if type(ds) is Subset:
        inner, folders = _folder_samples(ds.dataset, folder, where)
        return [inner[i] for i in ds.indices], folders
    if type(ds) is ConcatDataset:
        samples, folders = [], []
        for n, part in enumerate(ds.datasets):
            inner, found = _folder_samples(part, folder, f"{where}'s dataset {n}")
            samples += inner
            folders += found
        return samples, folders
    if not isinstance(ds, folder.DatasetFolder):
        raise NotNative(f"{where} is a {type(ds).__name__}, not a torchvision ImageFolder "
                        f"or DatasetFolder")
    if type(ds).__getitem__ is not folder.DatasetFolder.__getitem__:
        raise NotNative(f"{type(ds).__name__} has a __getitem__ of its own")
    if ds.loader not in (folder.default_loader, folder.pil_loader):
        raise NotNative(f"{where}'s loader is not torchvision's default (PIL) loader")
    if ds.target_transform is not None:
        raise NotNative(f"{where} has a target_transform")
    return list(ds.samples), [ds]


def plan(loader):
    """The native plan of a DataLoader: {"samples": [[path, label]...] in the
    dataset's index order, "cut": stages to uint8, "full": stages to the end,
    "shape": [C, H, W], "mean", "std"}. Raises NotNative saying why not. The
    dataset may be a DatasetFolder, or a Subset or ConcatDataset of them (nested),
    when every DatasetFolder's transform gives the same stages."""
    import sys
    folder = sys.modules.get("torchvision.datasets.folder")
    T = sys.modules.get("torchvision.transforms")
    if folder is None or T is None:
        raise NotNative("the dataset is not a torchvision ImageFolder")
    from torch.utils.data._utils.collate import default_collate
    samples, folders = _folder_samples(loader.dataset, folder, "the dataset")
    if loader.collate_fn is not default_collate or not loader._auto_collation:
        raise NotNative("the DataLoader has a collate_fn of its own or no batch size")
    import torchvision
    if torchvision.get_image_backend() != "PIL":
        raise NotNative("torchvision's image backend is not PIL")
    made = None
    for n, ds in enumerate(folders):
        if type(ds.transform) is not T.Compose:
            raise NotNative(f"the transform is a {type(ds.transform).__name__}, not a "
                            f"transforms.Compose")
        these = _stages(list(ds.transform.transforms))
        if made is not None and these != made:
            raise NotNative(f"the ConcatDataset's image folders have different transforms "
                            f"(folder {n}'s is not folder 0's)")
        made = these
    cut, full, shape, mean, std = made
    for path, _ in samples:
        if os.path.splitext(path)[1].lower() not in (".jpg", ".jpeg"):
            raise NotNative(f"{path} is not a JPEG file (goldminer decodes JPEG only)")
    return {"samples": [[os.path.abspath(p), int(label)] for p, label in samples],
            "cut": cut, "full": full, "shape": shape, "mean": mean, "std": std}


class Indices:
    """The dataset a native virtual worker's torch loop fetches from: an index
    is its own sample; collate (Collate) makes the batch."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


class Collate:
    """A native virtual worker's collate_fn: the batch of a list of indices, as
    the default collate of (image, label) makes it, [images, labels].

    The images are made in one buffer, used again for every batch of its size:
    torch's worker loop hands a batch to its data queue (_vworker._Results, which
    writes it out before it returns) before it fetches the next, and memory
    written for the first time costs more than the batch's decoding."""

    def __init__(self, native, cut_on, seed, recycler=None):
        self.paths = [s[0] for s in native["samples"]]
        self.labels = [s[1] for s in native["samples"]]
        self.ops = Ops(native["cut"] if cut_on else native["full"])
        self.shape = native["shape"]
        self.cut_on = cut_on
        self.seed = seed
        self.buffer = None
        self.recycler = recycler  # _vwire.Recycler: the batch made in a result memfd

    def __call__(self, indices):
        import torch
        dtype = torch.uint8 if self.cut_on else torch.float32
        labels = [self.labels[i] for i in indices]
        views = None
        if self.recycler is not None:
            n = len(indices)
            image_bytes = n * torch.tensor([], dtype=dtype).element_size()
            for d in self.shape:
                image_bytes *= d
            views = self.recycler.make_in_place([image_bytes, 8 * n])
        if views is not None:
            # Where the result goes as it is: written once, sent without a copy.
            images = torch.frombuffer(views[0], dtype=dtype).view(len(indices), *self.shape)
            out = torch.frombuffer(views[1], dtype=torch.int64)
            out.copy_(torch.tensor(labels, dtype=torch.int64))
        else:
            if self.buffer is None or len(self.buffer) != len(indices):
                self.buffer = torch.empty((len(indices), *self.shape), dtype=dtype)
            images, out = self.buffer, torch.tensor(labels, dtype=torch.int64)
        try:
            images = self.ops.batch([self.paths[i] for i in indices], indices, self.seed,
                                    self.shape, dtype, images)
        except Exception:
            if views is not None:
                self.recycler.abandon(views)
            raise
        return [images, out]
