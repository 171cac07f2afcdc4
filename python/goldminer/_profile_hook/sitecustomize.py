"""goldminer's PyTorch hook for `goldminer profile -- python3 train.py`, and for
DataLoaders whose workers goldminer serves ($GOLDMINER_OFFLOAD: goldminer/offload.py,
which it installs once torch.utils.data.dataloader is imported).

`goldminer profile` puts this directory first on the trainer's PYTHONPATH and sets
$GOLDMINER_PROFILE_DIR, so Python's `site` module runs this file at start-up, as
`sitecustomize`, in the trainer and in every Python process it starts. It:

1. runs the sitecustomize it shadows (the next one on sys.path, e.g. Debian's
   /usr/lib/python3.11/sitecustomize.py), always, whether profiling or not;
2. when $GOLDMINER_PROFILE_DIR is set (else it does nothing more), installs a
   sys.meta_path finder that waits for torch.utils.data.dataloader to be imported
   (it does not import torch itself) and then wraps
   _BaseDataLoaderIter.__init__ and __next__;
3. records each batch a DataLoader iterator hands to the program as one step,
   "S <wait_begin_ns> <wait_end_ns> <samples> <previous_cost_ns>" (the last: the
   previous line's own cost, so a killed program still leaves it; time.monotonic_ns(): the
   CLOCK_MONOTONIC of the C++ side), with one os.write on an O_APPEND file,
   $GOLDMINER_PROFILE_DIR/steps.<pid>.log (format: core/step_log.h, source=torch),
   opened at the first step. At exit (atexit) it adds "O <seconds> <records>", its
   own time spent recording. StopIteration is not a step.
4. after the "S" line of a batch from stock worker processes (num_workers > 0, not
   offloaded), in the same write, "D <workers> <cpu_ns> <bytes>": the iterator's
   worker count, the CPU its process's DataLoader workers used so far (utime +
   stime of /proc/PID/stat, summed over every worker it saw, cumulative for the
   process) and the batch's bytes (tensors' and arrays' nbytes, str and bytes
   lengths), so `goldminer profile` gives the CPU per sample of an unchanged
   program's DataLoader workers, which `goldminer plan` sizes data workers by.

5. when $GOLDMINER_PROFILE_NATIVE is 1 (`goldminer profile --offload native`), at
   the first iterator of each DataLoader: when goldminer._native recognises its
   dataset and transform, it makes NATIVE_SAMPLES of its samples with the native
   engine on this thread and writes "N <samples> <cpu_ns> <bytes> <cut_cpu_ns>
   <cut_bytes>" (the thread's CPU and the samples' bytes, to the transform's end
   and to the uint8 cut), so `goldminer plan` sizes the data workers by the
   engine's cost; when not, "X <why>" (the first step not recognised).

samples: the first dimension of the first tensor (anything with a non-empty
.shape) found in the batch, searching tuples, lists and dict values; else the
loader's batch_size; else 1.

Only the process that created an iterator records its steps (DataLoader worker
processes never do). Nor does a process in which a goldminer.Loader client is
open (e.g. under goldminer.torch.GoldminerDataset): that client records the same
waits itself. A DataLoader whose workers goldminer serves records its steps as
stock does, so `goldminer run` shows its rate and data wait. The hook never breaks the program: an exception in
its own code is caught and written as an "E" line; exceptions of the DataLoader
pass through unchanged.
"""

import os
import sys
import time

_DIR_ENV = "GOLDMINER_PROFILE_DIR"
_OFFLOAD_ENV = "GOLDMINER_OFFLOAD"  # goldminer/offload.py
_OFFLOAD_MODES = ("local", "workers")
_NATIVE_ENV = "GOLDMINER_PROFILE_NATIVE"
NATIVE_SAMPLES = 32  # samples the native engine makes to price a DataLoader
_TARGET = "torch.utils.data.dataloader"
_MAX_DEPTH = 4  # how deep into nested tuples/lists/dicts to look for a tensor
_Mapping = dict  # collections.abc.Mapping once torch is there (it imports collections)


