"""The trainer's side of a `goldminer run`: batches from the data workers.

    from goldminer import Loader
    loader = Loader(epochs=3)          # GOLDMINER_ADDR, RANK, WORLD_SIZE from `run`
    for batch in loader:               # every batch of epochs 0, 1, 2 for this rank
        batch["image"], batch["label"], batch["key"]

A batch is a dict: "image" (numpy array [n, ...], a zero-copy view of the batch the
client library received), "label" (int64 numpy array [n]; -1: none) and "key" (list
of n sample keys), plus "epoch" (int) and "layout" ("HWC", "CHW" or "none": of each
sample in "image"). When the pipeline leaves stages to the trainer ("on": "device"),
the Loader applies them with numpy (a new array; see goldminer._tail) unless made
with tail=False; goldminer.torch.DeviceLoader applies them on the GPU instead. The arrays share one buffer that is freed when the last array
viewing it is garbage (so keep or copy what must outlive the batch; writing into
them is allowed and changes nothing elsewhere).

The Loader wraps libgoldminer_client.so (include/goldminer/client.h) with ctypes
(goldminer._client_lib), found at $GOLDMINER_CLIENT_LIB, else beside the installed
package, else in a build tree of the source checkout. A Loader is for one thread;
make one per process (it connects on first use, so one made before a fork
connects in the child).
"""

import ctypes
import json
import weakref

import numpy as np

from goldminer._client_lib import (UNAVAILABLE, ClientError, ResumeState, Stats, check,
                                   find_library, library, library_path)
from goldminer._tail import Tail

# UNAVAILABLE and find_library: this module's names before the binding had a
# module of its own (goldminer._client_lib), kept for whoever imports them here.
__all__ = ["Loader", "ClientError", "library_path", "UNAVAILABLE", "find_library"]

_DTYPES = ["|u1", "<i4", "<i8", "<f4"]  # by gm_dtype code
_LAYOUTS = ["none", "HWC", "CHW"]  # by gm_layout code
_STATE_KEYS = ("epoch", "position", "split_index", "split_batch", "order", "seed",
               "world_size", "rank")


def _checked_state(state):
    """The state as a dict of the fields above, or ValueError naming what is wrong."""
    if not isinstance(state, dict):
        raise ValueError(f"a Loader state is a dict from state_dict(), not {type(state).__name__}")
    keys = ("epoch", "position") if "split_index" not in state else _STATE_KEYS
    missing = [k for k in keys if k not in state]
    if missing:
        raise ValueError(f"Loader state lacks {', '.join(missing)}: use a dict from state_dict()")
    out = {}
    for k in keys:
        v = state[k]
        if k == "order":
            if not isinstance(v, str) or len(v) > 64 or not all(c in "0123456789abcdef" for c in v):
                raise ValueError(f"Loader state: order must be up to 64 hex digits, not {v!r}")
        elif isinstance(v, bool) or not isinstance(v, int) or v < (-1 if k in ("seed", "world_size", "rank") else 0):
            raise ValueError(f"Loader state: {k} must be a non-negative integer, not {v!r}")
        out[k] = v
    return out


# goldminer.Loader clients opened in this process: each records its own steps, so
# the profile hook then records no DataLoader's (the library alone, loaded for a
# DataLoader's offload, is not a client).
_clients_opened = 0


class _View:
    """Exposes a span of a batch's memory to numpy; keeps the batch alive."""

    def __init__(self, owner, address, shape, typestr):
        self.owner = owner
        self.__array_interface__ = {"version": 3, "shape": tuple(shape), "typestr": typestr,
                                    "data": (address, False)}


class _BatchOwner:
    """Owns one gm_batch; frees it when no array views it any more."""

    def __init__(self, lib, handle):
        self.handle = handle
        self._free = weakref.finalize(self, lib.gm_batch_free, handle)


def _to_dict(lib, handle):
    owner = _BatchOwner(lib, handle)
    n = lib.gm_batch_size(handle)
    ndim = lib.gm_batch_ndim(handle)
    shape = [lib.gm_batch_shape(handle)[i] for i in range(ndim)]
    typestr = _DTYPES[lib.gm_batch_dtype(handle)]
    if n == 0 or lib.gm_batch_data_bytes(handle) == 0:
        image = np.zeros(shape, dtype=typestr)
        labels = np.zeros([n], dtype="<i8")
    else:
        image = np.asarray(_View(owner, lib.gm_batch_data(handle), shape, typestr))
        labels = np.asarray(_View(owner, lib.gm_batch_labels(handle), [n], "<i8"))
    keys = [lib.gm_batch_key(handle, i).decode("utf-8", "surrogateescape") for i in range(n)]
    layout = lib.gm_batch_layout(handle)
    return {"image": image, "label": labels, "key": keys, "epoch": lib.gm_batch_epoch(handle),
            "layout": _LAYOUTS[layout] if 0 <= layout < len(_LAYOUTS) else "none"}


