"""One of an exact-mode DataLoader iterator's workers, as torch's iterator sees
it: a process that a place starts (goldminer._host_client.LocalPlace on the
trainer's host, goldminer._channels.WorkersPlace on a data worker), fed TASK
frames and read by a thread of its own, replaced when it is lost
(goldminer.offload: exactly once, bit for bit).
"""

import collections
import threading

from goldminer import _vwire
from goldminer._channels import job_frame
from goldminer._lifetime import LIFETIME
from goldminer._offload_config import say
from goldminer._queues import Failed, Failure, read_channel


class VirtualWorker:
    """One of a DataLoader iterator's workers, as a process that `place` starts
    (LocalPlace: on the trainer's host; WorkersPlace: on a data worker).

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
        self.chan = None  # the process's channel (LocalChan, RemoteChan)
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
        LIFETIME.start_thread(self._read, f"goldminer vworker {self.worker_id}")

    def _open_first(self):
        try:
            self._spawn(self.job)
        finally:
            self._release_held()

    def _release_held(self):
        """Writes the tasks held while the JOB or a BLOB was written, in order, and
        lets torch's sends write again."""
        with self.lock:
            held, self.held = self.held, None
            if self.chan is not None:
                for item in held:
                    self._write(_vwire.TASK, item)

    def _spawn(self, job):
        self.chan = self.place.open(self.worker_id, self.modules, self.restarts)
        self.reader, self.writer = self.chan.reader, self.chan.writer
        self._write(_vwire.JOB, job_frame(self.chan, job))

    def _send_blob(self):
        """NEED (on the reader's thread): the worker's host does not have the blob
        (the first worker there, or its host restarted): sent now, outside the
        lock, so that torch's sends do not wait for it (they are held back and
        written after it, in order)."""
        with self.lock:
            self.held = []
        self._write(_vwire.BLOB, _vwire.blob_fields(self.job["blob"]))
        self._release_held()

    def _write(self, kind, obj):
        try:
            _vwire.write(self.writer, kind, obj)
        except (BrokenPipeError, ConnectionError, ValueError, OSError):
            pass  # it ended: its reader says how, or replaces it

    def send(self, item):
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
            self.results.put((None, Failed(self.worker_id, f"it cannot start: {e}")))
            return
        try:
            self._serve()
        except Exception as e:  # never leave the trainer waiting on a dead reader
            self.failed = True
            self.results.put((None, Failed(self.worker_id, f"its reader failed: "
                                                           f"{type(e).__name__}: {e}")))

    def _serve(self):
        while True:
            why = self._read_one()
            with self.lock:
                # At the program's end (the exit hook ended the hosts) a worker that
                # ends is no loss: nothing is made again and nothing is said.
                if why is None or self.stopping or LIFETIME.exiting:
                    return
                if self.restarts < self.MAX_RESTARTS:
                    self.restarts += 1
                    job = dict(self.job)
                    if self.iterable:
                        job["replay"] = list(self.answered)
                    else:
                        job["restore"] = self.state
                    say(f"virtual DataLoader worker {self.worker_id}{self.chan.where} {why}; "
                        f"a new one goes on "
                        f"from its last result ({len(self.pending)} tasks made again, "
                        f"restart {self.restarts} of {self.MAX_RESTARTS})")
                    self._spawn(job)
                    for item in self.pending:
                        self._write(_vwire.TASK, item)
                    continue
                self.failed = True
            self.results.put((None, Failed(self.worker_id, f"{why} (restarted "
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
            self.results.put((None, Failed(self.worker_id, why.text)))
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
