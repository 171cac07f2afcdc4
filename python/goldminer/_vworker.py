"""A virtual DataLoader worker: `python3 -m goldminer._vworker`.

Runs one worker of a trainer's DataLoader, as torch's own worker process would,
with frames (goldminer._vwire) on stdin and stdout instead of multiprocessing
queues. The first frame is the JOB; then TASK frames come in and RESULT frames go
out until a TASK of None (the trainer shuts its workers down) or the end of stdin.
Each RESULT carries the state of the worker's generators after it, so that a
replacement of a lost worker continues where it stood (_Tasks).

The work itself is torch's own worker loop (torch.utils.data._utils.worker.
_worker_loop), given the dataset, collate_fn and worker_init_fn unpickled from the
JOB: the same seeding (random and torch from base_seed + worker_id, numpy from
torch's _generate_state), the same get_worker_info() (id, num_workers, seed, this
process's copy of the dataset), worker_init_fn(worker_id), the same fetcher, and
exceptions wrapped as torch wraps them. So a task gives the batch the stock worker
would have given. A JOB with `elastic` set (goldminer._elastic) has each TASK carry
its own seed, from which the generators are set before the task is fetched.

stdout carries only frames: what the dataset prints goes to stderr. A JOB this
process cannot take (another Python, torch or numpy version than the trainer's;
a dataset that does not unpickle here, e.g. a module missing on this node) is
answered with one FAILED frame naming the cause and the host, and exit status 3.
"""

import os
import queue
import socket
import struct
import sys
import threading

from goldminer import _vwire

# The host's cache of blobs, one file per digest (goldminer._vhost sets it in each
# worker it forks; None: no cache, every JOB without its blob is answered NEED).
CACHE_DIR = None
CACHE_MAX_BYTES = 2 << 30  # the newest blobs within this stay
CACHE_MAX_FILES = 8
_CACHE_MAGIC = b"GMB1"
_KEEPING = []  # the threads writing blobs to the cache (_blob_of)
_KEEP_WAIT_S = 60  # how long a worker that ends waits for them


def versions():
    import numpy
    import torch
    return {"python": "%d.%d" % sys.version_info[:2], "torch": torch.__version__,
            "numpy": numpy.__version__}


def rng_state():
    """The global generators torch seeds per worker (Python's, numpy's, torch's),
    in plain types: ints, lists, bytes."""
    import random
    import numpy as np
    import torch
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {"random": random.getstate(), "numpy": (name, keys.tolist(), pos, has_gauss, cached),
            "torch": bytes(torch.get_rng_state().numpy())}


def seed_task(seed):
    """Elastic mode (goldminer._elastic): the global generators torch seeds per
    worker, set from one task's seed, as torch's worker loop sets them from
    base_seed + worker_id."""
    import random
    import torch
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np
    except ImportError:
        return
    from torch.utils.data._utils.worker import _generate_state
    np.random.seed(_generate_state(seed, 0))


def set_rng_state(state):
    import random
    import numpy as np
    import torch
    random.setstate(state["random"])
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(torch.frombuffer(bytearray(state["torch"]), dtype=torch.uint8))


class _Tasks:
    """The index queue torch's worker loop reads: TASK frames from stdin, read by a
    thread. None (or the end of stdin) sets `done` first, as torch's main process
    sets its done event before it sends None.

    A replacement worker (after one was lost) gets in its JOB either `restore`, the
    generators' state after the last result the trainer received, set before the
    first task is handed over (on the loop's thread, after worker_init_fn ran), or
    `replay`, tasks already answered that it does again first, silently (an
    IterableDataset's replica has no state to restore: it is run again up to
    where it stood).

    In elastic mode a task comes as (task index, sampler indices, seed): the
    generators are set from the seed before torch's loop has the task."""

    def __init__(self, stream, done, replay=(), restore=None, elastic=False, recycler=None):
        self.items = queue.Queue()
        self.recycler = recycler  # RELEASE frames give its memfds back
        self.done = done
        self.error = None
        self.restore = restore
        self.elastic = elastic
        for item in replay:
            if item is None:  # the shutdown came before the blob: as the reader does
                self.done.set()
            self.items.put(item)
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        try:
            while True:
                frame = _vwire.read(stream)
                if frame is None or frame[1] is None:
                    break
                kind, item = frame
                if kind == _vwire.RELEASE and self.recycler is not None:
                    self.recycler.release(item)
                    continue
                if kind != _vwire.TASK:
                    raise _vwire.FrameError(f"{_vwire.KINDS[kind]} frame where TASK was expected")
                self.items.put(item)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the trainer's end went away (it ended, or Ctrl-C): a shutdown
        except Exception as e:  # a broken channel ends the worker like a shutdown
            self.error = e
        self.done.set()
        self.items.put(None)

    def get(self, timeout=None):
        item = self.items.get(timeout=timeout)  # queue.Empty on timeout, as torch expects
        if self.restore is not None:
            set_rng_state(self.restore)
            self.restore = None
        if self.elastic and isinstance(item, tuple) and len(item) == 3:
            index, indices, seed = item
            seed_task(seed)
            item = (index, indices)
        return item