def _chain():
    """Runs the next sitecustomize on sys.path after this file's directory."""
    here = os.path.dirname(os.path.abspath(__file__))
    entries = [os.path.abspath(p or os.curdir) for p in sys.path]
    start = entries.index(here) + 1 if here in entries else 0
    rest = [p for p, a in zip(sys.path[start:], entries[start:]) if a != here]
    # The frozen import machinery is always loaded; importing importlib.machinery
    # would pull in `warnings` and more for every Python process of the job.
    bootstrap = sys.modules.get("_frozen_importlib")
    external = sys.modules.get("_frozen_importlib_external")
    if bootstrap is None or external is None:
        import importlib._bootstrap as bootstrap
        import importlib._bootstrap_external as external
    spec = external.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return None
    module = bootstrap.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


try:
    _chained = _chain()
except Exception as e:  # as site.py does for a failing sitecustomize
    _chained = None
    sys.stderr.write("Error in sitecustomize (chained by goldminer's profile hook): %s: %s\n"
                     % (type(e).__name__, e))


class _StepLog:
    """The process's steps.<pid>.log, opened at the first line written."""

    def __init__(self, directory):
        self.directory = directory
        self.fd = None
        self.pid = None
        self.failed = False
        self.spent_ns = 0
        self.last_ns = 0
        self.records = 0

    def _open(self):
        pid = os.getpid()
        if self.pid == pid:
            return self.fd
        if self.failed:
            return None
        path = os.path.join(self.directory, "steps.%d.log" % pid)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
            os.write(fd, b"# goldminer step log 1 pid=%d source=torch\n" % pid)
        except OSError as e:
            self.failed = True
            sys.stderr.write("goldminer: warning: not recording data waits for `goldminer "
                             "profile`: %s: %s\n" % (path, e.strerror))
            return None
        # A forked child starts its own log, and its own count.
        self.fd, self.pid, self.spent_ns, self.records = fd, pid, 0, 0
        self.last_ns = 0  # the previous S line's own cost, written in the next one
        import atexit
        atexit.register(self.close, pid)
        return fd

    def step(self, begin, end, samples, started, loader=b""):
        """One "S" line, and `loader` (a "D" line, or nothing) in the same write."""
        fd = self._open()
        if fd is None:
            return
        os.write(fd, b"S %d %d %d %d\n%s" % (begin, end, samples, self.last_ns, loader))
        self.records += 1
        self.last_ns = time.monotonic_ns() - started
        self.spent_ns += self.last_ns

    def line(self, data):
        """Another line (bytes with its newline), in one write."""
        fd = self._open()
        if fd is not None:
            os.write(fd, data)

    def error(self, text):
        if not self.directory:  # not profiling: say it on stderr
            sys.stderr.write("goldminer: warning: torch hook: %s\n" % " ".join(str(text).split()))
            return
        try:
            fd = self._open()
            if fd is not None:
                line = " ".join(str(text).split())
                os.write(fd, ("E torch hook: %s\n" % line).encode("utf-8", "replace"))
        except Exception:
            pass  # nowhere left to report it

    def close(self, pid):
        if self.pid != pid or self.fd is None:
            return  # registered by the parent of this forked process
        try:
            os.write(self.fd, b"O %.9f %d\n" % (self.spent_ns * 1e-9, self.records))
        except OSError:
            pass


def _samples(data, depth=0):
    """The first dimension of the first tensor in `data`, or None."""
    shape = getattr(data, "shape", None)
    if shape is not None and not isinstance(data, type):
        try:
            if len(shape) >= 1:
                return int(shape[0])
        except (TypeError, ValueError):
            pass
    if depth < _MAX_DEPTH:
        if isinstance(data, _Mapping):
            data = data.values()
        elif not isinstance(data, (tuple, list)):
            return None
        for item in data:
            found = _samples(item, depth + 1)
            if found is not None:
                return found
    return None


