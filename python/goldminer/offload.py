"""Unchanged PyTorch programs: a DataLoader's worker processes as goldminer
virtual workers.

A DataLoader with num_workers > 0 keeps its main-process half in the program: the
sampler, batch sampler, generator and base-seed draw, task order, prefetching,
pin_memory, persistent_workers and shutdown are torch's own code
(torch.utils.data.dataloader._MultiProcessingDataLoaderIter). Only the worker
half moves: each of its N workers is a virtual worker (goldminer._vworker) that
runs torch's own worker loop on a copy of the dataset, collate_fn and
worker_init_fn shipped to it once as a cloudpickle blob. Tasks go to worker
t mod N and come back in task order, as stock; so the batches are those of stock
PyTorch with the same N, bit for bit ("exact" mode).

install() patches DataLoader._get_iterator. It leaves alone, running stock:
  - a DataLoader with num_workers=0 (its transforms draw from the program's RNG),
    unless $GOLDMINER_DATALOADER_WORKERS=M: then it is served with M virtual
    workers, its batches those of num_workers=M, as for any other DataLoader;
  - a DataLoader subclass with its own __iter__ or _get_iterator;
  - a DataPipe dataset (torch shards and seeds those itself; not served yet);
  - what cannot travel to another process: an open file, an LMDB environment, a
    lock or queue of multiprocessing, a CUDA tensor, a blob over MAX_BLOB_BYTES.
    One line on stderr names the attribute path (e.g. `dataset.env`) and the
    usual fix, once per DataLoader; the program goes on with stock workers.

Code is shipped by value for the script's own modules (__main__ and modules
under the script's directory) and by reference for installed packages, which
the worker's Python must be able to import (the same versions of Python, torch
and numpy: a worker checks, and refuses naming both). Data paths the dataset
opens must be reachable from where the workers run, as with torch under spawn.

Where the virtual workers run is $GOLDMINER_OFFLOAD's choice:
  - "workers": on the data workers of the `goldminer run` the program runs in
    (worker/virtual_workers.h): an offload session at the coordinator
    (gm_offload_open) gives a ticket, and each virtual worker is one connection
    to a data worker (gm_vchannel_open), the one the coordinator names
    (gm_offload_place): the data worker hosting the fewest virtual workers, so
    that ranks, DataLoaders and replacements spread over them by load;
  - "local": processes of the trainer's own host (a goldminer._vhost it starts),
    the same batches with no goldminer run around it: it checks the mechanism.

Exactly once, bit for bit, when a worker is lost (killed, crashed): each result
carries the state of the worker's generators (Python's, numpy's, torch's) after
it; a replacement starts as the worker did (seeds, worker_info, worker_init_fn),
takes that state, and does the tasks sent and not answered, in order. An
IterableDataset's replica has no state to take: the replacement does again,
silently, every task the lost one answered, then goes on. A worker lost
VirtualWorker.MAX_RESTARTS times (a dataset that crashes its process) is an error
naming it and how it ended.

The cut (_cut_plan, GOLDMINER_OFFLOAD_CUT, `goldminer run --offload-cut`): an
ImageFolder whose transform ends in ToTensor (and Normalize) is sent as uint8 from
virtual workers whose batches cross TCP, and widened by the trainer as it receives
each batch (_finish_cut), with the same operations: a quarter of the bytes, the
same batches.

Premise (as for stock workers, and for the recovery): __getitem__ keeps no state
between calls that its result depends on, beyond the global generators torch
seeds per worker (a generator of the dataset's own is not restored); an
IterableDataset's replica yields the same items from the same seeds.
"""

import collections
import ctypes
import io
import os
import sys
import threading
import types

OFFLOAD_ENV = "GOLDMINER_OFFLOAD"
# `goldminer run --dataloader-workers M`: each served DataLoader gives the batches
# DataLoader(num_workers=M) would give, whatever num_workers the script set.
WORKERS_ENV = "GOLDMINER_DATALOADER_WORKERS"
# `goldminer run --offload exact|elastic|native`: exact, the batches of stock
# PyTorch with N workers; elastic (goldminer._elastic), every task seeded on its
# own, any number of processes, added and lost while an epoch runs; native
# (goldminer._native), a recognised ImageFolder made by the engine's ops, as
# exact otherwise.
MODE_ENV = "GOLDMINER_OFFLOAD_MODE"
MODES = ("exact", "elastic", "native")
MAX_DATALOADER_WORKERS = 1024
MAX_BLOB_BYTES = 1 << 30  # a dataset bigger than this is not shipped (it would be per worker)
_MAX_WALK_DEPTH = 8  # how deep the search for what cannot travel looks
_installed = False
_warned = set()  # ids of DataLoaders whose fallback was said
_noted = set()  # ids of DataLoaders whose offload was told to the run's record


def _say(line):
    sys.stderr.write("goldminer: " + line + "\n")
    sys.stderr.flush()


def _num_workers(loader):
    """The served loader's worker count: $GOLDMINER_DATALOADER_WORKERS when set (a
    value out of 1..MAX_DATALOADER_WORKERS is said once and ignored), else its own."""
    text = os.environ.get(WORKERS_ENV, "")
    if not text:
        return loader.num_workers
    try:
        n = int(text)
    except ValueError:
        n = 0
    if 1 <= n <= MAX_DATALOADER_WORKERS:
        return n
    if WORKERS_ENV not in _warned:
        _warned.add(WORKERS_ENV)
        _say(f"{WORKERS_ENV}={text!r} is not a worker count from 1 to {MAX_DATALOADER_WORKERS}: "
             "each DataLoader keeps its own num_workers")
    return loader.num_workers


def _mode():
    """$GOLDMINER_OFFLOAD_MODE (MODES); another value is said once, and exact."""
    text = os.environ.get(MODE_ENV, "") or "exact"
    if text in MODES:
        return text
    if MODE_ENV not in _warned:
        _warned.add(MODE_ENV)
        _say(f"{MODE_ENV}={text!r} is not one of {', '.join(MODES)}: exact mode")
    return "exact"


# ---- what cannot travel -----------------------------------------------------------


class CannotTravel(Exception):
    """Why a DataLoader's worker arguments cannot be shipped: `path` names the
    attribute (e.g. "dataset.env"), `why` the error, `fix` what usually helps."""

    def __init__(self, path, why, fix):
        super().__init__(f"{path} cannot travel to the data workers ({why}); {fix}")
        self.path, self.why, self.fix = path, why, fix


_FIX_OPEN = "open it lazily, in __getitem__ or worker_init_fn"
_FIX_CUDA = "keep the dataset's tensors on the CPU and move batches to the GPU in the loop"
_FIX_SIZE = ("load the data lazily (from files, in __getitem__) rather than holding it in "
             "the dataset object")


def _children(obj):
    """(name, value) of what `obj` holds, for the search: attributes, items."""
    if isinstance(obj, dict):
        return [(f"[{k!r}]", v) for k, v in list(obj.items())[:1000]]
    if isinstance(obj, (list, tuple)):
        return [(f"[{i}]", v) for i, v in enumerate(obj[:1000])]
    out = []
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict):
        out += [(f".{k}", v) for k, v in d.items()]
    for k in getattr(type(obj), "__slots__", ()):
        if isinstance(k, str) and hasattr(obj, k):
            out.append((f".{k}", getattr(obj, k)))
    return out


