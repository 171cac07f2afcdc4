// The one way a verb stops on SIGTERM and SIGINT (Ctrl-C, scancel, a Slurm time
// limit, a requeue): the signals are blocked in the constructing thread, and so
// in every thread it starts afterwards, and stay pending until taken: by a
// thread of their own that calls the callback given to Watch() (the worker), or
// by the caller polling TakePending() (run's loop, which so never misses a signal
// that also ended its trainer). Nothing runs in a signal handler. Children start
// with no signal blocked (core/os/spawn.h). Construct it before any thread starts;
// one per process; Watch or TakePending, not both.
//
// With `drain_signal`, SIGUSR2 is watched too: a data worker drains on it as on
// its first SIGTERM. `goldminer run` drains a Slurm step with it (scancel
// --signal=USR2), because slurmstepd answers `scancel --signal=TERM JOB.STEP` with
// "*** STEP ... CANCELLED ***" in the job's output, for a drain that ends well.
#pragma once

#include <signal.h>

#include <functional>
#include <thread>

namespace gm::cli {

class StopOnSignal {
 public:
  explicit StopOnSignal(bool drain_signal = false);
  ~StopOnSignal();  // ends the waiting thread and restores the signal mask
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

  // Calls `on_signal(sig)` for each SIGTERM or SIGINT (and SIGUSR2 with
  // drain_signal) from now on (on the waiting thread). Call once.
  void Watch(std::function<void(int)> on_signal);
  // The SIGTERM or SIGINT pending now, taken (0: none). Never blocks.
  int TakePending();
  // Whether the signal TakePending last returned came from the kernel for a
  // terminal (Ctrl-C: SIGINT to the whole foreground process group, so the
  // trainer had it too), not from kill(2) aimed at this process.
  bool LastFromTerminal() const { return last_from_terminal_; }

 private:
  sigset_t set_{};
  sigset_t old_{};
  std::thread thread_;
  bool last_from_terminal_ = false;
};

}  // namespace gm::cli
