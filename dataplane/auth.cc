#include "dataplane/auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "core/digest.h"
#include "core/log.h"
#include "core/os/file_util.h"
#include "core/os/unique_fd.h"
#include "dataplane/messages.h"
#include "dataplane/protocol.h"

namespace gm {
namespace {

constexpr size_t kNonceBytes = 32;
constexpr size_t kMaxRoleChars = 64;
constexpr std::string_view kAuthFailed = "authentication failed";

bool IsHex(std::string_view s, size_t chars) {
  if (s.size() != chars) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool SameMac(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// Both MACs cover the transport each end sees ("tcp" or "unix"): a process that
// takes a worker's same-host name and relays to its TCP port cannot complete a
// handshake, since the two ends compute different MACs.
std::string ClientMac(std::string_view secret, std::string_view nonce,
                      std::string_view client_nonce, std::string_view role,
                      std::string_view transport) {
  return HmacSha256Hex(secret, "goldminer-auth-v3|" + std::string(nonce) + "|" +
                                   std::string(client_nonce) + "|" + std::string(role) + "|" +
                                   std::string(transport));
}

// Covers the role the server's HELLO named, so a client can trust it.
std::string ServerMac(std::string_view secret, std::string_view client_nonce,
                      std::string_view nonce, std::string_view server_role,
                      std::string_view transport) {
  return HmacSha256Hex(secret, "goldminer-server-v3|" + std::string(client_nonce) + "|" +
                                   std::string(nonce) + "|" + std::string(server_role) + "|" +
                                   std::string(transport));
}

// A string member of a handshake message, or "" when absent or not a string.
std::string Field(const Frame& f, const char* key) {
  auto it = f.meta.find(key);
  return it != f.meta.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool ValidRole(std::string_view role) { return !role.empty() && role.size() <= kMaxRoleChars; }

// The peer's protocol version in a HELLO or AUTH; -1 when missing or not an integer.
int64_t Version(const Frame& f) {
  auto it = f.meta.find("version");
  if (it == f.meta.end() || !it->is_number_integer()) return -1;
  return it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX ? -1 : it->get<int64_t>();
}

std::string VersionMismatch(int64_t theirs) {
  return "protocol version mismatch: the peer speaks version " + std::to_string(theirs) +
         ", this side speaks version " + std::to_string(kProtocolVersion);
}

// Tells the peer why we give up and returns `status`. Best effort: the peer may
// be gone already, and `status` is what matters to our caller.
Status Refuse(Socket& socket, std::string_view message, Status status) {
  SendError(socket, std::string(message), Deadline::After(0.5));
  return status;
}

// A frame of `want` type, or why not (an ERROR from the peer becomes its message).
Result<Frame> Expect(Socket& socket, MsgType want, Deadline deadline) {
  GM_ASSIGN_OR_RETURN(Frame f, RecvFrame(socket, kHandshakeLimits, deadline));
  if (f.type == want) return f;
  if (f.type == MsgType::kError) {
    std::string msg = Field(f, "message");
    if (msg == kAuthFailed) {
      // The server's MAC check covers the key and the transport it sees, and it
      // cannot tell which failed: both causes are named.
      return Status::InvalidArgument(
          socket.peer() + ": authentication failed: the peer refused our proof: either our " +
          "key is not this run's key for the role we claim (check " + std::string(kSecretFileEnv) +
          ", which wins over " + std::string(kSecretEnv) +
          "), or the connection reached it through a relay between a Unix socket and a TCP port " +
          "(the handshake covers the transport each end sees: dial the peer's own address)");
    }
    // Refusals are for a version, a role or a malformed frame: dialling again
    // would not help (unlike a connection dropped without a word: DialHandshake).
    return Status::InvalidArgument(socket.peer() + ": refused the handshake: " + PeerText(msg));
  }
  return Status::Corrupt(socket.peer() + ": expected " + std::string(MsgTypeName(want)) +
                         " during the handshake, got " + std::string(MsgTypeName(f.type)));
}

}  // namespace

Result<std::string> RandomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (RAND_bytes(buf.data(), static_cast<int>(bytes)) != 1) {
    return Status::Internal("OpenSSL RAND_bytes failed to produce random bytes");
  }
  return ToHex(buf.data(), buf.size());
}

Result<std::string> NewSecret() { return RandomHex(kSecretHexChars / 2); }

std::string HmacSha256Hex(std::string_view key, std::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  return ToHex(mac, len);
}

Status CheckSecret(std::string_view secret, std::string_view origin) {
  if (IsHex(secret, kSecretHexChars)) return Status::Ok();
  return Status::InvalidArgument(
      std::string(origin) + ": the secret must be " + std::to_string(kSecretHexChars) +
      " lower-case hex characters (got " + std::to_string(secret.size()) + " characters)");
}

Result<std::string> ReadSecretFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int err = errno;
    std::string msg = path + ": cannot open the secret file: " + std::strerror(err);
    return err == ENOENT ? Status::NotFound(msg) : Status::IoError(msg);
  }
  // Checked and read on this one descriptor: a file swapped in between a check by
  // name and a read by name cannot slip through.
  const UniqueFd closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::IoError(path + ": cannot stat the secret file");
  if (!S_ISREG(st.st_mode))
    return Status::InvalidArgument(path + ": the secret file is not a regular file");
  if (st.st_uid != ::geteuid()) {
    return Status::InvalidArgument(path + ": the secret file belongs to uid " +
                                   std::to_string(st.st_uid) + ", not to this user (uid " +
                                   std::to_string(::geteuid()) + ")");
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::InvalidArgument(path + ": the secret file has mode " + mode +
                                   " and others may read it; run: chmod 600 " + path);
  }
  std::string secret;
  char buf[256];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return Status::IoError(path + ": cannot read the secret file: " + std::strerror(errno));
    if (n == 0) break;
    secret.append(buf, static_cast<size_t>(n));
    if (secret.size() > 4096)
      return Status::InvalidArgument(path + ": the secret file is too large");
  }
  while (!secret.empty() && std::strchr(" \t\r\n", secret.back()) != nullptr) secret.pop_back();
  GM_RETURN_IF_ERROR(CheckSecret(secret, path));
  return secret;
}

