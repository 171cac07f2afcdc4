// The supervisor of a run's processes, for `run` and `profile` alike, over any
// launcher (launcher/process_launcher.h): it starts workers and trainers, replaces
// a worker that crashes (bounded retries: the first at once, later ones after a
// delay that doubles), drains a worker
// without replacing it, stops processes with SIGTERM and SIGKILL after a grace
// period, and at the end stops everything. It holds no other policy: the caller
// decides what to start and when, and is told what ended (Poll).
//
// Time is read from a clock the caller passes (core/clock.h; the system's by
// default), so a test drives backoff and grace periods on a FakeClock.
//
// Thread-compatible: one thread (the run's loop).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "launcher/process_launcher.h"

namespace gm {

struct SupervisorOptions {
  int max_restarts = 3;      // crashed workers replaced at most this many times in all
  double backoff_s = 0.25;   // delay before the second replacement (the first is at
                             // once); doubled for each later one
  double max_backoff_s = 8;  // the delay's ceiling
  double stop_grace_s = 5;   // SIGTERM, then SIGKILL after this long (Stop)
  double end_grace_s = 10;   // the same at the end of the run (StopAll)
  double drain_kill_s = 0;   // a drained worker gets SIGKILL after this long (0: never)
  Clock* clock = nullptr;    // null: SystemClock()
  // Called on each request just before it starts (replacements included), e.g. to
  // give each process a name of its own. May be empty.
  std::function<void(LaunchRequest&)> prepare;
};

// What Poll reports: a process that ended, and what the supervisor did about it.
struct ProcessEnded {
  ChildExit exit;
  ProcessRole role = ProcessRole::kWorker;
  int slot = 0;
  bool drained = false;       // it was drained (Drain): not replaced, however it ended
  bool stopped = false;       // it was stopped (Stop)
  bool will_replace = false;  // a crashed worker: a replacement starts after `delay_s`
  double delay_s = 0;
  bool restarts_exhausted = false;  // a crashed worker not replaced: max_restarts reached
};

// A replacement the supervisor started (Poll): the slot's new process.
struct ProcessReplaced {
  pid_t pid = 0;
  int slot = 0;
  int threads = 1;       // as the replaced one's request said
  bool elastic = false;  // likewise
  std::string error;     // non-empty: it could not be started (then pid is 0)
};

class Supervisor {
 public:
  Supervisor(ProcessLauncher& launcher, SupervisorOptions options);
  // Kills what is still running (StopAll should have been called).
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  Result<pid_t> Start(const LaunchRequest& request);
  // Asks a worker to finish what it holds and exit (SIGTERM); it is not replaced.
  // One still running drain_kill_s later gets SIGKILL (in Poll).
  // `step`: the Slurm step the worker registered with, if known (ProcessLauncher::Drain).
  void Drain(pid_t pid, const std::string& step = "");
  // Stops a process: `sig` now (0: none, it has had one), SIGKILL once
  // stop_grace_s have passed (in Poll).
  void Stop(pid_t pid, int sig = SIGTERM);
  // Waits up to timeout_s for a process to end. Also sends the SIGKILLs that are due
  // and starts the replacements whose delay has passed (reported in `replaced`).
  std::optional<ProcessEnded> Poll(double timeout_s, std::vector<ProcessReplaced>* replaced);
  // SIGTERM to every process, SIGKILL to those left after end_grace_s; returns how
  // each ended. Pending replacements are dropped.
  std::vector<ProcessEnded> StopAll();

  size_t running(ProcessRole role) const;
  bool running(pid_t pid) const { return procs_.count(pid) > 0; }
  std::vector<pid_t> pids(ProcessRole role) const;
  int restarts() const { return restarts_; }
  std::string backend() const { return launcher_.name(); }

 private:
  struct Proc {
    LaunchRequest request;
    bool drained = false;
    bool stopped = false;
    double kill_at = 0;  // when stopped (or drained, with drain_kill_s): SIGKILL after this
  };
  struct Pending {
    double at = 0;
    LaunchRequest request;
  };
  double Now() const;
  ProcessEnded Ended(const ChildExit& e);

  ProcessLauncher& launcher_;
  SupervisorOptions options_;
  std::map<pid_t, Proc> procs_;
  std::vector<Pending> pending_;  // replacements waiting for their delay
  int restarts_ = 0;
};

}  // namespace gm
