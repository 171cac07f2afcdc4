#include "worker/subprocess.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/file_util.h"

namespace gm {
namespace {

int PollTimeoutMs(double deadline_s) {
  double left = deadline_s - MonotonicSeconds();
  if (left <= 0) return 0;
  return static_cast<int>(std::min(std::ceil(left * 1000.0), 2.0e9));
}

std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Spawns with fd 0 and fd 1 of the child on `child_fd`. posix_spawn (vfork-like
// in glibc) is safe in a multithreaded parent, unlike fork() followed by
// arbitrary code, and reports a failed exec as its return value.
int Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, int child_fd,
          pid_t& pid) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child_fd, 0);
  posix_spawn_file_actions_adddup2(&actions, child_fd, 1);
  // The child runs with the default SIGPIPE disposition and no blocked signals.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> c_argv = CStrings(argv);
  std::vector<char*> c_env = CStrings(env);
  int rc = posix_spawnp(&pid, c_argv[0], &actions, &attr, c_argv.data(), c_env.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  return rc;
}

}  // namespace

std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status))
    return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    const char* name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  return "ended with wait status " + std::to_string(wait_status);
}

Result<Subprocess> Subprocess::Start(const std::vector<std::string>& argv,
                                     const std::vector<std::string>& env) {
  if (argv.empty() || argv[0].empty()) return Status::InvalidArgument("empty command");
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return Status::FromErrno(errno, argv[0] + ": socketpair failed");
  }
  pid_t pid = -1;
  int rc = Spawn(argv, env, fds[1], pid);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return Status::FromErrno(rc, "cannot start " + argv[0]);
  }
  return Subprocess(pid, fds[0]);
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), fd_(std::exchange(other.fd_, -1)) {}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    Kill();
    pid_ = std::exchange(other.pid_, -1);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

Subprocess::~Subprocess() { Kill(); }

Status Subprocess::Poll(short events, double deadline_s, std::string_view what) {
  for (;;) {
    pollfd p{fd_, events, 0};
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
  if (fd_ < 0) return Status::Internal("write to a subprocess that is not running");
  size_t off = 0;
  while (off < data.size()) {
    GM_RETURN_IF_ERROR(Poll(POLLOUT, deadline_s, "write to"));
    ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
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
  if (fd_ < 0) return Status::Internal("read from a subprocess that is not running");
  out.resize(n);
  size_t got = 0;
  while (got < n) {
    GM_RETURN_IF_ERROR(Poll(POLLIN, deadline_s, "read from"));
    ssize_t r = ::recv(fd_, out.data() + got, n - got, MSG_DONTWAIT);
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

Result<double> Subprocess::CpuSeconds() const {
  std::string path = "/proc/" + std::to_string(pid_) + "/stat";
  GM_ASSIGN_OR_RETURN(std::string stat, ReadFile(path));
  // Fields after the command name, which is in parentheses and may hold spaces.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return Status::IoError(path + ": unexpected format");
  const char* p = stat.c_str() + close + 1;
  // Fields 3..17: state ppid pgrp session tty tpgid flags minflt cminflt majflt
  // cmajflt utime stime cutime cstime; the last four are in clock ticks.
  double ticks = 0;
  for (int field = 3; field <= 17; ++field) {
    while (*p == ' ') ++p;
    char* end = nullptr;
    if (field == 3) {
      end = const_cast<char*>(p) + 1;
    } else {
      long long v = std::strtoll(p, &end, 10);
      if (end == p) return Status::IoError(path + ": unexpected format");
      if (field >= 14) ticks += static_cast<double>(v);
    }
    p = end;
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::string Subprocess::Kill(double grace_s) {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (pid_ <= 0) return "was not running";
  pid_t pid = std::exchange(pid_, -1);
  if (grace_s > 0) {
    // A pidfd becomes readable when the child exits: wait for that, no polling loop.
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      while (::poll(&p, 1, static_cast<int>(grace_s * 1000)) < 0 && errno == EINTR) {
      }
      ::close(pidfd);
    }
  }
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) == pid) return DescribeExit(status);
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return "could not be reaped: " + std::string(std::strerror(errno));
  }
  return DescribeExit(status);
}

}  // namespace gm
