#!/usr/bin/python3
"""A hostile GMP1 peer for tests/e2e/attack_test.sh: it attacks a live
`goldminer run` (the coordinator at $GOLDMINER_ADDR) and its data workers the way
goldminer-protocol(7)'s threat model says they must withstand.

Run by tests/e2e/attack_trainer.py inside the run, so it holds what a trainer
holds: the address and the client key ($GOLDMINER_SECRET_FILE). Attacks marked
"worker key" model a compromised worker: they read worker.key from the run's
directory ($GOLDMINER_RUN_DIR), which a process of the run's user can.

  gmp_peer.py ATTACK      one of the attacks below; prints one JSON line of results

Attacks:
  churn N          N connect/close cycles without a byte sent
  handshakes N     N legitimate client handshakes, dialled as goldminer's clients
                   dial (again when dropped before WELCOME); reports failures
  idle N           open N connections and send nothing; reports how many the
                   coordinator closed within 4.5 s of their HELLO (before the
                   handshake deadline)
  slow             after the handshake, send 1 byte of a frame header and no more
  bad-subscribe    client key: SUBSCRIBE {"rank": "0"} (a string)
  second-rank0     client key: SUBSCRIBE as rank 0 while the trainer is
  client-as-worker client key: the handshake as role "worker"
  fake-split-done  worker key: SPLIT_DONE batch_count 0 for every split (dropped)
  big-payload      worker key: a HEARTBEAT with a 60 MiB payload
  replay           worker key: a sealed HEARTBEAT sent twice (a replay)
  unsealed         worker key: an unsealed HEARTBEAT after the handshake
  tamper           worker key: a sealed HEARTBEAT with one meta byte changed
  escape-role      a handshake whose role holds terminal escapes
  data-hijack      client key: rank 0 at the data port in $GOLDMINER_ADDR while
                   the trainer's connection is live, without a ticket
  forged-ticket    client key: a ticket made up for rank 0, session 999999
  stale-ticket R S the real ticket of rank R's ended session S (made with the
                   worker key, as the coordinator makes it) at the data
                   port in $GOLDMINER_ADDR: SUBSCRIBE, CREDIT 64, then reports
                   what came within 3 s (a BATCH must not: the data port learned
                   the rank's newer session from the coordinator)
"""
import json
import os
import resource
import socket
import struct
import sys
import time

REGISTER, REGISTERED, HEARTBEAT, GET_SPLIT, ASSIGN, SPLIT_DONE = 16, 17, 18, 19, 20, 21
SUBSCRIBE, CREDIT, SUBSCRIBED, GET_PLAN, PLAN = 24, 25, 29, 30, 31
BATCH, ERROR = 26, 4


def address():
    host, port = os.environ["GOLDMINER_ADDR"].rsplit(":", 1)
    return host, int(port)


def client_key():
    with open(os.environ["GOLDMINER_SECRET_FILE"]) as f:
        return f.read().strip()


def worker_key():
    with open(os.path.join(os.environ["GOLDMINER_RUN_DIR"], "worker.key")) as f:
        return f.read().strip()


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gmp_wire import (client_handshake, frame_bytes, send_frame, recv_frame as recv_whole_frame,  # noqa: E402
                      ticket_key, ticket_role)


def recv_frame(sock):
    """(type, meta) of the next frame; its payload is read and dropped."""
    msg_type, meta, _ = recv_whole_frame(sock)
    return msg_type, meta


def connect(role="client", key=None):
    """A socket after the client side of the handshake (dataplane/auth.h), as
    `role` with `key` (default: the client key)."""
    sock = socket.create_connection(address(), timeout=20)
    client_handshake(sock, key or client_key(), role)
    return sock


def registered_worker():
    """A connection registered as a worker, with the worker key."""
    s = connect(role="worker", key=worker_key())
    send_frame(s, REGISTER, {"data_addr": "127.0.0.1:9"})
    assert recv_frame(s)[0] == REGISTERED
    return s


def refused(**kwargs):
    """The message of a refused handshake, or "accepted"."""
    try:
        connect(**kwargs)
        return "accepted"
    except ConnectionError as e:
        return str(e)


def answer(sock):
    """(type, meta) of the next frame, or ("closed", reason)."""
    try:
        return recv_frame(sock)
    except (ConnectionError, OSError, struct.error) as e:
        return "closed", str(e)


def dial(within_s=5.0):
    """connect(), dialled again as goldminer's clients and workers do (DialHandshake
    in dataplane/auth.h) while the server drops the connection before WELCOME (its
    lobby is full during a flood): pauses of 20 ms doubling to 1 s, within
    `within_s` (the client's default connect timeout). A refusal (an ERROR frame)
    is final. (socket, how many times it was dialled again)."""
    deadline, pause, again = time.monotonic() + within_s, 0.02, 0
    while True:
        try:
            return connect(), again
        except ConnectionError as e:
            if str(e).startswith("handshake refused"):
                raise
            if time.monotonic() + pause >= deadline:
                raise
        except OSError:
            if time.monotonic() + pause >= deadline:
                raise
        time.sleep(pause)
        pause, again = min(pause * 2, 1.0), again + 1