def _find_cuda(obj, path, depth, seen):
    torch = sys.modules.get("torch")
    if torch is None or depth > _MAX_WALK_DEPTH or id(obj) in seen:
        return None
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return path if obj.is_cuda else None
    if isinstance(obj, (str, bytes, int, float, type(None))):
        return None
    for name, value in _children(obj):
        found = _find_cuda(value, path + name, depth + 1, seen)
        if found:
            return found
    return None


def _culprit(dumps, obj, path, depth=0):
    """The deepest attribute path under `obj` that does not pickle, and its error."""
    try:
        dumps(obj)
        return None
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    if depth < _MAX_WALK_DEPTH:
        for name, value in _children(obj):
            try:
                dumps(value)
            except Exception:
                found = _culprit(dumps, value, path + name, depth + 1)
                if found:
                    return found
    return path, error


def _register_script_modules():
    """cloudpickle by value for __main__ and the modules under the script's folder."""
    import cloudpickle
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    if not script:
        return
    root = os.path.dirname(os.path.abspath(script)) + os.sep
    for name, module in list(sys.modules.items()):
        f = getattr(module, "__file__", None)
        if not f or name == "__main__" or name.startswith("goldminer"):
            continue
        if os.path.abspath(f).startswith(root) and "site-packages" not in f \
                and "dist-packages" not in f:
            try:
                cloudpickle.register_pickle_by_value(module)
            except (ValueError, TypeError):
                pass


def ship(parts, names):
    """(blob, digest, modules) of the tuple `parts`: blob (pickle, [out-of-band
    buffers], the buffers views of the arrays' own memory, not copies), its
    _vwire.blob_digest, and the modules it names. Raises CannotTravel naming the
    attribute (by `names`, one per part, e.g. "dataset") that cannot go."""
    import cloudpickle
    from goldminer import _vwire
    _register_script_modules()
    for part, name in zip(parts, names):
        cuda = _find_cuda(part, name, 0, set())
        if cuda:
            raise CannotTravel(cuda, "a CUDA tensor", _FIX_CUDA)
    try:
        blob, modules = _dumps_noting_modules(tuple(parts))
    except Exception:
        for part, name in zip(parts, names):
            found = _culprit(lambda o: cloudpickle.dumps(o, protocol=5), part, name)
            if found:
                raise CannotTravel(found[0], found[1], _FIX_OPEN) from None
        raise
    size = _vwire.blob_size(blob)
    if size > MAX_BLOB_BYTES:
        raise CannotTravel(names[0], f"{size} bytes pickled, more than {MAX_BLOB_BYTES}",
                           _FIX_SIZE)
    return blob, _vwire.blob_digest(blob), modules


def _shipped_environ():
    """The program's environment for its virtual workers, less the run's keys."""
    from goldminer import _vwire
    return {k: v for k, v in os.environ.items() if k not in _vwire.KEY_VARIABLES}


def _code_with_its_file(pickler, code):
    """cloudpickle's reduction of a code object, keeping its file name: cloudpickle
    3 writes "<dynamic-code>" there, and a worker's traceback would then name no
    file and show no line, where stock's names the script's."""
    reduce = pickler.dispatch_table.get(types.CodeType)
    if reduce is None:
        return NotImplemented
    reduced = reduce(code)
    if not (isinstance(reduced, tuple) and len(reduced) >= 2 and isinstance(reduced[1], tuple)):
        return reduced
    args = tuple(code.co_filename if a == "<dynamic-code>" else a for a in reduced[1])
    return (reduced[0], args) + tuple(reduced[2:])


def _dumps_noting_modules(obj):
    """cloudpickle (protocol 5) of `obj` as (pickle, [out-of-band buffers]), and
    the modules of the classes and functions it names by reference (the host
    imports them once, not each worker)."""
    import io
    import cloudpickle

    modules = set()
    buffers = []

    class Pickler(cloudpickle.CloudPickler):
        def reducer_override(self, o):
            if isinstance(o, types.CodeType):
                return _code_with_its_file(self, o)
            if isinstance(o, type) or callable(o):
                m = getattr(o, "__module__", None)
                if isinstance(m, str) and m != "__main__":
                    modules.add(m)
            return super().reducer_override(o)

    out = io.BytesIO()
    Pickler(out, protocol=5, buffer_callback=buffers.append).dump(obj)
    return (out.getvalue(), [b.raw() for b in buffers]), sorted(modules)


# ---- the workers' stand-ins for multiprocessing -------------------------------------


class _Failed:
    """Put in the result queue when a virtual worker cannot go on."""

    def __init__(self, worker_id, why):
        self.worker_id, self.why = worker_id, why


class _Raw:
    """A RESULT frame as read (the answer to task `key`), loaded by whoever takes
    it from the queue."""

    def __init__(self, key, data, buffers):
        self.key, self.data, self.buffers = key, data, buffers

    def load(self):
        """The RESULT's object; a batch holding a global that the trainer does not
        load (goldminer._safepickle) is the task's worker error, as stock has a
        batch that fails in its worker."""
        from goldminer import _safepickle, _vwire
        try:
            return _vwire.loads(_vwire.RESULT, self.data, self.buffers)
        except _vwire.Refused as e:
            if not isinstance(self.key, int):
                raise
            refused = _vwire.Refused(_safepickle.refusal(e))
        from torch._utils import ExceptionWrapper
        return self.key, ExceptionWrapper((_vwire.Refused, refused, None),
                                          where="in a virtual DataLoader worker")


class _ResultQueue:
    """The queue torch's main process reads results from (and the pin-memory thread).
    Results are loaded in the thread that takes them, as stock's queue does: our
    reader threads run no torch code (a daemon thread inside torch's C++ when the
    interpreter exits aborts the process)."""

    def __init__(self):
        import queue
        self._q = queue.Queue()

    def put(self, item):
        self._q.put(item)

    def get(self, timeout=None):
        item = self._q.get(timeout=timeout)
        return item.load() if isinstance(item, _Raw) else item

    def cancel_join_thread(self):
        pass

    def close(self):
        pass


class _IndexQueue:
    """A worker's index queue: what torch puts goes to its virtual worker as TASK
    frames (once the worker is started: torch starts it before the first put)."""

    def __init__(self):
        self.worker = None

    def put(self, item):
        if self.worker is not None:
            self.worker.send(item)

    def cancel_join_thread(self):
        pass

    def close(self):
        pass