def _nbytes(data, depth=0):
    """The bytes of a batch: its tensors' and arrays' nbytes, str and bytes lengths."""
    n = getattr(data, "nbytes", None)
    if isinstance(n, int):
        return n
    size = getattr(data, "element_size", None)  # a tensor of a torch without .nbytes
    if callable(size) and callable(getattr(data, "numel", None)):
        return int(size()) * int(data.numel())
    if isinstance(data, (bytes, bytearray, str)):
        return len(data)
    if depth >= _MAX_DEPTH:
        return 0
    if isinstance(data, _Mapping):
        data = data.values()
    elif not isinstance(data, (tuple, list)):
        return 0
    return sum(_nbytes(item, depth + 1) for item in data)


_TICK_NS = None  # nanoseconds per clock tick of /proc/PID/stat


class _WorkerCpu:
    """The CPU of the stock DataLoader worker processes of this process, summed
    over every worker seen (utime + stime, read from /proc/PID/stat at each step),
    in nanoseconds."""

    def __init__(self):
        self.seen = {}  # pid -> ticks at the last read
        self.total_ticks = 0

    def update(self, pids):
        global _TICK_NS
        if _TICK_NS is None:
            _TICK_NS = 10 ** 9 // os.sysconf("SC_CLK_TCK")
        for pid in pids:
            try:
                with open("/proc/%d/stat" % pid, "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                ticks = int(fields[11]) + int(fields[12])  # utime, stime
            except (OSError, IndexError, ValueError):
                continue  # it ended: its last read stays counted
            self.total_ticks += max(0, ticks - self.seen.get(pid, 0))
            self.seen[pid] = ticks
        return self.total_ticks * _TICK_NS


_worker_cpu = _WorkerCpu()


def _loader_line(iterator, data):
    """The "D" line of a batch from stock worker processes, else b""."""
    workers = getattr(iterator, "_workers", None)
    if not workers:
        return b""
    pids = [w.pid for w in workers if isinstance(getattr(w, "pid", None), int) and w.pid > 0]
    if len(pids) != len(workers):  # virtual workers (offloaded): not this host's processes
        return b""
    return b"D %d %d %d\n" % (len(pids), _worker_cpu.update(pids), _nbytes(data))


def _goldminer_package():
    try:
        import goldminer  # noqa: F401
    except ImportError:  # the package beside this hook's directory
        sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))))


