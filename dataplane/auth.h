// Authentication of data-plane connections: a per-run secret, keys derived from
// it per role, and sealed frames after the handshake.
//
// `goldminer run` makes one secret per run (32 random bytes written as 64
// lower-case hex characters) and keeps it in the coordinator. The processes it
// starts get only the key of their role, in a file of mode 0600 named by
// GOLDMINER_SECRET_FILE:
//
//   worker key = hex HMAC-SHA256(secret, "goldminer-role-key-v2|worker")
//   client key = hex HMAC-SHA256(secret, "goldminer-role-key-v2|client")
//
// so a trainer (client key) cannot act as a worker and a worker cannot act as a
// client at the coordinator. A client meets a worker's data port with a ticket the
// coordinator gives it at SUBSCRIBE, for its rank and its session there:
//
//   ticket = hex HMAC-SHA256(worker key, "goldminer-ticket-v2|RANK|SESSION")
//
// claiming the role "client:RANK:SESSION" (TicketRole); the worker computes the
// same ticket from its key, so only the coordinator can issue one and only a
// worker can check one. Every connection runs a mutual challenge-response
// handshake first, with the key K of the role the client claims (see
// goldminer-protocol(7)):
//
//   server -> HELLO   {version: 3, nonce: N, role: server role}
//   client -> AUTH    {version: 3, role: R, client_nonce: C,
//                      mac: hex HMAC-SHA256(K, "goldminer-auth-v3|N|C|R|T")}
//   server -> WELCOME {mac: hex HMAC-SHA256(K, "goldminer-server-v3|C|N|server role|T")}
//          or ERROR   {message: "authentication failed"} and closes.
//
// T is the transport the end computing the MAC sees ("tcp" or "unix",
// Socket::transport()), so a relay from one transport to the other fails. N and C
// are 32 fresh random bytes as hex; HMAC keys are the keys' 64 hex
// characters. Both sides compare MACs in constant time; keys never travel except
// a ticket, in the sealed SUBSCRIBED. After WELCOME both ends seal every frame
// (dataplane/session.h) with keys derived from K, N and C.
//
// Thread-safety: every function is thread-safe; a handshake uses the Socket it
// is given from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "dataplane/socket.h"

