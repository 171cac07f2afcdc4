"""The elastic mode of an offloaded DataLoader (goldminer.offload,
$GOLDMINER_OFFLOAD_MODE=elastic, `goldminer run --offload elastic`).

In exact mode a DataLoader's N workers are N virtual workers, task t on worker
t mod N, each drawing from generators seeded once per worker: the batches of
stock PyTorch, but tied to N. In elastic mode every task is seeded on its own,
from (the iterator's base seed, the DataLoader's epoch, the task index): Python's
`random`, torch's and numpy's global generators are set from that seed just
before the task's samples are fetched (goldminer._vworker). So a task's batch does
not depend on which process makes it, nor on how many there are, and the
processes can come and go while an epoch runs:

  - torch's iterator still sees N workers (the script's num_workers, or
    $GOLDMINER_DATALOADER_WORKERS): its N index queues all feed one Dispatcher,
    which hands each task to whichever process has room (DEPTH tasks each),
    lowest task index first; results go back to torch's result queue, which
    puts them in task order as stock does;
  - the processes: K per place the transport lists (the run's live data workers;
    the trainer's host under "local"), K = ceil(M / W) with M the worker count
    above and W the places listed when the iterator started. The list is read
    again every REFRESH_S: a data worker the autoscaler adds gets K processes, a
    drained or lost one's are gone, and the window of tasks in flight grows so
    that every process has DEPTH;
  - a process that is lost (killed, its data worker gone) gives its unanswered
    tasks back; they are made again elsewhere, with the same seeds, so the
    batches do not change. A task whose process was lost MAX_TRIES times is an
    error naming it.

What differs from stock (goldminer-run(1), OFFLOADED DATALOADERS): the batches
are the same whatever the worker count and placement, but not those of stock
PyTorch; get_worker_info().id is the process's number modulo N (a process serves
tasks of every one of torch's N queues), worker_init_fn runs once per process and
what it seeds is replaced by each task's seed. An IterableDataset is served in
exact mode (its replicas shard by worker id and keep their place: a task cannot
move).

Thread-safety: the Dispatcher's state is under its condition variable; torch's
thread puts tasks, one reader thread per process takes results, one thread
refreshes the places.
"""

import hashlib
import heapq
import math
import struct
import threading
import time

from goldminer import _vwire
from goldminer._channels import job_frame
from goldminer._lifetime import LIFETIME
from goldminer._queues import Failure, read_channel

DEPTH = 2  # tasks a process holds at once (torch's default prefetch_factor)
MAX_TRIES = 3  # a task whose process was lost this many times fails the iterator
REFRESH_S = 1.0  # how often the places are listed again
NO_PLACE_S = 60.0  # tasks waiting and no process to run them this long: an error


def task_seed(base_seed, epoch, index):
    """The seed of task `index` of `epoch` under `base_seed`: 63 bits of the
    SHA-256 of the three as signed 64-bit integers."""
    digest = hashlib.sha256(struct.pack("<qqq", base_seed, epoch, index)).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class _Proc:
    """One process of the dispatcher: its channel and the tasks it holds."""

    def __init__(self, serial, place_name, chan):
        self.serial, self.place_name, self.chan = serial, place_name, chan
        self.pending = []  # (index, indices, seed) sent and not answered, in order
        self.held = None  # tasks (and None) sent while its BLOB is written, written after


