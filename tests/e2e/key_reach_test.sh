#!/usr/bin/env bash
# End-to-end attack (goldminer-protocol(7)): the code a data worker runs for an
# offloaded DataLoader (the dataset, collate_fn and worker_init_fn the trainer
# ships) finds no key of the run where it can look: not in its own environment
# and command line, nor in those of its ancestors (the Python host that forked it
# and the `goldminer worker` above them, as /proc/PID/environ and cmdline show
# them to the same user), whether the worker got its key as a file's path
# (GOLDMINER_SECRET_FILE, the local backend) or as the key itself
# (GOLDMINER_SECRET, as Slurm steps and elastic workers do). Before, the worker's
# environ named the key file, and a key given by value stayed in the bytes of its
# first environment after it was read.
source "$(dirname "$0")/lib.sh"

# The dataset reads the run's two keys in the trainer (its oracle: the trainer may
# read them), and on the worker looks for them in every ancestor it can read.
cat >"$T/reach.py" <<'PY'
import json, os, sys
import torch
from torch.utils.data import DataLoader, Dataset

def keys():
    run_dir = os.environ["GOLDMINER_RUN_DIR"]
    return [open(os.path.join(run_dir, f)).read().strip() for f in ("worker.key", "client.key")]

class Reach(Dataset):
    def __init__(self):
        self.keys = keys()
    def __len__(self):
        return 4
    def __getitem__(self, i):
        found, pid, seen = [], os.getpid(), []
        while pid > 1:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read()
                with open(f"/proc/{pid}/environ", "rb") as f:
                    environ = f.read()
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                break
            name = cmdline.split(b"\0")[0].decode(errors="replace")
            seen.append(f"{os.path.basename(name)}:{pid}")
            for what, text in (("cmdline", cmdline), ("environ", environ)):
                for k, key in zip(("worker", "client"), self.keys):
                    if key.encode() in text:
                        found.append(f"{k} key in {name} ({pid}) {what}")
            for entry in environ.split(b"\0"):  # a key variable with a value left
                if entry.startswith(b"GOLDMINER_SECRET") and entry.split(b"=", 1)[-1]:
                    found.append(f"{entry[:40]!r} in {name} ({pid}) environ")
            if os.path.basename(name) == "goldminer":
                break  # the data worker: what is above it is not the worker's
            pid = ppid
        return torch.tensor([i]), json.dumps({"found": found, "seen": seen})

out = [where for _, where in DataLoader(Reach(), batch_size=2, num_workers=2)]
json.dump([json.loads(w) for batch in out for w in batch], open(sys.argv[1], "w"))
PY

# check NAME: every sample was made under a `goldminer worker`, and none found a key.
check() {
  $PY - "$T/$1.json" <<'PY' || fail "$1: $(cat "$T/$1.json")"
import json, sys
samples = json.load(open(sys.argv[1]))
assert len(samples) == 4, samples
for s in samples:
    assert any(n.startswith("goldminer:") for n in s["seen"]), f"not made on a data worker: {s['seen']}"
    assert not s["found"], s["found"]
PY
}

gm_run file -- --backend local --workers 2 --no-db -- $PY "$T/reach.py" "$T/file.json" ||
  { cat "$T/file.err" >&2; fail "the run with workers given a key file"; }
check file
ok "workers given GOLDMINER_SECRET_FILE: no key, and no key variable, where the shipped code can look"

# The worker key by value, as the Slurm backend hands it: a worker started by
# hand beside the run's own (goldminer-worker(1): joins a running run) with
# GOLDMINER_SECRET=<key>; the program starts once it has registered, so that the
# DataLoader's two virtual workers go one to each.
cat >"$T/by_value.sh" <<'SH'
#!/bin/bash
set -e
key=$(cat "$GOLDMINER_RUN_DIR/worker.key")
# (the trainer's GOLDMINER_SECRET_FILE names the client key: not for a worker)
env -u GOLDMINER_SECRET_FILE GOLDMINER_SECRET="$key" "$GM" worker --coordinator "$GOLDMINER_ADDR" --listen 127.0.0.1:0 \
  2>"$T/hand.err" &
echo $! >"$T/hand.pid"
for _ in $(seq 1 300); do grep -q "worker 2 registered" "$T/value.err" && break; sleep 0.1; done
exec "$PY" "$T/reach.py" "$T/value.json"
SH
chmod +x "$T/by_value.sh"
GM=$GM PY=$PY T=$T gm_run value -- -v --backend local --workers 1 --no-db -- "$T/by_value.sh" ||
  { cat "$T/value.err" >&2; fail "the run beside a worker given its key by value"; }
check value
$PY - "$T/value.json" "$(cat "$T/hand.pid")" <<'PY' || fail "no sample was made by the worker given its key by value: $(cat "$T/value.json")"
import json, sys
samples, pid = json.load(open(sys.argv[1])), sys.argv[2]
assert any(f"goldminer:{pid}" in s["seen"] for s in samples)
PY
ok "a worker given GOLDMINER_SECRET=<key>: once read, the key is not in its /proc/PID/environ"
done_suite
