#include "dataplane/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/host.h"

namespace gm {
namespace {

std::string Errno(int err) { return std::strerror(err); }

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

void SetTcpOptions(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
}

// Numeric "address:port" (or "unix:PATH") of a connected peer.
std::string PeerName(const sockaddr_storage& addr, socklen_t len, const std::string& unix_path) {
  if (addr.ss_family == AF_UNIX) return "unix:" + unix_path;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, serv,
                    sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "unknown peer";
  }
  return JoinHostPort(host, std::atoi(serv));
}

// A path starting with '@' names a socket in the abstract namespace (Linux): no
// file, gone with its listener, private to the network namespace.
struct UnixAddr {
  sockaddr_un addr{};
  socklen_t len = sizeof(sockaddr_un);
};

Result<UnixAddr> UnixAddress(const std::string& path) {
  UnixAddr a;
  a.addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.addr.sun_path) {
    return Status::InvalidArgument("unix:" + path + ": a socket path must be 1 to " +
                                   std::to_string(sizeof a.addr.sun_path - 1) +
                                   " bytes long (choose a shorter directory)");
  }
  std::memcpy(a.addr.sun_path, path.data(), path.size());
  if (path[0] == '@') {
    a.addr.sun_path[0] = '\0';
    a.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  }
  return a;
}

// Waits for a non-blocking connect() on `fd` to finish; returns 0 or an errno.
int FinishConnect(int fd, Deadline deadline) {
  pollfd p{fd, POLLOUT, 0};
  for (;;) {
    int rc = ::poll(&p, 1, deadline.PollTimeoutMs());
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return errno;
    if (rc == 0) return ETIMEDOUT;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
    return err;
  }
}

// Connects a fresh non-blocking socket of `family` to `addr`; returns the fd or -errno.
int ConnectOne(int family, const sockaddr* addr, socklen_t len, Deadline deadline) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  int err = 0;
  if (::connect(fd, addr, len) != 0) {
    err = errno;
    if (err == EINPROGRESS || err == EINTR) err = FinishConnect(fd, deadline);
  }
  if (err != 0) {
    ::close(fd);
    return -err;
  }
  if (family != AF_UNIX) SetTcpOptions(fd);
  return fd;
}

}  // namespace

// ---- Deadline ----

Deadline Deadline::After(double seconds) { return Deadline(MonotonicSeconds() + seconds); }

bool Deadline::never() const { return std::isinf(at_); }

bool Deadline::expired() const { return !never() && MonotonicSeconds() >= at_; }

double Deadline::remaining_s() const {
  if (never()) return at_;
  double left = at_ - MonotonicSeconds();
  return left > 0 ? left : 0;
}

int Deadline::PollTimeoutMs() const {
  if (never()) return -1;
  double ms = std::ceil(remaining_s() * 1000.0);
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

// ---- Socket ----

Socket::Socket(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}

Socket::~Socket() { Close(); }

Socket::Socket(Socket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      peer_(std::move(other.peer_)),
      session_(std::move(other.session_)),
      accept_fds_(other.accept_fds_),
      fds_(std::move(other.fds_)) {
  other.fds_.clear();
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    peer_ = std::move(other.peer_);
    session_ = std::move(other.session_);
    accept_fds_ = other.accept_fds_;
    fds_ = std::move(other.fds_);
    other.fds_.clear();
  }
  return *this;
}

std::string_view Socket::transport() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (fd_ >= 0 && ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
      addr.ss_family == AF_UNIX) {
    return "unix";
  }
  return "tcp";
}

Result<Socket::PeerCredentials> Socket::peer_credentials() const {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (transport() != "unix") return Status::IoError(peer_ + ": not a Unix-domain socket");
  if (::getsockopt(fd_, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Status::IoError(peer_ + ": cannot read the peer's credentials: " + Errno(errno));
  }
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

void Socket::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  CloseFds();
}

void Socket::ShutdownWrite() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

Status Socket::SetSendBuffer(int bytes) {
  if (::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes) != 0) {
    return Status::IoError(peer_ + ": cannot set SO_SNDBUF: " + Errno(errno));
  }
  return Status::Ok();
}

Result<Socket> Socket::ConnectTcp(const std::string& host, int port, double timeout_s) {
  const std::string name = JoinHostPort(host, port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) return Status::Unavailable(name + ": cannot resolve host: " + gai_strerror(rc));
  Deadline deadline = Deadline::After(timeout_s);
  int last_err = ECONNREFUSED;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    int fd = ConnectOne(a->ai_family, a->ai_addr, a->ai_addrlen, deadline);
    if (fd >= 0) {
      ::freeaddrinfo(found);
      return Socket(fd, name);
    }
    last_err = -fd;
  }
  ::freeaddrinfo(found);
  if (last_err == ETIMEDOUT) {
    return Status::Unavailable(name + ": timed out connecting after " + Seconds(timeout_s));
  }
  return Status::Unavailable(name + ": cannot connect: " + Errno(last_err));
}

