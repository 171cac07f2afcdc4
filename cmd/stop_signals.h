// The one way a verb stops on SIGTERM and SIGINT (Ctrl-C, scancel, a Slurm time
// limit): the signals are blocked in the constructing thread, and so in every
// thread it starts afterwards, and taken by sigwait() on a thread of their own,
// which calls the callback given to Watch() with the signal's number. Nothing
// runs in a signal handler. Children start with no signal blocked
// (core/spawn.h). Construct it before any thread starts; one per process.
#pragma once

#include <signal.h>

#include <functional>
#include <thread>

namespace gm::cli {

class StopOnSignal {
 public:
  StopOnSignal();
  ~StopOnSignal();  // ends the waiting thread and restores the signal mask
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

  // Calls `on_signal(sig)` for each SIGTERM or SIGINT from now on (on the
  // waiting thread). Call once.
  void Watch(std::function<void(int)> on_signal);

 private:
  sigset_t set_{};
  sigset_t old_{};
  std::thread thread_;
};

}  // namespace gm::cli
