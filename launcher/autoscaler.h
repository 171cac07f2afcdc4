// The autoscaler of a run: from the trainer's data wait and the delivered rate,
// measured every sample interval, decides when to add a data worker or drain one.
// Pure decision logic (the run applies the decisions); one decision per period at
// most, and every decision carries its reason for the run's record.
//
// The rules (documented in goldminer-run(1), AUTOSCALING), per period of
// `period_s`, on the period's mean delivered rate and data wait fraction:
//   - after an addition: when the rate did not rise by at least `min_gain`, the
//     worker did not pay off (the trainer, or something else, is the bottleneck):
//     it is drained again, and the count it came from becomes a ceiling that no
//     addition passes until the rate there moves by more than 2 x `min_gain` (the
//     workload changed); so the run never holds more than one worker beyond the
//     best count it found;
//   - after a removal: when the rate fell by more than `min_gain`, the worker is
//     added back and removals stop for `hold_periods`;
//   - an undo (the two cases above) is not itself checked: it returns to a count
//     already measured;
//   - otherwise: data wait above `stall_high` -> add one (up to max_workers);
//     data wait below `stall_low` -> drain one (down to min_workers), which the
//     next period checks.
// Nothing is decided before the trainer has received data; the figures of the
// period after that, and of one period after each change (two after a removal is
// undone), are left out (the
// start-up or the change settles: a new worker starts and connects, a
// drained one hands back its place in the delivery order, and a wait is counted
// when its batch arrives). Thread-compatible.
#pragma once

#include <optional>
#include <string>

#include "launcher/run_recorder.h"

namespace gm {

struct AutoscalerOptions {
  int min_workers = 1;
  int max_workers = 64;
  double period_s = 10;
  double stall_high = 0.10;
  double stall_low = 0.02;
  double min_gain = 0.05;
  int hold_periods = 5;
};

struct ScaleDecision {
  int delta = 0;  // +1: add a worker; -1: drain one
  std::string reason;
};

class Autoscaler {
 public:
  explicit Autoscaler(const AutoscalerOptions& options) : o_(options) {}
  // One sample interval's figures and the workers running now; a decision when a
  // period ends and one is due.
  std::optional<ScaleDecision> Observe(const RunRates& rates, int workers);

 private:
  std::optional<ScaleDecision> Decide(double rate, double stall, int workers);

  const AutoscalerOptions o_;
  bool started_ = false;      // a sample was seen
  bool undo_ = false;         // the last decision undid a costly removal
  int removal_checks_ = 0;    // periods left in which a removal is checked
  double settle_until_ = -1;  // leave out samples up to this t_s (start-up, or a change)
  double period_start_ = -1;  // t_s of the period's first sample
  double rate_sum_ = 0, stall_sum_ = 0, dt_sum_ = 0, last_t_ = 0;
  int pending_ = 0;          // the last experiment, to be checked: +1, -1 or 0
  bool probe_ = false;       // Decide's decision is an experiment (not an undo)
  double rate_before_ = 0;   // the rate of the period before it
  int remove_hold_ = 0;      // periods left without removals
  int ceiling_ = 0;          // no additions beyond this count (0: none)
  double ceiling_rate_ = 0;  // the rate at the ceiling when it was set
};

}  // namespace gm
