#include "worker/subprocess.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/os/file_util.h"
#include "core/os/spawn.h"

namespace gm {
namespace {

int PollTimeoutMs(double deadline_s) {
  double left = deadline_s - MonotonicSeconds();
  if (left <= 0) return 0;
  return static_cast<int>(std::min(std::ceil(left * 1000.0), 2.0e9));
}

}  // namespace

Result<Subprocess> Subprocess::Start(const std::vector<std::string>& argv,
                                     const std::vector<std::string>& env) {
  if (argv.empty() || argv[0].empty()) return Status::InvalidArgument("empty command");
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return Status::FromErrno(errno, argv[0] + ": socketpair failed");
  }
  // The child's stdin and stdout are its end of the socket; its environment is `env` only.
  SpawnRequest request(argv, env);
  request.inherit_env = false;
  request.dup2 = {{fds[1], 0}, {fds[1], 1}};
  request.ignore_drain_signals = true;  // a drained worker's samples in flight are finished
  UniqueFd ours(fds[0]);
  Result<pid_t> pid = SpawnProcess(request);
  ::close(fds[1]);  // the child's end: it has its own copies now
  if (!pid.ok()) return pid.status();
  return Subprocess(*pid, std::move(ours));
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), fd_(std::move(other.fd_)) {}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    Kill();
    pid_ = std::exchange(other.pid_, -1);
    fd_ = std::move(other.fd_);
  }
  return *this;
}

Subprocess::~Subprocess() { Kill(); }

Status Subprocess::Poll(short events, double deadline_s, std::string_view what) {
  for (;;) {
    pollfd p{fd_.get(), events, 0};
    int n = ::poll(&p, 1, PollTimeoutMs(deadline_s));
    if (n > 0) return Status::Ok();
    if (n == 0) {
      return Status::Unavailable("timed out waiting to " + std::string(what) + " child process " +
                                 std::to_string(pid_));
    }
    if (errno != EINTR) return Status::IoError(std::string("poll failed: ") + std::strerror(errno));
  }
}

Status Subprocess::WriteAll(std::string_view data, double deadline_s) {
  if (!fd_.valid()) return Status::Internal("write to a subprocess that is not running");
  size_t off = 0;
  while (off < data.size()) {
    GM_RETURN_IF_ERROR(Poll(POLLOUT, deadline_s, "write to"));
    ssize_t n =
        ::send(fd_.get(), data.data() + off, data.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return Status::IoError("write to child process " + std::to_string(pid_) +
                             " failed: " + std::strerror(errno));
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status Subprocess::ReadExact(size_t n, std::string& out, double deadline_s) {
  if (!fd_.valid()) return Status::Internal("read from a subprocess that is not running");
  out.resize(n);
  size_t got = 0;
  while (got < n) {
    GM_RETURN_IF_ERROR(Poll(POLLIN, deadline_s, "read from"));
    ssize_t r = ::recv(fd_.get(), out.data() + got, n - got, MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return Status::IoError("read from child process " + std::to_string(pid_) +
                             " failed: " + std::strerror(errno));
    }
    if (r == 0) {
      return Status::IoError("child process " + std::to_string(pid_) + " closed its output after " +
                             std::to_string(got) + " of " + std::to_string(n) + " bytes");
    }
    got += static_cast<size_t>(r);
  }
  return Status::Ok();
}

Result<double> Subprocess::CpuSeconds() const { return CpuSecondsOfProcess(pid_); }

std::string Subprocess::Kill(double grace_s, int* ended) {
  if (ended != nullptr) *ended = 0;
  fd_.Reset();
  if (pid_ <= 0) return "was not running";
  pid_t pid = std::exchange(pid_, -1);
  if (grace_s > 0) {
    // A pidfd becomes readable when the child exits: wait for that, no polling loop.
    const UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (pidfd.valid()) {
      pollfd p{pidfd.get(), POLLIN, 0};
      while (::poll(&p, 1, static_cast<int>(grace_s * 1000)) < 0 && errno == EINTR) {
      }
    }
  }
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) == pid) {
    if (ended != nullptr && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      *ended = kKilledByOthers;
    return DescribeExit(status);
  }
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return "could not be reaped: " + std::string(std::strerror(errno));
  }
  return DescribeExit(status);
}

}  // namespace gm
