"""Virtual workers on the data workers of a `goldminer run`
(GOLDMINER_OFFLOAD=workers, goldminer.offload): WorkersPlace, the trainer
process's offload session at the coordinator, places each virtual worker on a
data worker and opens its channel (RemoteChan, one gm_vchannel of the client
library); job_frame() is the JOB frame that starts a worker on any channel.

A channel is read by one thread (its worker's reader) and written under its
worker's lock; kill() may come from any thread.
"""

import collections
import ctypes
import io
import json
import os
import sys
import threading
import time
import weakref

from goldminer import _client_lib
from goldminer._lifetime import LIFETIME


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
            import numpy  # optional here: without it the view goes in copied slices
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


class RemoteChan:
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


class WorkersPlace:
    """Virtual workers on the data workers of the run (GOLDMINER_OFFLOAD=workers):
    one offload session per trainer process, opened at the first use."""

    # How long a placement tries other data workers when the one named refuses
    # the connection (it was killed; the coordinator drops it when it hears).
    REPLACE_S = 10.0

    def __init__(self):
        self.lock = threading.Lock()
        self.lib = None
        self.handle = None
        self.chans = weakref.WeakSet()  # the channels open, for the program's end
        self.ending = False  # end_channels ran: a channel opened since is ended at once

    def _session(self):
        with self.lock:
            if self.handle is None:
                lib = _client_lib.library()
                handle = ctypes.c_void_p()
                _client_lib.check(lib, lib.gm_offload_open(None, -1, ctypes.byref(handle)))
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
        lib, offload = self._session()
        text = ctypes.c_char_p()
        _client_lib.check(lib, lib.gm_offload_workers(offload, ctypes.byref(text)))
        return json.loads(text.value.decode())

    def open(self, worker_id, modules, attempt):
        """A virtual worker on the data worker the coordinator names: the one that
        hosts the fewest (every rank's and DataLoader's counted, as the workers
        report them plus those it placed since), so that ranks, DataLoaders and
        replacements spread over the data workers by their load."""
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
            except _client_lib.ClientError as e:
                # A data worker killed a moment ago is listed until the coordinator
                # hears its connection close: place again, elsewhere, for a while;
                # not at the program's end (Ctrl-C ended the data workers too, and
                # the exit hook waits for this thread).
                if e.code != _client_lib.UNAVAILABLE or LIFETIME.exiting or \
                        time.monotonic() > deadline:
                    raise
                refused.add(worker)
                time.sleep(0.05)

    def open_on(self, worker, modules):
        lib, offload = self._session()
        handle = ctypes.c_void_p()
        _client_lib.check(lib, lib.gm_vchannel_open(offload, worker.encode(),
                                                    sys.executable.encode(),
                                                    json.dumps(modules).encode(),
                                                    ctypes.byref(handle)))
        chan = RemoteChan(lib, handle, worker)
        with self.lock:
            self.chans.add(chan)
            late = self.ending
        if late:  # opened while the program ended (Ctrl-C during a placement): its
            chan.kill()  # reader, waiting on it, would keep the exit hook waiting
        return chan

    def end_channels(self):
        """At the program's end: each virtual worker still open is ended (its
        reader then hears the end and returns), as the host's end ends local ones."""
        with self.lock:
            self.ending = True
            chans = list(self.chans)
        for chan in chans:
            chan.kill()
