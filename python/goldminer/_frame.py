"""Encoding and decoding of goldminer sample frames (the format is described
at the top of goldminer/stage.py and in worker/sample_frame.h).

A decoded sample is a dict:
  index (int), label (int, -1: none), key (str), data (bytes), ext (str),
  fields (dict str -> bytes), tensor (numpy array or None),
  layout ("none", "hwc" or "chw").
"""

import struct

import numpy as np

SAMPLE_MAGIC = b"GMS1"
SEEDED_MAGIC = b"GMS2"  # a request: u64 seed, then a GMS1 body
ERROR_MAGIC = b"GME1"
# A failure that is not the sample's (out of memory or descriptors): the worker
# makes the split again rather than skipping the sample.
RESOURCE_MAGIC = b"GMR1"
HEADER_BYTES = 8
MAX_BODY = 1 << 30

_DTYPES = [np.dtype("<u1"), np.dtype("<i4"), np.dtype("<i8"), np.dtype("<f4")]
_LAYOUTS = ["none", "hwc", "chw"]

class FrameError(ValueError):
    """A malformed frame, or a sample that cannot be encoded."""


class _Reader:
    def __init__(self, body):
        self.body = body
        self.view = memoryview(body)
        self.pos = 0

    def take(self, n, field):
        if n > len(self.body) - self.pos:
            raise FrameError(f"sample frame: body ends inside field {field!r} at byte "
                             f"{self.pos} of {len(self.body)}")
        start = self.pos
        self.pos += n
        return start

    def unpack(self, fmt, field):
        size = struct.calcsize(fmt)
        start = self.take(size, field)
        return struct.unpack_from(fmt, self.body, start)

    def blob(self, field):
        (n,) = self.unpack("<I", field)
        start = self.take(n, field)
        return bytes(self.view[start:start + n])


def decode_header(header):
    """Returns (magic, body_length) for 8 header bytes: magic is SAMPLE_MAGIC,
    SEEDED_MAGIC, ERROR_MAGIC or RESOURCE_MAGIC."""
    if len(header) < HEADER_BYTES:
        raise FrameError(f"frame header: got {len(header)} bytes, need {HEADER_BYTES}")
    magic = bytes(header[:4])
    if magic not in (SAMPLE_MAGIC, SEEDED_MAGIC, ERROR_MAGIC, RESOURCE_MAGIC):
        raise FrameError(f"frame header: bad magic {magic!r} "
                         "(expected b'GMS1', b'GMS2', b'GME1' or b'GMR1')")
    (length,) = struct.unpack_from("<I", header, 4)
    if length > MAX_BODY:
        raise FrameError(f"frame header: body of {length} bytes is over the 1 GiB limit")
    return magic, length


def _decode_tensor(r):
    dtype, layout, ndim = r.unpack("<BBB", "tensor")
    if dtype >= len(_DTYPES):
        raise FrameError(f"sample frame: unknown tensor dtype {dtype}")
    if layout >= len(_LAYOUTS):
        raise FrameError(f"sample frame: unknown tensor layout {layout}")
    if ndim == 0:
        raise FrameError("sample frame: a tensor needs at least one dimension")
    dims = r.unpack(f"<{ndim}q", "tensor.dims")
    if any(d < 0 for d in dims):
        raise FrameError(f"sample frame: negative tensor dimension in {list(dims)}")
    (nbytes,) = r.unpack("<Q", "tensor.nbytes")
    count = 1
    for d in dims:
        count *= d
    if count * _DTYPES[dtype].itemsize != nbytes:
        raise FrameError(f"sample frame: tensor of shape {list(dims)} and dtype "
                         f"{_DTYPES[dtype].name} cannot hold {nbytes} bytes")
    start = r.take(nbytes, "tensor.bytes")
    # A view into the (writable) body: no copy, and the user may modify it in place.
    array = np.frombuffer(r.body, dtype=_DTYPES[dtype], count=count, offset=start)
    return array.reshape(dims), _LAYOUTS[layout]


def decode_body(body):
    """Decodes a sample body (bytes or bytearray) into a sample dict."""
    r = _Reader(body)
    index, label = r.unpack("<Qq", "index/label")
    sample = {"index": index, "label": label}
    sample["key"] = r.blob("key").decode("utf-8", "replace")
    sample["data"] = r.blob("data")
    sample["ext"] = r.blob("ext").decode("utf-8", "replace")
    (count,) = r.unpack("<I", "fields.count")
    fields = {}
    for _ in range(count):
        name = r.blob("fields.name").decode("utf-8", "replace")
        fields[name] = r.blob("fields.value")
    sample["fields"] = fields
    (present,) = r.unpack("<B", "tensor.present")
    sample["tensor"], sample["layout"] = None, "none"
    if present > 1:
        raise FrameError(f"sample frame: tensor.present is {present}")
    if present:
        sample["tensor"], sample["layout"] = _decode_tensor(r)
    if r.pos != len(body):
        raise FrameError(f"sample frame: {len(body) - r.pos} unexpected bytes after the last field")
    return sample


