"""The DataLoader offload's threads and the program's end (goldminer.offload).

Every thread the offload starts (virtual workers' readers, the host's reader,
the elastic dispatcher's refresh) is started by LIFETIME.start_thread, so that
the exit hook (goldminer._patch) can wait for them before the interpreter's
teardown: a daemon thread stopped inside torch's C++ or the client library
aborts the process. LIFETIME.exiting is set once that hook runs: from then a
worker that ends is no loss and nothing new is opened.
"""

import threading

EXIT_JOIN_S = 3  # within `goldminer run`'s 5 s between SIGTERM (or Ctrl-C) and SIGKILL


class Lifetime:
    """The offload's threads in this process, and whether the interpreter is
    ending (`exiting`: set by the exit hook, read by any thread)."""

    def __init__(self):
        self.exiting = False
        self._threads = []
        self._lock = threading.Lock()

    def start_thread(self, target, name):
        """Starts target() on a daemon thread named `name`, joined at exit."""
        t = threading.Thread(target=target, daemon=True, name=name)
        t.start()
        with self._lock:
            self._threads[:] = [x for x in self._threads if x.is_alive()] + [t]

    def threads(self):
        """The threads started and not yet seen ended."""
        with self._lock:
            return list(self._threads)


LIFETIME = Lifetime()  # the one of this process
