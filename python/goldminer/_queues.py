"""What comes back from a DataLoader's virtual workers, on the trainer
(goldminer.offload): read_channel() reads a worker's frames from its channel,
and the queues torch's iterator uses in place of multiprocessing's carry them
(ResultQueue: the results, in any order, as torch's own; IndexQueue: a worker's
tasks, which go to it as TASK frames).

A RESULT is loaded by the thread that takes it from the queue (torch's, or its
pin-memory thread), never by a reader thread: those run no torch code.
"""

import queue

from goldminer import _safepickle, _vwire

EXIT_WAIT_S = 10  # for a worker whose channel ended to be reaped


class Failed:
    """Put in the result queue when a virtual worker cannot go on."""

    def __init__(self, worker_id, why):
        self.worker_id, self.why = worker_id, why


class Raw:
    """A RESULT frame as read (the answer to task `key`), loaded by whoever takes
    it from the queue."""

    def __init__(self, key, data, buffers):
        self.key, self.data, self.buffers = key, data, buffers

    def load(self):
        """The RESULT's object; a batch holding a global that the trainer does not
        load (goldminer._safepickle) is the task's worker error, as stock has a
        batch that fails in its worker."""
        try:
            return _vwire.loads(_vwire.RESULT, self.data, self.buffers)
        except _vwire.Refused as e:
            if not isinstance(self.key, int):
                raise
            refused = _vwire.Refused(_safepickle.refusal(e))
        from torch._utils import ExceptionWrapper  # torch is the program's: not imported here
        return self.key, ExceptionWrapper((_vwire.Refused, refused, None),
                                          where="in a virtual DataLoader worker")


class ResultQueue:
    """The queue torch's main process reads results from (and the pin-memory thread).
    Results are loaded in the thread that takes them, as stock's queue does: our
    reader threads run no torch code (a daemon thread inside torch's C++ when the
    interpreter exits aborts the process)."""

    def __init__(self):
        self._q = queue.Queue()

    def put(self, item):
        self._q.put(item)

    def get(self, timeout=None):
        item = self._q.get(timeout=timeout)
        return item.load() if isinstance(item, Raw) else item

    def cancel_join_thread(self):
        pass

    def close(self):
        pass


class IndexQueue:
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


class Failure:
    """A worker's FAILED frame, as read_channel returns it: `text` says why."""

    def __init__(self, text):
        self.text = text


def read_channel(chan, take, need=None, release=None):
    """Reads a virtual worker's frames from `chan` until its channel ends, calling
    take(key, state, raw) for each STATE and RESULT pair (raw: the Raw RESULT,
    loaded by whoever takes it from the result queue) and need() for a NEED (the
    worker's host lacks the blob: send it; a second NEED ends the channel).
    release(id): the worker's recycled memfd `id` is no longer mapped (for
    workers whose JOB said recycle: _vwire.Recycler).
    Returns None for a clean
    end (exit status 0), a Failure for a FAILED frame (the channel not yet
    waited for), else how it ended (a phrase: "was killed by signal 9", ...; for
    a stream cut inside a frame, how the process ended, when it says)."""
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
                take(meta[0], meta[1], Raw(meta[0], frame[1], frame[2]))
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
    code = chan.wait_exit(EXIT_WAIT_S)
    if code is None and cut is not None:
        chan.kill()  # cut off and still not ended
    if why is None and code != 0:
        why = ("was killed by signal %d" % -code if code is not None and code < 0 else
               "exited with status %s" % code if code is not None else
               chan.lost or cut or "closed its channel and did not exit")
    elif why is None and cut is not None:  # it ended well, in the middle of a frame
        why = cut
    return why