class VirtualWorker:
    """One of a DataLoader iterator's workers, as a process that `place` starts
    (_LocalPlace: on the trainer's host; _WorkersPlace: on a data worker).

    A worker that ends while the iterator still needs it (killed, crashed) is
    replaced, at most MAX_RESTARTS times: the new one gets the generators' state
    after the last result received (a map-style dataset) or replays the tasks
    already answered (an IterableDataset's replica), then the tasks sent and not
    answered, in order. So the batches stay those of stock PyTorch."""

    MAX_RESTARTS = 3

    def __init__(self, job, modules, index_queue, result_queue, worker_id, iterable, place):
        self.job, self.modules, self.index_queue, self.results, self.worker_id = \
            job, modules, index_queue, result_queue, worker_id
        self.iterable = iterable
        self.place = place
        self.daemon = True
        self.chan = None  # the process's channel (_LocalChan, _RemoteChan)
        self.lock = threading.Lock()
        self.stopping = False  # None was sent, or terminate(): an end is no failure
        self.failed = False
        self.pending = []   # items sent and not answered, in order
        self.answered = []  # items answered (an IterableDataset's, for a replay)
        self.state = None   # the generators' state after the last result
        self.restarts = 0
        self.held = None  # tasks sent while a BLOB is written, then written after it
        # (channel, id) of recycled result memfds the trainer let go of (appended by
        # the mappings' finalizers, on any thread): RELEASE frames, written before
        # the next TASK to that channel (_vwire.Recycler).
        self.released = collections.deque()
        # Not a pid torch may wait for: torch's SIGCHLD check ignores it, and a
        # worker's end is reported by its reader (FAILED, or how it ended).
        self.pid = -1

    def start(self):
        """Starts the reader's thread, which opens the channel (a connection, a
        fork on the host) and writes the JOB: torch's iterator starts its workers
        without waiting for one another, and the tasks it sends meanwhile are
        held, then written after the JOB, in order."""
        self.index_queue.worker = self
        self.held = []
        _start_thread(self._read, f"goldminer vworker {self.worker_id}")

    def _open_first(self):
        try:
            self._spawn(self.job)
        finally:
            self._release_held()

    def _release_held(self):
        """Writes the tasks held while the JOB or a BLOB was written, in order, and
        lets torch's sends write again."""
        from goldminer import _vwire
        with self.lock:
            held, self.held = self.held, None
            if self.chan is not None:
                for item in held:
                    self._write(_vwire.TASK, item)

    def _spawn(self, job):
        from goldminer import _vwire
        self.chan = self.place.open(self.worker_id, self.modules, self.restarts)
        self.reader, self.writer = self.chan.reader, self.chan.writer
        self._write(_vwire.JOB, job_frame(self.chan, job))

    def _send_blob(self):
        """NEED (on the reader's thread): the worker's host does not have the blob
        (the first worker there, or its host restarted): sent now, outside the
        lock, so that torch's sends do not wait for it (they are held back and
        written after it, in order)."""
        from goldminer import _vwire
        with self.lock:
            self.held = []
        self._write(_vwire.BLOB, _vwire.blob_fields(self.job["blob"]))
        self._release_held()

    def _write(self, kind, obj):
        from goldminer import _vwire
        try:
            _vwire.write(self.writer, kind, obj)
        except (BrokenPipeError, ConnectionError, ValueError, OSError):
            pass  # it ended: its reader says how, or replaces it

    def send(self, item):
        from goldminer import _vwire
        with self.lock:
            if item is None:
                self.stopping = True
            else:
                self.pending.append(item)
            if self.held is not None:  # the JOB or a BLOB is being written
                self.held.append(item)
            else:
                self._write_released()
                self._write(_vwire.TASK, item)

    def _write_released(self):
        """RELEASE frames for what the trainer let go of (under the lock); those of
        a channel that ended are dropped (its worker's memfds went with it)."""
        from goldminer import _vwire
        while self.released:
            chan, rid = self.released.popleft()
            if chan is self.chan:
                self._write(_vwire.RELEASE, rid)

    def _answer(self, key, state):
        """Takes the result of `key` (a task index, or "resume") off the pending
        list (under the lock)."""
        self.state = state
        for n, sent in enumerate(self.pending):
            if (isinstance(sent, tuple) and sent[0] == key) if isinstance(key, int) \
                    else not isinstance(sent, tuple):
                # Those before it were skipped (an IterableDataset's replica that
                # ended takes no more tasks): they did nothing to replay.
                if self.iterable:
                    self.answered.append(sent)
                del self.pending[:n + 1]
                return

    def _read(self):
        try:
            self._open_first()
        except Exception as e:  # no data worker, a refusal: the loop raises it
            self.failed = True
            self.results.put((None, _Failed(self.worker_id, f"it cannot start: {e}")))
            return
        try:
            self._serve()
        except Exception as e:  # never leave the trainer waiting on a dead reader
            self.failed = True
            self.results.put((None, _Failed(self.worker_id, f"its reader failed: "
                                                            f"{type(e).__name__}: {e}")))

    def _serve(self):
        from goldminer import _vwire
        while True:
            why = self._read_one()
            with self.lock:
                # At the program's end (_at_exit ended the hosts) a worker that ends
                # is no loss: nothing is made again and nothing is said.
                if why is None or self.stopping or exiting:
                    return
                if self.restarts < self.MAX_RESTARTS:
                    self.restarts += 1
                    job = dict(self.job)
                    if self.iterable:
                        job["replay"] = list(self.answered)
                    else:
                        job["restore"] = self.state
                    _say(f"virtual DataLoader worker {self.worker_id}{self.chan.where} {why}; "
                         f"a new one goes on "
                         f"from its last result ({len(self.pending)} tasks made again, "
                         f"restart {self.restarts} of {self.MAX_RESTARTS})")
                    self._spawn(job)
                    for item in self.pending:
                        self._write(_vwire.TASK, item)
                    continue
                self.failed = True
            self.results.put((None, _Failed(self.worker_id, f"{why} (restarted "
                                                             f"{self.restarts} times)")))
            return

    def _read_one(self):
        """Reads the worker's results until it ends; None for a clean end, else how
        it ended."""
        def take(key, state, raw):
            with self.lock:
                self._answer(key, state)
            self.results.put(raw)

        chan = self.chan
        why = read_channel(chan, take, self._send_blob,
                           lambda rid: self.released.append((chan, rid)))
        if isinstance(why, Failure):
            self.failed = True
            self.results.put((None, _Failed(self.worker_id, why.text)))
            self._close()
            return None  # no replacement: another would fail alike
        self._close()
        return why

    def _close(self):
        self.chan.kill()  # wakes a send blocked on a channel that reads no more
        with self.lock:  # no send is under way on what is closed
            self.chan.close()

    def is_alive(self):
        with self.lock:  # alive too while its channel opens (held: see start)
            return not self.failed and (self.chan is not None or self.held is not None)

    def join(self, timeout=None):
        with self.lock:
            chan = self.chan
        if chan is not None:
            chan.wait_exit(timeout)

    def terminate(self):
        with self.lock:
            self.stopping = True
            chan = self.chan
        if chan is not None:
            chan.kill()


_EXIT_WAIT_S = 10  # for a worker whose channel ended to be reaped


class Failure:
    """A worker's FAILED frame, as read_channel returns it: `text` says why."""

    def __init__(self, text):
        self.text = text


def job_frame(chan, job):
    """The JOB frame's dict of `job` for the virtual worker on `chan`: its blob's
    digest without the blob, which the worker takes from its host's cache (a
    host keeps what it was sent: goldminer._vhost) or asks for (NEED), so a
    dataset goes to each data worker once per run, not once per virtual worker
    and epoch, and the frame that starts a worker is small (the blob, when it
    goes, goes from the reader's thread: BLOB)."""
    cut = job.get("cut")
    if cut is not None:  # the worker cuts where bytes cost (auto), or always (on)
        cut = {"at": cut["at"], "on": cut["mode"] == "on" or chan.remote}
    return dict(job, shm=chan.same_host, blob=None, buffers=None, cut=cut)


