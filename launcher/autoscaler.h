// The autoscaler of a run: from the trainer's data wait and the delivered rate,
// measured every sample interval, decides when to add a data worker or drain one.
// Pure decision logic (the run applies the decisions); one decision per period at
// most, and every decision carries its reason for the run's record.
//
// A change is judged on the run's own noise, never on one period. The figures
// are taken per period of `period_s` (the mean delivered rate and data wait over
// it). The periods at one worker count form a segment (its last
// `max_judge_periods` are kept). The run's noise, sigma, is a period's relative
// spread as successive periods at one count show it (d = r_i / r_(i-1) - 1 has
// variance 2 sigma^2, and a slow drift barely moves it), pooled with `noise_prior`
// (worth two periods) until the run has shown its own. A change from count a to
// count b is judged by the gain
// g = mean(b) / mean(a) - 1 of the larger count over the smaller, with its
// standard error s = sigma * sqrt(1/n_a + 1/n_b):
//   - g - 2s >= min_gain: the larger count pays off (clearly);
//   - g + 2s <  min_gain: it does not (clearly), decided only with at least two
//     periods on each side;
//   - otherwise the segment goes on (no other change meanwhile) until
//     `max_judge_periods` periods, then g alone decides.
// The rules (documented in goldminer-run(1), AUTOSCALING):
//   - a count is changed only after at least two periods at it (an undo excepted);
//   - after an addition that does not pay off, the worker is drained again and
//     the count it came from becomes a ceiling that no addition passes until the
//     rate there (its last two periods) moves by more than 2 x `min_gain` beyond
//     2 sigma (the workload changed) or
//     `ceiling_retry_s` passed (then one worker is tried, not k); so the run holds
//     at most one worker beyond the best count it found, and never sets a ceiling
//     from one period;
//   - after a removal: when the larger count paid off, or in any period of the
//     `hold_periods` that follow the trainer's data wait rose above `stall_high`,
//     the worker is added back and nothing changes for `hold_periods`, doubled
//     for each removal undone in a row before it (at most the periods of
//     `ceiling_retry_s`): a run that needs its workers is not probed every few
//     periods for ever, each probe costing a period of waiting; a removal that
//     stands, or an addition for the trainer's wait, starts the count again;
//   - an undo is not itself judged: it returns to a count already measured;
//   - otherwise: data wait above `stall_high` -> add k, as many as the trainer's
//     demand needs at the rate a worker makes now (workers / (1 - wait), rounded
//     up, less those running; at least one), up to max_workers, the limit and the
//     ceiling; k added in one step pay when g clears k x `min_gain` as above (each
//     earns its share); when they do not, all but one are drained and the one
//     left is judged alone as a single addition is, and later additions are of
//     one worker until the workload changes (a ceiling's rate moved);
//     data wait below `stall_low` -> drain one (down to min_workers), which the
//     next periods judge.
// Nothing is decided before the trainer has received data; the figures of the
// period after that, and of one period after each change (two after a removal is
// undone), are left out (the start-up or the change settles: a new worker starts
// and connects, a drained one finishes what it holds, and a wait is counted when
// its batch arrives). Thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/run_rates.h"

namespace gm {

struct AutoscalerOptions {
  int min_workers = 1;
  int max_workers = 64;
  double period_s = 10;
  double stall_high = 0.10;
  double stall_low = 0.02;
  double min_gain = 0.05;
  int hold_periods = 5;
  int max_judge_periods = 6;     // after this many periods, a change's mean gain alone decides
  double noise_prior = 0.03;     // a period's relative spread, until the run shows its own
  double ceiling_retry_s = 300;  // a ceiling is tried again after this long
};

struct ScaleDecision {
  int delta = 0;  // +k: add k workers; -k: drain k
  std::string reason;
};

// The periods measured at one worker count since the run came to it (the last
// max_judge_periods of them).
struct RateSegment {
  int workers = 0;
  std::vector<double> rates;  // period means, in order
  double Mean() const;
  double RecentMean() const;  // of the last two periods
};

// How a change from segment `fewer` to segment `more` (one worker more) turned out.
struct GainVerdict {
  enum class Kind { kPays, kDoesNotPay, kUnsure };
  Kind kind = Kind::kUnsure;
  double gain = 0;   // mean(more) / mean(fewer) - 1
  double error = 0;  // its standard error
};
GainVerdict JudgeGain(const RateSegment& fewer, const RateSegment& more, double sigma,
                      double min_gain);

class Autoscaler {
 public:
  explicit Autoscaler(const AutoscalerOptions& options) : o_(options) {}
  // One sample interval's figures and the workers running now; a decision when a
  // period ends and one is due.
  std::optional<ScaleDecision> Observe(const RunRates& rates, int workers);
  // The run's noise as judged now (relative spread of a period's rate).
  double Sigma() const;
  // The most workers the run may hold now, below max_workers: the allocation plus
  // what a pool grants, or plus none while the elastic partition has no room. An
  // addition is not proposed at it (so none is recorded that cannot start); a
  // removal judged at it is not undone by an addition beyond it.
  void set_limit(int limit) { limit_ = limit; }

 private:
  std::optional<ScaleDecision> Decide(double t_s, double stall, int workers);
  std::optional<ScaleDecision> JudgeAddition(double t_s, double stall, int workers);
  std::optional<ScaleDecision> JudgeRemoval(double stall, int workers);
  void Change(int delta);  // the segments after a decision
  std::string Figures(const GainVerdict& v, const RateSegment& fewer,
                      const RateSegment& more) const;

  const AutoscalerOptions o_;
  bool started_ = false;      // a sample was seen
  bool undo_ = false;         // the last decision undid a costly removal
  double settle_until_ = -1;  // leave out samples up to this t_s (start-up, or a change)
  double period_start_ = -1;  // t_s of the period's first sample
  double rate_sum_ = 0, stall_sum_ = 0, dt_sum_ = 0, last_t_ = 0;
  int pending_ = 0;             // the change being judged: +k (workers added), -1 or 0
  RateSegment current_;         // the count now
  RateSegment before_;          // the count before the last change
  double noise_sum_ = 0;        // sum of d^2 / 2 over successive periods at one count
  int noise_count_ = 0;         // and how many
  int remove_hold_ = 0;         // periods left without changes
  int undone_in_a_row_ = 0;     // removals undone since one stood or the trainer waited
  int ceiling_ = 0;             // no additions beyond this count (0: none)
  bool one_at_a_time_ = false;  // a step of k did not each pay: one at a time since
  double ceiling_rate_ = 0;     // the rate at the ceiling when it was set
  double ceiling_until_ = 0;    // t_s after which the ceiling is tried again
  int limit_ = 1 << 30;         // set_limit's
  int Max() const { return limit_ < o_.max_workers ? limit_ : o_.max_workers; }
};

}  // namespace gm
