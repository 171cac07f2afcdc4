// A fake ProcessLauncher for unit tests of the supervisor and the run loop.
#pragma once

#include <signal.h>

#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "launcher/process_launcher.h"

namespace gm {

// Processes are numbers; the test decides when and how they end. Wait() advances
// the clock by its timeout when nothing ends (as a real wait would take that long).
class FakeLauncher : public ProcessLauncher {
 public:
  explicit FakeLauncher(FakeClock* clock) : clock_(clock) {}

  Result<pid_t> Start(const LaunchRequest& r) override {
    if (r.elastic && refuse_elastic) {  // as Slurm refuses a job at submission
      ++elastic_refused;
      return Status::InvalidArgument(
          "Slurm refuses a worker job (Memory specification can not "
          "be satisfied)");
    }
    if (fail_starts > 0) {
      --fail_starts;
      return Status::NotFound(r.argv.empty() ? "?" : r.argv[0] + ": cannot start");
    }
    const pid_t pid = next_++;
    running_[pid] = r;
    started.push_back({pid, r});
    started_at.push_back(clock_->Now());
    return pid;
  }
  void Signal(pid_t pid, int sig) override {
    if (!running_.count(pid)) return;
    signals.push_back({pid, sig});
    if (sig == SIGKILL || (sig == SIGTERM && obey_term)) End(pid, 128 + sig, sig);
  }
  std::optional<ChildExit> Wait(double timeout_s) override {
    if (ended_.empty()) {
      clock_->Advance(timeout_s);
      return std::nullopt;
    }
    ChildExit e = ended_.front();
    ended_.pop_front();
    return e;
  }
  std::vector<ChildExit> KillAll() override {
    std::vector<ChildExit> out(ended_.begin(), ended_.end());
    ended_.clear();
    for (const auto& [pid, r] : running_) out.push_back(Exit(pid, 128 + SIGKILL, SIGKILL));
    running_.clear();
    return out;
  }
  std::string name() const override { return "fake"; }

  // The process ends with `code` (or the signal `sig`, when non-zero).
  void End(pid_t pid, int code, int sig = 0) {
    if (!running_.erase(pid)) return;
    ended_.push_back(Exit(pid, code, sig));
  }
  static ChildExit Exit(pid_t pid, int code, int sig) {
    ChildExit e;
    e.pid = pid;
    e.wait_status = sig != 0 ? sig : (code << 8);
    e.describe = sig != 0 ? "was killed by signal " + std::to_string(sig)
                          : "exited with status " + std::to_string(code);
    return e;
  }
  size_t alive() const { return running_.size(); }
  const std::map<pid_t, LaunchRequest>& running() const { return running_; }

  std::vector<std::pair<pid_t, LaunchRequest>> started;
  std::vector<double> started_at;  // the clock at each start, in the order of `started`
  std::vector<std::pair<pid_t, int>> signals;
  bool obey_term = true;        // SIGTERM ends the process at once
  int fail_starts = 0;          // the next starts fail
  bool refuse_elastic = false;  // elastic requests are refused (InvalidArgument)
  int elastic_refused = 0;      // and how many were

 private:
  FakeClock* clock_;
  pid_t next_ = 100;
  std::map<pid_t, LaunchRequest> running_;
  std::deque<ChildExit> ended_;
};

}  // namespace gm