Result<Socket> Socket::ConnectUnix(const std::string& path, double timeout_s) {
  GM_ASSIGN_OR_RETURN(UnixAddr addr, UnixAddress(path));
  int fd = ConnectOne(AF_UNIX, reinterpret_cast<const sockaddr*>(&addr.addr), addr.len,
                      Deadline::After(timeout_s));
  if (fd < 0) return Status::Unavailable("unix:" + path + ": cannot connect: " + Errno(-fd));
  return Socket(fd, "unix:" + path);
}

Status Socket::WaitFor(short events, Deadline deadline, std::string_view what) {
  pollfd p{fd_, events, 0};
  for (;;) {
    int rc = ::poll(&p, 1, deadline.PollTimeoutMs());
    if (rc > 0) return Status::Ok();  // ready, or an error the next call reports
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return Status::IoError(peer_ + ": poll failed: " + Errno(errno));
    return Status::Unavailable(peer_ + ": timed out " +
                               std::string(events & POLLOUT ? "sending " : "waiting for ") +
                               std::string(what));
  }
}

Status Socket::SendAll(std::span<const iovec> iov, Deadline deadline, std::string_view what,
                       int pass_fd) {
  if (fd_ < 0) return Status::Internal("send on a closed socket (" + std::string(what) + ")");
  std::vector<iovec> left;
  for (const iovec& v : iov) {
    if (v.iov_len > 0) left.push_back(v);
  }
  if (pass_fd >= 0 && left.empty())
    return Status::Internal("a descriptor needs a byte to travel with");
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  size_t first = 0;
  while (first < left.size()) {
    msghdr msg{};
    msg.msg_iov = left.data() + first;
    msg.msg_iovlen = std::min<size_t>(left.size() - first, IOV_MAX);
    if (pass_fd >= 0) {  // with the first bytes only; the receiver takes it with them
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    }
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n > 0) pass_fd = -1;
    if (n < 0) {
      int err = errno;
      if (err == EINTR) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) {
        GM_RETURN_IF_ERROR(WaitFor(POLLOUT, deadline, what));
        continue;
      }
      if (err == EPIPE || err == ECONNRESET) {
        return Status::Unavailable("peer closed the connection: " + peer_ + ", while sending " +
                                   std::string(what));
      }
      return Status::IoError(peer_ + ": sending " + std::string(what) + ": " + Errno(err));
    }
    // Skip what went out: whole buffers, then a prefix of the next one.
    size_t sent = static_cast<size_t>(n);
    while (first < left.size() && sent >= left[first].iov_len) sent -= left[first++].iov_len;
    if (first < left.size()) {
      left[first].iov_base = static_cast<char*>(left[first].iov_base) + sent;
      left[first].iov_len -= sent;
    }
  }
  return Status::Ok();
}

Status Socket::RecvExact(void* buf, size_t size, Deadline deadline, std::string_view what) {
  if (fd_ < 0) return Status::Internal("receive on a closed socket (" + std::string(what) + ")");
  char* out = static_cast<char*>(buf);
  size_t got = 0;
  while (got < size) {
    ssize_t n;
    if (accept_fds_) {
      iovec v{out + got, size - got};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPendingFds)];
      msghdr msg{};
      msg.msg_iov = &v;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      n = ::recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC);
      if (n >= 0) GM_RETURN_IF_ERROR(KeepFds(msg));
    } else {
      n = ::recv(fd_, out + got, size - got, 0);
    }
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return Status::Unavailable("peer closed the connection: " + peer_ + ", while waiting for " +
                                 std::string(what) + " (" + std::to_string(got) + " of " +
                                 std::to_string(size) + " bytes)");
    }
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      GM_RETURN_IF_ERROR(WaitFor(POLLIN, deadline, what));
      continue;
    }
    if (err == ECONNRESET) {
      return Status::Unavailable("peer closed the connection: " + peer_ +
                                 " reset it while we waited for " + std::string(what));
    }
    return Status::IoError(peer_ + ": receiving " + std::string(what) + ": " + Errno(err));
  }
  return Status::Ok();
}

// Keeps the descriptors a recvmsg brought (SCM_RIGHTS), at most kMaxPendingFds
// waiting at a time; any beyond that, or a truncated batch of them, is closed and
// the peer is Corrupt (it sent descriptors no frame claimed).
Status Socket::KeepFds(msghdr& msg) {
  bool too_many = (msg.msg_flags & MSG_CTRUNC) != 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (fds_.size() < kMaxPendingFds) {
        fds_.push_back(fd);
      } else {
        ::close(fd);
        too_many = true;
      }
    }
  }
  if (too_many) {
    return Status::Corrupt(peer_ + ": sent more than " + std::to_string(kMaxPendingFds) +
                           " descriptors that no frame claimed");
  }
  return Status::Ok();
}

