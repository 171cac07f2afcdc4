// `goldminer pool`: the service that divides a cluster's spare CPUs between the
// runs that report to it (connection 6 of dataplane/messages_pool.h). It holds no
// training data: runs send their figures (POOL_REPORT), the pool divides its budget
// by marginal gain (planner/pool_state.h: the rules, the same as the simulator's)
// and answers each report with that run's grant (POOL_GRANT); POOL_STATUS gets the
// whole division (POOL_STATE). It keeps nothing on disk: a pool that restarts
// starts empty and rebuilds its view from the next reports (runs keep what they
// hold meanwhile). The last kMaxPoolHistory changes of a grant are kept (in
// memory) for POOL_STATUS: who had what, when, and why.
//
// Peers hold the pool key (a file the admin creates and shares: `goldminer pool
// --key-file`): they authenticate as role "run" (dataplane/auth.h). What a peer
// can make it hold is bounded as for the coordinator (ConnectionServer: a lobby,
// a gate on connections); a connection silent for 2 x report_timeout_s is closed;
// a report's size is bounded (kMaxPoolCounts rates, a 64 KiB frame); a connection
// reports for one run only; at most kMaxPoolRuns runs are known at once (a report
// of one more is refused; PoolServerOptions::max_runs), and at most
// max_runs_per_host of them first reported from one host (the peer's address), so
// that a key holder on one node cannot fill every slot. A run's first report gets
// a token in its grant, which any later report of that run from another
// connection must carry (PoolClient does, when it dials again): a peer that holds
// the pool key cannot replace another run's report. Tokens are never shown
// (POOL_STATE's reports leave them out). With job_gpus (--check-gpus slurm), a
// report's GPUs are cut to what its Slurm job holds (slurm_job; a job that is not
// running is refused), and to 1 when it names no job. Thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "dataplane/connection_server.h"
#include "dataplane/messages_pool.h"
#include "planner/pool_state.h"

namespace gm {

inline constexpr std::string_view kPoolRunRole = "run";

struct PoolServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;        // 0: any free port
  std::string secret;  // the pool key (its file's contents)
  planner::PoolStateOptions pool;
  const Clock* clock = nullptr;  // null: SystemClock()
  // When set, the budget is what it returns (e.g. the idle CPUs of a partition)
  // plus the CPUs the runs' pool workers hold, asked at most every budget_every_s;
  // an error keeps the last budget (said once).
  std::function<Result<int>()> idle_cpus;
  // With idle_cpus, when set: the CPUs wanted by jobs that wait for CPUs on the
  // partition's nodes (AskPendingCpus). While it is above 0 the budget is what the
  // pool workers hold less that, at least 0: the pool gives CPUs back to waiting
  // jobs (without a scavenger partition nothing preempts its workers) and grants
  // none of the idle ones, which a waiting job may be about to get.
  std::function<Result<int>()> pending_cpus;
  double budget_every_s = 10;
  size_t max_runs = kMaxPoolRuns;  // runs known at once; a report of one more is refused
  // Runs first reported from one host (the connection's peer address) known at once.
  size_t max_runs_per_host = kMaxPoolRunsPerHost;
  // When set, the GPUs Slurm says a running job holds (AskJobGpus): a report's
  // GPUs are cut to its job's (NotFound: the job is not running, and the report
  // is refused), to 1 when it names none; asked at most every job_every_s per job.
  std::function<Result<double>(const std::string& job)> job_gpus;
  double job_every_s = 10;
};

class PoolServer {
 public:
  static Result<std::unique_ptr<PoolServer>> Start(const PoolServerOptions& options);
  ~PoolServer();
  PoolServer(const PoolServer&) = delete;
  PoolServer& operator=(const PoolServer&) = delete;

  int port() const { return port_; }
  // The division now, as POOL_STATUS answers it.
  PoolStateMsg State();
  void Stop();

 private:
  explicit PoolServer(const PoolServerOptions& options);
  void Serve(const ConnectionServer::Connection& connection);
  Status ServeRun(Socket& socket);
  Result<PoolGrantMsg> OnReport(std::string* bound_run, const std::string& host,
                                const PoolReportMsg& report);
  // Whether this connection may report for the run (its token, the run slots).
  Status Admit(const std::string& bound_run, const std::string& host, const PoolReportMsg& report)
      REQUIRES(mu_);
  // The report's GPUs as the pool counts them (job_gpus), or why it is refused.
  Result<double> CountedGpus(const PoolReportMsg& report, double now) REQUIRES(mu_);
  void RefreshBudget(double now) REQUIRES(mu_);
  double Now() const;

  const PoolServerOptions o_;
  int port_ = 0;
  Mutex mu_;
  planner::PoolState state_ GUARDED_BY(mu_);
  std::map<std::string, planner::PoolGrant> grants_ GUARDED_BY(mu_);
  struct Seen {
    int held_workers = 0;
    double gpus = 1;
    double at_s = 0;  // its last report
    PoolReportMsg report;
    std::string host;       // where its first report came from
    bool cut_said = false;  // its GPUs were cut, and the pool said so
  };
  std::map<std::string, Seen> seen_ GUARDED_BY(mu_);
  std::map<std::string, std::string> tokens_ GUARDED_BY(mu_);  // run id -> its token
  struct Change {
    double at_s = 0;
    std::string run_id;
    int from_cpus = 0, to_cpus = 0;
    std::string reason;
  };
  std::deque<Change> history_ GUARDED_BY(mu_);   // the last kMaxPoolHistory grant changes
  double budget_at_s_ GUARDED_BY(mu_) = -1e300;  // when idle_cpus was last asked
  bool budget_failing_ GUARDED_BY(mu_) = false;
  struct JobGpus {
    double gpus = 0;
    double at_s = 0;
  };
  std::map<std::string, JobGpus> job_gpus_ GUARDED_BY(mu_);  // job id -> its GPUs, when asked
  bool jobs_failing_ GUARDED_BY(mu_) = false;
  std::unique_ptr<ConnectionServer> connections_;
};

}  // namespace gm
