#!/usr/bin/python3
"""A local user who holds no key and squats the same-host names of data workers.

Run by tests/e2e/squat_test.sh as a second user before the run starts. It binds
the abstract Unix name "@goldminer-data/127.0.0.1:P" (goldminer-protocol(7), SAME
HOST) for every port P of the kernel's ephemeral range, so whichever port a worker
gets, its same-host name is already taken. Every connection it accepts it relays
to the worker's TCP port 127.0.0.1:P, and it zeroes the payload bytes of every
BATCH frame it sees going to the client (the part the handshake's MACs do not
cover). So if a client completed a handshake through it, the trainer would get
wrong pixels and labels.

  squatter.py OUT READY      writes READY once every name is bound; on SIGTERM
                             writes OUT: {"bound", "accepted", "client_bytes",
                             "batches_rewritten"} summed over its processes

The range is split over several processes, since one may not hold enough
descriptors for the whole of it.
"""
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time

CHUNK = 9000  # names per process (below a 10,000-descriptor limit with room for relays)
HEADER = struct.Struct("<4sBBHIIQ")
BATCH = 26


class Relay:
    """One accepted connection and its TCP side; rewrites BATCH payloads to the client."""

    def __init__(self, inner, outer):
        self.inner, self.outer = inner, outer
        self.pending = b""  # worker -> client bytes not yet parsed
        self.payload_left = 0  # BATCH payload bytes still to zero


def rewrite(relay, data, stats):
    """The worker's bytes with every BATCH payload zeroed (frames parsed on the fly)."""
    out = bytearray()
    buf = relay.pending + data
    i = 0
    while i < len(buf):
        if relay.payload_left:
            n = min(relay.payload_left, len(buf) - i)
            out += bytes(n)
            relay.payload_left -= n
            i += n
            continue
        if len(buf) - i < HEADER.size:
            break
        magic, _, kind, flags, meta_len, _, payload_len = HEADER.unpack_from(buf, i)
        head = HEADER.size + meta_len + (32 if flags & 1 else 0)
        if magic != b"GMP1" or len(buf) - i < head:
            break
        out += buf[i:i + head]
        i += head
        relay.payload_left = payload_len
        if kind == BATCH:
            stats["batches_rewritten"] += 1
    relay.pending = bytes(buf[i:])
    return bytes(out)


def serve(ports, out_path, ready_path):
    stats = {"bound": 0, "accepted": 0, "client_bytes": 0, "batches_rewritten": 0}
    sel = selectors.DefaultSelector()
    for port in ports:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind("\0goldminer-data/127.0.0.1:%d" % port)
            s.listen(16)
        except OSError:
            s.close()
            continue
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, ("listen", port))
        stats["bound"] += 1

    def finish(*_):
        with open(out_path, "w") as f:
            json.dump(stats, f)
        os._exit(0)

    signal.signal(signal.SIGTERM, finish)
    open(ready_path, "w").close()
    while True:
        for key, _ in sel.select():
            kind, arg = key.data
            if kind == "listen":
                try:
                    inner, _ = key.fileobj.accept()
                except OSError:
                    continue
                stats["accepted"] += 1
                try:
                    outer = socket.create_connection(("127.0.0.1", arg), timeout=2)
                except OSError:
                    inner.close()
                    continue
                relay = Relay(inner, outer)
                sel.register(inner, selectors.EVENT_READ, ("client", relay))
                sel.register(outer, selectors.EVENT_READ, ("worker", relay))
                continue
            relay = arg
            try:
                data = key.fileobj.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                for s in (relay.inner, relay.outer):
                    try:
                        sel.unregister(s)
                    except (KeyError, ValueError):
                        pass
                    s.close()
                continue
            try:
                if kind == "client":
                    stats["client_bytes"] += len(data)
                    relay.outer.sendall(data)
                else:
                    relay.inner.sendall(rewrite(relay, data, stats))
            except OSError:
                pass


def main():
    out_path, ready_path = sys.argv[1], sys.argv[2]
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low, high = (int(x) for x in f.read().split())
    ports = list(range(low, high + 1))
    children = []
    for n, start in enumerate(range(0, len(ports), CHUNK)):
        pid = os.fork()
        if pid == 0:
            serve(ports[start:start + CHUNK], "%s.%d" % (out_path, n), "%s.%d" % (ready_path, n))
        children.append((pid, n))
    for _, n in children:  # every child bound its names
        while not os.path.exists("%s.%d" % (ready_path, n)):
            time.sleep(0.05)
    open(ready_path, "w").close()

    def stop(*_):
        total = {}
        for pid, n in children:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
            try:
                with open("%s.%d" % (out_path, n)) as f:
                    for k, v in json.load(f).items():
                        total[k] = total.get(k, 0) + v
            except OSError:
                pass
        with open(out_path, "w") as f:
            json.dump(total, f)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