class Dispatcher:
    """The processes behind one elastic iterator. `job`: the JOB without
    worker_id; `results`: torch's result queue; `place`: where processes go
    (live(), open_on()); `num_workers`: N, torch's count and the processes
    wanted at the start (M above); `say`: one line to the user; `failed`: makes
    the item that fails the iterator, from a phrase. A process is in `procs`
    from its start until its reader saw it end."""

    def __init__(self, job, modules, results, place, num_workers, say, failed):
        self.job, self.modules, self.results, self.place = job, modules, results, place
        self.num_workers, self.say, self.failed = num_workers, say, failed
        self.base_seed = job["base_seed"]
        self.epoch = 0  # set by the iterator at each reset, before its tasks
        self.per_place = None  # K, from the first listing
        self.cv = threading.Condition()
        self.queue = []  # heap of (index, indices, seed) not sent yet
        self.procs = {}  # serial -> _Proc
        self.serial = 0
        self.tries = {}  # task index -> processes lost while holding it
        self.started = False
        self.stopping = False
        self.dead = False  # failed: the iterator raises
        self.wake = False  # a process was lost: list the places again now
        self.unplaced_since = None  # when tasks waited with no process last began
        self.said = set()  # places whose failure to open was said

    # ---- what torch's iterator calls (through _Slot and _SlotQueue) ----

    def start(self):
        with self.cv:
            if self.started:
                return
            self.started = True
        self.refresh()
        LIFETIME.start_thread(self._refresh_loop, "goldminer elastic")

    def submit(self, item):
        """What torch puts in any of its index queues."""
        from torch.utils.data._utils.worker import _ResumeIteration  # torch: the program's
        with self.cv:
            if item is None:
                self._stop()
            elif isinstance(item, _ResumeIteration):
                # No process keeps state between epochs: acknowledged here, as
                # torch's worker loop would.
                self.results.put((item, None))
            else:
                index, indices = item
                seed = task_seed(self.base_seed, self.epoch, index)
                heapq.heappush(self.queue, (index, indices, seed))
                self._pump()

    def capacity(self):
        """Tasks the processes can hold at once."""
        with self.cv:
            return DEPTH * len(self.procs)

    def alive(self):
        with self.cv:
            return not self.dead and (not self.stopping or bool(self.procs))

    def join(self, timeout):
        with self.cv:
            self.cv.wait_for(lambda: not self.procs, timeout)

    def terminate(self):
        with self.cv:
            self._stop()
            procs = list(self.procs.values())
        for p in procs:
            p.chan.kill()

    # ---- inside ----

    def _stop(self):
        if self.stopping:
            return
        self.stopping = True
        self.queue.clear()
        for p in self.procs.values():
            self._send(p, None)
        self.cv.notify_all()

    def _send(self, proc, task):
        if proc.held is not None:  # its BLOB is being written (need, in _read)
            proc.held.append(task)
            return
        try:
            _vwire.write(proc.chan.writer, _vwire.TASK, task)
        except (BrokenPipeError, ConnectionError, ValueError, OSError):
            pass  # it ended: its reader gives its tasks back

    def _pump(self):
        """Hands waiting tasks to the processes with room, the emptiest first
        (under cv)."""
        if self.stopping:
            return
        while self.queue and self.procs:
            proc = min(self.procs.values(), key=lambda p: len(p.pending))
            if len(proc.pending) >= DEPTH:
                return
            task = heapq.heappop(self.queue)
            proc.pending.append(task)
            self._send(proc, task)

    def _fail(self, why):
        if not self.dead:
            self.dead = True
            self.results.put(self.failed(why))
        self._stop()

    def _read(self, proc):
        def take(key, state, raw):
            with self.cv:
                proc.pending = [t for t in proc.pending if t[0] != key]
                self.results.put(raw)
                self._pump()

        def need():  # its host lacks the blob: sent now, outside cv (tasks held meanwhile)
            with self.cv:
                proc.held = []
            try:
                _vwire.write(proc.chan.writer, _vwire.BLOB, _vwire.blob_fields(self.job["blob"]))
            except (BrokenPipeError, ConnectionError, ValueError, OSError):
                pass  # it ended: its reader gives its tasks back
            with self.cv:
                held, proc.held = proc.held, None
                for task in held:
                    self._send(proc, task)

        try:
            why = read_channel(proc.chan, take, need)
        except Exception as e:  # never leave the trainer waiting on a dead reader
            why = Failure(f"its reader failed: {type(e).__name__}: {e}")
        with self.cv:  # no send is under way on what is closed
            proc.chan.close()
            del self.procs[proc.serial]
            self.cv.notify_all()
            if isinstance(why, Failure):
                self._fail(f"virtual DataLoader worker {proc.serial}: {why.text}")
                return
            if self.stopping or LIFETIME.exiting:
                return
            self.wake = True
            self._lost(proc, why or f"ended holding {len(proc.pending)} task(s)")

    def _lost(self, proc, why):
        """Gives back the tasks of a process that ended while needed (under cv)."""
        for task in proc.pending:
            tries = self.tries[task[0]] = self.tries.get(task[0], 0) + 1
            if tries >= MAX_TRIES:
                self._fail(f"task {task[0]} lost its virtual DataLoader worker {tries} "
                           f"times, the last {proc.serial}{proc.chan.where}, which {why}")
                return
            heapq.heappush(self.queue, task)
        self.say(f"virtual DataLoader worker {proc.serial}{proc.chan.where} {why}; "
                 f"its {len(proc.pending)} task(s) go to the others (elastic mode: "
                 f"the same batches)")
        self._pump()

    def refresh(self):
        """Lists the places and opens the processes each lacks. Not once the
        interpreter is ending: the offload's exit hook ends every channel, and a
        process opened after it would be a call into the native library still
        under way while the interpreter tears down (a crash at exit)."""
        if LIFETIME.exiting:
            return
        try:
            live = list(self.place.live())
        except Exception as e:  # noqa: BLE001 - said, and tried again
            live = []
            if "list" not in self.said:
                self.said.add("list")
                self.say(f"cannot list the data workers for virtual workers: {e}")
        with self.cv:
            if self.per_place is None and live:
                self.per_place = max(1, math.ceil(self.num_workers / len(live)))
            held = {}
            for p in self.procs.values():
                held[p.place_name] = held.get(p.place_name, 0) + 1
            wanted = [w for w in live for _ in range((self.per_place or 0) - held.get(w, 0))]
        for where in wanted:
            if self.stopping or LIFETIME.exiting:
                return
            self._open(where)
        self._check_placed(time.monotonic())

    def _open(self, where):
        with self.cv:
            serial = self.serial
            self.serial += 1
        job = dict(self.job, worker_id=serial % self.num_workers, elastic=True)
        try:
            chan = self.place.open_on(where, self.modules)
            _vwire.write(chan.writer, _vwire.JOB, job_frame(chan, job))
        except Exception as e:  # noqa: BLE001 - said once per place, tried again
            if where not in self.said:
                self.said.add(where)
                self.say(f"cannot start a virtual DataLoader worker on {where}: {e}")
            return
        proc = _Proc(serial, where, chan)
        with self.cv:
            self.procs[serial] = proc
            self._pump()
        LIFETIME.start_thread(lambda: self._read(proc), f"goldminer vworker {serial}")

    def _check_placed(self, now):
        with self.cv:
            if self.procs or not self.queue:
                self.unplaced_since = None
            elif self.unplaced_since is None:
                self.unplaced_since = now
            elif now - self.unplaced_since > NO_PLACE_S:
                self._fail(f"no data worker could host a virtual DataLoader worker for "
                           f"{NO_PLACE_S:.0f} s")

    def _refresh_loop(self):
        while True:
            with self.cv:
                self.cv.wait_for(lambda: self.stopping or self.wake, REFRESH_S)
                # At exit the loop ends within REFRESH_S, inside the exit hook's
                # wait for our threads.
                if self.stopping or LIFETIME.exiting:
                    return
                self.wake = False
            self.refresh()


class Slot:
    """What torch's iterator takes for one of its N worker processes: all N are
    the dispatcher."""

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        self.daemon = True
        self.pid = -1  # not a pid torch may wait for (see _virtual_worker.VirtualWorker)

    def start(self):
        self.dispatcher.start()

    def is_alive(self):
        return self.dispatcher.alive()

    def join(self, timeout=None):
        self.dispatcher.join(timeout)

    def terminate(self):
        self.dispatcher.terminate()


class SlotQueue:
    """One of torch's N index queues: each goes to the dispatcher."""

    def __init__(self, context):
        self.context = context

    def put(self, item):
        self.context.dispatcher.submit(item)

    def cancel_join_thread(self):
        pass

    def close(self):
        pass
