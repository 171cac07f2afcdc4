// The pool service's state: what the runs of a cluster report (their GPUs, the
// delivered rate they measured at each worker count, what their trainers could
// take) and how many extra workers each may hold, divided by DividePool
// (planner/pool.h) over a budget of CPUs. Pure and clocked from outside: every
// call takes the time, so the service, its tests (a fake clock) and the simulator
// run the same rules. Thread-compatible.
//
// A run's curve, in the pool's terms (a fraction of its GPUs' speed per extra CPU):
// its speed with W workers in all is rate(W) / demand, at most 1. The counts it
// measured give their own points; a count not measured yet is assumed to add what
// the last measured worker added (optimistic, so a new run gets a worker to try,
// and its next report corrects it), up to the demand. Slopes are made to fall (a
// later worker never counts for more than an earlier one), as DividePool needs.
//
// Rules (the pool's own, beyond DividePool's hysteresis):
//   - a connection is bound to the run its first report names: a report for another
//     run on it is refused (a run can only report for itself);
//   - a run not heard from for report_timeout_s is forgotten: its grant ends and its
//     CPUs go to the others at the next division (what it holds meanwhile is its
//     own; a pool that restarts starts empty and rebuilds its view from reports);
//   - a run's holding "grew" (DividePool's min_lifetime) when its grant rose.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "planner/pool.h"

namespace gm::planner {

struct RunReport {
  std::string run_id;               // 1..128 characters
  double gpus = 1;                  // its trainers' GPUs: its weight, > 0
  int cpus_per_worker = 1;          // what one extra worker holds, >= 1
  int base_workers = 0;             // workers of its own allocation, >= 0
  int extra_workers = 0;            // pool workers it holds now, >= 0
  double demand_samples_per_s = 0;  // what its trainers could take, > 0
  // Measured delivered rate at total worker counts (base + extra), each count >= 1
  // and given once, rates >= 0; at most kMaxReportedCounts of them.
  std::vector<std::pair<int, double>> rates;
};
inline constexpr size_t kMaxReportedCounts = 1024;

struct PoolGrant {
  std::string run_id;
  int extra_workers = 0;  // may hold this many pool workers
  int cpus = 0;           // their CPUs
  // Why, for the run's record and `pool --status`: whether the division changed,
  // the budget, what the grant adds to the run's speed and what one more CPU would.
  std::string reason;
};

struct PoolStateOptions {
  int cpus = 0;  // the budget the pool divides, >= 0
  PoolOptions division;
  double report_timeout_s = 60;  // > 0
};

// The pool curve of one run from its report (see above). Exposed for tests.
std::vector<PoolSegment> RunCurve(const RunReport& report, int max_cpus);

class PoolState {
 public:
  explicit PoolState(const PoolStateOptions& options) : o_(options) {}

  // A report on a connection bound to `bound_run` ("" for one that has not
  // reported yet). InvalidArgument, naming the field, for a value out of range, and
  // for a report naming another run than the one the connection is bound to.
  Status Report(const std::string& bound_run, const RunReport& report, double now_s);
  // Forgets the runs not heard from for report_timeout_s (their ids, sorted), then
  // divides the budget: a grant for every run still known, in run id order.
  Result<std::vector<PoolGrant>> Divide(double now_s, std::vector<std::string>* forgotten);
  size_t runs() const { return runs_.size(); }
  // A new budget (e.g. the idle CPUs Slurm reports now), from the next division;
  // `why`, when not empty, is said in the grants' reasons after the budget.
  void set_cpus(int cpus, std::string why = "") {
    o_.cpus = cpus;
    budget_why_ = std::move(why);
  }
  int cpus() const { return o_.cpus; }
  // The CPUs the runs say their pool workers hold now.
  int HeldCpus() const;

 private:
  struct Run {
    RunReport report;
    double last_report_s = 0;
    int granted_cpus = 0;
    double grew_at_s = -1e300;
  };
  PoolStateOptions o_;
  std::string budget_why_;
  std::map<std::string, Run> runs_;
};

}  // namespace gm::planner
