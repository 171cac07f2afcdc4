// Authentication of data-plane connections with a per-run shared secret.
//
// `goldminer run` makes one secret per run (32 random bytes written as 64
// lower-case hex characters), stores it in a file of mode 0600 and hands the
// file's path to the processes it starts (GOLDMINER_SECRET_FILE). Every
// connection then runs a mutual challenge-response handshake before anything
// else (see goldminer-protocol(7)):
//
//   server -> HELLO   {version: 1, nonce: N, role: server role}
//   client -> AUTH    {version: 1, role: R, client_nonce: C,
//                      mac: hex HMAC-SHA256(secret, "goldminer-auth-v1|N|C|R")}
//   server -> WELCOME {mac: hex HMAC-SHA256(secret, "goldminer-server-v1|C|N")}
//          or ERROR   {message: "authentication failed"} and closes.
//
// N and C are 32 fresh random bytes as hex; the HMAC key is the secret's 64 hex
// characters. Both sides compare MACs in constant time. The secret never travels.
//
// Thread-safety: every function is thread-safe; a handshake uses the Socket it
// is given from one thread.
#pragma once

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

// Writes `secret` to `path` with mode 0600, atomically (a reader sees no file or
// the whole file, never one with wider permissions).
Status WriteSecretFile(const std::string& path, std::string_view secret);

// The server's side of the handshake on a freshly accepted connection. OK: the
// client proved it knows `secret`; `*client_role` (when given) is the role it
// claimed, which the MAC covers. InvalidArgument "authentication failed" for a
// wrong secret (the client was sent ERROR), InvalidArgument naming both versions
// for a version mismatch, Corrupt for a peer that does not speak the protocol,
// Unavailable when it times out or closes. On failure, close the socket.
Status ServerHandshake(Socket& socket, std::string_view secret, std::string_view server_role,
                       Deadline deadline, std::string* client_role);

// The client's side, right after connecting. OK: the server proved it knows
// `secret`; `*server_role` (when given) is the role its HELLO named. Failures as
// for ServerHandshake; a server that rejects our MAC, or whose WELCOME does not
// prove the secret, is InvalidArgument "authentication failed".
Status ClientHandshake(Socket& socket, std::string_view secret, std::string_view client_role,
                       Deadline deadline, std::string* server_role);

}  // namespace gm
