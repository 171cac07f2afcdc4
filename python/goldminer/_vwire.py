"""Frames between a trainer's offloaded DataLoader and its virtual workers
(goldminer.offload, goldminer._vworker).

A frame is a 24-byte header, then its pickle, then its out-of-band buffers
(pickle protocol 5: a tensor's or array's bytes travel beside the pickle, never
copied into it). All integers little-endian:

    magic     4 bytes  b"GMV1"
    kind      u8       JOB 1, TASK 2, RESULT 3, FAILED 4, STATE 5, NEED 6, BLOB 7,
                       RELEASE 8
    flags     u8       0, FLAG_SHM, or FLAG_SHM | FLAG_RECYCLE
    reserved  2 bytes  zero
    buffers   u32      out-of-band buffers, at most MAX_BUFFERS
    pickle    u64      bytes of pickle
then `buffers` u64 lengths, the pickle, and each buffer in turn. The pickle plus
the buffers are at most MAX_FRAME bytes. With FLAG_SHM (a RESULT of a virtual
worker whose trainer shares its host, write_shm) the buffers are not in the
stream: they are in a memfd, sealed against any change (F_SEAL_SHRINK, GROW,
WRITE and SEAL), passed with the frame's first bytes (SCM_RIGHTS), each at the
next multiple of ALIGN bytes from the start; the reader maps it (a private
mapping: numpy and torch view it, nothing is copied) and takes the descriptors
in the order the frames come. With FLAG_RECYCLE as well (a worker whose JOB said
`recycle`) a u64 id follows the lengths and the memfd is sealed against resizing
only: the worker writes the next results into it again once the trainer sent
RELEASE with that id, when the last view of its mapping was let go (Recycler), so
that a batch's pages are not new memory each time (fresh shared memory costs
more to fault in than the batch costs to make). What each kind carries:

    JOB     (trainer -> worker, first and once) a dict: versions (python, torch,
            numpy as the trainer has them), digest (blob_digest of blob and
            buffers), blob (cloudpickle, protocol 5, of the DataLoader's worker
            arguments: dataset kind, dataset, auto_collation, collate_fn,
            drop_last, worker_init_fn, num_workers, persistent_workers) and
            buffers (its out-of-band buffers: arrays' bytes), both None when the
            trainer has sent that digest to this worker's host already (the
            worker then takes it from its host's cache, or sends NEED),
            worker_id, base_seed, shared_seed,
            sys_path (the trainer's, appended to the worker's before unpickling);
            cwd and environ (the trainer's working directory and os.environ when
            the iterator started its workers, less the run's keys: the worker
            takes them before unpickling, as a stock worker inherits them);
            for a replacement of a lost worker, restore (the generators' state
            after its last result) or replay (tasks it answered, to do again);
            elastic (true in elastic mode: goldminer._elastic); cut (None, or
            {at, on}: with on, the dataset's transform stops before step `at`
            and the worker sends uint8 images: goldminer._cut.cut_plan);
            native (the shipped dataset is a goldminer._native plan); recycle
            (the trainer sends RELEASE: FLAG_RECYCLE frames may come)
    TASK    (trainer -> worker) what torch's main process puts in the worker's
            index queue: (task index, sampler indices), a resume marker, or None;
            in elastic mode (task index, sampler indices, the task's seed)
    STATE   (worker -> trainer, just before each RESULT) (key, state): the task
            index the RESULT answers ("resume" for a resume acknowledgement) and
            the state of Python's, numpy's and torch's generators after it, in
            plain types (ints, lists, bytes; {} in elastic mode), so the
            trainer's reader thread can keep its books without loading the RESULT
    RESULT  (worker -> trainer) what torch's worker loop puts in its data queue:
            (task index, batch or ExceptionWrapper), or a resume acknowledgement;
            loaded by the thread that takes it from the queue, as stock loads
            results in the thread that reads its queue
    FAILED  (worker -> trainer, last) a str: why the worker cannot go on (a
            version mismatch, a dataset that does not unpickle there)
    NEED    (worker -> trainer, answering a JOB without its blob that its host
            does not have) the digest
    BLOB    (trainer -> worker, answering NEED) a dict: blob and buffers
    RELEASE (trainer -> worker) the id of a FLAG_RECYCLE frame's memfd that the
            trainer no longer maps

Pickles are cloudpickle's (by value where the trainer registered it), so that a
class defined in the training script comes back as the trainer's own class.

Trust: a pickle runs code where it is loaded. The trainer's JOB is code the
worker runs (the dataset): a worker trusts its trainer. A trainer loads its
workers' frames as data (goldminer._safepickle: tensors, arrays, builtin types,
the program's own classes, which a worker sends by name, trainer_class); other
globals are Refused, unless $GOLDMINER_TRUST_WORKERS is set. The header's bounds
catch a corrupted or foreign stream (they are not a defence against a peer,
which the pickle could not be anyway); a corrupted length costs at most
_DIRECT bytes more than what arrived.
CPU tensors of a dtype numpy has travel as numpy arrays out of band and come back
as torch tensors of the same dtype, shape and values (contiguous).
"""

