// The coordinator of `goldminer run` in a process of its own (`goldminer
// coordinator --config FILE`, a verb for run's use only), so that its death does
// not take the run with it: run supervises it, and one that dies (a crash, kill -9,
// the OOM killer) is started again on the same address from its journal
// (launcher/coordinator_journal.h); its workers and trainers come back to it with
// their ids and sessions (dataplane/messages_control.h) and nothing acknowledged is made
// again.
//
// The two processes speak JSON lines over the child's stdin and stdout: run sends
// the config first (ConfigJson with the run's secret: over the pipe, never in a
// file or the command line), the child says {"address", "port", "order_notice"}
// once listening (or {"error"}), then answers
// each {"op": "summary" | "end_workers" | "stop"} with one line (the summary, or
// {"ok": true}); "stop" ends it (the run's end is said first) and end of input
// stops it too (run is gone). Its log goes to the stderr it shares with run.
//
// Thread-safety: every method may be called from any thread (one mutex).
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/os/unique_fd.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "launcher/coordinator_server.h"

namespace gm {

// CoordinatorSummary and CoordinatorConfig as JSON, and back (the child's answers,
// its config). The config's JSON leaves the secret and the clock out.
nlohmann::json SummaryJson(const CoordinatorSummary& summary);
Result<CoordinatorSummary> SummaryFromJson(const nlohmann::json& j);
nlohmann::json ConfigJson(const CoordinatorConfig& config);
Result<CoordinatorConfig> ConfigFromJson(const nlohmann::json& j);

// The child's side: reads its config from `in_fd`, serves it and answers run on
// `in_fd` / `out_fd` until "stop" or end of input. The process's exit status: 0,
// or 1 when the coordinator could not start (said on out_fd and in the log).
int ServeCoordinatorProcess(int in_fd, int out_fd);

class CoordinatorProcess {
 public:
  struct Options {
    std::string exe;                     // the goldminer binary
    std::vector<std::string> log_flags;  // "-v" or "-q", as run was given
    // Deaths it is started again after; one more fails the run.
    int max_restarts = 5;
  };
  // Starts the child, gives it its config and waits until it listens. The error of
  // a child that cannot start (a pipeline it cannot load, a port in use).
  static Result<std::unique_ptr<CoordinatorProcess>> Start(CoordinatorConfig config,
                                                           Options options);
  ~CoordinatorProcess();  // kills a child still running
  CoordinatorProcess(const CoordinatorProcess&) = delete;
  CoordinatorProcess& operator=(const CoordinatorProcess&) = delete;

  const std::string& address() const { return address_; }
  const std::string& order_notice() const { return order_notice_; }
  // The coordinator's view now. A child found dead is started again first; while
  // it cannot be, the last view.
  CoordinatorSummary Summary();
  void EndWorkers();
  // Stops it (it says how the run's epochs ended first) and returns its last view.
  CoordinatorSummary Finish();
  // Starts the child again at once when it has died (run calls it every 0.2 s, so
  // that a death is not noticed only at the next summary); false once failure()
  // is set.
  bool Watch();
  // Why it could not be started again (a journal cut short or corrupted, too many
  // deaths): the run must stop. Empty while it serves.
  std::string failure() const;
  int restarts() const;

 private:
  CoordinatorProcess(CoordinatorConfig config, Options options)
      : config_(std::move(config)), options_(std::move(options)) {}
  Status Spawn() REQUIRES(mu_);
  // Sends `op` and reads the answer; a dead or silent child is reaped and started
  // again once, and asked again.
  Result<nlohmann::json> Ask(const std::string& op) REQUIRES(mu_);
  Result<nlohmann::json> AskOnce(const std::string& op) REQUIRES(mu_);
  // Ends the child (SIGKILL when it has not exited) and says how it ended.
  std::string Reap() REQUIRES(mu_);
  // The child ended (`how`): starts it again, unless it died too often or cannot
  // start (failure_ then says why, and that is returned).
  Status Restart(const std::string& how) REQUIRES(mu_);

  CoordinatorConfig config_;  // its port fixed once the first child listens
  const Options options_;
  std::string address_;
  std::string order_notice_;
  mutable Mutex mu_;
  pid_t pid_ GUARDED_BY(mu_) = -1;       // the child running (-1: none)
  pid_t last_pid_ GUARDED_BY(mu_) = -1;  // the last one started
  UniqueFd to_child_ GUARDED_BY(mu_);
  UniqueFd from_child_ GUARDED_BY(mu_);
  std::string pending_ GUARDED_BY(mu_);  // read past the last line
  CoordinatorSummary last_ GUARDED_BY(mu_);
  std::string failure_ GUARDED_BY(mu_);
  int restarts_ GUARDED_BY(mu_) = 0;
  bool finished_ GUARDED_BY(mu_) = false;
};

}  // namespace gm