Result<std::string> LoadSecret() {
  const std::string file_env(kSecretFileEnv), env(kSecretEnv);
  if (const char* file = std::getenv(file_env.c_str()); file != nullptr && *file != '\0') {
    return ReadSecretFile(file);
  }
  if (const char* secret = std::getenv(env.c_str()); secret != nullptr && *secret != '\0') {
    GM_RETURN_IF_ERROR(CheckSecret(secret, env));
    return std::string(secret);
  }
  return Status::NotFound("no run secret: set " + file_env + " (a file of mode 0600) or " + env +
                          " (goldminer run sets them for the processes it starts)");
}

void ForgetSecretEnvironment() {
  for (std::string_view name : {kSecretEnv, kSecretFileEnv}) {
    const std::string n(name);
    if (char* value = std::getenv(n.c_str())) OPENSSL_cleanse(value, std::strlen(value));
    ::unsetenv(n.c_str());
  }
}

Status WriteSecretFile(const std::string& path, std::string_view secret) {
  GM_RETURN_IF_ERROR(CheckSecret(secret, path));
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::IoError(path + ": cannot create: " + std::strerror(errno));
  std::string text = std::string(secret) + "\n";
  bool ok = ::fchmod(fd, 0600) == 0 &&
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) err = errno;
    ::unlink(tmp.c_str());
    return Status::IoError(path + ": cannot write the secret file: " + std::strerror(err));
  }
  return Status::Ok();
}

std::string RoleKey(std::string_view run_secret, std::string_view role) {
  return HmacSha256Hex(run_secret, "goldminer-role-key-v2|" + std::string(role));
}

