#!/usr/bin/python3
"""A small trainer for the end-to-end tests of `goldminer run`.

It consumes batches with goldminer.Loader and writes what it saw to OUT (JSON):
{"rank", "world_size", "epochs": [[key, ...], ...], "labels": [[label, ...], ...],
 "digests": [sha256 of each epoch's batch data and labels, in order], "shapes": [...],
 "stats": {...}}.
Actions mid-epoch, chosen by environment variables (N = batches consumed so far,
counted over the whole run):
  GM_TEST_KILL_AFTER=N    kill -9 one of the run's workers
  GM_TEST_TERM_AFTER=N    SIGTERM one worker (it drains: finishes and exits)
  GM_TEST_NOFILE_AFTER=N  leave every worker no free file descriptor for
                          GM_TEST_NOFILE_S seconds (default 3), then restore its limit
  GM_TEST_ADD_AFTER=N     start one more `goldminer worker` that joins the run
                          (GM_TEST_ADD_REMOTE=1: with GOLDMINER_SAME_HOST=off, so
                          batches come from it over TCP, as from another host)
  GM_TEST_DIE_AFTER=N     kill -9 the trainer itself, holding the batches it got
                          (segments in flight and in use)
  GM_TEST_STEP_S=S        sleep S seconds after each batch (a slow step)
  GM_TEST_UNTIL_FILE=F    with GM_TEST_EPOCH_SAMPLES=K: stop at the end of the first
                          epoch (K samples) that ends once F exists (EPOCHS is then
                          the most)
  GM_TEST_RESUME_AFTER=N  save the loader's state, drop the loader, and continue
                          with a new loader restored from that state
  GM_TEST_SAVE_AFTER=N    with GM_TEST_STATE=FILE: write the loader's state to FILE
                          (JSON) and stop there, as a job whose time ran out
  GM_TEST_STATE=FILE      a checkpoint: {"loader": state, "seen": what OUT holds}; when
                          it exists at start, the trainer continues from it (a new
                          run resuming an earlier one's checkpoint); with
                          GM_TEST_CHECKPOINT=1 it is rewritten after every batch
  GM_TEST_KILL_RUN_AFTER=N  kill -9 `goldminer run` itself (the coordinator): the
                          loader must raise a clear error, and the workers must
                          exit; OUT then holds {"error", "workers_alive"}
  GM_TEST_KILL_COORDINATOR_AFTER=N[,N...]  kill -9 the run's coordinator process
                          (`goldminer coordinator`, run's child) after each N; run
                          starts it again from its journal
  GM_TEST_CORRUPT_JOURNAL=1  with the first of those: change one byte of the
                          coordinator's journal (GOLDMINER_RUN_DIR) first
usage: trainer.py OUT EPOCHS   ("{rank}" in OUT and GM_TEST_STATE is replaced by the rank)
OUT also holds "batches": per epoch, the sha256 (16 hex) of each batch's data and labels.
A failure of the loader is written to OUT as {"error": message}, exit status 3.
"""
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

import goldminer


def workers():
    with open(os.path.join(os.environ["GOLDMINER_RUN_DIR"], "workers")) as f:
        return [int(line) for line in f.read().split()]


def starve_descriptors(seconds):
    """Leaves every worker no free descriptor for `seconds` (its soft RLIMIT_NOFILE
    at its lowest free descriptor number), then gives its limit back."""
    saved = {}
    for pid in workers():
        used = {int(fd) for fd in os.listdir("/proc/%d/fd" % pid)}
        lowest = next(i for i in range(len(used) + 1) if i not in used)
        saved[pid] = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (lowest, saved[pid][1]))
    time.sleep(seconds)
    for pid, limit in saved.items():
        try:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, limit)
        except ProcessLookupError:
            pass


def act(n, spawned):
    env = os.environ
    if env.get("GM_TEST_STEP_S"):  # a step that takes time, for tests that act meanwhile
        time.sleep(float(env["GM_TEST_STEP_S"]))
    if env.get("GM_TEST_DIE_AFTER") == str(n):
        os.kill(os.getpid(), signal.SIGKILL)
    if env.get("GM_TEST_KILL_AFTER") == str(n):
        os.kill(workers()[0], signal.SIGKILL)
    kills = env.get("GM_TEST_KILL_COORDINATOR_AFTER", "").split(",")
    if str(n) in kills:
        kill_coordinator(kills.index(str(n)) == 0)
    if env.get("GM_TEST_NOFILE_AFTER") == str(n):
        threading.Thread(target=starve_descriptors, args=(float(env.get("GM_TEST_NOFILE_S", "3")),)).start()
    if env.get("GM_TEST_TERM_AFTER") == str(n):
        os.kill(workers()[0], signal.SIGTERM)
    if env.get("GM_TEST_ADD_AFTER") == str(n):
        # A worker joins with the worker key (the trainer's own key is refused). The
        # trainer goes on once it has registered (its debug log says so), so the run
        # cannot end before the worker joined, however fast the epoch is.
        worker_env = dict(env, GOLDMINER_SECRET_FILE=os.path.join(env["GOLDMINER_RUN_DIR"], "worker.key"))
        if env.get("GM_TEST_ADD_REMOTE") == "1":  # it offers no same-host path: "another host"
            worker_env["GOLDMINER_SAME_HOST"] = "off"
        log = tempfile.NamedTemporaryFile(prefix="added-worker-", suffix=".log", delete=False)
        spawned.append(subprocess.Popen(
            [env["GM_TEST_GOLDMINER"], "-v", "worker", "--coordinator", env["GOLDMINER_ADDR"],
             "--threads", "1"], env=worker_env, stderr=log))
        deadline = time.monotonic() + 60
        while b"registered with" not in open(log.name, "rb").read():
            if time.monotonic() > deadline or spawned[-1].poll() is not None:
                sys.exit("the added worker did not register: " + open(log.name).read())
            time.sleep(0.02)