class Loader:
    """Iterates over this rank's batches of epochs [start, epochs).

    coordinator: "HOST:PORT" (None: $GOLDMINER_ADDR); rank, world_size: None reads
    $RANK/$WORLD_SIZE, else $SLURM_PROCID/$SLURM_NTASKS, else 0 and 1.
    Errors (unreachable coordinator, wrong secret, a run that went away) raise
    ClientError with the library's message.
    """

    def __init__(self, epochs=1, coordinator=None, rank=None, world_size=None, tail=True):
        self.epochs = int(epochs)
        self._apply_tail = bool(tail)
        self._tail = None
        self._device_stages = None  # SUBSCRIBED's device_stages, read once at connect
        self._coordinator = coordinator
        self._rank = -1 if rank is None else int(rank)
        self._world_size = -1 if world_size is None else int(world_size)
        self._lib = None
        self._client = None
        self._close = None
        self._resume = None  # a state (dict) to continue from on the next iteration

    def _open(self):
        if self._client is None:
            lib = library()
            handle = ctypes.c_void_p()
            address = None if self._coordinator is None else self._coordinator.encode()
            check(lib, lib.gm_client_open(address, self._rank, self._world_size, ctypes.byref(handle)))
            global _clients_opened
            _clients_opened += 1
            self._lib, self._client = lib, handle
            self._close = weakref.finalize(self, lib.gm_client_close, handle)
            self._device_stages = json.loads(lib.gm_client_device_stages(handle).decode())
            self._tail = Tail(self._device_stages)
        return self._lib, self._client

    @property
    def device_stages(self):
        """The pipeline's stages "on": "device" (list of stage dicts; [] for none)."""
        self._open()
        return [dict(stage) for stage in self._device_stages]

    @property
    def tail(self):
        """The device stages as a goldminer._tail.Tail (connects on first use)."""
        self._open()
        return self._tail

    def __iter__(self):
        lib, client = self._open()
        resume, self._resume = self._resume, None
        start = resume["epoch"] if resume is not None else 0
        for epoch in range(start, self.epochs):
            if epoch == start and resume is not None and "split_index" in resume:
                state = ResumeState(**{k: (v.encode() if k == "order" else v)
                                       for k, v in resume.items()})
                check(lib, lib.gm_client_resume_from(client, ctypes.byref(state)))
            elif epoch == start and resume is not None and resume["position"] > 0:
                check(lib, lib.gm_client_resume(client, epoch, resume["position"]))
            else:
                check(lib, lib.gm_client_start_epoch(client, epoch))
            while True:
                batch = ctypes.c_void_p()
                check(lib, lib.gm_client_next(client, ctypes.byref(batch)))
                if not batch.value:
                    break
                out = _to_dict(lib, batch)
                if self._apply_tail and not self._tail.empty:
                    out["image"] = self._tail.numpy(out["image"], out["layout"])
                    out["layout"] = self._tail.layout_after(out["layout"])
                yield out

    def stats(self):
        """{data_wait_s, batches, samples, bytes, duplicates_dropped,
        workers_connected, connections_lost, same_host_connections,
        same_host_batches} of this process's client. The last two count the
        same-host path: worker connections on it now, and batches whose data came
        in shared memory (received, not copied)."""
        lib, client = self._open()
        out = Stats()
        check(lib, lib.gm_client_stats_get(client, ctypes.byref(out)))
        stats = {name: getattr(out, name) for name, _ in Stats._fields_}
        conns, batches = ctypes.c_uint64(), ctypes.c_uint64()
        check(lib, lib.gm_client_same_host_stats(client, ctypes.byref(conns), ctypes.byref(batches)))
        stats["same_host_connections"], stats["same_host_batches"] = conns.value, batches.value
        return stats

    def state_dict(self):
        """Where this rank stands, for a checkpoint: {"epoch", "position",
        "split_index", "split_batch", "order", "seed", "world_size", "rank"}.

        "position" is the number of batches of "epoch" consumed; "split_index" and
        "split_batch" say where that lies in the rank's sequence, so that a NEW
        `goldminer run` (a requeued job, another worker count) continues with exactly
        the batches an uninterrupted run would have delivered next. "order" and
        "seed" name the pipeline (its document and split size) and seed the state
        belongs to: a run of another pipeline refuses it, saying why. Plain ints and
        a str, so it can be saved with torch.save or json."""
        if self._resume is not None:
            return dict(self._resume)
        lib, client = self._open()
        out = ResumeState()
        check(lib, lib.gm_client_resume_state_get(client, ctypes.byref(out)))
        state = {k: getattr(out, k) for k in _STATE_KEYS}
        state["order"] = out.order.decode()
        return state

    def load_state_dict(self, state):
        """Makes the next iteration continue from `state` (a dict from state_dict(),
        possibly saved by an earlier run). A dict of only {"epoch", "position"}
        resumes within the run that saved it. ValueError for a dict that is not a
        state; the library refuses, with its reason, a state of another pipeline,
        seed, world size or rank."""
        self._resume = _checked_state(state)

    def close(self):
        """Closes the connections now; arrays already handed out stay valid."""
        if self._close is not None:
            self._close()
        self._client = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
