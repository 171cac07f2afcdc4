"""The torch patch of the DataLoader offload (goldminer.offload): install()
replaces DataLoader._get_iterator, once per process, so that a DataLoader's
iterator gets virtual workers (goldminer._offload_iter.OffloadIter), or runs
stock saying why (once per DataLoader, on stderr and in the run's record); and
an exit hook ends the virtual workers and waits for the offload's threads
before the interpreter's teardown.

The state of this process's offload is one object, OFFLOAD: what install()
replaced, where the virtual workers go (its places: one per transport and
process), and which DataLoaders the run's record was told of.

Importing this module imports neither torch nor cloudpickle: the program
imports torch, and cloudpickle is imported once a DataLoader is shipped (a
program without it runs stock, saying so).
"""

import atexit
import os
import sys
import threading
import time

from goldminer import _cut
from goldminer._channels import WorkersPlace
from goldminer._host_client import HOSTS, LocalPlace
from goldminer._lifetime import EXIT_JOIN_S, LIFETIME
from goldminer._offload_config import (OFFLOAD_ENV, SAID, TRANSPORTS, Once, mode,
                                       num_workers, say)
from goldminer._ship import ARG_NAMES, CannotTravel, ship, worker_args

IN_PROCESS = 2  # a note's `served` for a DataLoader with num_workers=0 (gm_offload_note)


# The torch releases the offload is tested on (Debian 12's and the newest on PyPI:
# python/torch2/requirements.txt); those between are expected to work.
TESTED_TORCH = ((1, 13), (2, 15))


def _torch_version():
    torch = sys.modules.get("torch")
    return str(getattr(torch, "__version__", "unknown"))


def outside_tested(version):
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


def missing_internals(dataloader_module):
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
        # A probe of the torch at hand, which may lack it (then it is named).
        from torch.utils.data._utils import worker
    except ImportError:
        worker = None
    if not callable(getattr(worker, "_worker_loop", None)):
        return "torch.utils.data._utils.worker._worker_loop"
    return None


def _why_not(loader):
    """Why `loader` runs stock (a short phrase), or None when it is served."""
    from torch.utils.data import DataLoader, IterDataPipe, MapDataPipe  # torch: the program's
    cls = type(loader)
    if cls.__iter__ is not DataLoader.__iter__ or \
            getattr(cls._get_iterator, "_goldminer", False) is False:
        return "its class has its own iterator"
    if isinstance(loader.dataset, (IterDataPipe, MapDataPipe)):
        return "DataPipe datasets are not served yet"
    return None


def _ship_workers(loader, native):
    """(None, the worker count served, ship() of its worker arguments), or (why
    it runs stock, None, None). `native`: the plan that travels in the
    dataset's place (native mode), or None."""
    try:
        workers = num_workers(loader)
        args = worker_args(loader, workers)
        if native is not None:  # the plan travels in the dataset's place
            args = (args[0], native, *args[2:])
        return None, workers, ship(args, ARG_NAMES)
    except CannotTravel as e:
        return str(e), None, None
    except ImportError as e:
        return f"{e} (goldminer needs cloudpickle: Debian's python3-cloudpickle)", None, None


class _Places:
    """Where virtual workers go: one place per transport and process (a fork's
    own), made at the first use. Any thread."""

    def __init__(self):
        self._places = {}  # (transport name, pid) -> its place
        self._lock = threading.Lock()

    def get(self, transport):
        with self._lock:
            key = (transport, os.getpid())
            if key not in self._places:
                self._places[key] = WorkersPlace() if transport == "workers" else LocalPlace()
            return self._places[key]

    def all(self):
        with self._lock:
            return list(self._places.values())


