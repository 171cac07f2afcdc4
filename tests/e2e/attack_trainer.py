#!/usr/bin/python3
"""A trainer under attack, for tests/e2e/attack_test.sh.

It reads EPOCHS epochs with goldminer.Loader while tests/e2e/gmp_peer.py attacks
the run it belongs to (the coordinator in its parent `goldminer run`, and the data
workers), samples the threads and resident memory of `goldminer run` meanwhile (and
the data workers' threads, summed, while a churn hits a data port), and writes OUT
(JSON): {"epochs": [[key, ...], ...], "attacks": {name: result}, "max_threads": N,
"max_rss_kib": N, "idle_threads": N, "idle_rss_kib": N, "worker_idle_threads": N,
"worker_max_threads": N}.

usage: attack_trainer.py OUT EPOCHS CHURN IDLE
"""
import json
import os
import subprocess
import sys
import threading
import time

import goldminer

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "gmp_peer.py")


def proc_status(pid):
    """(threads, VmRSS in KiB) of a process."""
    threads = rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Threads:"):
                threads = int(line.split()[1])
            elif line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return threads, rss


def data_ports(pids):
    """The TCP ports the given processes listen on (their data ports)."""
    inodes = set()
    for pid in pids:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    ports.append(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def attack(*args, env=None):
    return subprocess.Popen([sys.executable, PEER] + [str(a) for a in args], stdout=subprocess.PIPE,
                            env=env, text=True)


def result(proc):
    out, _ = proc.communicate(timeout=300)
    return json.loads(out.strip().splitlines()[-1]) if out.strip() else {"error": proc.returncode}


def main():
    out, epochs, churn_n, idle_n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    run_pid = os.getppid()
    loader = goldminer.Loader(epochs=epochs)
    it = iter(loader)
    seen = [[] for _ in range(epochs)]

    def take(n):
        for _ in range(n):
            batch = next(it, None)
            if batch is None:
                return False
            seen[batch["epoch"]].extend(batch["key"])
        return True

    take(2)
    idle_threads, idle_rss = proc_status(run_pid)
    samples = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            samples.append(proc_status(run_pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    attacks = {}
    # First, alone, so that its warning is not held back by the rate limit.
    attacks["escape-role"] = result(attack("escape-role"))
    with open(os.path.join(os.environ["GOLDMINER_RUN_DIR"], "workers")) as f:
        workers = [int(p) for p in f.read().split()]
    ports = data_ports(workers)
    hijack_env = dict(os.environ, GOLDMINER_ADDR="127.0.0.1:%d" % ports[0]) if ports else None
    # Two waves, training all the while: the floods, then the targeted attacks (each
    # needs a handshake, which a flood from the same address may evict).
    waves = [{"churn": lambda: attack("churn", churn_n), "churn2": lambda: attack("churn", churn_n // 2),
              "idle": lambda: attack("idle", idle_n), "handshakes": lambda: attack("handshakes", "300")},
             {"bad-subscribe": lambda: attack("bad-subscribe"),
              "second-rank0": lambda: attack("second-rank0"),
              "fake-split-done": lambda: attack("fake-split-done"),
              "big-payload": lambda: attack("big-payload"),
              "client-as-worker": lambda: attack("client-as-worker"),
              "replay": lambda: attack("replay"),
              "unsealed": lambda: attack("unsealed"),
              "tamper": lambda: attack("tamper"),
              "slow": lambda: attack("slow")}]
    if hijack_env:
        waves[1]["data-hijack"] = lambda: attack("data-hijack", env=hijack_env)
        waves[1]["forged-ticket"] = lambda: attack("forged-ticket", env=hijack_env)
    for wave in waves:
        running = {name: start() for name, start in wave.items()}
        while any(p.poll() is None for p in running.values()):
            take(1)
            time.sleep(0.02)
        for name, proc in running.items():
            attacks[name] = result(proc)
    # Last, a churn at a data port, the trainer reading through it all the while:
    # connections that close before their first byte must cost the worker no thread.
    worker_threads = lambda: sum(proc_status(pid)[0] for pid in workers)  # noqa: E731
    worker_idle = worker_max = worker_threads()
    if hijack_env:
        churning = attack("churn", churn_n // 2, env=hijack_env)
        while churning.poll() is None:
            take(1)
            worker_max = max(worker_max, worker_threads())
            time.sleep(0.02)
        attacks["data-churn"] = result(churning)
    attacks["data-ports"] = ports
    stop.set()
    sampler.join()
    while take(16):
        pass
    loader.close()
    with open(out, "w") as f:
        json.dump({"epochs": seen, "attacks": attacks,
                   "max_threads": max(t for t, _ in samples), "max_rss_kib": max(r for _, r in samples),
                   "idle_threads": idle_threads, "idle_rss_kib": idle_rss,
                   "worker_idle_threads": worker_idle, "worker_max_threads": worker_max}, f)


if __name__ == "__main__":
    main()
