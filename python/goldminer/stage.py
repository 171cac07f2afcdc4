"""Serve a Python function as a goldminer `exec` stage.

    python3 -m goldminer.stage mymodule:myfn

imports `myfn` from `mymodule` (importable from the current directory, the
pipeline's directory or PYTHONPATH) and serves framed samples on stdin/stdout
until end of input. The function takes one sample dict and returns it:

    def myfn(sample):
        sample["tensor"] = ...   # numpy array
        return sample

A sample dict has: index (int), label (int, -1: none), key (str), data (bytes),
ext (str), fields (dict str -> bytes), tensor (numpy array or None) and layout
("none", "hwc" or "chw"). Returning a numpy array instead of a dict replaces the
tensor and keeps the rest (the layout stays when the array has as many
dimensions as the input tensor, else it becomes "none"). An exception fails that
sample only: its last traceback line travels back as the error (skipped under the
pipeline's on_error "skip"). MemoryError, and OSError EMFILE, ENFILE, ENOMEM,
ENOBUFS or ENOSPC, say the process is short of a resource, not that the sample is
bad: they travel as a resource error, the sample is never skipped for them, and
the worker makes the split again (a few times, then the split fails). print() output
goes to stderr; stdout carries only frames. A script with its own main can call
goldminer.stage.serve(fn).

Randomness: before each sample, Python's `random`, numpy's global generator and
torch's default generator (when torch is imported) are seeded from the sample's own
seed, drawn from (pipeline seed, epoch, sample index, stage number) as native ops
draw theirs. So a stage that draws from them (torchvision transforms, random.random,
np.random.rand) makes the same output for a sample on any worker, process or
thread count. A generator of your own must be made per sample from
goldminer.stage.sample_seed(), e.g. np.random.default_rng(sample_seed()).

Frame format (all integers little-endian). A frame is an 8-byte header, then a
body:
    magic   4 bytes   b"GMS1" (a sample), b"GMS2" (a seeded sample: a request
                      whose body is a u64 seed, then a GMS1 body), b"GME1"
                      (an error) or b"GMR1" (a resource error)
    length  u32       bytes of body after the header, at most 1 GiB
A sample body is, in order:
    u64 index
    i64 label
    key     u32 length + bytes (UTF-8)
    data    u32 length + bytes
    ext     u32 length + bytes (UTF-8)
    u32 count of extra fields, then per field: name (u32 length + bytes),
            value (u32 length + bytes)
    tensor  u8 present (0 or 1); when 1:
            u8 dtype (0 uint8, 1 int32, 2 int64, 3 float32)
            u8 layout (0 none, 1 HWC, 2 CHW)
            u8 ndim (>= 1), i64 dims[ndim] (each >= 0)
            u64 nbytes (= product(dims) * dtype size), then the bytes,
            row-major and contiguous
and ends exactly there. An error body (either kind) is the UTF-8 message. For each request
frame the stage writes exactly one response frame: the transformed sample or an
error.
"""

import errno
import importlib
import os
import random
import sys
import traceback

import numpy as np

from goldminer import _frame


class _Channel:
    """stdin/stdout as a frame channel; stdout is moved away from print()."""

    def __init__(self):
        self.inp = os.fdopen(os.dup(0), "rb", buffering=1 << 16)
        self.out = os.fdopen(os.dup(1), "wb", buffering=1 << 16)
        # Anything the user prints goes to stderr instead of corrupting frames.
        os.dup2(2, 1)
        sys.stdout = sys.stderr

    def read_exact(self, n):
        data = self.inp.read(n) if n else b""
        return data if data is not None else b""

    def read_frame(self):
        """Returns (seed, body) of the next sample frame (seed None for an unseeded
        one), or None at end of input."""
        header = self.read_exact(_frame.HEADER_BYTES)
        if not header:
            return None
        magic, length = _frame.decode_header(header)
        if magic in (_frame.ERROR_MAGIC, _frame.RESOURCE_MAGIC):
            raise _frame.FrameError("stage received an error frame as a request")
        body = bytearray(length)
        got = self.inp.readinto(body) if length else 0
        if got != length:
            raise _frame.FrameError(f"request ends after {got} of {length} body bytes")
        return _frame.split_seed(magic, body)

    def write(self, frame):
        self.out.write(frame)
        self.out.flush()


def apply_result(sample, result):
    """Turns what a stage function returned into the sample dict to send back."""
    if isinstance(result, dict):
        return result
    if result is None:
        raise TypeError("the stage function returned None; return the sample dict "
                        "or a numpy array")
    old = sample.get("tensor")
    sample["tensor"] = result
    ndim = getattr(result, "ndim", None)
    if old is None or ndim != old.ndim:
        sample["layout"] = "none"
    return sample


def error_message(exc):
    """The last line of the exception's traceback, e.g. "ValueError: bad row"."""
    lines = traceback.format_exception_only(type(exc), exc)
    return lines[-1].strip() if lines else repr(exc)


_sample_seed = None


def sample_seed():
    """The seed of the sample being handled (an int below 2**64), or None when the
    request carried none. Generators of the user's own (numpy.random.default_rng,
    torch.Generator, random.Random instances) must be made from it per sample, e.g.
    np.random.default_rng(goldminer.stage.sample_seed()), to stay reproducible."""
    return _sample_seed


def seed_generators(seed):
    """Seeds the global generators a stage may draw from: Python's random, numpy's
    legacy global RandomState (32 bits of the seed) and torch's default generator
    (63 bits) when torch has been imported. Called before each seeded sample."""
    global _sample_seed
    _sample_seed = seed
    random.seed(seed)
    np.random.seed(seed & 0xFFFFFFFF)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "manual_seed"):
        torch.manual_seed(seed & 0x7FFFFFFFFFFFFFFF)


# errno values that say the process is short of a resource, not that the sample
# is bad: such a failure is sent as a resource error (the split is made again).
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS,
                             errno.ENOSPC})


def is_resource_error(exc):
    """True for MemoryError and an OSError whose errno is in RESOURCE_ERRNOS."""
    return isinstance(exc, MemoryError) or (
        isinstance(exc, OSError) and exc.errno in RESOURCE_ERRNOS)


def handle(fn, body, seed=None):
    """One request body -> one response frame (never raises for a bad sample). A
    seed (from a GMS2 request) seeds the global generators first. Out of memory or
    descriptors (is_resource_error) answers a resource error frame: the sample is
    then not skipped, and the worker makes its split again."""
    try:
        if seed is not None:
            seed_generators(seed)
        sample = _frame.decode_body(body)
        return _frame.encode_sample(apply_result(sample, fn(sample)))
    except Exception as exc:  # the boundary: any user error fails one sample only
        traceback.print_exc(file=sys.stderr)
        return _frame.encode_error(error_message(exc), resource=is_resource_error(exc))


def serve(fn):
    """Serves `fn` on stdin/stdout until end of input; returns the exit code."""
    channel = _Channel()
    while True:
        request = channel.read_frame()
        if request is None:
            return 0
        seed, body = request
        channel.write(handle(fn, body, seed))


def load(spec):
    """Imports "module:function" (the module from sys.path, cwd included)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise SystemExit(f"goldminer.stage: expected MODULE:FUNCTION, got {spec!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python3 -m goldminer.stage MODULE:FUNCTION", file=sys.stderr)
        return 2
    return serve(load(argv[0]))


if __name__ == "__main__":
    sys.exit(main())
