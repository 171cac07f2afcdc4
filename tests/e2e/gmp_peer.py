#!/usr/bin/python3
"""A hostile GMP1 peer for tests/e2e/attack_test.sh: it attacks a live
`goldminer run` (the coordinator at $GOLDMINER_ADDR) and its data workers the way
goldminer-protocol(7)'s threat model says they must withstand.

Run by tests/e2e/attack_trainer.py inside the run (so it has the address and, for
attacks that need it, the run's secret file from $GOLDMINER_SECRET_FILE).

  gmp_peer.py ATTACK      one of the attacks below; prints one JSON line of results

Attacks:
  churn N          N connect/close cycles without a byte sent
  idle N           open N connections and send nothing; reports how many the
                   coordinator closed within 4.5 s (before the handshake deadline)
  slow             after the handshake, send 1 byte of a frame header and no more
  bad-subscribe    authenticated client: SUBSCRIBE {"rank": "0"} (a string)
  second-rank0     authenticated client: SUBSCRIBE as rank 0 while the trainer is
  fake-split-done  authenticated worker: SPLIT_DONE batch_count 0 for every split
  big-payload      authenticated worker: a HEARTBEAT with a 60 MiB payload
  escape-role      a handshake whose role holds terminal escapes
  data-hijack      authenticated client: SUBSCRIBE rank 0 at the data port in
                   $GOLDMINER_ADDR while the trainer's connection is live
"""
import hashlib
import hmac
import json
import os
import resource
import secrets
import socket
import struct
import sys
import time

HELLO, AUTH, WELCOME, ERROR = 1, 2, 3, 4
REGISTER, REGISTERED, HEARTBEAT, GET_SPLIT, ASSIGN, SPLIT_DONE = 16, 17, 18, 19, 20, 21
SUBSCRIBE, CREDIT, SUBSCRIBED, GET_PLAN, PLAN = 24, 25, 29, 30, 31


def address():
    host, port = os.environ["GOLDMINER_ADDR"].rsplit(":", 1)
    return host, int(port)


def secret():
    with open(os.environ["GOLDMINER_SECRET_FILE"]) as f:
        return f.read().strip()


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gmp_wire import send_frame, recv_frame as recv_whole_frame  # noqa: E402


def recv_frame(sock):
    """(type, meta) of the next frame; its payload is read and dropped."""
    msg_type, meta, _ = recv_whole_frame(sock)
    return msg_type, meta


def connect(addr=None, role="client", key=None, raw_role=None):
    """A socket after the client side of the handshake (dataplane/auth.h)."""
    sock = socket.create_connection(addr or address(), timeout=20)
    _, hello = recv_frame(sock)
    role_sent = raw_role if raw_role is not None else role
    client_nonce = secrets.token_hex(32)
    key = (key or secret()).encode()
    mac = hmac.new(key, ("goldminer-auth-v1|%s|%s|%s" % (hello["nonce"], client_nonce, role_sent)).encode(),
                   hashlib.sha256).hexdigest()
    send_frame(sock, AUTH, {"version": 1, "role": role_sent, "client_nonce": client_nonce, "mac": mac})
    msg_type, meta = recv_frame(sock)
    if msg_type != WELCOME:
        raise ConnectionError("handshake refused: %r" % meta)
    return sock


def answer(sock):
    """(type, meta) of the next frame, or ("closed", reason)."""
    try:
        return recv_frame(sock)
    except (ConnectionError, OSError, struct.error) as e:
        return "closed", str(e)


def churn(n):
    for _ in range(n):
        socket.create_connection(address(), timeout=20).close()
    return {"cycles": n}


def idle(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 256)), hard))
    socks = [socket.create_connection(address(), timeout=20) for _ in range(n)]
    for s in socks:
        s.setblocking(False)
    open_socks, closed = list(socks), 0
    # Until all but the bound's 64 are closed, or 4.5 s: before the 5 s handshake
    # deadline, so what closes them is the bound, not the deadline.
    deadline = time.monotonic() + 4.5
    while len(open_socks) > 64 and time.monotonic() < deadline:
        still = []
        for s in open_socks:
            try:
                data = s.recv(1 << 16)  # HELLO, then end of file for the evicted
                while data:
                    data = s.recv(1 << 16)
                closed += 1
            except BlockingIOError:
                still.append(s)
            except OSError:
                closed += 1
        open_socks = still
        time.sleep(0.05)
    for s in socks:
        s.close()
    return {"held": n, "closed_by_server": closed}


def main():
    attack = sys.argv[1]
    if attack == "churn":
        out = churn(int(sys.argv[2]))
    elif attack == "idle":
        out = idle(int(sys.argv[2]))
    elif attack == "bad-subscribe":
        s = connect()
        send_frame(s, SUBSCRIBE, {"rank": "0", "world_size": 1})
        out = {"answer": answer(s)}
    elif attack == "second-rank0":
        s = connect()
        send_frame(s, SUBSCRIBE, {"rank": 0, "world_size": 1})
        out = {"answer": answer(s)}
    elif attack == "fake-split-done":
        s = connect(role="worker")
        send_frame(s, REGISTER, {"data_addr": "127.0.0.1:9"})
        assert recv_frame(s)[0] == REGISTERED
        for split in range(64):
            send_frame(s, SPLIT_DONE, {"epoch": 0, "split": split, "batch_count": 0})
        send_frame(s, GET_SPLIT, {})  # still served: the lies were ignored, not fatal
        out = {"answer": answer(s)}
    elif attack == "big-payload":
        s = connect(role="worker")
        send_frame(s, REGISTER, {"data_addr": "127.0.0.1:9"})
        assert recv_frame(s)[0] == REGISTERED
        try:
            send_frame(s, HEARTBEAT, {}, b"\0" * (60 << 20))
        except OSError:
            pass
        out = {"answer": answer(s)}
    elif attack == "escape-role":
        try:
            connect(raw_role="\x1b[31mred\x1b[0m\r\x07", key="00" * 32)
            out = {"answer": "accepted"}
        except ConnectionError as e:
            out = {"answer": str(e)}
    elif attack == "slow":
        s = connect()
        s.sendall(b"G")
        start = time.monotonic()
        result = answer(s)
        out = {"answer": result, "seconds": time.monotonic() - start}
    elif attack == "data-hijack":  # GOLDMINER_ADDR is a worker's data port here
        s = connect()
        send_frame(s, SUBSCRIBE, {"rank": 0})
        send_frame(s, CREDIT, {"n": 4})
        out = {"answer": answer(s)}
    else:
        sys.exit("unknown attack " + attack)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