def split_seed(magic, body):
    """(seed, sample body) of a frame's body: the seed of a GMS2 request, or None."""
    if magic != SEEDED_MAGIC:
        return None, body
    if len(body) < 8:
        raise FrameError("sample frame: no room for the seed")
    (seed,) = struct.unpack_from("<Q", body, 0)
    return seed, memoryview(body)[8:]  # no copy of the sample's bytes


def decode_frame(frame):
    """Decodes one whole frame; an error frame raises FrameError with its message.
    A seeded request's seed is dropped (split_seed reads it)."""
    magic, length = decode_header(frame)
    body = bytearray(frame[HEADER_BYTES:])
    if len(body) != length:
        raise FrameError(f"sample frame: header says {length} body bytes, got {len(body)}")
    if magic in (ERROR_MAGIC, RESOURCE_MAGIC):
        raise FrameError(body.decode("utf-8", "replace"))
    return decode_body(split_seed(magic, body)[1])


def _as_bytes(value, what):
    if value is None:
        return b""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise FrameError(f"{what} must be bytes or str, got {type(value).__name__}")


def _blob(value, what):
    b = _as_bytes(value, what)
    return struct.pack("<I", len(b)) + b


def _wire_dtype(dtype):
    kind, size = dtype.kind, dtype.itemsize
    if kind == "b" or (kind == "u" and size == 1):
        return _DTYPES[0]
    if (kind == "i" and size <= 4) or (kind == "u" and size == 2):
        return _DTYPES[1]
    if kind in "iu":
        return _DTYPES[2]
    if kind == "f":
        return _DTYPES[3]
    raise FrameError(f"tensor dtype {dtype} cannot travel (use uint8, int32, int64 or float32)")


def wire_array(array):
    """The array as one of the four wire dtypes (bool -> uint8, other ints ->
    int32 or int64, floats -> float32), C-contiguous, at least 1-D."""
    a = np.asarray(array)
    a = a.astype(_wire_dtype(a.dtype), copy=False)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim > 255:
        raise FrameError(f"tensor has {a.ndim} dimensions; at most 255 travel")
    return np.ascontiguousarray(a)


def _encode_tensor(tensor, layout):
    if tensor is None:
        return [b"\x00"]
    a = wire_array(tensor)
    name = str(layout or "none").lower()
    if name not in _LAYOUTS:
        raise FrameError(f"layout must be one of {_LAYOUTS}, got {layout!r}")
    dtype = _DTYPES.index(a.dtype)
    head = struct.pack("<BBBB", 1, dtype, _LAYOUTS.index(name), a.ndim)
    dims = struct.pack(f"<{a.ndim}q", *a.shape)
    return [head, dims, struct.pack("<Q", a.nbytes), a.data.cast("B") if a.nbytes else b""]


def encode_sample(sample):
    """Encodes a sample dict as a whole frame (bytes). Missing keys take defaults."""
    fields = sample.get("fields") or {}
    parts = [struct.pack("<Qq", int(sample.get("index", 0)), int(sample.get("label", -1))),
             _blob(sample.get("key"), "key"), _blob(sample.get("data"), "data"),
             _blob(sample.get("ext"), "ext"), struct.pack("<I", len(fields))]
    for name, value in fields.items():
        parts.append(_blob(name, "field name"))
        parts.append(_blob(value, f"field {name!r}"))
    parts.extend(_encode_tensor(sample.get("tensor"), sample.get("layout")))
    body = b"".join(parts)
    if len(body) > MAX_BODY:
        raise FrameError(f"sample frame body of {len(body)} bytes is over the 1 GiB limit")
    return SAMPLE_MAGIC + struct.pack("<I", len(body)) + body


def encode_error(message, resource=False):
    """Encodes an error frame carrying message (str): a resource error frame when
    resource (the failure is not the sample's)."""
    body = str(message).encode("utf-8", "replace")[:MAX_BODY]
    return (RESOURCE_MAGIC if resource else ERROR_MAGIC) + struct.pack("<I", len(body)) + body
