"""torch's multi-process DataLoader iterator with virtual workers (OffloadIter),
for goldminer.offload: torch's own main-process half (sampler, order,
prefetching, pin_memory, shutdown), given a multiprocessing context (_Context)
whose queues and processes are virtual workers (goldminer._virtual_worker), or,
in elastic mode, one goldminer._elastic.Dispatcher behind all of them.

Imported by goldminer._patch once a DataLoader is shipped: it needs torch's
DataLoader internals and cloudpickle (through goldminer._vwire), which a program
whose DataLoaders all run stock may lack.
"""

import os
import sys
import threading

from torch.utils.data import _DatasetKind
from torch.utils.data import dataloader as dl

from goldminer import _cut, _elastic, _safepickle, _vwire, _vworker
from goldminer._offload_config import say
from goldminer._queues import Failed, IndexQueue, ResultQueue
from goldminer._virtual_worker import VirtualWorker


def shipped_environ():
    """The program's environment for its virtual workers, less the run's keys."""
    return {k: v for k, v in os.environ.items() if k not in _vwire.KEY_VARIABLES}


class _Context:
    """What torch's iterator asks its multiprocessing context for: queues, an
    event, and processes (virtual workers). torch asks for the result queue
    first, then one index queue per worker. `shipped`: ship() of the loader's
    worker arguments, made before the iterator draws its base seed. In elastic
    mode every index queue and process stands for one _elastic.Dispatcher, made
    at the first process. `place`: where the virtual workers go."""

    def __init__(self, shipped, place, elastic, cut=None, native=False):
        self.shipped = shipped
        self.place = place
        self.elastic = elastic
        self.cut = cut  # _cut.cut_plan's, or None
        self.native = native  # the shipped dataset is a goldminer._native plan
        self.result_queue = None
        self.dispatcher = None

    def Queue(self):
        if self.result_queue is None:
            self.result_queue = ResultQueue()
            return self.result_queue
        if self.elastic:
            return _elastic.SlotQueue(self)
        return IndexQueue()

    def Event(self):
        return threading.Event()

    def Process(self, target, args):
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
               "environ": shipped_environ(),
               "native": self.native}
        if self.elastic:
            if self.dispatcher is None:
                self.dispatcher = _elastic.Dispatcher(
                    job, modules, result_queue, self.place, num_workers,
                    say, lambda why: (None, Failed(None, why)))
            return _elastic.Slot(self.dispatcher)
        job["recycle"] = True  # its results' memfds come back (VirtualWorker.released)
        return VirtualWorker(job, modules, index_queue, result_queue, worker_id,
                             kind == _DatasetKind.Iterable, self.place)


class _LoaderView:
    """The user's DataLoader as torch's iterator reads it, with our context and
    the worker count served (_offload_config.num_workers)."""

    def __init__(self, loader, context, num_workers):
        object.__setattr__(self, "_loader", loader)
        object.__setattr__(self, "multiprocessing_context", context)
        object.__setattr__(self, "num_workers", num_workers)
        if getattr(loader, "prefetch_factor", None) is None:  # num_workers=0 in torch 2.x
            object.__setattr__(self, "prefetch_factor", 2)  # stock's default with workers

    def __getattr__(self, name):
        return getattr(self._loader, name)


class OffloadIter(dl._MultiProcessingDataLoaderIter):
    """torch's multi-process iterator with virtual workers."""

    def __init__(self, loader, shipped, num_workers, place, elastic, cut=None, native=False):
        # Before torch's __init__, which calls _reset.
        self._gm_context = _Context(shipped, place, elastic, cut, native)
        self.goldminer_cut = cut  # where the batches are cut (_cut.cut_plan), or None
        self._gm_prefetch = None
        super().__init__(_LoaderView(loader, self._gm_context, num_workers))
        self.goldminer_digest = shipped[1]
        self.goldminer_blob_bytes = _vwire.blob_size(shipped[0])

    def _reset(self, loader, first_iter=False):
        dispatcher = self._gm_context.dispatcher
        if dispatcher is not None:  # elastic: this epoch's tasks get its seeds
            dispatcher.epoch = next_epoch(getattr(loader, "_loader", loader))
        super()._reset(loader, first_iter)

    def _process_data(self, data, *worker_idx):
        # Newer torch also passes the worker's index (for its count of tasks in flight).
        dispatcher = self._gm_context.dispatcher
        if dispatcher is not None:
            self._widen(dispatcher.capacity())
        data = super()._process_data(data, *worker_idx)
        cut = self._gm_context.cut
        # Looked up at each batch: a test or benchmark may wrap _cut.finish_cut.
        return data if cut is None else _cut.finish_cut(data, cut, self._pin_memory)

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
                isinstance(data[1], Failed):
            failed = data[1]
            if failed.worker_id is None:  # elastic: the phrase names the worker
                raise RuntimeError(f"goldminer: {failed.why}")
            raise RuntimeError(f"goldminer: virtual DataLoader worker {failed.worker_id} "
                               f"cannot go on: {failed.why}")
        return ok, data


def next_epoch(loader):
    """How many epochs `loader` began before this one (its iterators' resets)."""
    epoch = loader.__dict__.get("_goldminer_epoch", 0)
    loader.__dict__["_goldminer_epoch"] = epoch + 1  # past DataLoader.__setattr__
    return epoch


def blob_bytes(shipped):
    """The size of ship()'s blob, in bytes (what the run's record notes)."""
    return _vwire.blob_size(shipped[0])


def is_iterable(loader):
    """Whether `loader`'s dataset is an IterableDataset (torch's dataset kind)."""
    return loader._dataset_kind == _DatasetKind.Iterable
