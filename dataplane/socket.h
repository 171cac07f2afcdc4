// Stream sockets for the data plane: TCP and Unix-domain connections with
// deadlines on every blocking operation.
//
// A Socket owns one connected, non-blocking file descriptor (close-on-exec). Every
// send and receive takes a Deadline and waits with poll(); a missed deadline is
// Unavailable naming the peer and what was awaited, a peer that closed the
// connection is Unavailable("peer closed the connection") with the peer named in
// the context. Sends use MSG_NOSIGNAL: writing to a closed peer is an error value,
// never SIGPIPE. TCP sockets get TCP_NODELAY and SO_KEEPALIVE. Buffer sizes are
// left to the kernel's TCP autotuning on purpose: a fixed SO_SNDBUF/SO_RCVBUF
// turns autotuning off and is capped by net.core.[rw]mem_max (208 KiB on a stock
// kernel), below what autotuning reaches (tcp_rmem's maximum, 6 MiB or more); on
// loopback fixed 4 MiB buffers measured no faster than autotuning.
//
// Thread-safety: a Socket or Listener is thread-compatible (one thread at a time).
// One thread may send while another receives on the same Socket, since the two
// directions share nothing but the descriptor. Deadline is a plain value.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "dataplane/session.h"

namespace gm {

// A point on the monotonic clock (core/clock.h) by which an operation must finish.
class Deadline {
 public:
  // `seconds` from now; a negative or zero value is already expired.
  static Deadline After(double seconds);
  // A deadline that never expires.
  static Deadline Never() { return Deadline(std::numeric_limits<double>::infinity()); }

  bool never() const;
  bool expired() const;
  // Seconds left, >= 0 (infinity for Never()).
  double remaining_s() const;
  // The timeout to pass to poll(): -1 for Never(), else remaining milliseconds
  // rounded up (so a wait never returns just before the deadline).
  int PollTimeoutMs() const;
  // The sooner of the two.
  Deadline Min(Deadline other) const { return at_ <= other.at_ ? *this : other; }

 private:
  explicit Deadline(double at) : at_(at) {}
  double at_;  // MonotonicSeconds() value
};

class Socket {
 public:
  Socket() = default;  // not connected
  // Takes ownership of a connected descriptor; `peer` names it in messages
  // ("127.0.0.1:5000", "unix:/run/x.sock").
  Socket(int fd, std::string peer);
  ~Socket();
  Socket(Socket&& other) noexcept;
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Connects to `host` (name or address) and `port`, trying each resolved address
  // until one accepts or `timeout_s` seconds pass (name resolution itself is not
  // bounded by it). Unavailable names host:port and the reason (refused, timed
  // out, unresolvable).
  static Result<Socket> ConnectTcp(const std::string& host, int port, double timeout_s);
  // Connects to the Unix-domain stream socket at `path`.
  static Result<Socket> ConnectUnix(const std::string& path, double timeout_s);

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& peer() const { return peer_; }
  // "unix" for a Unix-domain socket, else "tcp" (from the descriptor's family).
  // The handshake binds it into its MACs, so a relay between transports fails.
  std::string_view transport() const;
  // Unix sockets: the credentials the peer's process had when it connected or
  // listened (SO_PEERCRED). IoError for a TCP socket or when the kernel says no.
  struct PeerCredentials {
    int64_t pid = 0;
    uint32_t uid = 0;
    uint32_t gid = 0;
  };
  Result<PeerCredentials> peer_credentials() const;

  // The frame session the handshake set up (dataplane/session.h), or null before
  // it. SendFrame seals and RecvFrame checks every frame once it is set.
  FrameSession* session() const { return session_.get(); }
  void SetSession(std::unique_ptr<FrameSession> session) { session_ = std::move(session); }

  // Sends every byte of `iov` in order (one sendmsg per call when the kernel takes
  // it all; partial writes resume where they stopped). `what` names the data in
  // errors, e.g. "BATCH frame".
  // `pass_fd` >= 0: a descriptor sent with the first bytes (SCM_RIGHTS, Unix
  // sockets only); the receiver gets a copy, ours stays open.
  Status SendAll(std::span<const iovec> iov, Deadline deadline, std::string_view what,
                 int pass_fd = -1);
  // Receives exactly `size` bytes into `buf`. A peer that closes before the first
  // byte and one that closes midway are both Unavailable; `what` names the data.
  Status RecvExact(void* buf, size_t size, Deadline deadline, std::string_view what);
  // Unix sockets: from now on receives also take descriptors the peer passes
  // (SCM_RIGHTS, close-on-exec), kept until TakeFd, at most kMaxPendingFds at a
  // time (more is Corrupt: they are closed). Off by default: a descriptor sent to
  // a socket that does not accept them is closed by the kernel.
  void AcceptFds() { accept_fds_ = true; }
  // The oldest descriptor received and not taken yet (the caller owns it), or -1.
  int TakeFd();
  static constexpr size_t kMaxPendingFds = 2;

  // Sets SO_SNDBUF (bytes; the kernel doubles it and caps it at wmem_max), which
  // turns send-side autotuning off. For tests and deliberate tuning only.
  Status SetSendBuffer(int bytes);
  // Stops sending (the peer reads end-of-stream) but keeps receiving.
  void ShutdownWrite();
  // Closes the descriptor now; the socket becomes not valid.
  void Close();

 private:
  Status WaitFor(short events, Deadline deadline, std::string_view what);
  Status KeepFds(msghdr& msg);
  void CloseFds();
  int fd_ = -1;
  std::string peer_;
  std::unique_ptr<FrameSession> session_;
  bool accept_fds_ = false;
  std::vector<int> fds_;  // received, not taken yet
};

// A listening socket. A Unix listener removes its socket file when destroyed.
class Listener {
 public:
  Listener() = default;
  ~Listener();
  Listener(Listener&& other) noexcept;
  Listener& operator=(Listener&& other) noexcept;
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Listens on `host` ("0.0.0.0", "127.0.0.1", "::", a name) and `port` (0: the
  // kernel picks a free one; see port()). Unavailable names host:port and why.
  static Result<Listener> ListenTcp(const std::string& host, int port);
  // Listens on a Unix-domain socket at `path`. A stale socket file left there by a
  // dead process is replaced; any other existing file is an error.
  static Result<Listener> ListenUnix(const std::string& path);

  // The bound TCP port (0 for a Unix listener).
  int port() const { return port_; }
  // "host:port" or "unix:PATH", for messages and for telling peers where to connect.
  const std::string& address() const { return address_; }
  bool valid() const { return fd_ >= 0; }

  // Waits up to `timeout_s` seconds for one connection. Unavailable on timeout.
  Result<Socket> Accept(double timeout_s);
  // Accepts until the connection whose other end is `client` (a TCP socket of
  // this process, connected to this listener) arrives, closing each other one
  // that came first: another local process may connect to a loopback port before
  // us. At most kMaxStrangers others; Unavailable on timeout.
  Result<Socket> AcceptFrom(const Socket& client, double timeout_s);
  static constexpr int kMaxStrangers = 64;
  // Closes the listening descriptor (and removes a Unix socket file).
  void Close();

 private:
  int fd_ = -1;
  int port_ = 0;
  bool is_unix_ = false;
  bool abstract_ = false;  // "@name": nothing to remove
  std::string address_;
  std::string unix_path_;
};

}  // namespace gm