# `goldminer run --offload-cut auto|off`: where a dataset's transform ends in steps
# that only widen the data, the virtual workers send the samples before them
# (uint8) and the trainer applies them as it receives each batch. "on" cuts on the
# trainer's host too (tests, benchmarks).
CUT_ENV = "GOLDMINER_OFFLOAD_CUT"
CUT_MODES = ("auto", "off", "on")


def _cut_plan(loader):
    """Where `loader`'s batches can be cut, or None: {"at": the index in
    dataset.transform.transforms of the first widening step, "dtype", "mean",
    "std" (None without a Normalize), "mode"}. Only where the trainer's part
    gives stock's bytes exactly: a torchvision ImageFolder (DatasetFolder, its
    own __getitem__ and PIL loader) whose transform is a Compose that ends in
    ToTensor(), or PILToTensor() then ConvertImageDtype(a float), then at most a
    Normalize, batched by the default collate_fn."""
    mode = os.environ.get(CUT_ENV, "") or "auto"
    if mode not in CUT_MODES or mode == "off":
        return None
    folder = sys.modules.get("torchvision.datasets.folder")
    T = sys.modules.get("torchvision.transforms")
    if folder is None or T is None or not loader._auto_collation:
        return None
    from torch.utils.data._utils.collate import default_collate
    ds = loader.dataset
    if loader.collate_fn is not default_collate or not isinstance(ds, folder.DatasetFolder) or \
            type(ds).__getitem__ is not folder.DatasetFolder.__getitem__ or \
            ds.loader not in (folder.default_loader, folder.pil_loader):
        return None
    import torchvision
    if torchvision.get_image_backend() != "PIL" or type(ds.transform) is not T.Compose:
        return None
    steps = list(ds.transform.transforms)
    import torch
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


def _native_plan(loader):
    """goldminer._native.plan() of `loader`, or None: then why is said once."""
    from goldminer import _native
    try:
        return _native.plan(loader)
    except _native.NotNative as e:
        if ("native", id(loader)) not in _warned:
            _warned.add(("native", id(loader)))
            _say(f"DataLoader of {type(loader.dataset).__name__} runs in exact mode, not "
                 f"native: {e}")
        return None


def _native_cut(native):
    """The cut of a native plan (as _cut_plan's): the workers' batches are uint8
    where it is on, and the trainer widens them; None under --offload-cut off."""
    mode = os.environ.get(CUT_ENV, "") or "auto"
    if mode not in CUT_MODES or mode == "off":
        return None
    import torch
    return {"at": None, "dtype": torch.float32, "mean": native["mean"], "std": native["std"],
            "mode": mode}


def _finish_cut(batch, cut, pin):
    """The trainer's part of a cut batch: its images (uint8, as the virtual worker
    sent them) through the steps it left, the same operations as stock's, so the
    same bytes; a batch a worker did not cut (float already) is left as it is."""
    import torch
    if not (isinstance(batch, (list, tuple)) and batch and isinstance(batch[0], torch.Tensor)
            and batch[0].dtype == torch.uint8):
        return batch
    # In place on the one new tensor (stock's ops and values, a third of the passes
    # over memory of out-of-place ones).
    images = batch[0].to(dtype=cut["dtype"])
    images.div_(255)
    if cut["mean"] is not None:
        from torchvision.transforms import functional as F
        images = F.normalize(images, cut["mean"], cut["std"], inplace=True)
    if pin:
        images = images.pin_memory()
    return type(batch)([images, *batch[1:]])


def read_channel(chan, take, need=None, release=None):
    """Reads a virtual worker's frames from `chan` until its channel ends, calling
    take(key, state, raw) for each STATE and RESULT pair (raw: the _Raw RESULT,
    loaded by whoever takes it from the result queue) and need() for a NEED (the
    worker's host lacks the blob: send it; a second NEED ends the channel).
    release(id): the worker's recycled memfd `id` is no longer mapped (for
    workers whose JOB said recycle: _vwire.Recycler).
    Returns None for a clean
    end (exit status 0), a Failure for a FAILED frame (the channel not yet
    waited for), else how it ended (a phrase: "was killed by signal 9", ...; for
    a stream cut inside a frame, how the process ended, when it says)."""
    from goldminer import _vwire
    why = cut = None
    meta = None  # the STATE before the RESULT that follows it
    try:
        while True:
            frame = _vwire.read_raw(chan.reader, chan.take_fd, release=release)
            if frame is None:
                break
            kind = frame[0]
            if kind == _vwire.STATE:
                meta = _vwire.loads(*frame)  # plain types only: no torch code here
                if not (isinstance(meta, tuple) and len(meta) == 2 and
                        isinstance(meta[0], (int, str)) and isinstance(meta[1], dict)):
                    why = "sent a STATE that is not (key, state)"
                    break
            elif kind == _vwire.RESULT:
                if meta is None:
                    why = "sent a RESULT without its STATE"
                    break
                take(meta[0], meta[1], _Raw(meta[0], frame[1], frame[2]))
                meta = None
            elif kind == _vwire.FAILED:
                return Failure(str(_vwire.loads(*frame)))
            elif kind == _vwire.NEED and need is not None:
                # Once per channel: a worker asks for its JOB's blob at most once,
                # and a second NEED would have us send it again and again.
                need()
                need = None
            else:
                why = f"sent a {_vwire.KINDS[kind]} frame"
                break
    except ConnectionError:
        pass  # a worker that died with tasks unread resets its socket: as an end
    except _vwire.FrameCut as e:
        # It ended mid-write (killed, crashed): how it ended says why, when it
        # says anything; else the cut does.
        cut = str(e)
    except (_vwire.FrameError, OSError) as e:
        why = str(e)
    if why is not None:
        chan.kill()
    code = chan.wait_exit(_EXIT_WAIT_S)
    if code is None and cut is not None:
        chan.kill()  # cut off and still not ended
    if why is None and code != 0:
        why = ("was killed by signal %d" % -code if code is not None and code < 0 else
               "exited with status %s" % code if code is not None else
               chan.lost or cut or "closed its channel and did not exit")
    elif why is None and cut is not None:  # it ended well, in the middle of a frame
        why = cut
    return why