import io
import os
import pickle
import struct
import sys
import threading

import cloudpickle

from goldminer import _safepickle

MAGIC = b"GMV1"
JOB, TASK, RESULT, FAILED, STATE, NEED, BLOB, RELEASE = 1, 2, 3, 4, 5, 6, 7, 8
KINDS = {JOB: "JOB", TASK: "TASK", RESULT: "RESULT", FAILED: "FAILED", STATE: "STATE",
         NEED: "NEED", BLOB: "BLOB", RELEASE: "RELEASE"}
FLAG_SHM = 1
FLAG_RECYCLE = 2
RECYCLE_MAX = 6  # memfds a worker keeps out or for reuse
HEADER = struct.Struct("<4sBB2xIQ")
SHM_MIN_BYTES = 1 << 16  # buffers smaller than this in all stay in the stream
ALIGN = 64  # a buffer's offset in a memfd
HEADER_BYTES = HEADER.size
MAX_BUFFERS = 1 << 16
MAX_FRAME = 1 << 36  # 64 GiB: a bound on one frame, not a target
_DIRECT = 1 << 26  # 64 MiB
_DIRECT_TRUSTED = 1 << 30  # 1 GiB: the largest blob the trainer ships (offload.MAX_BLOB_BYTES)


class FrameError(ValueError):
    """A malformed frame, or a channel that ended inside one."""


class Refused(FrameError):
    """A worker's frame names a global that the trainer does not load: the
    message is the global (goldminer._safepickle)."""


class FrameCut(FrameError):
    """The channel ended inside a frame: its writer went away mid-write."""


def _rebuild_tensor(array):
    import torch
    return torch.from_numpy(array)


def trainer_class(module, qualname):
    """The trainer's class `qualname` of `module`: how a worker names a class of the
    program that it got by value (goldminer._safepickle checks it before this
    runs; with the workers trusted this is what runs)."""
    import importlib
    return _safepickle.attribute(importlib.import_module(module), qualname)


# The run's keys: never in a JOB's environ, nor in a virtual worker's environment.
KEY_VARIABLES = ("GOLDMINER_SECRET", "GOLDMINER_SECRET_FILE", "GOLDMINER_POOL_KEY_FILE")

# Set in a virtual worker's process: the program's classes go back by name.
CLASSES_BY_NAME = False


def _by_value(cls):
    """Whether pickle cannot name `cls` here (cloudpickle would send it by value)."""
    try:
        named = _safepickle.attribute(sys.modules.get(getattr(cls, "__module__", None) or ""),
                                      cls.__qualname__)
    except AttributeError:
        return True
    return named is not cls


class _Pickler(cloudpickle.CloudPickler):
    """cloudpickle, with CPU tensors as numpy arrays (out of band under protocol 5);
    in a virtual worker (CLASSES_BY_NAME), a class of the program by its name."""

    def reducer_override(self, obj):
        torch = sys.modules.get("torch")
        if torch is not None and type(obj) is torch.Tensor:
            reduced = _reduce_tensor(torch, obj)
            if reduced is not None:
                return reduced
        if CLASSES_BY_NAME and isinstance(obj, type) and "<locals>" not in obj.__qualname__ \
                and _by_value(obj):
            return trainer_class, (obj.__module__, obj.__qualname__)
        return super().reducer_override(obj)