def _native_line(loader):
    """The "N" line of a DataLoader the native engine can make (its cost on
    NATIVE_SAMPLES samples spread over the dataset, after one not counted), else
    an "X" line saying why not."""
    _goldminer_package()
    from goldminer import _native
    try:
        native = _native.plan(loader)
    except _native.NotNative as e:
        why = " ".join(("a DataLoader of %s: %s" % (type(loader.dataset).__name__, e)).split())
        return ("X %s\n" % why).encode("utf-8", "replace")
    import torch
    samples = native["samples"]
    n = min(NATIVE_SAMPLES, len(samples))
    if n == 0:
        return b""
    picked = [samples[i * len(samples) // n] for i in range(n)]
    paths = [path for path, _ in picked]
    out = []
    for stages, dtype in ((native["full"], torch.float32), (native["cut"], torch.uint8)):
        ops = _native.Ops(stages)
        ops.batch(paths[:1], [0], 0, native["shape"], dtype)  # first-use costs, not counted
        begin = time.thread_time_ns()
        batch = ops.batch(paths, list(range(n)), 0, native["shape"], dtype)
        out += [time.thread_time_ns() - begin, batch.element_size() * batch.numel()]
    return b"N %d %d %d %d %d\n" % (n, out[0], out[1], out[2], out[3])


def _goldminer_client_open():
    """Whether this process opened a goldminer.Loader client: it logs the steps. (The
    client library alone, loaded for an offloaded DataLoader, logs none.)"""
    loader = sys.modules.get("goldminer.loader")
    return loader is not None and getattr(loader, "_clients_opened", 0) > 0


def _wrap(base, log):
    """Wraps base.__init__ (remembers the creating pid, batch_size) and __next__."""
    global _Mapping
    import collections.abc
    import functools

    _Mapping = collections.abc.Mapping
    init, next_ = base.__init__, base.__next__

    @functools.wraps(init)
    def __init__(self, loader, *args, **kwargs):
        init(self, loader, *args, **kwargs)
        try:
            self._goldminer_pid = os.getpid()
            self._goldminer_batch_size = getattr(loader, "batch_size", None)
        except Exception as e:
            log.error("DataLoader iterator: %s: %s" % (type(e).__name__, e))
        if os.environ.get(_NATIVE_ENV) == "1" and log.directory and \
                not getattr(loader, "_goldminer_priced", False):
            try:
                loader._goldminer_priced = True  # once per DataLoader, not per epoch
                line = _native_line(loader)
                if line:
                    log.line(line)
            except Exception as e:
                log.error("native engine: %s: %s" % (type(e).__name__, e))

    @functools.wraps(next_)
    def __next__(self):
        begin = time.monotonic_ns()
        data = next_(self)  # StopIteration and the loader's errors pass through
        end = time.monotonic_ns()
        try:
            if getattr(self, "_goldminer_pid", None) == os.getpid() and \
                    not _goldminer_client_open():
                samples = _samples(data)
                if samples is None:
                    samples = getattr(self, "_goldminer_batch_size", None) or 1
                log.step(begin, end, samples, end, _loader_line(self, data))
        except Exception as e:
            log.error("step: %s: %s" % (type(e).__name__, e))
        return data

    __next__._goldminer_wrapped = True
    base.__init__, base.__next__ = __init__, __next__


def _patch(module, log):
    if log.directory:
        try:
            base = module._BaseDataLoaderIter
            if not getattr(base.__next__, "_goldminer_wrapped", False):
                _wrap(base, log)
        except Exception as e:
            log.error("cannot wrap %s._BaseDataLoaderIter: %s: %s" % (_TARGET, type(e).__name__, e))
    if os.environ.get(_OFFLOAD_ENV) in _OFFLOAD_MODES:
        try:
            _goldminer_package()
            from goldminer import offload
            offload.install(module)
        except Exception as e:
            log.error("cannot offload DataLoader workers: %s: %s" % (type(e).__name__, e))


class _Finder:
    """A sys.meta_path finder that patches torch's DataLoader once it is imported."""

    goldminer_profile_hook = True  # marks it for another copy of this file

    def __init__(self, log):
        self.log = log

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _TARGET:
            return None
        try:
            return self._find(fullname, path, target)
        except Exception as e:
            self.log.error("import hook: %s: %s" % (type(e).__name__, e))
            return None  # the import goes on without the hook

    def _find(self, fullname, path, target):
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        # The loader instance is this module's own: patching it touches nothing else.
        loader, log = spec.loader, self.log
        real_exec = loader.exec_module

        def exec_module(module):
            real_exec(module)
            _patch(module, log)

        loader.exec_module = exec_module
        return spec


def _install():
    directory = os.environ.get(_DIR_ENV)
    offload = os.environ.get(_OFFLOAD_ENV)
    if offload and offload not in _OFFLOAD_MODES:
        sys.stderr.write("goldminer: warning: $%s=%s is not one of %s: DataLoaders keep their "
                         "stock workers\n" % (_OFFLOAD_ENV, offload, ", ".join(_OFFLOAD_MODES)))
        offload = None
    if not directory and not offload:
        return
    if any(getattr(f, "goldminer_profile_hook", False) for f in sys.meta_path):
        return  # another copy of this hook, chained above, is installed already
    log = _StepLog(directory)
    try:
        loaded = sys.modules.get(_TARGET)
        if loaded is not None:
            _patch(loaded, log)
        else:
            sys.meta_path.insert(0, _Finder(log))
    except Exception as e:
        log.error("cannot install: %s: %s" % (type(e).__name__, e))


_install()