class _Host:
    """The trainer's goldminer._vhost process, which forks the virtual workers."""

    def __init__(self):
        import socket
        import subprocess
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                    else "")
        env.pop(OFFLOAD_ENV, None)  # a worker's own DataLoaders stay stock
        self.proc = subprocess.Popen([sys.executable, "-m", "goldminer._vhost",
                                      str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                     env=env, stdin=subprocess.DEVNULL)
        theirs.close()
        self.ctl = mine
        self.cv = threading.Condition()
        self.replies = []  # one [pid or None] per SPAWN sent, in order
        self.exits = {}    # pid -> status
        self.alive = True
        _start_thread(self._read, "goldminer vhost")

    def _read(self):
        while True:
            try:
                msg = self.ctl.recv(256)
            except OSError:
                msg = b""
            if not msg:
                # A host killed leaves its blob cache: the first to see it gone removes it.
                from goldminer import _vhost
                _vhost.sweep(_vhost._cache_root())
            with self.cv:
                if not msg:
                    self.alive = False
                    for reply in self.replies:
                        reply[0] = 0
                    self.replies.clear()
                    self.cv.notify_all()
                    return
                word, _, rest = msg.partition(b" ")
                if word == b"SPAWNED" and self.replies:
                    self.replies.pop(0)[0] = int(rest)
                elif word == b"EXIT":
                    pid, code = rest.split()
                    self.exits[int(pid)] = int(code)
                self.cv.notify_all()

    def spawn(self, modules):
        """(channel socket, pid) of a new virtual worker; raises RuntimeError when
        the host cannot fork one."""
        import json
        import socket
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        reply = [None]
        with self.cv:
            self.replies.append(reply)
            try:
                socket.send_fds(self.ctl, [b"SPAWN " + json.dumps(modules).encode()],
                                [theirs.fileno()])
            except OSError as e:
                self.replies.remove(reply)
                raise RuntimeError(f"goldminer: the virtual worker host is gone: {e}") from e
            finally:
                theirs.close()
            self.cv.wait_for(lambda: reply[0] is not None)
        if not reply[0]:
            mine.close()
            raise RuntimeError("goldminer: the virtual worker host could not start a worker")
        return mine, reply[0]

    def wait_exit(self, pid, timeout):
        """The exit status of worker `pid` once it ended (None: not within timeout)."""
        with self.cv:
            self.cv.wait_for(lambda: pid in self.exits or not self.alive, timeout)
            return self.exits.get(pid)

    def kill(self, pid):
        try:
            self.ctl.send(b"KILL %d" % pid)
        except OSError:
            pass

    def close(self):
        """Ends the host, which kills its workers: their channels end too."""
        import socket
        try:
            self.ctl.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _LocalChan:
    """A virtual worker forked by the trainer's _Host, on a socket pair."""

    where = ""
    lost = None
    same_host = False  # its bytes come through the socket pair, descriptors never
    remote = False  # on the trainer's host
    take_fd = None

    def __init__(self, host, sock, pid):
        self.host, self.sock, self.pid = host, sock, pid
        self.reader = sock.makefile("rb", buffering=1 << 16)
        self.writer = sock.makefile("wb", buffering=1 << 16)

    def kill(self):
        self.host.kill(self.pid)

    def wait_exit(self, timeout):
        return self.host.wait_exit(self.pid, timeout)

    def close(self):
        for f in (self.reader, self.writer, self.sock):
            try:
                f.close()
            except (OSError, ValueError):
                pass


class _LocalPlace:
    """Virtual workers on the trainer's host (GOLDMINER_OFFLOAD=local)."""

    def open(self, worker_id, modules, attempt):
        return self.open_on("local", modules)

    def live(self):
        """Where virtual workers may go: this host, under one name."""
        return ["local"]

    def open_on(self, where, modules):
        host = _host()
        sock, pid = host.spawn(modules)
        return _LocalChan(host, sock, pid)


class _ChannelIO(io.RawIOBase):
    """A gm_vchannel as the raw stream under a BufferedReader and a BufferedWriter:
    readinto() takes the next OFFLOAD_DATA bytes (the library's buffer, until the
    next recv), write() sends. The end of the stream records the exit status.
    Descriptors that came with the bytes (memfds of results, from a data worker
    on this host) wait in `fds`, in the order they came, for the frames that
    name them (goldminer._vwire.read_raw)."""

    def __init__(self, lib, handle, worker):
        super().__init__()
        self.lib, self.handle, self.worker = lib, handle, worker
        self.fds = collections.deque()
        self.ptr, self.len, self.pos = None, 0, 0
        self.exit_status = None
        self.lost = None  # why the connection broke, when it did
        self.ended = threading.Event()

    def readable(self):
        return True

    def writable(self):
        return True

    def readinto(self, b):
        c = ctypes
        if self.pos >= self.len:
            if self.ended.is_set() or self.handle is None:
                return 0
            data, n = c.c_void_p(), c.c_size_t()
            status, has = c.c_int(), c.c_int()
            rc = self.lib.gm_vchannel_recv(self.handle, c.byref(data), c.byref(n),
                                           c.byref(status), c.byref(has))
            if rc != 0:
                self.lost = ("lost its data worker (%s)" %
                             self.lib.gm_last_error().decode("utf-8", "replace"))
                self.ended.set()
                raise ConnectionError(self.lost)
            if n.value == 0:
                self.exit_status = status.value if has.value else None
                self.ended.set()
                return 0
            fd = self.lib.gm_vchannel_take_fd(self.handle)
            if fd >= 0:
                self.fds.append(fd)
            self.ptr, self.len, self.pos = data.value, n.value, 0
        with memoryview(b) as view, view.cast("B") as flat:
            k = min(flat.nbytes, self.len - self.pos)
            c.memmove((c.c_char * flat.nbytes).from_buffer(flat), self.ptr + self.pos, k)
        self.pos += k
        return k

    def write(self, b):
        if self.handle is None:  # closed (under the worker's lock, as writes are)
            raise BrokenPipeError("the virtual worker's channel is closed")
        with memoryview(b) as view, view.cast("B") as flat:
            n = flat.nbytes
            if not flat.readonly:
                buf = (ctypes.c_char * n).from_buffer(flat)
                rc = self.lib.gm_vchannel_send(self.handle, buf, n)
                del buf  # releases its hold on the view
            else:  # a large write comes read-only from BufferedWriter: not copied
                rc = self._send_readonly(flat)
        if rc != 0:
            raise BrokenPipeError(self.lib.gm_last_error().decode("utf-8", "replace"))
        return n

    _COPY_SLICE = 4 << 20

    def _send_readonly(self, flat):
        """Sends a read-only view without copying it whole (a 150 MB array would
        be a second 150 MB while it goes): by its address, through numpy, which
        wraps read-only memory; without numpy, in copied slices of 4 MiB."""
        try:
            import numpy
        except ImportError:
            numpy = None
        if numpy is not None:
            array = numpy.frombuffer(flat, dtype=numpy.uint8)
            return self.lib.gm_vchannel_send(self.handle, ctypes.c_void_p(array.ctypes.data),
                                             flat.nbytes)
        for at in range(0, flat.nbytes, self._COPY_SLICE):
            part = flat[at:at + self._COPY_SLICE]
            buf = (ctypes.c_char * part.nbytes).from_buffer_copy(part)
            rc = self.lib.gm_vchannel_send(self.handle, buf, part.nbytes)
            if rc != 0:
                return rc
        return 0


class _RemoteChan:
    """A virtual worker on a data worker, over one gm_vchannel."""

    def __init__(self, lib, handle, worker):
        self.lib = lib
        self.io = _ChannelIO(lib, handle, worker)  # holds the handle, None once closed
        self.reader = io.BufferedReader(self.io, 1 << 16)
        self.writer = io.BufferedWriter(self.io, 1 << 16)
        host = lib.gm_vchannel_host(handle).decode("utf-8", "replace")
        self.pid = lib.gm_vchannel_pid(handle)
        self.same_host = bool(lib.gm_vchannel_same_host(handle))
        self.remote = not self.same_host  # its bytes cross TCP: where a cut pays
        self.where = f" (pid {self.pid} on worker {host or worker})"
        # kill() may come from any thread, close() from the reader's (under the
        # worker's lock, which writes hold): the handle is freed once, unused.
        self.mu = threading.Lock()

    @property
    def lost(self):
        return self.io.lost

    def take_fd(self):
        """The next descriptor that came with the channel's bytes, or None."""
        return self.io.fds.popleft() if self.io.fds else None

    def kill(self):
        with self.mu:
            if self.io.handle is not None:
                self.lib.gm_vchannel_shutdown(self.io.handle)  # the worker ends the process

    def wait_exit(self, timeout):
        self.io.ended.wait(timeout)
        return self.io.exit_status

    def close(self):
        with self.mu:
            handle, self.io.handle = self.io.handle, None
            if handle is not None:
                self.io.ended.set()
                self.lib.gm_vchannel_close(handle)
            while self.io.fds:  # brought by frames no one will read
                os.close(self.io.fds.popleft())


class _WorkersPlace:
    """Virtual workers on the data workers of the run (GOLDMINER_OFFLOAD=workers):
    one offload session per trainer process, opened at the first use."""

    # How long a placement tries other data workers when the one named refuses
    # the connection (it was killed; the coordinator drops it when it hears).
    REPLACE_S = 10.0

    def __init__(self):
        import weakref
        self.lock = threading.Lock()
        self.lib = None
        self.handle = None
        self.chans = weakref.WeakSet()  # the channels open, for the program's end
        self.ending = False  # end_channels ran: a channel opened since is ended at once

    def _session(self):
        from goldminer import loader
        with self.lock:
            if self.handle is None:
                lib = loader._library()
                handle = ctypes.c_void_p()
                loader._check(lib, lib.gm_offload_open(None, -1, ctypes.byref(handle)))
                self.lib, self.handle = lib, handle
            return self.lib, self.handle

    def close(self):
        """BYE to the coordinator (channels open stay usable)."""
        with self.lock:
            if self.handle is not None:
                self.lib.gm_offload_close(self.handle)
                self.handle = None

    def note(self, served, dataset, workers=0, blob_bytes=0, why="", mode="exact"):
        """Tells the coordinator what became of a DataLoader, for the run's record
        (runs.db, the report): served True, False (stock local workers) or
        IN_PROCESS (num_workers=0). Never fails the program: a note that cannot
        be sent is dropped."""
        try:
            lib, handle = self._session()
            name = "".join(c if 32 < ord(c) < 127 else "?" for c in dataset)[:256] or "?"
            text = why.encode("ascii", "backslashreplace")[:1024] or b"?"
            lib.gm_offload_note(handle, int(served), name.encode(), int(workers),
                                int(blob_bytes), text, mode.encode())
        except Exception:  # noqa: BLE001 - the record is not worth the program
            pass

    def live(self):
        """The run's live data workers ("HOST:PORT"), as the coordinator lists them."""
        import json
        from goldminer import loader
        lib, offload = self._session()
        text = ctypes.c_char_p()
        loader._check(lib, lib.gm_offload_workers(offload, ctypes.byref(text)))
        return json.loads(text.value.decode())

    def open(self, worker_id, modules, attempt):
        """A virtual worker on the data worker the coordinator names: the one that
        hosts the fewest (every rank's and DataLoader's counted, as the workers
        report them plus those it placed since), so that ranks, DataLoaders and
        replacements spread over the data workers by their load."""
        import time
        from goldminer import loader
        lib, offload = self._session()
        refused = set()  # data workers that refused us: killed, and maybe still listed
        deadline = time.monotonic() + self.REPLACE_S
        while True:
            where = ctypes.c_char_p()
            rc = lib.gm_offload_place(offload, ctypes.byref(where))
            if rc != 0:
                raise RuntimeError("goldminer: " + lib.gm_last_error().decode("utf-8", "replace"))
            worker = where.value.decode()
            if worker in refused:  # the coordinator has not yet heard that it is gone
                others = [w for w in self.live() if w not in refused]
                worker = others[0] if others else worker
            try:
                return self.open_on(worker, modules)
            except loader.ClientError as e:
                # A data worker killed a moment ago is listed until the coordinator
                # hears its connection close: place again, elsewhere, for a while;
                # not at the program's end (Ctrl-C ended the data workers too, and
                # _at_exit waits for this thread).
                if e.code != loader.UNAVAILABLE or exiting or time.monotonic() > deadline:
                    raise
                refused.add(worker)
                time.sleep(0.05)

    def open_on(self, worker, modules):
        import json
        from goldminer import loader
        lib, offload = self._session()
        handle = ctypes.c_void_p()
        loader._check(lib, lib.gm_vchannel_open(offload, worker.encode(),
                                                sys.executable.encode(),
                                                json.dumps(modules).encode(),
                                                ctypes.byref(handle)))
        chan = _RemoteChan(lib, handle, worker)
        with self.lock:
            self.chans.add(chan)
            late = self.ending
        if late:  # opened while the program ended (Ctrl-C during a placement): its
            chan.kill()  # reader, waiting on it, would keep _at_exit waiting
        return chan

    def end_channels(self):
        """At the program's end: each virtual worker still open is ended (its
        reader then hears the end and returns), as the host's end ends local ones."""
        with self.lock:
            self.ending = True
            chans = list(self.chans)
        for chan in chans:
            chan.kill()


_places = {}  # transport name -> its place (one per process)
_places_lock = threading.Lock()


def _place(transport):
    with _places_lock:
        key = (transport, os.getpid())
        if key not in _places:
            _places[key] = _WorkersPlace() if transport == "workers" else _LocalPlace()
        return _places[key]


exiting = False  # the interpreter is ending: workers that end are not lost
_threads = []  # our reader threads, joined at exit
_threads_lock = threading.Lock()
_EXIT_JOIN_S = 3  # within `goldminer run`'s 5 s between SIGTERM (or Ctrl-C) and SIGKILL


def _start_thread(target, name):
    t = threading.Thread(target=target, daemon=True, name=name)
    t.start()
    with _threads_lock:
        _threads[:] = [x for x in _threads if x.is_alive()] + [t]


def _at_exit():
    """Before the interpreter's teardown: end the host (its workers with it) and
    wait for our threads, so none is running when daemon threads are stopped."""
    import time
    global exiting
    exiting = True
    with _hosts_lock:
        hosts = list(_hosts.values())
    with _threads_lock:
        threads = list(_threads)
    with _places_lock:
        places = list(_places.values())
    for h in hosts:
        h.close()
    for p in places:  # after a KeyboardInterrupt torch's iterator did not end them
        if isinstance(p, _WorkersPlace):
            p.end_channels()
    until = time.monotonic() + _EXIT_JOIN_S
    for t in threads:
        t.join(max(0.0, until - time.monotonic()))
    if any(t.is_alive() for t in threads):
        return  # a reader still in a channel's call: its session stays (the exit frees it)
    for p in places:
        if isinstance(p, _WorkersPlace):
            p.close()


_hosts = {}  # pid of the trainer process -> its host
_hosts_lock = threading.Lock()


def _host():
    with _hosts_lock:
        h = _hosts.get(os.getpid())
        if h is None or not h.alive:
            h = _hosts[os.getpid()] = _Host()
        return h


_ARG_NAMES = ("dataset kind", "dataset", "auto_collation", "collate_fn", "drop_last",
              "worker_init_fn", "num_workers", "persistent_workers")


def _worker_args(loader, num_workers):
    """What torch hands each worker process, less its id and seeds (_ARG_NAMES)."""
    return (loader._dataset_kind, loader.dataset, loader._auto_collation, loader.collate_fn,
            loader.drop_last, loader.worker_init_fn, num_workers, loader.persistent_workers)


class _Context:
    """What torch's iterator asks its multiprocessing context for: queues, an
    event, and processes (virtual workers). torch asks for the result queue
    first, then one index queue per worker. `shipped`: ship() of the loader's
    worker arguments, made before the iterator draws its base seed. In elastic
    mode every index queue and process stands for one _elastic.Dispatcher, made
    at the first process."""

    def __init__(self, shipped, elastic, cut=None, native=False):
        self.shipped = shipped
        self.elastic = elastic
        self.cut = cut  # _cut_plan's, or None
        self.native = native  # the shipped dataset is a goldminer._native plan
        self.result_queue = None
        self.dispatcher = None

    def Queue(self):
        if self.result_queue is None:
            self.result_queue = _ResultQueue()
            return self.result_queue
        if self.elastic:
            from goldminer import _elastic
            return _elastic.SlotQueue(self)
        return _IndexQueue()

    def Event(self):
        return threading.Event()

    def Process(self, target, args):
        from goldminer import _safepickle, _vworker
        (kind, dataset, index_queue, result_queue, done_event, auto_collation, collate_fn,
         drop_last, base_seed, init_fn, worker_id, num_workers, persistent_workers,
         shared_seed) = args
        blob, digest, modules = self.shipped
        job = {"versions": _vworker.versions(), "digest": digest, "blob": blob,
               "worker_id": worker_id, "base_seed": base_seed, "shared_seed": shared_seed,
               "sys_path": [p for p in sys.path if isinstance(p, str)],
               "trust": _safepickle.trusted(),
               # As stock workers start: in the program's directory and environment
               # as they are now, when the iterator starts its workers (keys left out).
               "cut": None if self.cut is None else
               {"at": self.cut["at"], "mode": self.cut["mode"]},
               "cwd": os.getcwd(),
               "environ": _shipped_environ(),
               "native": self.native}
        if self.elastic:
            from goldminer import _elastic
            if self.dispatcher is None:
                self.dispatcher = _elastic.Dispatcher(
                    job, modules, result_queue, _place(_transport), num_workers,
                    _say, lambda why: (None, _Failed(None, why)))
            return _elastic.Slot(self.dispatcher)
        from torch.utils.data import _DatasetKind
        job["recycle"] = True  # its results' memfds come back (VirtualWorker.released)
        return VirtualWorker(job, modules, index_queue, result_queue, worker_id,
                             kind == _DatasetKind.Iterable, _place(_transport))


class _LoaderView:
    """The user's DataLoader as torch's iterator reads it, with our context and
    the worker count served (_num_workers)."""

    def __init__(self, loader, context, num_workers):
        object.__setattr__(self, "_loader", loader)
        object.__setattr__(self, "multiprocessing_context", context)
        object.__setattr__(self, "num_workers", num_workers)
        if getattr(loader, "prefetch_factor", None) is None:  # num_workers=0 in torch 2.x
            object.__setattr__(self, "prefetch_factor", 2)  # stock's default with workers

    def __getattr__(self, name):
        return getattr(self._loader, name)


def _iterator_class():
    from torch.utils.data import dataloader as dl

    class OffloadIter(dl._MultiProcessingDataLoaderIter):
        """torch's multi-process iterator with virtual workers."""

        def __init__(self, loader, shipped, num_workers, elastic, cut=None, native=False):
            # Before torch's __init__, which calls _reset.
            self._gm_context = _Context(shipped, elastic, cut, native)
            self.goldminer_cut = cut  # where the batches are cut (_cut_plan), or None
            self._gm_prefetch = None
            super().__init__(_LoaderView(loader, self._gm_context, num_workers))
            self.goldminer_digest = shipped[1]
            from goldminer import _vwire
            self.goldminer_blob_bytes = _vwire.blob_size(shipped[0])

        def _reset(self, loader, first_iter=False):
            dispatcher = self._gm_context.dispatcher
            if dispatcher is not None:  # elastic: this epoch's tasks get its seeds
                dispatcher.epoch = _next_epoch(getattr(loader, "_loader", loader))
            super()._reset(loader, first_iter)

        def _process_data(self, data, *worker_idx):
            # Newer torch also passes the worker's index (for its count of tasks in flight).
            dispatcher = self._gm_context.dispatcher
            if dispatcher is not None:
                self._widen(dispatcher.capacity())
            data = super()._process_data(data, *worker_idx)
            cut = self._gm_context.cut
            return data if cut is None else _finish_cut(data, cut, self._pin_memory)

        def _widen(self, capacity):
            """Elastic: keeps as many tasks in flight as the processes can hold
            (they may be more than torch's N workers times its prefetch
            factor); torch's _process_data then sends the one it frees."""
            if self._gm_prefetch is None:
                self._gm_prefetch = self._prefetch_factor
            n = self._num_workers
            # Never below what is in flight and the task torch sends next (it
            # checks: an assert in 1.13, an AssertionError raised in 2.x), when
            # the capacity fell (a process lost).
            self._prefetch_factor = max(self._gm_prefetch, -(-capacity // n),
                                        -(-(self._tasks_outstanding + 1) // n))
            # torch keeps the tasks from the one being taken on to the next to
            # send within the window (results that came early count: they are
            # held), then sends one more as it takes a result on: so does this,
            # leaving room for that one (torch 2.x counts the one taken on as
            # received before this runs, 1.13 after).
            window = self._prefetch_factor * n
            while self._send_idx - self._rcvd_idx < window and \
                    self._tasks_outstanding < window - 1:
                sent = self._send_idx
                self._try_put_index()
                if self._send_idx == sent:  # the sampler is done
                    return

        def _try_get_data(self, timeout=5.0):
            ok, data = super()._try_get_data(timeout)
            if ok and isinstance(data, tuple) and len(data) == 2 and \
                    isinstance(data[1], _Failed):
                failed = data[1]
                if failed.worker_id is None:  # elastic: the phrase names the worker
                    raise RuntimeError(f"goldminer: {failed.why}")
                raise RuntimeError(f"goldminer: virtual DataLoader worker {failed.worker_id} "
                                   f"cannot go on: {failed.why}")
            return ok, data

    return OffloadIter


def _next_epoch(loader):
    """How many epochs `loader` began before this one (its iterators' resets)."""
    epoch = loader.__dict__.get("_goldminer_epoch", 0)
    loader.__dict__["_goldminer_epoch"] = epoch + 1  # past DataLoader.__setattr__
    return epoch


def _why_not(loader):
    """Why `loader` runs stock (a short phrase), or None when it is served."""
    from torch.utils.data import DataLoader, IterDataPipe, MapDataPipe
    cls = type(loader)
    if cls.__iter__ is not DataLoader.__iter__ or \
            getattr(cls._get_iterator, "_goldminer", False) is False:
        return "its class has its own iterator"
    if isinstance(loader.dataset, (IterDataPipe, MapDataPipe)):
        return "DataPipe datasets are not served yet"
    return None


_OffloadIter = None


IN_PROCESS = 2  # a note's `served` for a DataLoader with num_workers=0 (gm_offload_note)


def _get_iterator(self):
    global _OffloadIter
    note = getattr(_place(_transport), "note", None)  # the run's record, when in one
    zero = self.num_workers == 0  # stock makes its batches in the program's process
    if zero and _num_workers(self) == 0:
        # Said in the run's record and its last line, not here: it is stock.
        if note is not None and id(self) not in _noted:
            _noted.add(id(self))
            note(IN_PROCESS, type(self.dataset).__name__,
                 why="num_workers=0 (goldminer run --dataloader-workers M offloads it)")
        return _stock_get_iterator(self)
    why = _why_not(self)
    mode = _mode()
    native = _native_plan(self) if why is None and mode == "native" else None
    if native is None and mode == "native":
        mode = "exact"
    if why is None:
        # Before anything draws from the loader's generator: a DataLoader that
        # falls back gives the batches it would have given without the hook.
        try:
            num_workers = _num_workers(self)
            args = _worker_args(self, num_workers)
            if native is not None:  # the plan travels in the dataset's place
                args = (args[0], native, *args[2:])
            shipped = ship(args, _ARG_NAMES)
        except CannotTravel as e:
            why = str(e)
        except ImportError as e:
            why = f"{e} (goldminer needs cloudpickle: Debian's python3-cloudpickle)"
    if why is None:
        if _OffloadIter is None:
            _OffloadIter = _iterator_class()
        # As stock, when the workers share this host's CPUs (an override, or the
        # data workers, mean other CPUs: the check would count the wrong ones).
        if num_workers == self.num_workers and _transport == "local":
            self.check_worker_number_rationality()
        from torch.utils.data import _DatasetKind
        if mode == "elastic" and self._dataset_kind == _DatasetKind.Iterable:
            mode = "exact"
            if ("iterable", id(self)) not in _warned:
                _warned.add(("iterable", id(self)))
                _say(f"DataLoader of {type(self.dataset).__name__} is served in exact mode: "
                     "an IterableDataset's replicas keep their place, so its tasks cannot move "
                     "between workers as elastic mode needs")
        if note is not None and id(self) not in _noted:
            _noted.add(id(self))
            from goldminer import _vwire
            note(True, type(self.dataset).__name__, num_workers, _vwire.blob_size(shipped[0]),
                 mode=mode)
        cut = _cut_plan(self) if native is None else _native_cut(native)
        return _OffloadIter(self, shipped, num_workers, mode == "elastic", cut,
                            native is not None)
    if id(self) not in _warned:
        _warned.add(id(self))
        where = "in the program's process (num_workers=0)" if zero else "on stock local workers"
        _say(f"DataLoader of {type(self.dataset).__name__} runs {where}: {why}")
        if note is not None:
            note(IN_PROCESS if zero else False, type(self.dataset).__name__, why=why)
        if _stock_check is not None:
            _stock_check(self)
    return _stock_get_iterator(self)


_get_iterator._goldminer = True
_stock_get_iterator = None
_stock_check = None  # DataLoader.check_worker_number_rationality, when install() replaced it


TRANSPORTS = ("local", "workers")
_transport = "local"


# The torch releases the offload is tested on (Debian 12's and the newest on PyPI:
# python/torch2/requirements.txt); those between are expected to work.
TESTED_TORCH = ((1, 13), (2, 15))


def _torch_version():
    torch = sys.modules.get("torch")
    return str(getattr(torch, "__version__", "unknown"))


def _outside_tested(version):
    """One line when torch `version` is outside TESTED_TORCH's range, else None."""
    try:
        major_minor = tuple(int(p) for p in version.split("+")[0].split(".")[:2])
    except ValueError:
        return None
    low, high = TESTED_TORCH
    if low <= major_minor <= high:
        return None
    return (f"torch {version} is outside the versions the offload is tested on "
            f"({low[0]}.{low[1]} to {high[0]}.{high[1]}): its DataLoaders are served as on "
            f"those, and one whose internals differ fails naming them")


def _missing_internals(dataloader_module):
    """The first of torch's DataLoader internals the offload drives that this
    torch lacks ("_MultiProcessingDataLoaderIter._try_put_index", ...), or None."""
    it = getattr(dataloader_module, "_MultiProcessingDataLoaderIter", None)
    if it is None:
        return "DataLoader._MultiProcessingDataLoaderIter"
    for name in ("_reset", "_process_data", "_try_get_data", "_try_put_index", "_next_data"):
        if not callable(getattr(it, name, None)):
            return f"_MultiProcessingDataLoaderIter.{name}"
    if not callable(getattr(dataloader_module.DataLoader, "_get_iterator", None)):
        return "DataLoader._get_iterator"
    try:
        from torch.utils.data._utils.worker import _worker_loop  # noqa: F401
    except ImportError:
        return "torch.utils.data._utils.worker._worker_loop"
    return None


def install(dataloader_module=None, transport=None):
    """Patches torch's DataLoader (once) so that its multi-process iterators use
    virtual workers placed by `transport` (TRANSPORTS; None: $GOLDMINER_OFFLOAD,
    else "local"). Called by goldminer's sitecustomize hook when $GOLDMINER_OFFLOAD
    is set, once torch.utils.data.dataloader is imported."""
    global _installed, _stock_get_iterator, _transport
    if _installed:
        return
    transport = transport or os.environ.get(OFFLOAD_ENV) or "local"
    if transport not in TRANSPORTS:
        raise ValueError(f"offload transport {transport!r} is not one of {', '.join(TRANSPORTS)}")
    _transport = transport
    if dataloader_module is None:
        from torch.utils.data import dataloader as dataloader_module
    missing = _missing_internals(dataloader_module)
    if missing:
        _say(f"torch {_torch_version()} has no {missing}, which the offload drives: its "
             f"DataLoaders run on stock local workers")
        return
    outside = _outside_tested(_torch_version())
    if outside:
        _say(outside)
    loader_cls = dataloader_module.DataLoader
    _stock_get_iterator = loader_cls._get_iterator
    loader_cls._get_iterator = _get_iterator
    if transport == "workers":
        # torch warns, at DataLoader() and at each iterator, when num_workers
        # exceeds this host's CPUs: served workers run on the data workers' CPUs.
        # A DataLoader left stock is checked when it falls back.
        global _stock_check
        _stock_check = loader_cls.check_worker_number_rationality
        loader_cls.check_worker_number_rationality = lambda self: None
    _installed = True
    import atexit
    atexit.register(_at_exit)
    if transport == "local":
        # The host imports torch while the program builds its model: warm by the
        # first iterator.
        try:
            _host()
        except OSError as e:
            _say(f"cannot start the virtual worker host yet: {e}")


def uninstall():
    """Undoes install() (tests)."""
    global _installed
    if not _installed:
        return
    global _stock_check
    from torch.utils.data import DataLoader
    DataLoader._get_iterator = _stock_get_iterator
    if _stock_check is not None:
        DataLoader.check_worker_number_rationality = _stock_check
        _stock_check = None
    _installed = False