def coordinator_pid():
    """The run's coordinator process: the child of `goldminer run` (this trainer's
    parent) that runs `goldminer coordinator`; waits for one started again."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = open(f"/proc/{entry}/stat").read()
                cmd = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == os.getppid() and b"coordinator" in cmd[1:]:
                return int(entry)
        time.sleep(0.05)
    sys.exit("no coordinator process under goldminer run")


def kill_coordinator(first):
    if first and os.environ.get("GM_TEST_CORRUPT_JOURNAL") == "1":
        path = os.path.join(os.environ["GOLDMINER_RUN_DIR"], "coordinator.journal")
        with open(path, "r+b") as f:
            data = f.read()
            at = data.index(b'"op"') + 2  # inside a line's JSON: its hash no longer matches
            f.seek(at)
            f.write(b"X")
    os.kill(coordinator_pid(), signal.SIGKILL)


def alive(pid):
    return os.path.exists(f"/proc/{pid}") and "zombie" not in open(f"/proc/{pid}/status").read()


def coordinator_vanishes(out, loader, it):
    pids = workers()
    os.kill(os.getppid(), signal.SIGKILL)
    error = None
    try:
        for _ in it:
            pass
    except goldminer.ClientError as e:
        error = str(e)
    deadline = time.monotonic() + 30  # workers exit within the liveness timeout (5 s)
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    with open(out, "w") as f:
        json.dump({"error": error, "workers_alive": [p for p in pids if alive(p)]}, f)


def save_checkpoint(path, loader, seen, labels, batches):
    with open(path + ".tmp", "w") as f:
        json.dump({"loader": loader.state_dict(), "seen": seen, "labels": labels,
                   "batches": batches}, f)
    os.replace(path + ".tmp", path)


def main():
    rank = os.environ.get("RANK", "0")
    out = sys.argv[1].replace("{rank}", rank)
    epochs = int(sys.argv[2])
    resume_after = os.environ.get("GM_TEST_RESUME_AFTER")
    state_file = os.environ.get("GM_TEST_STATE", "").replace("{rank}", rank)
    loader = goldminer.Loader(epochs=epochs)
    seen, labels, batches, digests, shapes, spawned, n = [], [], [], [], set(), [], 0
    if state_file and os.path.exists(state_file):
        with open(state_file) as f:
            checkpoint = json.load(f)
        loader.load_state_dict(checkpoint["loader"])
        seen, labels, batches = checkpoint["seen"], checkpoint["labels"], checkpoint["batches"]
    resumed = False
    it = iter(loader)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            break
        except goldminer.ClientError as e:
            with open(out, "w") as f:
                json.dump({"error": str(e)}, f)
            sys.exit(3)
        assert isinstance(batch["image"], np.ndarray)
        assert batch["label"].dtype == np.int64 and len(batch["label"]) == len(batch["key"])
        shapes.add(tuple(batch["image"].shape[1:]))
        epoch = batch.get("epoch", 0)
        while len(seen) <= epoch:
            seen.append([])
            labels.append([])
            batches.append([])
        while len(digests) <= epoch:
            digests.append(hashlib.sha256())
        seen[epoch].extend(batch["key"])
        labels[epoch].extend(batch["label"].tolist())
        image = np.ascontiguousarray(batch["image"]).tobytes()
        digests[epoch].update(image)
        digests[epoch].update(batch["label"].tobytes())
        batches[epoch].append(hashlib.sha256(image + batch["label"].tobytes()).hexdigest()[:16])
        n += 1
        if os.environ.get("GM_TEST_DIE_AFTER"):
            spawned.append(batch)  # held (its segment stays in use) until the trainer dies
        act(n, spawned)
        if state_file and os.environ.get("GM_TEST_CHECKPOINT") == "1":
            save_checkpoint(state_file, loader, seen, labels, batches)
        if state_file and os.environ.get("GM_TEST_SAVE_AFTER") == str(n):
            save_checkpoint(state_file, loader, seen, labels, batches)
            break
        until = os.environ.get("GM_TEST_UNTIL_FILE")
        if until and len(seen[epoch]) == int(os.environ["GM_TEST_EPOCH_SAMPLES"]) and \
                os.path.exists(until):
            break
        if os.environ.get("GM_TEST_KILL_RUN_AFTER") == str(n):
            return coordinator_vanishes(out, loader, it)
        if resume_after == str(n) and not resumed:
            state = loader.state_dict()
            del it, loader
            loader = goldminer.Loader(epochs=epochs)
            loader.load_state_dict(state)
            it = iter(loader)
            resumed = True
    stats = loader.stats()
    for p in spawned:
        p.terminate()
        p.wait(timeout=30)
    with open(out, "w") as f:
        json.dump({"rank": int(os.environ.get("RANK", 0)),
                   "world_size": int(os.environ.get("WORLD_SIZE", 1)),
                   "epochs": seen, "labels": labels, "batches": batches,
                   "digests": [d.hexdigest() for d in digests],
                   "shapes": sorted(shapes), "stats": stats}, f)


if __name__ == "__main__":
    main()