std::string TicketKey(std::string_view worker_key, int64_t rank, uint64_t session) {
  return HmacSha256Hex(
      worker_key, "goldminer-ticket-v2|" + std::to_string(rank) + "|" + std::to_string(session));
}

std::string TicketRole(int64_t rank, uint64_t session) {
  return std::string(kClientRole) + ":" + std::to_string(rank) + ":" + std::to_string(session);
}

namespace {

// "KIND:RANK:NUMBER" with a rank of 0..65535 and a number of at most 2^62.
bool ParseRankedRole(std::string_view role, std::string_view kind, int64_t* rank,
                     uint64_t* session) {
  const std::string prefix = std::string(kind) + ":";
  if (!role.starts_with(prefix)) return false;
  role.remove_prefix(prefix.size());
  const size_t colon = role.find(':');
  if (colon == std::string_view::npos) return false;
  auto number = [](std::string_view digits, uint64_t max, uint64_t* out) {
    if (digits.empty() || digits.size() > 19 || (digits.size() > 1 && digits[0] == '0'))
      return false;
    uint64_t v = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    if (v > max) return false;
    *out = v;
    return true;
  };
  uint64_t r = 0;
  if (!number(role.substr(0, colon), 65535, &r) ||
      !number(role.substr(colon + 1), uint64_t{1} << 62, session)) {
    return false;
  }
  *rank = static_cast<int64_t>(r);
  return true;
}

}  // namespace

bool ParseTicketRole(std::string_view role, int64_t* rank, uint64_t* session) {
  return ParseRankedRole(role, kClientRole, rank, session);
}

std::string OffloadTicketKey(std::string_view worker_key, int64_t rank, uint64_t channel) {
  return HmacSha256Hex(
      worker_key, "goldminer-offload-v1|" + std::to_string(rank) + "|" + std::to_string(channel));
}

std::string OffloadRole(int64_t rank, uint64_t channel) {
  return std::string(kOffloadRole) + ":" + std::to_string(rank) + ":" + std::to_string(channel);
}

bool ParseOffloadRole(std::string_view role, int64_t* rank, uint64_t* channel) {
  return ParseRankedRole(role, kOffloadRole, rank, channel);
}

Status ServerHandshake(Socket& socket, std::string_view key, std::string_view server_role,
                       Deadline deadline, std::string* client_role) {
  const std::string k(key);
  return ServerHandshake(
      socket, [&k](std::string_view) -> Result<std::string> { return k; }, server_role, deadline,
      client_role);
}

Result<std::string> SendServerHello(Socket& socket, std::string_view server_role,
                                    Deadline deadline) {
  GM_ASSIGN_OR_RETURN(std::string nonce, RandomHex(kNonceBytes));
  GM_RETURN_IF_ERROR(SendFrame(
      socket, MsgType::kHello,
      {{"version", kProtocolVersion}, {"nonce", nonce}, {"role", server_role}}, deadline));
  return nonce;
}