def _reduce_tensor(torch, t):
    if t.device.type != "cpu" or t.layout != torch.strided or t.requires_grad or t.is_quantized:
        return None
    if t.is_conj() or t.is_neg():
        return None
    try:
        array = t.detach().contiguous().numpy()
    except (TypeError, RuntimeError):  # a dtype numpy has not (bfloat16, ...)
        return None
    return _rebuild_tensor, (array,)


def blob_size(blob):
    """The bytes of a shipped blob: (pickle, [out-of-band buffers])."""
    data, buffers = blob
    return len(data) + sum(memoryview(b).nbytes for b in buffers)


DIGEST_CHUNK = 4 << 20  # a blob is hashed in chunks of this, on threads


def blob_digest(blob):
    """A shipped blob's digest (hex): the SHA-256 of, for each part, its length
    (u64) then the SHA-256 of each of its DIGEST_CHUNK chunks. The chunks are
    hashed on up to 8 threads (hashlib lets go of the GIL), so a 150 MB dataset
    costs the trainer and each worker a fraction of one core's 0.1 s."""
    import hashlib
    views = [_bytes(part) for part in (blob[0], *blob[1])]
    chunks = [v[at:at + DIGEST_CHUNK] for v in views for at in range(0, v.nbytes, DIGEST_CHUNK)]
    threads = min(8, os.cpu_count() or 1, len(chunks))
    if threads > 1:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(threads) as pool:
            sums = list(pool.map(lambda c: hashlib.sha256(c).digest(), chunks))
    else:
        sums = [hashlib.sha256(c).digest() for c in chunks]
    h = hashlib.sha256()
    n = 0
    for view in views:
        h.update(struct.pack("<Q", view.nbytes))
        count = -(-view.nbytes // DIGEST_CHUNK)
        h.update(b"".join(sums[n:n + count]))
        n += count
    return h.hexdigest()


def blob_fields(blob):
    """A blob as a JOB's or BLOB's fields, its parts out of band (never copied
    into the frame's pickle: a 150 MB array goes from the dataset to the channel)."""
    data, buffers = blob
    return {"blob": pickle.PickleBuffer(data),
            "buffers": [pickle.PickleBuffer(b) for b in buffers]}


def dumps(obj):
    """(pickle bytes, [out-of-band buffers]) of `obj`."""
    buffers = []
    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=buffers.append).dump(obj)
    return out.getvalue(), [b.raw() for b in buffers]


def encode(kind, obj):
    """The frame of `obj` as a list of byte-like parts (to write in turn)."""
    data, buffers = dumps(obj)
    if len(buffers) > MAX_BUFFERS:
        raise FrameError(f"{KINDS[kind]} frame: {len(buffers)} out-of-band buffers "
                         f"(at most {MAX_BUFFERS})")
    total = len(data) + sum(b.nbytes for b in buffers)
    if total > MAX_FRAME:
        raise FrameError(f"{KINDS[kind]} frame: {total} bytes (at most {MAX_FRAME})")
    head = HEADER.pack(MAGIC, kind, 0, len(buffers), len(data))
    lengths = struct.pack(f"<{len(buffers)}Q", *(b.nbytes for b in buffers))
    return [head + lengths, data, *buffers]