namespace gm {

inline constexpr std::string_view kSecretFileEnv = "GOLDMINER_SECRET_FILE";
inline constexpr std::string_view kSecretEnv = "GOLDMINER_SECRET";
inline constexpr size_t kSecretHexChars = 64;
// Seconds a handshake may take; callers pass Deadline::After(kHandshakeTimeoutS)
// so that a peer that connects and sends nothing is dropped quickly.
inline constexpr double kHandshakeTimeoutS = 5.0;

// `bytes` random bytes from OpenSSL's RAND_bytes as lower-case hex. Internal when
// the generator fails.
Result<std::string> RandomHex(size_t bytes);

// A new run secret: RandomHex(32).
Result<std::string> NewSecret();

// Lower-case hex of HMAC-SHA256(key, message).
std::string HmacSha256Hex(std::string_view key, std::string_view message);

// InvalidArgument, naming `origin` (a file or variable) but never the secret,
// unless `secret` is 64 lower-case hex characters.
Status CheckSecret(std::string_view secret, std::string_view origin);

// Reads a secret file: it must be a regular file owned by this user with no
// permission bits for group or others (else InvalidArgument naming the file and
// the fix "chmod 600 FILE"); trailing whitespace is ignored.
Result<std::string> ReadSecretFile(const std::string& path);

// The run's secret: from the file named by GOLDMINER_SECRET_FILE when it is set,
// else from GOLDMINER_SECRET. NotFound when neither is set.
Result<std::string> LoadSecret();

// Removes GOLDMINER_SECRET and GOLDMINER_SECRET_FILE from this process's
// environment, their values overwritten first where they lie (the initial
// environment block, which /proc/PID/environ shows to the same user, included),
// so that neither the processes this one starts nor a reader of its environ find
// a key or a key file's path. Call once the secret was read (LoadSecret), before
// other threads start: the environment is not thread-safe.
void ForgetSecretEnvironment();

// Writes `secret` to `path` with mode 0600, atomically (a reader sees no file or
// the whole file, never one with wider permissions).
Status WriteSecretFile(const std::string& path, std::string_view secret);

inline constexpr std::string_view kWorkerRole = "worker";
inline constexpr std::string_view kClientRole = "client";

// The key `role` holds, derived from the run's secret (hex, like the secret).
std::string RoleKey(std::string_view run_secret, std::string_view role);
// The key of a client of `rank` in coordinator session `session` at data ports.
std::string TicketKey(std::string_view worker_key, int64_t rank, uint64_t session);
// "client:RANK:SESSION", the role a ticket's holder claims at a data port.
std::string TicketRole(int64_t rank, uint64_t session);
// Parses TicketRole's form; false for anything else (ranks 0..65535).
bool ParseTicketRole(std::string_view role, int64_t* rank, uint64_t* session);

// The DataLoader offload's tickets (python/goldminer/offload.py): the coordinator
// gives a client that asks OFFLOAD a channel number and the key of role
// "offload:RANK:CHANNEL" at data ports, where it opens virtual DataLoader workers
// (worker/virtual_workers.h):
//
//   offload ticket = hex HMAC-SHA256(worker key, "goldminer-offload-v1|RANK|CHANNEL")
//
// It is a client-key holder's: it runs code on the workers (goldminer-protocol(7)).
inline constexpr std::string_view kOffloadRole = "offload";
std::string OffloadTicketKey(std::string_view worker_key, int64_t rank, uint64_t channel);
std::string OffloadRole(int64_t rank, uint64_t channel);
bool ParseOffloadRole(std::string_view role, int64_t* rank, uint64_t* channel);

// The key a server checks a client claiming `role` with; an error (any) refuses
// the client as "authentication failed".
using KeyForRole = std::function<Result<std::string>(std::string_view role)>;

// The server's side of the handshake on a freshly accepted connection. OK: the
// client proved it knows the key of the role it claimed (`key_for(role)`), and
// the socket seals frames from now on; `*client_role` (when given) is the role it
// claimed, which the MAC covers. InvalidArgument "authentication failed" for a
// wrong secret (the client was sent ERROR), InvalidArgument naming both versions
// for a version mismatch, Corrupt for a peer that does not speak the protocol,
// Unavailable when it times out or closes. On failure, close the socket.
// With `hello_nonce`, the server's HELLO was sent already (SendServerHello,
// before the connection waited in a Lobby for the client's answer).
Status ServerHandshake(Socket& socket, const KeyForRole& key_for, std::string_view server_role,
                       Deadline deadline, std::string* client_role,
                       const std::string* hello_nonce = nullptr);
// The handshake's first frame, HELLO with a fresh nonce (returned).
Result<std::string> SendServerHello(Socket& socket, std::string_view server_role,
                                    Deadline deadline);
// The same with one key for every role (tests, and servers with a single role).
Status ServerHandshake(Socket& socket, std::string_view key, std::string_view server_role,
                       Deadline deadline, std::string* client_role);

// The client's side, right after connecting, with the key of `client_role`.
// OK: the server proved it knows that key, and the socket seals frames from now on; `*server_role`
// (when given) is the role its HELLO named. Failures as for ServerHandshake; a server that rejects
// our MAC, or whose WELCOME does not prove the secret, is InvalidArgument "authentication failed".
Status ClientHandshake(Socket& socket, std::string_view secret, std::string_view client_role,
                       Deadline deadline, std::string* server_role);

// Connects with `connect` and runs ClientHandshake on what it gives, within
// `deadline`. A server that closes or refuses the connection before WELCOME
// (Unavailable: evicted from a full lobby during a flood, a full connection table)
// is dialled again after a pause (20 ms, doubling to 1 s) until `deadline`; the
// last failure is returned then. A connect that fails, a refused key or version and
// a malformed frame are returned at once.
Result<Socket> DialHandshake(const std::function<Result<Socket>()>& connect,
                             std::string_view secret, std::string_view client_role,
                             Deadline deadline, std::string* server_role);

}  // namespace gm
