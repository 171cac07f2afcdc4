#!/usr/bin/python3
"""A malicious data worker (it holds the worker key) that tries to fill the
trainer's memory, for tests/e2e/flood_test.sh.

It registers at the coordinator ($GOLDMINER_ADDR) with the worker key from the
run's directory ($GOLDMINER_RUN_DIR/worker.key), takes one split and never makes
it, so the trainer ends up waiting for that split while every other connection
is out of credit. Meanwhile it serves a data port of its own: to every client
that connects with a valid ticket it sends one MIB-MiB BATCH per credit, forever:

  next-epoch   batches 0 and 1 of splits of the epoch after the one being read
               (which the trainer keeps, unchecked, until it reaches that epoch:
               workers make the next epoch's splits ahead), each with new keys
  ahead        batches of its own split, numbered from 1,000,000 (never the
               batch the trainer waits for), each with new sample keys
  other        batches 0 and 1 of the splits after its own (splits it was never
               given), each with new sample keys
  repeat       one batch of its split whose samples are all the same key
  cut          batch 0 of its split only, marked as the split's last
               (split_batches 1), and SPLIT_DONE {batch_count: 1, skipped: 0}
               for it: the split cut short, and the samples lost not owned up to
  short        batches 0 and 1 of its split, the second (the last, split_batches
               2) with 1 sample of 10, and SPLIT_DONE {batch_count: 2, skipped:
               0}: every count right, 9 samples lost
  hold         nothing: it takes the credit and heartbeats, and stops when the
               coordinator drops it (the trainer's progress deadline)

It stops after SECONDS, or after sending LIMIT MiB in all, closes every
connection (the coordinator then gives its split to a real worker) and prints
one JSON line: {"mode", "split", "batches_sent", "mib_sent", "connections",
"dropped_after_s": seconds from taking the split until the coordinator closed
its connection, or null}.
Each batch holds 10 samples (the batch size of the suites' sleepy_pipeline).

  flood_worker.py MODE SECONDS MIB LIMIT
"""
import json
import zlib
import os
import select
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gmp_wire import recv_frame, send_frame, server_handshake, client_handshake, ticket_key  # noqa: E402

REGISTER, REGISTERED, HEARTBEAT, GET_SPLIT, ASSIGN, SPLIT_DONE = 16, 17, 18, 19, 20, 21
SUBSCRIBE, CREDIT, BATCH = 24, 25, 26