def _layout(lengths):
    """The offsets of buffers of these lengths in a memfd, and its size."""
    offsets, at = [], 0
    for n in lengths:
        offsets.append(at)
        at += -(-n // ALIGN) * ALIGN
    return offsets, max(at, ALIGN)


class Recycler:
    """A worker's memfds for FLAG_RECYCLE frames: at most RECYCLE_MAX, each out
    with the trainer until it sends RELEASE, then written again. Thread-safe (the
    task reader releases, the worker loop takes)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.free = []   # [(size, fd, id)]
        self.out = {}    # id -> (size, fd)
        self.next_id = 1
        self.made = {}   # a result made in place: its first buffer's address -> (fd, id, offsets)
        # Each memfd's mapping, kept: mapping it again for every result faulted
        # its pages in again (a quarter of a native worker's CPU).
        self.maps = {}   # id -> mmap
        self.sent_in_place = 0  # results sent from where they were made, no copy

    def make_in_place(self, lengths):
        """Views of buffers of these lengths in a memfd of ours, mapped to be
        written (one memoryview each), for a result that is then sent without a
        copy (write_shm finds it by its first buffer's address); None when none
        is to be had. Its writer must let go of the views before it is reused
        (the trainer's RELEASE comes after the frame was written)."""
        offsets, size = _layout(lengths)
        taken = self.take(size)
        if taken is None:
            return None
        fd, rid = taken
        view = memoryview(self.mapping(fd, rid))
        views = [view[at:at + n] for at, n in zip(offsets, lengths)]
        with self.lock:
            self.made[_address(views[0])] = (fd, rid, offsets)
        return views

    def mapping(self, fd, rid):
        """The writable mapping of memfd `rid` (all of it), made once."""
        import mmap
        with self.lock:
            m = self.maps.get(rid)
            if m is None:
                m = self.maps[rid] = mmap.mmap(fd, os.fstat(fd).st_size)
            return m

    def made_in_place(self, buffers):
        """(fd, id) of the memfd whose in-place result `buffers` are, each at
        its place; else None, and a memfd made in place for buffers[0] but not
        matching them goes back to the free ones."""
        if not buffers:
            return None
        with self.lock:
            made = self.made.pop(_address(buffers[0]), None)
        if made is None:
            return None
        fd, rid, offsets = made
        base = _address(buffers[0])
        if len(offsets) == len(buffers) and all(
                _address(b) == base + at for b, at in zip(buffers, offsets)):
            self.sent_in_place += 1
            return fd, rid
        self.release(rid)
        return None

    def abandon(self, views):
        """A result made in place that will not be sent (its making failed)."""
        with self.lock:
            made = self.made.pop(_address(views[0]), None)
        if made is not None:
            self.release(made[1])

    def take(self, size):
        """(fd, id) of a memfd of at least `size` bytes to write and send, or None
        when RECYCLE_MAX are out (a one-off sealed memfd goes instead)."""
        import fcntl
        with self.lock:
            fits = sorted((f for f in self.free if f[0] >= size), key=lambda f: f[0])
            if fits:
                self.free.remove(fits[0])
                held, fd, rid = fits[0]
            elif len(self.out) + len(self.free) < RECYCLE_MAX or self.free:
                if len(self.out) + len(self.free) >= RECYCLE_MAX:
                    _, small, gone = self.free.pop(0)  # too small: one of a new size instead
                    os.close(small)
                    self.maps.pop(gone, None)
                held = -(-size // (1 << 20)) << 20
                fd = os.memfd_create("goldminer-result", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
                os.ftruncate(fd, held)
                fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW |
                            fcntl.F_SEAL_SEAL)
                rid, self.next_id = self.next_id, self.next_id + 1
            else:
                return None
            self.out[rid] = (held, fd)
            return fd, rid

    def release(self, rid):
        """The trainer let go of memfd `rid`; an id not out is ignored (a
        trainer's mistake costs it nothing here)."""
        with self.lock:
            got = self.out.pop(rid, None) if isinstance(rid, int) else None
            if got is not None:
                self.free.append((got[0], got[1], rid))


def _bytes(buffer):
    """A buffer as a flat memoryview of its bytes."""
    view = memoryview(buffer)
    return view.cast("B") if view.ndim != 1 or view.format != "B" else view


def _address(buffer):
    """Where a buffer's bytes start in this process's memory."""
    import numpy
    view = _bytes(buffer)
    return numpy.frombuffer(view, dtype=numpy.uint8).ctypes.data if view.nbytes else 0


def write_shm(sock, stream, kind, obj, recycler=None):
    """Writes one frame of `obj` on `stream` with its buffers in a memfd passed on
    `sock` (the same socket) with the header: FLAG_SHM, the memfd sealed against
    any change; with a `recycler` that has one, FLAG_RECYCLE and one of its
    memfds, sealed against resizing only. Buffers of less than SHM_MIN_BYTES in
    all go in the stream (write())."""
    import fcntl
    import mmap
    import socket
    data, buffers = dumps(obj)
    lengths = [b.nbytes for b in buffers]
    in_place = recycler.made_in_place(buffers) if recycler is not None else None
    if sum(lengths) < SHM_MIN_BYTES or len(buffers) > MAX_BUFFERS:
        if in_place is not None:
            recycler.release(in_place[1])
        write(stream, kind, obj)
        return
    offsets, size = _layout(lengths)
    taken = in_place or (recycler.take(size) if recycler is not None else None)
    if taken is not None:
        fd, rid = taken
        flags, tail = FLAG_SHM | FLAG_RECYCLE, struct.pack("<Q", rid)
    else:
        fd = os.memfd_create("goldminer-result", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        flags, tail = FLAG_SHM, b""
    try:
        if taken is None:
            os.ftruncate(fd, size)
        if in_place is None:  # else its bytes are there already
            m = recycler.mapping(fd, rid) if taken is not None else mmap.mmap(fd, size)
            for b, at in zip(buffers, offsets):
                m[at:at + b.nbytes] = b
            if taken is None:
                m.close()
        if taken is None:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW |
                        fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
        head = HEADER.pack(MAGIC, kind, flags, len(buffers), len(data)) + \
            struct.pack(f"<{len(buffers)}Q", *lengths) + tail
        sent = socket.send_fds(sock, [head], [fd])
        if sent < len(head):
            sock.sendall(head[sent:])
    finally:
        if taken is None:
            os.close(fd)
    stream.write(data)
    stream.flush()


_SEALS = None  # the seals a memfd of a frame must have


def _map_shm(fd, lengths, released=None):
    """Memoryviews of each buffer in the memfd `fd` (which it closes): a private
    mapping, so the views are writable and nothing is copied. With `released`
    (a FLAG_RECYCLE frame's) the memfd need not be sealed against writing, and
    released() is called once the last view of the mapping is gone."""
    import fcntl
    import mmap
    import os
    global _SEALS
    if _SEALS is None:
        _SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_WRITE
    try:
        offsets, size = _layout(lengths)
        try:
            seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        except OSError as e:
            raise FrameError(f"the descriptor of a frame in shared memory is not a memfd: {e}")
        need = _SEALS if released is None else fcntl.F_SEAL_SHRINK
        if seals & need != need:
            raise FrameError("the memfd of a frame in shared memory is not sealed against "
                             "shrinking" + (" and writing" if released is None else ""))
        if os.fstat(fd).st_size < size:
            raise FrameError(f"the memfd of a frame in shared memory has "
                             f"{os.fstat(fd).st_size} bytes, fewer than its {size}")
        m = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    if released is not None:
        import weakref
        weakref.finalize(m, released)
    view = memoryview(m)
    return [view[at:at + n] for at, n in zip(offsets, lengths)]


def write(stream, kind, obj):
    """Writes one frame of `obj` on a binary stream and flushes it."""
    for part in encode(kind, obj):
        stream.write(part)
    stream.flush()


def _read_exact(stream, n, what, direct=False):
    """n bytes as a bytearray. Up to _DIRECT bytes (_DIRECT_TRUSTED when
    `direct`: a worker reading its trainer's frames, a 150 MB dataset held once,
    not twice) are read into one buffer of that size; a larger one in chunks
    joined at the end, so that a corrupted length makes us hold what arrived,
    not what it says."""
    if n > (_DIRECT_TRUSTED if direct else _DIRECT):
        chunks, got = [], 0
        while got < n:
            chunk = _read_exact(stream, min(_DIRECT, n - got), what)
            chunks.append(chunk)
            got += len(chunk)
        return bytearray().join(chunks)
    buf = bytearray(n)
    with memoryview(buf) as view:
        got = 0
        while got < n:
            k = stream.readinto(view[got:])
            if not k:
                raise FrameCut(f"the channel ended inside {what} ({got} of {n} bytes)")
            got += k
    return buf


def read_raw(stream, take_fd=None, direct=False, release=None):
    """(kind, pickle, buffers) of the next frame, not loaded, or None at a clean
    end of the channel (before a frame's first byte). FrameError for a malformed
    header or a channel that ends inside the frame. A FLAG_SHM frame's buffers
    are in the memfd take_fd() returns (the next descriptor the channel brought;
    None: none came), mapped, not copied. A FLAG_RECYCLE frame's memfd is given
    back with release(id) once its mapping is gone; without `release` (a reader
    that did not ask for them) such a frame is a FrameError."""
    first = stream.read(1)
    if not first:
        return None
    head = bytes(first) + bytes(_read_exact(stream, HEADER_BYTES - 1, "a frame header"))
    magic, kind, flags, nbuf, size = HEADER.unpack(head)
    if magic != MAGIC:
        raise FrameError(f"not a goldminer virtual-worker frame (magic {magic!r}, "
                         f"expected {MAGIC!r})")
    if kind not in KINDS:
        raise FrameError(f"unknown frame kind {kind}")
    if flags & ~(FLAG_SHM | FLAG_RECYCLE):
        raise FrameError(f"{KINDS[kind]} frame: unknown flags {flags:#x}")
    if flags & FLAG_RECYCLE and (not flags & FLAG_SHM or release is None):
        raise FrameError(f"{KINDS[kind]} frame: a recycled memfd "
                         + ("outside shared memory" if not flags & FLAG_SHM else
                            "this reader did not ask for"))
    if nbuf > MAX_BUFFERS:
        raise FrameError(f"{KINDS[kind]} frame: {nbuf} out-of-band buffers "
                         f"(at most {MAX_BUFFERS})")
    lengths = struct.unpack(f"<{nbuf}Q", _read_exact(stream, 8 * nbuf, "the buffer lengths"))
    total = size + sum(lengths)
    if total > MAX_FRAME:
        raise FrameError(f"{KINDS[kind]} frame: {total} bytes (at most {MAX_FRAME})")
    if flags & FLAG_SHM:
        fd = take_fd() if take_fd is not None else None
        if fd is None:
            raise FrameError(f"{KINDS[kind]} frame in shared memory without its descriptor")
        if flags & FLAG_RECYCLE:
            try:
                (rid,) = struct.unpack("<Q", _read_exact(stream, 8, "a recycled memfd's id"))
            except FrameError:
                os.close(fd)
                raise
            buffers = _map_shm(fd, lengths, lambda: release(rid))
        else:
            buffers = _map_shm(fd, lengths)
        return kind, _read_exact(stream, size, "a pickle"), buffers
    data = _read_exact(stream, size, "a pickle", direct)
    buffers = [_read_exact(stream, n, "an out-of-band buffer", direct) for n in lengths]
    return kind, data, buffers


def loads(kind, data, buffers, trainer=True):
    """The object of a frame read by read_raw; FrameError when it does not load.
    A trainer (reading a worker's frames) loads it as data (goldminer._safepickle):
    Refused, a FrameError, when it names a global a trainer does not load. A
    worker loads its trainer's frames with pickle (the JOB is the program's code)."""
    try:
        if trainer:
            return _safepickle.loads(data, buffers)
        return pickle.loads(data, buffers=buffers)
    except _safepickle.Refused as e:
        raise Refused(str(e)) from None
    except Exception as e:  # whatever a malformed pickle raises
        raise FrameError(f"{KINDS[kind]} frame: its pickle does not load: "
                         f"{type(e).__name__}: {e}") from e


def read(stream):
    """(kind, object) of the next frame from the trainer, or None at a clean end of
    the channel (before a frame's first byte). FrameError for anything malformed."""
    frame = read_raw(stream, direct=True)  # the trainer's: trusted, its sizes too
    return None if frame is None else (frame[0], loads(*frame, trainer=False))