class Offload:
    """This process's offload: `installed`, `transport` (TRANSPORTS), torch's
    methods install() replaced, the places, and the DataLoaders whose offload
    was told to the run's record (`noted`)."""

    def __init__(self):
        self.installed = False
        self.transport = "local"
        self.stock_get_iterator = None
        self.stock_check = None  # DataLoader.check_worker_number_rationality, when replaced
        self.places = _Places()
        self.noted = Once()

    def get_iterator(self, loader):
        """What the patched DataLoader._get_iterator returns: torch's iterator with
        virtual workers, or stock's, saying why once."""
        note = getattr(self.places.get(self.transport), "note", None)  # the run's record
        zero = loader.num_workers == 0  # stock makes its batches in the program's process
        if zero and num_workers(loader) == 0:
            # Said in the run's record and its last line, not here: it is stock.
            if note is not None and self.noted.first(id(loader)):
                note(IN_PROCESS, type(loader.dataset).__name__,
                     why="num_workers=0 (goldminer run --dataloader-workers M offloads it)")
            return self.stock_get_iterator(loader)
        why = _why_not(loader)
        served_mode = mode()
        native = _cut.native_plan(loader) if why is None and served_mode == "native" else None
        if native is None and served_mode == "native":
            served_mode = "exact"
        if why is None:
            # Before anything draws from the loader's generator: a DataLoader that
            # falls back gives the batches it would have given without the hook.
            why, workers, shipped = _ship_workers(loader, native)
        if why is None:
            return self._served(loader, note, workers, shipped, served_mode, native)
        self._fall_back(loader, note, zero, why)
        return self.stock_get_iterator(loader)

    def _served(self, loader, note, workers, shipped, served_mode, native):
        """The iterator of a DataLoader whose worker arguments were shipped."""
        # Once a DataLoader is shipped: it needs cloudpickle and torch's internals.
        from goldminer import _offload_iter
        # As stock, when the workers share this host's CPUs (an override, or the
        # data workers, mean other CPUs: the check would count the wrong ones).
        if workers == loader.num_workers and self.transport == "local":
            loader.check_worker_number_rationality()
        if served_mode == "elastic" and _offload_iter.is_iterable(loader):
            served_mode = "exact"
            if SAID.first(("iterable", id(loader))):
                say(f"DataLoader of {type(loader.dataset).__name__} is served in exact mode: "
                    "an IterableDataset's replicas keep their place, so its tasks cannot move "
                    "between workers as elastic mode needs")
        if note is not None and self.noted.first(id(loader)):
            note(True, type(loader.dataset).__name__, workers, _offload_iter.blob_bytes(shipped),
                 mode=served_mode)
        cut = _cut.cut_plan(loader) if native is None else _cut.native_cut(native)
        return _offload_iter.OffloadIter(loader, shipped, workers, self.places.get(self.transport),
                                         served_mode == "elastic", cut, native is not None)

    def _fall_back(self, loader, note, zero, why):
        """Says once why `loader` runs stock, here and in the run's record."""
        if not SAID.first(id(loader)):
            return
        where = "in the program's process (num_workers=0)" if zero else "on stock local workers"
        say(f"DataLoader of {type(loader.dataset).__name__} runs {where}: {why}")
        if note is not None:
            note(IN_PROCESS if zero else False, type(loader.dataset).__name__, why=why)
        if self.stock_check is not None:
            self.stock_check(loader)

    def install(self, dataloader_module=None, transport=None):
        """Patches `dataloader_module`'s DataLoader (torch's when None), once, for
        virtual workers placed by `transport` (None: $GOLDMINER_OFFLOAD, else
        "local"); a torch that lacks what the offload drives is left stock,
        saying so."""
        if self.installed:
            return
        transport = transport or os.environ.get(OFFLOAD_ENV) or "local"
        if transport not in TRANSPORTS:
            raise ValueError(f"offload transport {transport!r} is not one of "
                             f"{', '.join(TRANSPORTS)}")
        self.transport = transport
        if dataloader_module is None:
            from torch.utils.data import dataloader as dataloader_module  # torch: the program's
        missing = missing_internals(dataloader_module)
        if missing:
            say(f"torch {_torch_version()} has no {missing}, which the offload drives: its "
                f"DataLoaders run on stock local workers")
            return
        outside = outside_tested(_torch_version())
        if outside:
            say(outside)
        loader_cls = dataloader_module.DataLoader
        self.stock_get_iterator = loader_cls._get_iterator
        loader_cls._get_iterator = _get_iterator
        if transport == "workers":
            # torch warns, at DataLoader() and at each iterator, when num_workers
            # exceeds this host's CPUs: served workers run on the data workers' CPUs.
            # A DataLoader left stock is checked when it falls back.
            self.stock_check = loader_cls.check_worker_number_rationality
            loader_cls.check_worker_number_rationality = lambda self: None
        self.installed = True
        atexit.register(self.at_exit)
        if transport == "local":
            # The host imports torch while the program builds its model: warm by the
            # first iterator.
            try:
                HOSTS.get()
            except OSError as e:
                say(f"cannot start the virtual worker host yet: {e}")

    def uninstall(self):
        """Undoes install() (tests)."""
        if not self.installed:
            return
        from torch.utils.data import DataLoader  # torch: the program's
        DataLoader._get_iterator = self.stock_get_iterator
        if self.stock_check is not None:
            DataLoader.check_worker_number_rationality = self.stock_check
            self.stock_check = None
        self.installed = False

    def at_exit(self):
        """Before the interpreter's teardown: end the host (its workers with it) and
        wait for our threads, so none is running when daemon threads are stopped."""
        LIFETIME.exiting = True
        hosts = HOSTS.all()
        threads = LIFETIME.threads()
        places = [p for p in self.places.all() if isinstance(p, WorkersPlace)]
        for h in hosts:
            h.close()
        for p in places:  # after a KeyboardInterrupt torch's iterator did not end them
            p.end_channels()
        until = time.monotonic() + EXIT_JOIN_S
        for t in threads:
            t.join(max(0.0, until - time.monotonic()))
        if any(t.is_alive() for t in threads):
            return  # a reader still in a channel's call: its session stays (the exit frees it)
        for p in places:
            p.close()


OFFLOAD = Offload()  # the one of this process


def _get_iterator(self):
    """DataLoader._get_iterator once install() ran (self: the DataLoader)."""
    return OFFLOAD.get_iterator(self)


_get_iterator._goldminer = True  # _why_not: a class that keeps this iterator is served
