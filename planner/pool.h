// The pool's division: a cluster's spare CPUs shared between running jobs' data
// workers by marginal gain (goldminer-simulate(1), POLICIES; the pool service of
// the elastic-workers design runs the same function). Pure: values in, values
// out, time passed in. Thread-compatible.
//
// Each job's speed, as a fraction of the speed its GPUs allow (0..1), is a
// concave, piecewise-linear function of the CPUs its data workers hold: a list of
// segments of falling slope. The division maximizes the sum over jobs of
// weight x speed (the weight: the job's GPUs, so a GPU idle for data counts the
// same in every job): since every curve is concave, filling the steepest
// remaining segments first is optimal.
//
// Hysteresis, so that workers are not started and stopped for nothing:
//   - a job's holding that grew less than `min_lifetime_s` ago is not shrunk
//     (its workers have just started), except what lies beyond its own baseline
//     when every job's baseline does not fit beside it; taking CPUs back to admit
//     a new job is the caller's preemption, outside this function;
//   - the current holdings are kept when they fit and the best division is
//     worth less than `min_gain` more (a fraction of its own value).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace gm::planner {

// `cpus` CPUs that each add `slope` to the job's speed (a fraction per CPU).
struct PoolSegment {
  int cpus = 0;
  double slope = 0;
};

struct PoolJob {
  std::string id;
  double weight = 1;               // the job's GPUs, > 0
  std::vector<PoolSegment> curve;  // slopes >= 0, falling
  int held = 0;                    // CPUs its workers hold now, >= 0
  // The first CPUs of its curve, given before any job's CPUs beyond its own
  // baseline, steepest first among baselines: what the job would hold as submitted,
  // so that sharing never leaves it slower than that while the pool has them.
  int baseline = 0;              // >= 0
  double held_since_s = -1e300;  // when its holding last grew (the caller's clock)
};

struct PoolOptions {
  double min_gain = 0.02;      // fraction of the best division's value, >= 0
  double min_lifetime_s = 60;  // seconds, >= 0
};

struct PoolDivision {
  std::vector<int> cpus;  // per job, in the order given
  double value = 0;       // sum of weight x speed the workers give
  bool changed = false;   // false: every job keeps what it holds
};

// The weighted speed `job` gets from `cpus` worker CPUs.
double PoolValue(const PoolJob& job, int cpus);

// Divides `spare_cpus` (the CPUs no job's trainer and no other task holds, the
// workers' included) between `jobs` at time `now_s`. InvalidArgument, naming the
// job, for a weight that is not positive, a negative holding or segment, or a
// curve whose slopes rise.
Result<PoolDivision> DividePool(const std::vector<PoolJob>& jobs, int spare_cpus, double now_s,
                                const PoolOptions& options);

}  // namespace gm::planner
