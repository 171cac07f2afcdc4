"""GMP1 frames in Python, for the tests' own peers (tests/python/test_loader.py's
fake servers, tests/e2e/gmp_peer.py's attacker): frames, the handshake, role keys,
tickets and sealed frames. The format is described in dataplane/protocol.h,
dataplane/auth.h, dataplane/session.h and goldminer-protocol(7)."""
import hashlib
import hmac
import json
import secrets
import socket
import struct
import weakref

HEADER = struct.Struct("<4sBBHIIQ")
VERSION = 3
SEALED = 1  # header flag: a 32-byte MAC follows the meta
HELLO, AUTH, WELCOME, ERROR = 1, 2, 3, 4

# The session of each socket whose handshake is done (see Session).
SESSIONS = weakref.WeakKeyDictionary()


def hmac_hex(key, message):
    return hmac.new(key.encode(), message.encode(), hashlib.sha256).hexdigest()


def role_key(secret, role):
    return hmac_hex(secret, "goldminer-role-key-v2|" + role)


def ticket_key(worker_key, rank, session):
    return hmac_hex(worker_key, "goldminer-ticket-v2|%d|%d" % (rank, session))


def ticket_role(rank, session):
    return "client:%d:%d" % (rank, session)


class Session:
    """Seals and checks the frames of one connection after its handshake."""

    def __init__(self, key, nonce, client_nonce, is_server):
        session = hmac.new(key.encode(), ("goldminer-session-v2|%s|%s" % (nonce, client_nonce)).encode(),
                           hashlib.sha256).digest()
        to_server = hmac.new(session, b"client-to-server", hashlib.sha256).digest()
        to_client = hmac.new(session, b"server-to-client", hashlib.sha256).digest()
        self.send_key, self.recv_key = (to_client, to_server) if is_server else (to_server, to_client)
        self.send_seq = self.recv_seq = 0

    @staticmethod
    def _mac(key, seq, header, meta):
        return hmac.new(key, struct.pack("<Q", seq) + header + meta, hashlib.sha256).digest()

    def seal(self, header, meta):
        mac = self._mac(self.send_key, self.send_seq, header, meta)
        self.send_seq += 1
        return mac

    def check(self, header, meta, mac):
        want = self._mac(self.recv_key, self.recv_seq, header, meta)
        self.recv_seq += 1
        return hmac.compare_digest(want, mac)


def frame_bytes(sock, msg_type, meta, payload=b""):
    """The frame as bytes; sealed (and counted) when `sock` has a session."""
    body = json.dumps(meta).encode()
    session = SESSIONS.get(sock)
    header = HEADER.pack(b"GMP1", VERSION, msg_type, SEALED if session else 0, len(body), 0, len(payload))
    return header + body + (session.seal(header, body) if session else b"") + payload


def send_frame(sock, msg_type, meta, payload=b""):
    sock.sendall(frame_bytes(sock, msg_type, meta, payload))


def recv_exact(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("peer closed")
        out += chunk
    return out


def recv_frame(sock):
    """(type, meta, payload) of the next frame; ConnectionError when its seal is wrong."""
    header = recv_exact(sock, HEADER.size)
    magic, _, msg_type, flags, meta_len, _, payload_len = HEADER.unpack(header)
    assert magic == b"GMP1", magic
    body = recv_exact(sock, meta_len)
    session = SESSIONS.get(sock)
    if session is not None:
        if not flags & SEALED or not session.check(header, body, recv_exact(sock, 32)):
            raise ConnectionError("frame seal does not match")
    meta = json.loads(body or b"{}")
    return msg_type, meta, recv_exact(sock, payload_len)


def transport(sock):
    """What the handshake's MACs bind: "unix" or "tcp" (goldminer-protocol(7))."""
    return "unix" if sock.family == socket.AF_UNIX else "tcp"


def client_handshake(sock, key, role):
    """The client side (dataplane/auth.h) with `key` as `role`; the server's role.
    ConnectionError with the server's message when it refuses."""
    _, hello, _ = recv_frame(sock)
    client_nonce = secrets.token_hex(32)
    mac = hmac_hex(key, "goldminer-auth-v3|%s|%s|%s|%s" % (hello["nonce"], client_nonce, role, transport(sock)))
    send_frame(sock, AUTH, {"version": VERSION, "role": role, "client_nonce": client_nonce, "mac": mac})
    msg_type, meta, _ = recv_frame(sock)
    if msg_type != WELCOME:
        raise ConnectionError("handshake refused: %r" % meta)
    SESSIONS[sock] = Session(key, hello["nonce"], client_nonce, is_server=False)
    return hello["role"]


def server_handshake(sock, key_for, role):
    """The server side; `key_for(claimed role)` is the key to check (None: refuse).
    The client's role, or None when it was refused."""
    nonce = secrets.token_hex(32)
    send_frame(sock, HELLO, {"version": VERSION, "nonce": nonce, "role": role})
    _, auth, _ = recv_frame(sock)
    key = key_for(auth["role"])
    expected = key and hmac_hex(key, "goldminer-auth-v3|%s|%s|%s|%s" % (
        nonce, auth["client_nonce"], auth["role"], transport(sock)))
    if not key or not hmac.compare_digest(expected, auth["mac"]):
        send_frame(sock, ERROR, {"message": "authentication failed"})
        return None
    send_frame(sock, WELCOME, {"mac": hmac_hex(key, "goldminer-server-v3|%s|%s|%s|%s" % (
        auth["client_nonce"], nonce, role, transport(sock)))})
    SESSIONS[sock] = Session(key, nonce, auth["client_nonce"], is_server=True)
    return auth["role"]