def handshakes(n):
    """n legitimate client handshakes, 10 ms apart (beside a churn and an idle
    flood), each dialled as our clients dial: how many failed, and why (the
    first), and how many were dialled again before they got through."""
    refused_n, first, redialled = 0, None, 0
    for _ in range(n):
        try:
            sock, again = dial()
            sock.close()
            redialled += 1 if again else 0
        except (ConnectionError, OSError) as e:
            refused_n += 1
            first = first or str(e)
        time.sleep(0.01)
    return {"done": n, "refused": refused_n, "first_refusal": first, "redialled": redialled}


def churn(n):
    for _ in range(n):
        socket.create_connection(address(), timeout=20).close()
    return {"cycles": n}


def idle(n):
    """Opens n connections and sends nothing. A connection counts as closed by the
    server's bound when it closes within 4.5 s of its HELLO (before the 5 s
    handshake deadline, so what closed it is the lobby's bound, not the deadline):
    timed from each one's own HELLO, so a server slow to accept (a busy machine)
    does not count against the bound."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 256)), hard))
    socks = [socket.create_connection(address(), timeout=20) for _ in range(n)]
    for s in socks:
        s.setblocking(False)
    hello_at, closed, open_at_bound = {}, 0, 0
    waiting = list(socks)
    deadline = time.monotonic() + 60  # for the server to accept them all
    while waiting and time.monotonic() < deadline:
        still = []
        for s in waiting:
            now = time.monotonic()
            try:
                data = s.recv(1 << 16)  # HELLO, then end of file for the evicted
                while data:
                    hello_at.setdefault(s, now)
                    data = s.recv(1 << 16)
                if now - hello_at.get(s, now) < 4.5:
                    closed += 1
            except BlockingIOError:
                if s in hello_at and now - hello_at[s] >= 4.5:
                    open_at_bound += 1  # held to the deadline
                else:
                    still.append(s)
            except OSError:
                closed += 1
        waiting = still
        time.sleep(0.05)
    for s in socks:
        s.close()
    return {"held": n, "closed_by_server": closed, "open_at_4_5_s": open_at_bound,
            "never_answered": len(waiting)}


def main():
    attack = sys.argv[1]
    if attack == "churn":
        out = churn(int(sys.argv[2]))
    elif attack == "handshakes":
        out = handshakes(int(sys.argv[2]))
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
    elif attack == "client-as-worker":
        out = {"answer": refused(role="worker")}
    elif attack == "fake-split-done":
        s = registered_worker()
        # The range source knows every split's size: the first lie gets the worker
        # dropped (it holds none of them, so the run goes on).
        try:
            for split in range(64):
                send_frame(s, SPLIT_DONE, {"epoch": 0, "split": split, "batch_count": 0})
            send_frame(s, GET_SPLIT, {})
        except OSError:
            pass
        out = {"answer": answer(s)}
    elif attack in ("replay", "unsealed", "tamper"):
        s = registered_worker()
        out = {}
        if attack == "replay":  # the genuine frame is answered, its copy ends the connection
            frame = frame_bytes(s, GET_SPLIT, {})
            s.sendall(frame)
            out["first"] = answer(s)[0]
        else:
            frame = frame_bytes(s, HEARTBEAT, {"batches_sent": 0})
            if attack == "unsealed":
                frame = frame[:6] + b"\0\0" + frame[8:-32]  # flags 0, no MAC
            else:
                frame = frame.replace(b'"batches_sent": 0', b'"batches_sent": 9')
        s.sendall(frame)
        out["answer"] = answer(s)
    elif attack == "big-payload":
        s = registered_worker()
        try:
            send_frame(s, HEARTBEAT, {}, b"\0" * (60 << 20))
        except OSError:
            pass
        out = {"answer": answer(s)}
    elif attack == "escape-role":
        out = {"answer": refused(role="\x1b[31mred\x1b[0m\r\x07", key="00" * 32)}
    elif attack == "slow":
        s = connect()
        s.sendall(b"G")
        start = time.monotonic()
        result = answer(s)
        out = {"answer": result, "seconds": time.monotonic() - start}
    elif attack == "data-hijack":  # GOLDMINER_ADDR is a worker's data port here
        out = {"answer": refused()}
    elif attack == "stale-ticket":
        rank, session = int(sys.argv[2]), int(sys.argv[3])
        try:
            s = connect(role=ticket_role(rank, session), key=ticket_key(worker_key(), rank, session))
        except ConnectionError as e:
            out = {"handshake": str(e), "batches": 0}
        else:
            send_frame(s, SUBSCRIBE, {"rank": rank})
            send_frame(s, CREDIT, {"n": 64})
            s.settimeout(3)
            got, batches = [], 0
            while True:
                try:
                    msg_type, meta = recv_frame(s)
                except socket.timeout:
                    got.append("silence")
                    break
                except (ConnectionError, OSError, struct.error) as e:
                    got.append("closed: %s" % e)
                    break
                batches += msg_type == BATCH
                got.append(msg_type if msg_type != ERROR else meta.get("message"))
            out = {"handshake": "accepted", "answers": got, "batches": batches}
    elif attack == "forged-ticket":  # at a data port too
        out = {"answer": refused(role=ticket_role(0, 999999), key=ticket_key(client_key(), 0, 999999))}
    else:
        sys.exit("unknown attack " + attack)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
