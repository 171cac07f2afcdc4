#!/usr/bin/python3
"""A trainer whose first process dies partway, for tests/e2e/restart_test.sh.

A child process reads TAKE batches of epoch 0 with goldminer.Loader, prints
their sample keys (one JSON line) and kills itself with SIGKILL: no close, no
saved state. Then this process starts a new Loader of the same rank, without a
state, and reads EPOCHS epochs. Writes OUT (JSON): {"child": [key, ...],
"epochs": [[key, ...], ...]}, or {"error": message} (exit status 3).

usage: restart_trainer.py OUT EPOCHS TAKE
"""
import json
import subprocess
import sys

import goldminer

CHILD = """
import json, os, signal, sys
import goldminer
keys, it = [], iter(goldminer.Loader(epochs=1))
for _ in range(int(sys.argv[1])):
    keys.extend(next(it)["key"])
print(json.dumps(keys), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def main():
    out, epochs, take = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    child = subprocess.run([sys.executable, "-c", CHILD, str(take)], stdout=subprocess.PIPE,
                           text=True, timeout=120)
    result = {"child": json.loads(child.stdout.strip().splitlines()[-1]), "child_rc": child.returncode}
    try:
        seen = [[] for _ in range(epochs)]
        for batch in goldminer.Loader(epochs=epochs):
            seen[batch["epoch"]].extend(batch["key"])
        result["epochs"] = seen
    except Exception as e:  # noqa: BLE001 - the test reads the message
        result["error"] = str(e)
    with open(out, "w") as f:
        json.dump(result, f)
    sys.exit(3 if "error" in result else 0)


if __name__ == "__main__":
    main()