class _Results:
    """The data queue torch's worker loop writes: for each of torch's items a STATE
    frame (its key, the generators' state after it) and a RESULT frame on stdout.
    The first `silent` results (of replayed tasks) are not sent. In elastic mode
    the state is left empty: each task is seeded on its own."""

    def __init__(self, stream, silent=0, elastic=False, sock=None, recycler=None):
        self.stream = stream
        self.recycler = recycler
        self.silent = silent
        self.elastic = elastic
        self.sock = sock  # the channel as a socket: RESULT buffers in a memfd (_vwire.write_shm)
        self.lock = threading.Lock()
        self.gone = False  # the channel broke under a write: later results are dropped

    def put(self, item):
        with self.lock:
            if self.gone:
                return
            if self.silent > 0:
                self.silent -= 1
                return
            key = item[0] if isinstance(item[0], int) else "resume"
            try:
                _vwire.write(self.stream, _vwire.STATE,
                             (key, {} if self.elastic else rng_state()))
                if self.sock is not None:
                    _vwire.write_shm(self.sock, self.stream, _vwire.RESULT, item, self.recycler)
                else:
                    _vwire.write(self.stream, _vwire.RESULT, item)
            except (BrokenPipeError, ConnectionResetError):
                # The trainer's end went away (it ended, or Ctrl-C ended it): as a
                # stock worker's result to a main process that is gone, the result is
                # dropped; the task reader sees the channel's end and stops the loop.
                self.gone = True

    def cancel_join_thread(self):
        pass

    def close(self):
        pass


def _fail(out, why):
    try:
        _vwire.write(out, _vwire.FAILED, f"{why} (virtual DataLoader worker on "
                                         f"{socket.gethostname()}, pid {os.getpid()})")
    except OSError:
        pass
    return 3


def _take_place(job):
    """The trainer's working directory and environment, as a stock worker inherits
    them (a script that chdir()s or sets os.environ before its loop); raises
    ValueError naming the directory and this node when the directory is not here."""
    import socket
    cwd, environ = job.get("cwd"), job.get("environ")
    if isinstance(cwd, str) and cwd:
        try:
            os.chdir(cwd)
        except OSError as e:
            raise ValueError(f"the trainer's working directory {cwd} is not on node "
                             f"{socket.gethostname()} ({e.strerror}): run where the data "
                             f"workers see the same directories (a shared file system)") from e
    if isinstance(environ, dict):
        keep = {k: v for k, v in environ.items() if isinstance(k, str) and isinstance(v, str)
                and k not in _vwire.KEY_VARIABLES}
        os.environ.clear()
        os.environ.update(keep)


def _cache_path(digest):
    if CACHE_DIR is None or not isinstance(digest, str) or len(digest) != 64 or \
            any(c not in "0123456789abcdef" for c in digest):
        return None
    return os.path.join(CACHE_DIR, digest)


def _cached(digest):
    """The blob of `digest` from the host's cache, mapped (copy on write: the
    workers of this host share its pages), or None."""
    import mmap
    path = _cache_path(digest)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            os.utime(path)  # the newest stay
            whole = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    except (OSError, ValueError):
        return None
    view = memoryview(whole)
    if view[:4] != _CACHE_MAGIC:
        return None
    (count,) = struct.unpack_from("<I", view, 4)
    lengths = struct.unpack_from(f"<{count}Q", view, 8)
    base = _cache_base(8 + 8 * count)
    offsets, _ = _vwire._layout(lengths)
    parts = [view[base + at:base + at + n] for at, n in zip(offsets, lengths)]
    return parts[0], parts[1:]


