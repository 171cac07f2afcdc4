#!/usr/bin/python3
"""A trainer whose first process dies partway, for tests/e2e/restart_test.sh.

A child process reads TAKE batches of epoch 0 with goldminer.Loader, prints
their sample keys (one JSON line) and kills itself with SIGKILL: no close, no
saved state. Then this process starts a new Loader of the same rank, without a
state, and reads EPOCHS epochs. Writes OUT (JSON; "{rank}" in it is replaced by
the rank): {"child": [key, ...], "child_rc": N, "epochs": [[key, ...], ...]}, or
{"error": message} (exit status 3). With RANKS (e.g. "1,3"), only those ranks
have a child that dies; the others read their epochs at once ("child": []).

With "stale" (one rank: the child is session 1, the new Loader session 2), the
new Loader reads 10 batches, then this process kills a data worker (SIGKILL), waits
for its replacement, and has tests/e2e/gmp_peer.py use the dead session's ticket
at the replacement's data port while it reads on: the result's "stale" is what
that peer got.

usage: restart_trainer.py OUT EPOCHS TAKE [RANKS [stale]]
"""
import json
import os
import signal
import subprocess
import sys
import time

import goldminer
from attack_trainer import data_ports

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = """
import json, os, signal, sys
import goldminer
keys, it = [], iter(goldminer.Loader(epochs=1))
for _ in range(int(sys.argv[1])):
    keys.extend(next(it)["key"])
print(json.dumps(keys), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def worker_pids():
    with open(os.path.join(os.environ["GOLDMINER_RUN_DIR"], "workers")) as f:
        return [int(p) for p in f.read().split()]


def use_stale_ticket():
    """Kills a data worker, waits for its replacement, and starts gmp_peer.py with
    session 1's ticket (rank 0) at the replacement's data port."""
    before = worker_pids()
    os.kill(before[0], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        fresh = [p for p in worker_pids() if p not in before]
        ports = data_ports(fresh) if fresh else []
        if ports:
            env = dict(os.environ, GOLDMINER_ADDR="127.0.0.1:%d" % ports[0])
            return subprocess.Popen([sys.executable, os.path.join(HERE, "gmp_peer.py"),
                                     "stale-ticket", "0", "1"], stdout=subprocess.PIPE,
                                    text=True, env=env)
        time.sleep(0.05)
    raise RuntimeError("the killed worker was not replaced within 60 s")


def main():
    out, epochs, take = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rank = int(os.environ.get("RANK", "0"))
    out = out.replace("{rank}", str(rank))
    restarts = len(sys.argv) < 5 or str(rank) in sys.argv[4].split(",")
    result = {"child": [], "child_rc": None}
    if restarts:
        child = subprocess.run([sys.executable, "-c", CHILD, str(take)], stdout=subprocess.PIPE,
                               text=True, timeout=120)
        result = {"child": json.loads(child.stdout.strip().splitlines()[-1]),
                  "child_rc": child.returncode}
    stale = len(sys.argv) > 5 and sys.argv[5] == "stale"
    peer = None
    try:
        seen = [[] for _ in range(epochs)]
        for n, batch in enumerate(goldminer.Loader(epochs=epochs)):
            seen[batch["epoch"]].extend(batch["key"])
            if stale and n == 10:
                peer = use_stale_ticket()
        result["epochs"] = seen
        if peer is not None:
            out_text, _ = peer.communicate(timeout=60)
            result["stale"] = json.loads(out_text.strip().splitlines()[-1])
    except Exception as e:  # noqa: BLE001 - the test reads the message
        result["error"] = str(e)
    with open(out, "w") as f:
        json.dump(result, f)
    sys.exit(3 if "error" in result else 0)


if __name__ == "__main__":
    main()
