"""Virtual workers on the trainer's own host (GOLDMINER_OFFLOAD=local,
goldminer.offload): the trainer starts one goldminer._vhost process (Host), once
per process, which forks each virtual worker (LocalChan, on a socket pair), so
a DataLoader gets the same batches with no `goldminer run` around it.

Thread-safety: a Host's state is under its condition variable; its reader
thread takes the host's replies, any thread asks it for a worker.
"""

import json
import os
import socket
import subprocess
import sys
import threading

from goldminer import _vhost
from goldminer._lifetime import LIFETIME
from goldminer._offload_config import OFFLOAD_ENV


class Host:
    """The trainer's goldminer._vhost process, which forks the virtual workers."""

    def __init__(self):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                    else "")
        env.pop(OFFLOAD_ENV, None)  # a worker's own DataLoaders stay stock
        self.proc = subprocess.Popen([sys.executable, "-m", "goldminer._vhost",
                                      str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                     env=env, stdin=subprocess.DEVNULL)
        theirs.close()
        self.ctl = mine
        self.cv = threading.Condition()
        self.replies = []  # one [pid or None] per SPAWN sent, in order
        self.exits = {}    # pid -> status
        self.alive = True
        LIFETIME.start_thread(self._read, "goldminer vhost")

    def _read(self):
        while True:
            try:
                msg = self.ctl.recv(256)
            except OSError:
                msg = b""
            if not msg:
                # A host killed leaves its blob cache: the first to see it gone removes it.
                _vhost.sweep(_vhost.cache_root())
            with self.cv:
                if not msg:
                    self.alive = False
                    for reply in self.replies:
                        reply[0] = 0
                    self.replies.clear()
                    self.cv.notify_all()
                    return
                word, _, rest = msg.partition(b" ")
                if word == b"SPAWNED" and self.replies:
                    self.replies.pop(0)[0] = int(rest)
                elif word == b"EXIT":
                    pid, code = rest.split()
                    self.exits[int(pid)] = int(code)
                self.cv.notify_all()

    def spawn(self, modules):
        """(channel socket, pid) of a new virtual worker; raises RuntimeError when
        the host cannot fork one."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        reply = [None]
        with self.cv:
            self.replies.append(reply)
            try:
                socket.send_fds(self.ctl, [b"SPAWN " + json.dumps(modules).encode()],
                                [theirs.fileno()])
            except OSError as e:
                self.replies.remove(reply)
                raise RuntimeError(f"goldminer: the virtual worker host is gone: {e}") from e
            finally:
                theirs.close()
            self.cv.wait_for(lambda: reply[0] is not None)
        if not reply[0]:
            mine.close()
            raise RuntimeError("goldminer: the virtual worker host could not start a worker")
        return mine, reply[0]

    def wait_exit(self, pid, timeout):
        """The exit status of worker `pid` once it ended (None: not within timeout)."""
        with self.cv:
            self.cv.wait_for(lambda: pid in self.exits or not self.alive, timeout)
            return self.exits.get(pid)

    def kill(self, pid):
        try:
            self.ctl.send(b"KILL %d" % pid)
        except OSError:
            pass

    def close(self):
        """Ends the host, which kills its workers: their channels end too."""
        try:
            self.ctl.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class LocalChan:
    """A virtual worker forked by the trainer's Host, on a socket pair."""

    where = ""
    lost = None
    same_host = False  # its bytes come through the socket pair, descriptors never
    remote = False  # on the trainer's host
    take_fd = None

    def __init__(self, host, sock, pid):
        self.host, self.sock, self.pid = host, sock, pid
        self.reader = sock.makefile("rb", buffering=1 << 16)
        self.writer = sock.makefile("wb", buffering=1 << 16)

    def kill(self):
        self.host.kill(self.pid)

    def wait_exit(self, timeout):
        return self.host.wait_exit(self.pid, timeout)

    def close(self):
        for f in (self.reader, self.writer, self.sock):
            try:
                f.close()
            except (OSError, ValueError):
                pass


class LocalPlace:
    """Virtual workers on the trainer's host (GOLDMINER_OFFLOAD=local)."""

    def open(self, worker_id, modules, attempt):
        return self.open_on("local", modules)

    def live(self):
        """Where virtual workers may go: this host, under one name."""
        return ["local"]

    def open_on(self, where, modules):
        host = HOSTS.get()
        sock, pid = host.spawn(modules)
        return LocalChan(host, sock, pid)


class Hosts:
    """The trainer's hosts: one per process (a fork's own), started at the first
    use and again when it ended. Any thread."""

    def __init__(self):
        self._hosts = {}  # pid of the trainer process -> its host
        self._lock = threading.Lock()

    def get(self):
        """This process's host, started when it has none alive."""
        with self._lock:
            h = self._hosts.get(os.getpid())
            if h is None or not h.alive:
                h = self._hosts[os.getpid()] = Host()
            return h

    def all(self):
        with self._lock:
            return list(self._hosts.values())


HOSTS = Hosts()  # the one of this process
