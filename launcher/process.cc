#include "launcher/process.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "core/clock.h"
#include "worker/subprocess.h"  // DescribeExit

extern char** environ;

namespace gm {
namespace {

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

std::vector<std::string> MergedEnvironment(const std::vector<std::string>& extra) {
  std::set<std::string> overridden;
  for (const auto& kv : extra) overridden.insert(kv.substr(0, kv.find('=')));
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    if (!overridden.count(kv.substr(0, kv.find('=')))) env.push_back(kv);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

}  // namespace

int ChildExit::exit_code() const {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

ProcessGroup::~ProcessGroup() {
  for (const auto& [pid, fd] : pidfds_) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ::close(fd);
  }
}

Result<pid_t> ProcessGroup::Spawn(const std::vector<std::string>& argv,
                                  const std::vector<std::string>& env) {
  if (argv.empty()) return Status::InvalidArgument("no command to start");
  std::vector<std::string> envs = MergedEnvironment(env);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0].c_str(), nullptr, nullptr, cargv.data(), cenv.data());
  if (rc != 0) {
    std::string msg = argv[0] + ": cannot start: " + std::strerror(rc);
    return rc == ENOENT ? Status::NotFound(msg) : Status::IoError(msg);
  }
  int fd = PidfdOpen(pid);
  if (fd < 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return Status::IoError(std::string("pidfd_open failed: ") + std::strerror(errno));
  }
  pidfds_[pid] = fd;
  return pid;
}

void ProcessGroup::Signal(pid_t pid, int sig) {
  if (pidfds_.count(pid)) ::kill(pid, sig);
}

std::optional<ChildExit> ProcessGroup::WaitAny(double timeout_s) {
  if (pidfds_.empty()) return std::nullopt;
  std::vector<pollfd> fds;
  std::vector<pid_t> pids;
  for (const auto& [pid, fd] : pidfds_) {
    fds.push_back(pollfd{fd, POLLIN, 0});
    pids.push_back(pid);
  }
  const int ms = timeout_s <= 0 ? 0 : static_cast<int>(timeout_s * 1000 + 0.999);
  int n = ::poll(fds.data(), fds.size(), ms);
  if (n <= 0) return std::nullopt;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
    int status = 0;
    if (::waitpid(pids[i], &status, 0) != pids[i]) continue;
    ::close(pidfds_[pids[i]]);
    pidfds_.erase(pids[i]);
    return ChildExit{pids[i], status, DescribeExit(status)};
  }
  return std::nullopt;
}

std::vector<ChildExit> ProcessGroup::TerminateAll(double grace_s) {
  std::vector<ChildExit> exits;
  for (const auto& [pid, fd] : pidfds_) ::kill(pid, SIGTERM);
  const double deadline = MonotonicSeconds() + grace_s;
  while (!pidfds_.empty() && MonotonicSeconds() < deadline) {
    if (auto e = WaitAny(deadline - MonotonicSeconds())) exits.push_back(*e);
  }
  for (const auto& [pid, fd] : pidfds_) ::kill(pid, SIGKILL);
  while (!pidfds_.empty()) {
    if (auto e = WaitAny(5)) exits.push_back(*e);
  }
  return exits;
}

}  // namespace gm