def _cache_base(header_bytes):
    """Where a cache file's parts start: past its header, aligned as a memfd's
    (_vwire._layout places them from there)."""
    return -(-header_bytes // _vwire.ALIGN) * _vwire.ALIGN


def _keep(digest, blob):
    """Writes the blob to the host's cache (atomically), the oldest let go."""
    path = _cache_path(digest)
    if path is None:
        return
    data, buffers = blob
    parts = [data, *buffers]
    try:
        st = os.statvfs(CACHE_DIR)
        if st.f_bavail * st.f_frsize < 2 * _vwire.blob_size(blob) + (64 << 20):
            return  # no room: the next worker asks again
        tmp = f"{path}.{os.getpid()}.tmp"
        lengths = [memoryview(p).nbytes for p in parts]
        offsets, _ = _vwire._layout(lengths)
        with open(tmp, "wb") as f:
            head = _CACHE_MAGIC + struct.pack(f"<I{len(parts)}Q", len(parts), *lengths)
            base = _cache_base(len(head))
            f.write(head)
            for p, at in zip(parts, offsets):
                f.write(b"\0" * (base + at - f.tell()))
                f.write(p)
        os.replace(tmp, path)
        files = sorted((e for e in os.scandir(CACHE_DIR)
                        if not e.name.endswith(".tmp") and not e.name.startswith(".")),
                       key=lambda e: e.stat().st_mtime, reverse=True)
        total = 0
        for n, e in enumerate(files):
            total += e.stat().st_size
            if n >= CACHE_MAX_FILES or (n > 0 and total > CACHE_MAX_BYTES):
                os.remove(e.path)
    except OSError:
        pass  # a full disk: the next worker asks again


def _blob_of(job, inp, out, early):
    """The JOB's blob: in it, from the host's cache, or asked for (NEED, then
    the BLOB; TASK frames that come before it are put in `early`, in order).
    A blob that came is kept in the host's cache once it matches its digest."""
    digest = job.get("digest")
    if job.get("blob") is None:
        cached = _cached(digest)
        if cached is not None:
            return cached
        _vwire.write(out, _vwire.NEED, digest)
        while True:
            frame = _vwire.read(inp)
            if frame is None:
                raise ValueError("the trainer's channel ended before the blob came")
            if frame[0] == _vwire.BLOB:
                job = frame[1]
                break
            if frame[0] != _vwire.TASK:
                raise ValueError(f"{_vwire.KINDS[frame[0]]} frame where BLOB was expected")
            early.append(frame[1])
    blob = (job["blob"], list(job.get("buffers") or ()))
    if _cache_path(digest) is not None:
        # Checked and written on a thread of its own, while the work starts: the
        # blob came from the trainer in frames the data worker checked one by one,
        # so its digest matters only to the cache, where the next worker looks it up.
        keeping = threading.Thread(target=_keep_checked, args=(digest, blob),
                                   name="goldminer keep", daemon=True)
        keeping.start()
        _KEEPING.append(keeping)
    return blob


def _keep_checked(digest, blob):
    if _vwire.blob_digest(blob) != digest:
        sys.stderr.write("goldminer: a virtual DataLoader worker's blob does not match "
                         "the digest its JOB named: not kept in the host's cache\n")
        return
    _keep(digest, blob)


def _versions_differ(job):
    """Why this worker cannot take the trainer's JOB (another Python, torch or
    numpy), or None."""
    mine, theirs = versions(), job.get("versions", {})
    for name in ("python", "torch", "numpy"):
        if theirs.get(name) != mine[name]:
            return (f"the trainer has {name} {theirs.get(name)}, this worker "
                    f"{mine[name]}: install the same version on every node")
    return None


def _take_job(job, blob):
    """The worker loop's arguments from a JOB dict and its blob; raises ValueError
    saying why not."""
    why = _versions_differ(job)
    if why:
        raise ValueError(why)
    import pickle
    _take_place(job)
    # The trainer's sys.path (a script may add its own folders at run time), after
    # this worker's own, as multiprocessing's spawn gives its children.
    for entry in job.get("sys_path") or ():
        if isinstance(entry, str) and entry not in sys.path:
            sys.path.append(entry)
    data, buffers = blob
    try:
        (kind, dataset, auto_collation, collate_fn, drop_last, init_fn, num_workers,
         persistent_workers) = pickle.loads(data, buffers=buffers)
    except ModuleNotFoundError as e:
        raise ValueError(f"the DataLoader needs module {e.name!r}, which this worker's "
                         f"Python cannot import ({sys.executable})") from e
    except Exception as e:
        raise ValueError(f"the DataLoader's dataset does not unpickle here: "
                         f"{type(e).__name__}: {e}") from e
    return (kind, dataset, auto_collation, collate_fn, drop_last, job["base_seed"], init_fn,
            job["worker_id"], num_workers, persistent_workers, job.get("shared_seed"))


def _to_uint8(pic):
    """The cut's last step on the worker (goldminer._cut.cut_plan): the image as
    ToTensor holds it before it widens it to floats, channels first, uint8."""
    import numpy as np
    import torch
    from PIL import Image
    if not isinstance(pic, Image.Image) or pic.mode not in ("RGB", "L"):
        raise TypeError(f"goldminer's cut takes an RGB or L PIL image here, not "
                        f"{type(pic).__name__} {getattr(pic, 'mode', '')}: run with "
                        f"--offload-cut off")
    img = torch.from_numpy(np.array(pic, np.uint8, copy=True))
    img = img.view(pic.size[1], pic.size[0], len(pic.getbands()))
    return img.permute((2, 0, 1)).contiguous()


def _cut(dataset, cut):
    """The dataset's transform up to the cut, then _to_uint8: the trainer does
    the rest (JOB's cut {at, on})."""
    if not cut or not cut.get("on"):
        return
    from torchvision import transforms
    dataset.transform = transforms.Compose(
        list(dataset.transform.transforms[:cut["at"]]) + [_to_uint8])


def _takes_holder(worker_loop):
    """Whether torch's _worker_loop takes its dataset in a list it empties
    ("dataset_holder", torch 2.10 and later) rather than as the dataset: by its
    parameters, not by torch's version."""
    import inspect
    try:
        params = list(inspect.signature(worker_loop).parameters)
    except (TypeError, ValueError):
        return False
    return len(params) > 1 and params[1] == "dataset_holder"


def main():
    try:
        return _serve()
    finally:
        for keeping in _KEEPING:  # a half-written blob is of no use to the next worker
            keeping.join(_KEEP_WAIT_S)


def _serve():
    inp = os.fdopen(os.dup(0), "rb", buffering=1 << 16)
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # print() in the dataset goes to stderr, never between frames
    sys.stdout = sys.stderr
    try:
        frame = _vwire.read(inp)
        if frame is None:
            return 0
        if frame[0] != _vwire.JOB:
            return _fail(out, f"{_vwire.KINDS[frame[0]]} frame where JOB was expected")
        # The program's classes go back by name unless the trainer trusts its
        # workers' pickles (goldminer._safepickle).
        _vwire.CLASSES_BY_NAME = not frame[1].get("trust")
        early = []  # tasks that came while the blob was asked for
        mine = _versions_differ(frame[1])  # before anything is asked for or unpickled
        if mine:
            return _fail(out, mine)
        args = _take_job(frame[1], _blob_of(frame[1], inp, out, early))
    except (ValueError, KeyError, TypeError, _vwire.FrameError) as e:
        return _fail(out, str(e))
    from torch.utils.data._utils.worker import _worker_loop
    done = threading.Event()
    replay = list(frame[1].get("replay") or ())
    elastic = bool(frame[1].get("elastic"))
    # A trainer on this host (its channel the data port's Unix socket) takes a
    # result's buffers in a memfd passed on the channel, our stdout.
    sock = socket.socket(fileno=os.dup(out.fileno())) if frame[1].get("shm") else None
    # Result memfds written again once the trainer lets go of them (its JOB asks).
    recycler = _vwire.Recycler() if sock is not None and frame[1].get("recycle") else None
    tasks = _Tasks(inp, done, replay + early, frame[1].get("restore"), elastic, recycler)
    kind, dataset, auto_collation, collate_fn, drop_last, base_seed, init_fn, worker_id, \
        num_workers, persistent_workers, shared_seed = args
    if frame[1].get("native"):
        # The dataset is a goldminer._native plan: the engine's ops make each batch.
        from goldminer import _native  # a native plan's only
        try:
            collate_fn = _native.Collate(dataset, bool((frame[1].get("cut") or {}).get("on")),
                                         base_seed, recycler)
        except (OSError, ValueError) as e:
            return _fail(out, f"the native ops do not start here: {e}")
        dataset = _native.Indices(len(dataset["samples"]))
    else:
        _cut(dataset, frame[1].get("cut"))
    if _takes_holder(_worker_loop):
        dataset = [dataset]  # torch >= 2.10 pops the dataset from a list it is handed
    _worker_loop(kind, dataset, tasks, _Results(out, len(replay), elastic, sock, recycler), done,
                 auto_collation, collate_fn, drop_last, base_seed, init_fn, worker_id,
                 num_workers, persistent_workers, shared_seed)
    if tasks.error is not None:
        sys.stderr.write(f"goldminer: virtual DataLoader worker {worker_id}: the trainer's "
                         f"channel broke: {tasks.error}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