int Socket::TakeFd() {
  if (fds_.empty()) return -1;
  const int fd = fds_.front();
  fds_.erase(fds_.begin());
  return fd;
}

void Socket::CloseFds() {
  for (int fd : fds_) ::close(fd);
  fds_.clear();
}

// ---- Listener ----

Listener::~Listener() { Close(); }

Listener::Listener(Listener&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      port_(other.port_),
      is_unix_(other.is_unix_),
      abstract_(other.abstract_),
      address_(std::move(other.address_)),
      unix_path_(std::move(other.unix_path_)) {}

Listener& Listener::operator=(Listener&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    port_ = other.port_;
    abstract_ = other.abstract_;
    is_unix_ = other.is_unix_;
    address_ = std::move(other.address_);
    unix_path_ = std::move(other.unix_path_);
  }
  return *this;
}

void Listener::Close() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  if (is_unix_ && !abstract_) ::unlink(unix_path_.c_str());
}

Result<Listener> Listener::ListenTcp(const std::string& host, int port) {
  const std::string name = JoinHostPort(host, port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(),
                         &hints, &found);
  if (rc != 0) return Status::Unavailable(name + ": cannot resolve host: " + gai_strerror(rc));
  int fd = -1, err = 0;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      err = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      err = errno;
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return Status::Unavailable(name + ": cannot listen: " + Errno(err));
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  Listener l;
  l.fd_ = fd;
  l.port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  l.address_ = JoinHostPort(host, l.port_);
  return l;
}

Result<Listener> Listener::ListenUnix(const std::string& path) {
  GM_ASSIGN_OR_RETURN(UnixAddr addr, UnixAddress(path));
  const bool abstract = path[0] == '@';
  struct stat st {};
  if (!abstract && ::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status::InvalidArgument("unix:" + path + ": exists and is not a socket");
    }
    if (Socket::ConnectUnix(path, 1.0).ok()) {
      return Status::Unavailable("unix:" + path + ": a live process is listening there already");
    }
    ::unlink(path.c_str());  // stale: its listener died without removing it
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError("unix:" + path + ": socket: " + Errno(errno));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr.addr), addr.len) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    int err = errno;
    ::close(fd);
    return Status::Unavailable("unix:" + path + ": cannot listen: " + Errno(err));
  }
  Listener l;
  l.fd_ = fd;
  l.is_unix_ = true;
  l.unix_path_ = path;
  l.abstract_ = abstract;
  l.address_ = "unix:" + path;
  return l;
}

Result<Socket> Listener::Accept(double timeout_s) {
  if (fd_ < 0) return Status::Internal(address_ + ": accept on a closed listener");
  Deadline deadline = Deadline::After(timeout_s);
  pollfd p{fd_, POLLIN, 0};
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      if (!is_unix_) SetTcpOptions(fd);
      return Socket(fd, PeerName(addr, len, unix_path_));
    }
    int err = errno;
    if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR && err != ECONNABORTED) {
      return Status::IoError(address_ + ": accept failed: " + Errno(err));
    }
    int rc = ::poll(&p, 1, deadline.PollTimeoutMs());
    if (rc < 0 && errno != EINTR) return Status::IoError(address_ + ": poll: " + Errno(errno));
    if (rc == 0) {
      return Status::Unavailable(address_ + ": timed out after " + Seconds(timeout_s) +
                                 " waiting for a connection");
    }
  }
}

namespace {

// A socket's address (getsockname when `local`, else getpeername) as bytes, for
// comparing two ends; empty when the kernel says no.
std::string EndOf(int fd, bool local) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  const int rc = local ? ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                       : ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return "";
  return std::string(reinterpret_cast<const char*>(&addr), len);
}

}  // namespace

Result<Socket> Listener::AcceptFrom(const Socket& client, double timeout_s) {
  const std::string want = EndOf(client.fd(), /*local=*/true);
  if (want.empty()) return Status::IoError(address_ + ": getsockname of our own client failed");
  Deadline deadline = Deadline::After(timeout_s);
  for (int strangers = 0;; ++strangers) {
    GM_ASSIGN_OR_RETURN(Socket socket, Accept(deadline.remaining_s()));
    if (EndOf(socket.fd(), /*local=*/false) == want) return socket;
    if (strangers == kMaxStrangers) {
      return Status::Unavailable(address_ + ": " + std::to_string(kMaxStrangers + 1) +
                                 " other connections came before our own (the last from " +
                                 socket.peer() + ")");
    }
  }  // each other one is closed as it goes
}

}  // namespace gm
