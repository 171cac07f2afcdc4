"""GMP1 frames in Python, for the tests' own peers (tests/python/test_loader.py's
fake servers, tests/e2e/gmp_peer.py's attacker). The format is described in
dataplane/protocol.h and goldminer-protocol(7)."""
import json
import struct

HEADER = struct.Struct("<4sBBHIIQ")


def send_frame(sock, msg_type, meta, payload=b""):
    body = json.dumps(meta).encode()
    sock.sendall(HEADER.pack(b"GMP1", 1, msg_type, 0, len(body), 0, len(payload)) + body + payload)


def recv_exact(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("peer closed")
        out += chunk
    return out


def recv_frame(sock):
    """(type, meta, payload) of the next frame."""
    magic, _, msg_type, _, meta_len, _, payload_len = HEADER.unpack(recv_exact(sock, HEADER.size))
    assert magic == b"GMP1", magic
    meta = json.loads(recv_exact(sock, meta_len) or b"{}")
    return msg_type, meta, recv_exact(sock, payload_len)
