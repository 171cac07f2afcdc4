// Starting and supervising local processes (the local backend's edge to the OS):
// children inherit our stdin/stdout/stderr and environment plus additions, and
// are watched through pidfds so a supervisor waits on exits without polling.
// Thread-compatible: one supervising thread uses a ProcessGroup.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/os/unique_fd.h"
#include "core/status.h"

namespace gm {

struct ChildExit {
  pid_t pid = 0;
  int wait_status = 0;    // as waitpid() reports it
  std::string describe;   // "exited with status 3", "was killed by signal 9 (Killed)"
  int exit_code() const;  // the status, or 128 + signal
};

// What a short command printed, and how it ended.
struct CommandOutput {
  std::string out;  // stdout (at most max_bytes)
  std::string err;  // stderr (at most max_bytes)
  ChildExit exit;
};

// Runs argv (searched in PATH) with our environment, stdin from /dev/null, and
// collects its stdout and stderr. NotFound names the program when it cannot start;
// Unavailable when it runs longer than timeout_s (it is then killed and reaped);
// IoError when it prints more than max_bytes on either stream.
// For queries such as `scontrol show node`, not for long-running children.
Result<CommandOutput> CaptureOutput(const std::vector<std::string>& argv, double timeout_s,
                                    size_t max_bytes = 64u << 20);

class ProcessGroup {
 public:
  ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;
  // Kills (SIGKILL) and reaps every child still running.
  ~ProcessGroup();

  // Starts argv (argv[0] searched in PATH when it has no '/') with our
  // environment plus `env` ("NAME=value", overriding). NotFound/IoError name the
  // program when it cannot start. With `cpus`, the child runs on those CPUs only
  // from its first instruction (it inherits the mask; so do its threads and
  // children); InvalidArgument when this process may not use them all.
  // With `own_group`, the child leads a process group of its own, its stdin
  // /dev/null (SpawnRequest::own_process_group: a terminal's Ctrl-C is not its).
  Result<pid_t> Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                      const std::vector<int>& cpus = {}, bool own_group = false);
  // Sends `sig` to a running child; OK if it already exited.
  void Signal(pid_t pid, int sig);
  // Waits up to timeout_s for any child to exit and reaps it; nullopt on timeout.
  std::optional<ChildExit> WaitAny(double timeout_s);
  // Sends SIGTERM to each running child, waits up to grace_s for them, then
  // SIGKILLs the rest; returns their exits.
  std::vector<ChildExit> TerminateAll(double grace_s);
  size_t running() const { return pidfds_.size(); }

 private:
  std::map<pid_t, UniqueFd> pidfds_;  // running children -> pidfd
};

}  // namespace gm
