"""The host of a trainer's virtual DataLoader workers: `python3 -m goldminer._vhost FD`.

Starting a Python process and importing torch takes seconds; forking one that has
done it takes milliseconds. A DataLoader without persistent_workers starts its
workers at every epoch, so the trainer (goldminer.offload) starts one host, once,
and asks it for each virtual worker. The host imports torch, numpy, cloudpickle
and the modules each DataLoader's blob names, then forks a child per request
that runs goldminer._vworker on the channel it was given.

FD is one end of an AF_UNIX SOCK_SEQPACKET socket pair (the trainer holds the
other). Messages, one per packet, ASCII:
    trainer -> host  "SPAWN <modules>"  with one descriptor (SCM_RIGHTS): the
                     child's channel, a stream socket it reads JOB and TASK frames
                     from and writes RESULT frames to (goldminer._vwire);
                     <modules>: a JSON list of module names to import first
    trainer -> host  "KILL <pid>"       SIGKILL to one of its children
    host -> trainer  "SPAWNED <pid>"    for each SPAWN, in order (pid 0: the fork
                     failed; the channel is closed then)
    host -> trainer  "EXIT <pid> <status>"  a child ended; status as
                     subprocess.Popen.returncode (negative: the signal)
The host ends, killing its children, when the trainer's end closes.

The host keeps the blobs its workers were sent (goldminer._vworker.CACHE_DIR: a
private directory of its own, removed when it ends), so that a DataLoader's
dataset comes to it once per run, not once per virtual worker and epoch. The
folder's .lock is flock()ed by the host and, inherited, by its workers: a folder
whose lock is free belongs to nobody (its host was killed) and is removed by the
next host to start, by the data worker whose host ended, or by the trainer.
"""

import importlib
import json
import os
import select
import signal
import socket
import sys

MAX_PACKET = 1 << 16
CACHE_DIR = None  # main()'s: the blobs the workers were sent


def _import(names):
    for name in names:
        if isinstance(name, str) and name not in sys.modules:
            try:
                importlib.import_module(name)
            except Exception:
                pass  # the child's own unpickling says what is missing, naming it


def cache_root():
    """Where the blob cache goes: /dev/shm (memory: a 150 MB dataset is written in
    a few hundredths of a second, and the workers that map it share its pages)
    when it is there with room, else the temporary folder ($TMPDIR)."""
    import tempfile
    try:
        st = os.statvfs("/dev/shm")
        if os.access("/dev/shm", os.W_OK) and st.f_bavail * st.f_frsize >= 4 << 30:
            return "/dev/shm"
    except OSError:
        pass
    return tempfile.gettempdir()


CACHE_PREFIX = "goldminer-vhost-"
CACHE_LOCK = ".lock"  # held (flock) by the host and its workers while they live


def sweep(root):
    """Removes the blob caches that no host holds any more (their hosts were killed
    with the whole process group, say, before anyone could remove them): ours, in
    `root`, whose lock is free. A folder without its lock yet is one a host is
    making, left alone for a minute."""
    import fcntl
    import shutil
    import time
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for e in entries:
        if not e.name.startswith(CACHE_PREFIX):
            continue
        try:
            if not e.is_dir(follow_symlinks=False) or e.stat().st_uid != os.geteuid():
                continue
            fd = os.open(os.path.join(e.path, CACHE_LOCK), os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            try:
                if time.time() - e.stat().st_mtime > 60:
                    shutil.rmtree(e.path, ignore_errors=True)
            except OSError:
                pass
            continue
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(e.path, ignore_errors=True)
        except OSError:
            pass  # a live host's
        finally:
            os.close(fd)


def make_cache():
    """The host's blob cache, its lock held: (folder, the lock's fd). The lock is
    inherited by the forked workers, so the folder is in use while any of them lives."""
    import fcntl
    import tempfile
    root = cache_root()
    sweep(root)
    folder = tempfile.mkdtemp(prefix=f"{CACHE_PREFIX}{os.getpid()}-", dir=root)
    fd = os.open(os.path.join(folder, CACHE_LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return folder, fd


def _child(ctl, wake, channel):
    """In the forked child: the channel as stdin and stdout, then the worker."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    ctl.close()
    for fd in wake:
        os.close(fd)
    os.dup2(channel, 0)
    os.dup2(channel, 1)
    os.close(channel)
    code = 1
    try:
        # In the child, inside the try: a failed import is its traceback and status 1.
        from goldminer import _vworker
        _vworker.CACHE_DIR = CACHE_DIR
        code = _vworker.main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)


def _reap(ctl, children):
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        ctl.send(b"EXIT %d %d" % (pid, code))


def serve(ctl):
    children = set()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    try:
        while True:
            ready, _, _ = select.select([ctl, wake_r], [], [])
            if wake_r in ready:
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
                _reap(ctl, children)
            if ctl not in ready:
                continue
            try:
                msg, fds, _, _ = socket.recv_fds(ctl, MAX_PACKET, 1)
            except InterruptedError:
                continue
            except ConnectionError:  # the trainer ended with our EXIT lines unread
                return
            if not msg:
                return  # the trainer is gone
            word, _, rest = msg.partition(b" ")
            if word == b"KILL":
                pid = int(rest)
                if pid in children:
                    os.kill(pid, signal.SIGKILL)
            elif word == b"SPAWN" and len(fds) == 1:
                try:
                    _import(json.loads(rest or b"[]"))
                except ValueError:
                    pass
                try:
                    pid = os.fork()
                except OSError:
                    pid = -1
                if pid == 0:
                    _child(ctl, (wake_r, wake_w), fds[0])
                os.close(fds[0])
                if pid > 0:
                    children.add(pid)
                ctl.send(b"SPAWNED %d" % max(pid, 0))
            else:
                for fd in fds:
                    os.close(fd)
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def main():
    # A terminal's Ctrl-C goes to its whole foreground process group: the trainer
    # hears it and ends us; nor do the workers we fork (as torch's ignore it).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if len(sys.argv) != 2:
        sys.stderr.write("usage: python3 -m goldminer._vhost FD (started by goldminer.offload)\n")
        return 2
    ctl = socket.socket(fileno=int(sys.argv[1]))
    # What every worker needs, imported once here rather than in each child.
    _import(["numpy", "torch", "cloudpickle", "torch.utils.data",
             "torch.utils.data._utils.worker", "goldminer._vworker"])
    os.dup2(2, 1)  # nothing of ours goes to the trainer's stdout
    import shutil
    global CACHE_DIR
    CACHE_DIR, _ = make_cache()
    try:
        serve(ctl)
    finally:
        shutil.rmtree(CACHE_DIR, ignore_errors=True)
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown: torch's threads need none, and it can abort


if __name__ == "__main__":
    sys.exit(main())
