#include "launcher/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "core/clock.h"
#include "core/host.h"
#include "core/os/cpus.h"
#include "core/os/spawn.h"

namespace gm {
namespace {

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

}  // namespace

Result<CommandOutput> CaptureOutput(const std::vector<std::string>& argv, double timeout_s,
                                    size_t max_bytes) {
  if (argv.empty()) return Status::InvalidArgument("no command to run");
  GM_ASSIGN_OR_RETURN(Pipe out_pipe, MakePipe());
  GM_ASSIGN_OR_RETURN(Pipe err_pipe, MakePipe());
  SpawnRequest request(argv);
  request.stdin_null = true;
  request.dup2 = {{out_pipe.write.get(), 1}, {err_pipe.write.get(), 2}};
  Result<pid_t> spawned = SpawnProcess(request);
  out_pipe.write.Reset();  // only the child writes now: its exit ends the reads
  err_pipe.write.Reset();
  if (!spawned.ok()) return spawned.status();
  const pid_t pid = *spawned;
  CommandOutput result;
  std::string* sinks[2] = {&result.out, &result.err};
  UniqueFd* ends[2] = {&out_pipe.read, &err_pipe.read};
  pollfd fds[2] = {{out_pipe.read.get(), POLLIN, 0}, {err_pipe.read.get(), POLLIN, 0}};
  const double deadline = MonotonicSeconds() + timeout_s;
  Status failure;
  int open = 2;
  while (open > 0 && failure.ok()) {
    const double left = deadline - MonotonicSeconds();
    if (left <= 0) {
      failure = Status::Unavailable(argv[0] + " did not finish within " +
                                    std::to_string(static_cast<int>(timeout_s)) + " s");
      break;
    }
    if (::poll(fds, 2, static_cast<int>(left * 1000) + 1) < 0 && errno != EINTR) {
      failure = Status::IoError(std::string("poll: ") + std::strerror(errno));
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
        if (sinks[i]->size() > max_bytes) {
          failure = Status::IoError(argv[0] + " printed more than " + std::to_string(max_bytes) +
                                    " bytes");
        }
      } else if (n == 0 || errno != EINTR) {
        ends[i]->Reset();
        fds[i].fd = -1;
        --open;
      }
    }
  }
  if (!failure.ok()) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!failure.ok()) return failure;
  result.exit = ChildExit{pid, status, DescribeExit(status)};
  return result;
}

int ChildExit::exit_code() const {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

ProcessGroup::~ProcessGroup() {
  for (const auto& [pid, fd] : pidfds_) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }  // the pidfds close with the map
}

Result<pid_t> ProcessGroup::Spawn(const std::vector<std::string>& argv,
                                  const std::vector<std::string>& env, const std::vector<int>& cpus,
                                  bool own_group) {
  if (argv.empty()) return Status::InvalidArgument("no command to start");
  // A child spawned while the thread is pinned inherits its CPUs.
  std::unique_ptr<ScopedCpus> pinned;
  if (!cpus.empty()) {
    GM_ASSIGN_OR_RETURN(pinned, ScopedCpus::Pin(cpus, argv[0] + ": CPUs"));
  }
  SpawnRequest request(argv, env);  // with our environment
  request.own_process_group = own_group;
  request.stdin_null = own_group;  // a background group reading the terminal would stop
  Result<pid_t> spawned = SpawnProcess(request);
  pinned.reset();
  if (!spawned.ok()) return spawned.status();
  const pid_t pid = *spawned;
  int fd = PidfdOpen(pid);
  if (fd < 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return Status::IoError(std::string("pidfd_open failed: ") + std::strerror(errno));
  }
  pidfds_[pid] = UniqueFd(fd);
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
    fds.push_back(pollfd{fd.get(), POLLIN, 0});
    pids.push_back(pid);
  }
  const int ms = timeout_s <= 0 ? 0 : static_cast<int>(timeout_s * 1000 + 0.999);
  int n = ::poll(fds.data(), fds.size(), ms);
  if (n <= 0) return std::nullopt;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
    int status = 0;
    if (::waitpid(pids[i], &status, 0) != pids[i]) continue;
    pidfds_.erase(pids[i]);  // closes its pidfd
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