Status ServerHandshake(Socket& socket, const KeyForRole& key_for, std::string_view server_role,
                       Deadline deadline, std::string* client_role,
                       const std::string* hello_nonce) {
  std::string nonce;
  if (hello_nonce != nullptr) {
    nonce = *hello_nonce;
  } else {
    GM_ASSIGN_OR_RETURN(nonce, SendServerHello(socket, server_role, deadline));
  }
  auto auth = Expect(socket, MsgType::kAuth, deadline);
  if (!auth.ok()) {
    if (auth.status().code() != Code::kCorrupt) return auth.status();
    return Refuse(socket, auth.status().message(), auth.status());
  }
  int64_t version = Version(*auth);
  if (version != kProtocolVersion) {
    std::string why = VersionMismatch(version);
    return Refuse(socket, why, Status::InvalidArgument(socket.peer() + ": " + why));
  }
  std::string role = Field(*auth, "role");
  std::string client_nonce = Field(*auth, "client_nonce");
  std::string mac = Field(*auth, "mac");
  Result<std::string> key =
      ValidRole(role) ? key_for(role) : Result<std::string>(Status::InvalidArgument("role"));
  if (!key.ok() || !IsHex(client_nonce, 2 * kNonceBytes) || !IsHex(mac, 64) ||
      !SameMac(mac, ClientMac(*key, nonce, client_nonce, role, socket.transport()))) {
    return Refuse(socket, kAuthFailed,
                  Status::InvalidArgument(socket.peer() +
                                          ": authentication failed: the client "
                                          "(role \"" +
                                          PeerText(role, kMaxRoleChars) +
                                          "\") does not hold that role's key for this run"));
  }
  GM_RETURN_IF_ERROR(SendFrame(
      socket, MsgType::kWelcome,
      {{"mac", ServerMac(*key, client_nonce, nonce, server_role, socket.transport())}}, deadline));
  socket.SetSession(std::make_unique<FrameSession>(*key, nonce, client_nonce, /*is_server=*/true));
  if (client_role != nullptr) *client_role = role;
  return Status::Ok();
}

Status ClientHandshake(Socket& socket, std::string_view secret, std::string_view client_role,
                       Deadline deadline, std::string* server_role) {
  GM_ASSIGN_OR_RETURN(Frame hello, Expect(socket, MsgType::kHello, deadline));
  int64_t version = Version(hello);
  if (version != kProtocolVersion) {
    std::string why = VersionMismatch(version);
    return Refuse(socket, why, Status::InvalidArgument(socket.peer() + ": " + why));
  }
  std::string nonce = Field(hello, "nonce");
  std::string role = Field(hello, "role");
  if (!IsHex(nonce, 2 * kNonceBytes) || !ValidRole(role)) {
    return Refuse(socket, "HELLO needs a 64-hex-character nonce and a role",
                  Status::Corrupt(socket.peer() + ": HELLO without a valid nonce and role"));
  }
  GM_ASSIGN_OR_RETURN(std::string client_nonce, RandomHex(kNonceBytes));
  GM_RETURN_IF_ERROR(
      SendFrame(socket, MsgType::kAuth,
                {{"version", kProtocolVersion},
                 {"role", client_role},
                 {"client_nonce", client_nonce},
                 {"mac", ClientMac(secret, nonce, client_nonce, client_role, socket.transport())}},
                deadline));
  GM_ASSIGN_OR_RETURN(Frame welcome, Expect(socket, MsgType::kWelcome, deadline));
  if (!SameMac(Field(welcome, "mac"),
               ServerMac(secret, client_nonce, nonce, role, socket.transport()))) {
    return Status::InvalidArgument(socket.peer() + ": authentication failed: the server (role \"" +
                                   PeerText(role, kMaxRoleChars) +
                                   "\") does not know this run's key");
  }
  socket.SetSession(
      std::make_unique<FrameSession>(secret, nonce, client_nonce, /*is_server=*/false));
  if (server_role != nullptr) *server_role = role;
  return Status::Ok();
}

Result<Socket> DialHandshake(const std::function<Result<Socket>()>& connect,
                             std::string_view secret, std::string_view client_role,
                             Deadline deadline, std::string* server_role) {
  double pause_s = 0.02;
  for (;;) {
    GM_ASSIGN_OR_RETURN(Socket socket, connect());
    const Status st =
        ClientHandshake(socket, secret, client_role,
                        deadline.Min(Deadline::After(kHandshakeTimeoutS)), server_role);
    if (st.ok()) return socket;
    if (st.code() != Code::kUnavailable || deadline.remaining_s() <= pause_s) return st;
    socket = Socket();  // closed before the pause
    std::this_thread::sleep_for(std::chrono::duration<double>(pause_s));
    pause_s = std::min(pause_s * 2, 1.0);
  }
}

}  // namespace gm