def main():
    mode, seconds, mib, limit = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    with open(os.path.join(os.environ["GOLDMINER_RUN_DIR"], "worker.key")) as f:
        key = f.read().strip()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    host, port = os.environ["GOLDMINER_ADDR"].rsplit(":", 1)
    coord = socket.create_connection((host, int(port)), timeout=20)
    client_handshake(coord, key, "worker")
    send_frame(coord, REGISTER, {"data_addr": "127.0.0.1:%d" % listener.getsockname()[1],
                                 "host": socket.gethostname(), "pid": os.getpid(), "threads": 1})
    assert recv_frame(coord)[0] == REGISTERED
    split = None
    while split is None:
        send_frame(coord, GET_SPLIT, {})
        kind, meta, _ = recv_frame(coord)
        if kind == ASSIGN and meta.get("kind") == "assign":
            split = meta
        else:
            time.sleep(0.05)
    data = bytes((mib << 20) // 10 * 10)  # 10 samples of equal size
    sent = connections = 0
    number = 1_000_000
    told = False
    end = time.monotonic() + seconds
    conns = []  # [socket, credit]
    last_beat = taken = time.monotonic()
    dropped_after = None
    while time.monotonic() < end and sent * mib < limit:
        if time.monotonic() - last_beat > 1:
            try:
                send_frame(coord, HEARTBEAT, {})
            except OSError:  # the coordinator dropped it (mode cut): serve on till the end
                pass
            last_beat = time.monotonic()
        watch = [listener] + [c[0] for c in conns] + ([coord] if dropped_after is None else [])
        ready, _, _ = select.select(watch, [], [], 0.05)
        for r in ready:
            if r is coord:  # the coordinator says nothing unasked: this is its close
                try:
                    recv_frame(coord)
                except (OSError, ConnectionError, ValueError):
                    dropped_after = time.monotonic() - taken
                continue
            if r is listener:
                s, _ = listener.accept()
                s.settimeout(10)

                def key_for(role):
                    parts = role.split(":")
                    return ticket_key(key, int(parts[1]), int(parts[2])) if len(parts) == 3 else None
                try:
                    if server_handshake(s, key_for, "worker") is None or recv_frame(s)[0] != SUBSCRIBE:
                        s.close()
                        continue
                except (OSError, ConnectionError, ValueError):
                    s.close()
                    continue
                connections += 1
                conns.append([s, 0])
                continue
            conn = next(c for c in conns if c[0] is r)
            try:
                kind, meta, _ = recv_frame(r)
                if kind == CREDIT:
                    conn[1] += meta.get("n", 0)
                    if os.environ.get("GM_FLOOD_DEBUG"):
                        print("credit", meta, time.monotonic(), file=sys.stderr)
            except (OSError, ConnectionError, ValueError):
                conns.remove(conn)
                r.close()
        if mode == "hold" and dropped_after is not None:
            break
        for conn in list(conns):
            if mode == "hold":
                break
            s = conn[0]
            while conn[1] > 0 and sent * mib < limit and not conn[2:] == ["sent"]:
                n = 10
                split_id = split["split"]
                extra = {}
                body = data
                if mode == "short":
                    split_batch = 1 if conn[2:] == ["0"] else 0
                    n = 1 if split_batch == 1 else 10
                    keys, body = ["forged-short-%d-%d" % (split_batch, i) for i in range(n)], data[:len(data) // 10 * n]
                    if split_batch == 1:
                        extra = {"split_batches": 2}
                        conn[2:] = ["sent"]
                    else:
                        conn.append("0")
                elif mode == "cut":
                    keys, split_batch, extra = ["forged-cut-%d" % i for i in range(n)], 0, {"split_batches": 1}
                    conn.append("sent")
                elif mode == "repeat":
                    keys, split_batch = ["same"] * n, 0
                elif mode in ("other", "next-epoch"):  # batches 0 and 1 of the splits after its own
                    k = number - 1_000_000
                    split_id = (split_id + 1 + k // 2) % 400
                    keys, split_batch = ["forged-%d-%d" % (number, i) for i in range(n)], k % 2
                    number += 1
                else:
                    keys, split_batch = ["forged-%d-%d" % (number, i) for i in range(n)], number
                    number += 1
                epoch = split["epoch"] + (1 if mode == "next-epoch" else 0)
                meta = {"epoch": epoch, "index": 0, "split": split_id, "split_batch": split_batch,
                        "rank": split["rank"], "dtype": "uint8", "shape": [n, len(body) // n],
                        "layout": "none", "n": n, "keys": keys, "sample_indices": [zlib.crc32(k.encode()) for k in keys],
                        "data_bytes": len(body), "labels_bytes": 8 * n, **extra}
                try:
                    send_frame(s, BATCH, meta, body + bytes(8 * n))
                except OSError:
                    conns.remove(conn)
                    s.close()
                    break
                conn[1] -= 1
                sent += 1
                if mode in ("cut", "short") and len(conn) > 2 and conn[2] == "sent" and not told:
                    send_frame(coord, SPLIT_DONE, {"epoch": split["epoch"], "split": split["split"],
                                                   "batch_count": 1 if mode == "cut" else 2, "skipped": 0})
                    told = True
    for conn in conns:
        conn[0].close()
    coord.close()
    print(json.dumps({"mode": mode, "split": split["split"], "epoch": split["epoch"], "batches_sent": sent,
                      "mib_sent": sent * mib, "connections": connections,
                      "dropped_after_s": dropped_after}))


if __name__ == "__main__":
    main()
