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

The cut (goldminer._cut, GOLDMINER_OFFLOAD_CUT, `goldminer run --offload-cut`):
an ImageFolder whose transform ends in ToTensor (and Normalize) is sent as uint8
from virtual workers whose batches cross TCP, and widened by the trainer as it
receives each batch (finish_cut), with the same operations: a quarter of the
bytes, the same batches.

Premise (as for stock workers, and for the recovery): __getitem__ keeps no state
between calls that its result depends on, beyond the global generators torch
seeds per worker (a generator of the dataset's own is not restored); an
IterableDataset's replica yields the same items from the same seeds.

This module is the offload's public face; the work is done by private modules:
  - goldminer._offload_config: the variables read, and what is said once;
  - goldminer._ship: the worker arguments pickled (ship, CannotTravel);
  - goldminer._patch: install(), the patched _get_iterator, the exit hook;
  - goldminer._offload_iter: torch's iterator with virtual workers;
  - goldminer._queues: torch's queues' look-alikes, a worker's frames read;
  - goldminer._virtual_worker: one exact-mode worker, replaced when lost;
  - goldminer._elastic: elastic mode's dispatcher;
  - goldminer._host_client, goldminer._channels: the places ("local", "workers");
  - goldminer._cut: the cut; goldminer._lifetime: our threads, the program's end.
"""

import importlib

from goldminer._channels import job_frame
from goldminer._cut import CUT_ENV, CUT_MODES
from goldminer._offload_config import (MAX_DATALOADER_WORKERS, MODE_ENV, MODES, OFFLOAD_ENV,
                                       TRANSPORTS, WORKERS_ENV)
from goldminer._patch import IN_PROCESS, OFFLOAD, TESTED_TORCH
from goldminer._ship import MAX_BLOB_BYTES, CannotTravel, ship

__all__ = ["CUT_ENV", "CUT_MODES", "IN_PROCESS", "MAX_BLOB_BYTES", "MAX_DATALOADER_WORKERS",
           "MODES", "MODE_ENV", "OFFLOAD_ENV", "TESTED_TORCH", "TRANSPORTS", "WORKERS_ENV",
           "CannotTravel", "install", "job_frame", "ship", "uninstall"]

# Named here too, imported when first asked for (module __getattr__): they need
# cloudpickle (through goldminer._vwire), which a program whose DataLoaders all
# run stock may lack, and this module is imported by every offloaded program.
_LATER = {"VirtualWorker": "goldminer._virtual_worker", "Failure": "goldminer._queues",
          "read_channel": "goldminer._queues"}


def __getattr__(name):
    if name not in _LATER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LATER[name]), name)


def install(dataloader_module=None, transport=None):
    """Patches torch's DataLoader (once) so that its multi-process iterators use
    virtual workers placed by `transport` (TRANSPORTS; None: $GOLDMINER_OFFLOAD,
    else "local"). Called by goldminer's sitecustomize hook when $GOLDMINER_OFFLOAD
    is set, once torch.utils.data.dataloader is imported."""
    OFFLOAD.install(dataloader_module, transport)


def uninstall():
    """Undoes install() (tests)."""
    OFFLOAD.uninstall()
