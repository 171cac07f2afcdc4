#include "launcher/autoscaler.h"

#include <algorithm>
#include <cmath>

#include "core/text_format.h"

namespace gm {
namespace {

std::string Rate(double r) { return Fixed(r, 0) + " samples/s"; }

}  // namespace

std::optional<ScaleDecision> Autoscaler::Observe(const RunRates& r, int workers) {
  if (!started_) {
    // The start-up (workers starting, the first batches) settles: nothing is decided
    // before the trainer has received data, nor in the period after that.
    if (r.samples_per_s <= 0) return std::nullopt;
    started_ = true;
    settle_until_ = r.t_s + o_.period_s;
  }
  // A worker started and not yet registered with the coordinator (starting up: a
  // Slurm step, an exec stage's interpreter) makes the figures say nothing about
  // the worker count: the settling lasts until it is ready, then one more period.
  if (r.workers_ready >= 0 && r.workers_ready < r.workers) {
    settle_until_ = std::max(settle_until_, r.t_s + o_.period_s);
  }
  if (r.t_s <= settle_until_) {
    last_t_ = r.t_s;
    period_start_ = -1;
    rate_sum_ = stall_sum_ = dt_sum_ = 0;
    return std::nullopt;
  }
  const double dt = last_t_ > 0 && r.t_s > last_t_ ? r.t_s - last_t_ : 0;
  last_t_ = r.t_s;
  if (dt <= 0) return std::nullopt;
  if (period_start_ < 0) period_start_ = r.t_s - dt;
  rate_sum_ += r.samples_per_s * dt;
  stall_sum_ += r.data_wait_fraction * dt;
  dt_sum_ += dt;
  if (r.t_s - period_start_ < o_.period_s) return std::nullopt;
  const double rate = rate_sum_ / dt_sum_, stall = stall_sum_ / dt_sum_;
  period_start_ = -1;
  rate_sum_ = stall_sum_ = dt_sum_ = 0;
  probe_ = false;
  undo_ = false;
  std::optional<ScaleDecision> d = Decide(rate, stall, workers);
  // A removal undone leaves the trainer catching up on what the drained worker
  // handed back: two periods settle, so its wait is not read as a need for more.
  if (d) settle_until_ = r.t_s + o_.period_s * (undo_ ? 2 : 1);
  // Only an experiment is checked; undoing one is not. A removal is checked over the
  // hold's periods: what a drained worker handed back may be waited for a while
  // later, and a wait then is the removal's cost, not a need for more workers.
  if (d && probe_) {
    pending_ = d->delta;
    removal_checks_ = d->delta < 0 ? std::max(1, o_.hold_periods) : 0;
  } else if (!d && pending_ == -1 && --removal_checks_ > 0) {
    // still checking the removal
  } else {
    pending_ = 0;
  }
  rate_before_ = rate;
  return d;
}

std::optional<ScaleDecision> Autoscaler::Decide(double rate, double stall, int workers) {
  if (remove_hold_ > 0) --remove_hold_;
  const std::string now = Rate(rate) + ", data wait " + Percent(stall);
  if (pending_ == +1 && rate < rate_before_ * (1 + o_.min_gain) && workers > o_.min_workers) {
    ceiling_ = workers - 1;
    ceiling_rate_ = rate_before_;
    return ScaleDecision{-1, "the worker added did not pay off (" + Rate(rate_before_) + " -> " +
                                 now + "): draining it; no more than " + std::to_string(ceiling_) +
                                 " workers while the rate holds"};
  }
  // The ceiling lifts when the rate at it moved: the workload changed.
  if (ceiling_ > 0 && workers == ceiling_ && pending_ == 0 &&
      std::abs(rate - ceiling_rate_) > 2 * o_.min_gain * ceiling_rate_) {
    ceiling_ = 0;
  }
  // After an undo the count is one already measured: it gets the hold's periods
  // before anything is added or removed (the trainer catches up meanwhile).
  const bool may_add = (ceiling_ == 0 || workers < ceiling_) && remove_hold_ == 0;
  if (pending_ == -1 && rate < rate_before_ * (1 - o_.min_gain) && workers < o_.max_workers) {
    remove_hold_ = o_.hold_periods;
    undo_ = true;
    return ScaleDecision{+1, "removing a worker cost " + Percent(1 - rate / rate_before_) + " (" +
                                 Rate(rate_before_) + " -> " + now +
                                 "): adding it back; no change for " +
                                 std::to_string(o_.hold_periods) + " periods"};
  }
  // A removal after which the trainer waits cost something too, even when the rate
  // held: it is undone (the count it had was enough), not followed by an addition.
  if (pending_ == -1 && stall > o_.stall_high && workers < o_.max_workers) {
    remove_hold_ = o_.hold_periods;
    undo_ = true;
    return ScaleDecision{+1, "removing a worker made the trainer wait (" + now +
                                 "): adding it back; no change for " +
                                 std::to_string(o_.hold_periods) + " periods"};
  }
  probe_ = true;
  if (stall > o_.stall_high && workers < o_.max_workers && may_add) {
    return ScaleDecision{+1, "data wait " + Percent(stall) + " above " + Percent(o_.stall_high) +
                                 " (" + now + "): adding a worker"};
  }
  if (stall < o_.stall_low && workers > o_.min_workers && remove_hold_ == 0) {
    return ScaleDecision{-1, "data wait " + Percent(stall) + " below " + Percent(o_.stall_low) +
                                 " (" + now + "): trying one worker fewer"};
  }
  return std::nullopt;
}

}  // namespace gm
