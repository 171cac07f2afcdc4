"""What the DataLoader offload (goldminer.offload) reads from its environment, and
how it speaks to the user: the variables `goldminer run` sets for the program,
their values, and one line on stderr per thing said, said once (SAID).
"""

import os
import sys
import threading

OFFLOAD_ENV = "GOLDMINER_OFFLOAD"
# Where the virtual workers run ($GOLDMINER_OFFLOAD): on the data workers of the
# `goldminer run` around the program, or on the trainer's own host.
TRANSPORTS = ("local", "workers")
# `goldminer run --dataloader-workers M`: each served DataLoader gives the batches
# DataLoader(num_workers=M) would give, whatever num_workers the script set.
WORKERS_ENV = "GOLDMINER_DATALOADER_WORKERS"
# `goldminer run --offload exact|elastic|native`: exact, the batches of stock
# PyTorch with N workers; elastic (goldminer._elastic), every task seeded on its
# own, any number of processes, added and lost while an epoch runs; native
# (goldminer._native), a recognised ImageFolder made by the engine's ops, as
# exact otherwise.
MODE_ENV = "GOLDMINER_OFFLOAD_MODE"
MODES = ("exact", "elastic", "native")
MAX_DATALOADER_WORKERS = 1024


def say(line):
    """One line to the user, on stderr."""
    sys.stderr.write("goldminer: " + line + "\n")
    sys.stderr.flush()


class Once:
    """Keys of what was already done once in this process (a line said, a
    DataLoader noted in the run's record): first() is true for a key's first
    call only. Any thread."""

    def __init__(self):
        self._keys = set()
        self._lock = threading.Lock()

    def first(self, key):
        with self._lock:
            if key in self._keys:
                return False
            self._keys.add(key)
            return True


SAID = Once()  # what was said to the user: a bad variable, a DataLoader's fallback


def num_workers(loader):
    """The served loader's worker count: $GOLDMINER_DATALOADER_WORKERS when set (a
    value out of 1..MAX_DATALOADER_WORKERS is said once and ignored), else its own."""
    text = os.environ.get(WORKERS_ENV, "")
    if not text:
        return loader.num_workers
    try:
        n = int(text)
    except ValueError:
        n = 0
    if 1 <= n <= MAX_DATALOADER_WORKERS:
        return n
    if SAID.first(WORKERS_ENV):
        say(f"{WORKERS_ENV}={text!r} is not a worker count from 1 to {MAX_DATALOADER_WORKERS}: "
            "each DataLoader keeps its own num_workers")
    return loader.num_workers


def mode():
    """$GOLDMINER_OFFLOAD_MODE (MODES); another value is said once, and exact."""
    text = os.environ.get(MODE_ENV, "") or "exact"
    if text in MODES:
        return text
    if SAID.first(MODE_ENV):
        say(f"{MODE_ENV}={text!r} is not one of {', '.join(MODES)}: exact mode")
    return "exact"
