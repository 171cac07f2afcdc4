// Where a run's processes start: children of this process on this machine, or, for
// data workers, Slurm job steps of the allocation this process runs in
// (launcher/slurm_job.h). A launcher
// only starts, signals and reaps; what to start, when to replace and how to stop is
// the supervisor's (launcher/supervisor.h), the same for every launcher, for `run`
// and for `profile`. Unit tests drive the supervisor with a fake launcher.
//
// Thread-compatible: one thread (the run's loop) uses a launcher.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "launcher/process.h"

namespace gm {

enum class ProcessRole { kWorker, kTrainer };

struct LaunchRequest {
  ProcessRole role = ProcessRole::kWorker;
  std::vector<std::string> argv;
  std::vector<std::string> env;   // "NAME=value", added to this process's environment
  int slot = 0;                   // a worker's slot: its size and placement
  int threads = 1;                // a worker's CPUs (stage threads)
  bool off_trainer_node = false;  // a worker the plan put on another node than the trainer's
  uint64_t memory_bytes = 0;      // a worker's memory (0: not said)
  std::vector<int> cpus;          // run on these CPUs only (empty: ours); local children only
  // A worker beyond the allocation: under Slurm a job of its own in the run's
  // elastic partition (launcher/slurm_job.h, ElasticWorkers); refused elsewhere.
  bool elastic = false;
  // A worker that crashes is replaced in its slot (launcher/supervisor.h); false:
  // not, the caller decides (an elastic worker's job that Slurm refused or ended
  // is not submitted again in a loop).
  bool replace = true;
};

class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  // Starts the process; its handle is the pid of the child this process reaps (for
  // a Slurm step, its srun). NotFound/IoError name the program when it cannot start.
  virtual Result<pid_t> Start(const LaunchRequest& request) = 0;
  // Sends `sig` to a running process (SIGTERM to an srun ends its step); no-op if
  // it already exited.
  virtual void Signal(pid_t pid, int sig) = 0;
  // Asks a worker to drain (SIGTERM to its process). `step` is the Slurm step it
  // registered with ("JOB.STEP", or "" when not known): srun ends its step at once
  // on SIGTERM (SIGKILL to the tasks after KillWait at best, the tasks' own
  // handlers never run), so the Slurm launcher signals the step's tasks instead.
  virtual void Drain(pid_t pid, const std::string& step) {
    (void)step;
    Signal(pid, SIGTERM);
  }
  // Waits up to timeout_s for any process to end and reaps it.
  virtual std::optional<ChildExit> Wait(double timeout_s) = 0;
  // Kills (SIGKILL) and reaps every process still running; returns their exits.
  virtual std::vector<ChildExit> KillAll() = 0;
  // "local" or "slurm": the backend's name, as recorded.
  virtual std::string name() const = 0;
};

// Children of this process (launcher/process.h's ProcessGroup), workers and
// trainers alike. Its name() is "local". Slurm job steps: launcher/slurm_job.h.
std::unique_ptr<ProcessLauncher> MakeChildLauncher();

}  // namespace gm
