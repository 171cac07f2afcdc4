#include "launcher/autoscaler.h"

#include <algorithm>
#include <cmath>

#include "core/text_format.h"

namespace gm {
namespace {

std::string Rate(double r) { return Fixed(r, 0) + " samples/s"; }

// "+2.8%", "-1.0%": a gain to one decimal.
std::string SignedPercent(double fraction) {
  return (fraction >= 0 ? "+" : "") + Fixed(100 * fraction, 1) + "%";
}

// The weight of noise_prior in Sigma(), in periods' degrees of freedom.
constexpr double kPriorWeight = 2;

// The smallest share of time the trainer is taken to compute (not wait) when its
// demand is read from its wait: a trainer that waits all the time asks for any
// number of workers, which the limits then bound.
constexpr double kMinBusy = 0.01;

std::string Workers(int n) { return n == 1 ? "a worker" : std::to_string(n) + " workers"; }

}  // namespace

double RateSegment::Mean() const {
  if (rates.empty()) return 0;
  double sum = 0;
  for (double r : rates) sum += r;
  return sum / static_cast<double>(rates.size());
}

double RateSegment::RecentMean() const {
  if (rates.size() < 2) return Mean();
  return (rates[rates.size() - 1] + rates[rates.size() - 2]) / 2;
}

GainVerdict JudgeGain(const RateSegment& fewer, const RateSegment& more, double sigma,
                      double min_gain) {
  GainVerdict v;
  const size_t nf = fewer.rates.size(), nm = more.rates.size();
  if (nf == 0 || nm == 0) return v;
  const double base = fewer.Mean();
  if (base <= 0) {
    v.gain = more.Mean() > 0 ? 1 : 0;  // from nothing to something: pays
    v.kind = more.Mean() > 0 ? GainVerdict::Kind::kPays : GainVerdict::Kind::kUnsure;
    return v;
  }
  v.gain = more.Mean() / base - 1;
  v.error = sigma * std::sqrt(1.0 / static_cast<double>(nf) + 1.0 / static_cast<double>(nm));
  if (v.gain - 2 * v.error >= min_gain) {
    v.kind = GainVerdict::Kind::kPays;
  } else if (v.gain + 2 * v.error < min_gain && nf >= 2 && nm >= 2) {
    v.kind = GainVerdict::Kind::kDoesNotPay;  // never from one period on either side
  }
  return v;
}

double Autoscaler::Sigma() const {
  return std::sqrt((kPriorWeight * o_.noise_prior * o_.noise_prior + noise_sum_) /
                   (kPriorWeight + noise_count_));
}

std::optional<ScaleDecision> Autoscaler::Observe(const RunRates& r, int workers) {
  if (!started_) {
    // The start-up (workers starting, the first batches) settles: nothing is decided
    // before the trainer has received data, nor in the period after that.
    if (r.samples_per_s <= 0) return std::nullopt;
    started_ = true;
    settle_until_ = r.t_s + o_.period_s;
  }
  // A worker started that has not finished its first split (starting up: a Slurm
  // step, an exec stage's interpreter importing its libraries) makes the figures say nothing about
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
  if (workers != current_.workers) {
    // The count changed without a decision (the first period, a worker lost or
    // replaced, a start that failed): what was being judged no longer applies.
    before_ = RateSegment{};
    current_ = RateSegment{workers, {}};
    pending_ = 0;
  }
  if (!current_.rates.empty() && current_.rates.back() > 0) {
    const double d = rate / current_.rates.back() - 1;
    noise_sum_ += d * d / 2;
    ++noise_count_;
  }
  current_.rates.push_back(rate);
  const size_t keep = static_cast<size_t>(std::max(2, o_.max_judge_periods));
  if (current_.rates.size() > keep) current_.rates.erase(current_.rates.begin());
  undo_ = false;
  std::optional<ScaleDecision> d = Decide(r.t_s, stall, workers);
  // A removal undone leaves the trainer catching up on what the drained worker
  // did not make: two periods settle, so its wait is not read as a need for more.
  if (d) settle_until_ = r.t_s + o_.period_s * (undo_ ? 2 : 1);
  return d;
}

void Autoscaler::Change(int delta) {
  before_ = current_;
  current_ = RateSegment{current_.workers + delta, {}};
}

std::string Autoscaler::Figures(const GainVerdict& v, const RateSegment& fewer,
                                const RateSegment& more) const {
  return Rate(fewer.Mean()) + " with " + std::to_string(fewer.workers) + " over " +
         std::to_string(fewer.rates.size()) + " period(s), " + Rate(more.Mean()) + " with " +
         std::to_string(more.workers) + " over " + std::to_string(more.rates.size()) + ": " +
         SignedPercent(v.gain) + " +/- " + Fixed(200 * v.error, 1) + "%";
}

std::optional<ScaleDecision> Autoscaler::JudgeAddition(double t_s, double stall, int workers) {
  // k workers added in one step pay when each earns min_gain on average.
  const int added = pending_;
  const double needed = o_.min_gain * added;
  const GainVerdict v = JudgeGain(before_, current_, Sigma(), needed);
  const bool enough = static_cast<int>(current_.rates.size()) >= o_.max_judge_periods;
  if (v.kind == GainVerdict::Kind::kPays || (enough && v.gain >= needed)) {
    pending_ = 0;  // it paid off: the usual rules go on from here
    return std::nullopt;
  }
  if (v.kind != GainVerdict::Kind::kDoesNotPay && !enough) return std::nullopt;  // not yet
  pending_ = 0;
  if (added > 1) {
    // Not each of them paid: all but one go, and the one left is judged alone
    // against the count before the step, as a single addition is.
    std::string reason = "the " + std::to_string(added) + " workers added did not each pay off (" +
                         Figures(v, before_, current_) + ", " + SignedPercent(needed) +
                         " needed): draining " + Workers(added - 1) +
                         "; the one left is judged alone";
    pending_ = +1;
    current_ = RateSegment{before_.workers + 1, {}};
    one_at_a_time_ = true;  // the demand's count was wrong for this run
    return ScaleDecision{-(added - 1), std::move(reason)};
  }
  if (workers <= o_.min_workers) return std::nullopt;
  ceiling_ = workers - 1;
  ceiling_rate_ = before_.Mean();
  ceiling_until_ = t_s + o_.ceiling_retry_s;
  std::string reason = "the worker added did not pay off (" + Figures(v, before_, current_) +
                       ", data wait " + Percent(stall) + "): draining it; no more than " +
                       std::to_string(ceiling_) + " workers while the rate holds (tried again in " +
                       Fixed(o_.ceiling_retry_s, 0) + " s)";
  Change(-1);
  return ScaleDecision{-1, std::move(reason)};
}

std::optional<ScaleDecision> Autoscaler::JudgeRemoval(double stall, int workers) {
  if (workers >= Max()) {
    pending_ = 0;
    return std::nullopt;
  }
  std::string reason;
  const GainVerdict v = JudgeGain(current_, before_, Sigma(), o_.min_gain);
  const bool enough = static_cast<int>(current_.rates.size()) >= std::max(1, o_.hold_periods);
  if (v.kind == GainVerdict::Kind::kPays || (enough && v.gain >= o_.min_gain)) {
    reason = "removing a worker cost " + Percent(v.gain / (1 + v.gain)) + " (" +
             Figures(v, current_, before_) + ")";
  } else if (stall > o_.stall_high) {
    // A removal after which the trainer waits cost something even when the rate
    // held: it is undone (the count it had was enough), not followed by an addition.
    reason = "removing a worker made the trainer wait (" + Rate(current_.rates.back()) +
             ", data wait " + Percent(stall) + ")";
  } else {
    if (enough) {  // the removal stands
      pending_ = 0;
      undone_in_a_row_ = 0;
    }
    return std::nullopt;
  }
  pending_ = 0;
  // Each removal undone in a row doubles the hold, up to ceiling_retry_s.
  const int most =
      std::max(o_.hold_periods, static_cast<int>(o_.ceiling_retry_s / std::max(o_.period_s, 1e-9)));
  remove_hold_ = std::min(most, o_.hold_periods << std::min(undone_in_a_row_, 16));
  ++undone_in_a_row_;
  undo_ = true;
  Change(+1);
  return ScaleDecision{
      +1, reason + ": adding it back; no change for " + std::to_string(remove_hold_) + " periods" +
              (undone_in_a_row_ > 1
                   ? " (" + std::to_string(undone_in_a_row_) + " removals undone in a row)"
                   : "")};
}

std::optional<ScaleDecision> Autoscaler::Decide(double t_s, double stall, int workers) {
  if (remove_hold_ > 0) --remove_hold_;
  // A change being judged: nothing else happens until it is.
  if (pending_ > 0) {
    if (auto d = JudgeAddition(t_s, stall, workers)) return d;
  } else if (pending_ == -1) {
    if (auto d = JudgeRemoval(stall, workers)) return d;
  }
  if (pending_ != 0) return std::nullopt;
  // The ceiling lifts when the rate at it moved (the workload changed) or when it
  // is due to be tried again.
  std::string lifted;
  bool retry = false;  // a ceiling tried again after its time: one worker, not k
  // A move is told from noise as a gain is: beyond twice its standard error.
  if (ceiling_ > 0 && workers == ceiling_ && current_.rates.size() >= 2 &&
      std::abs(current_.RecentMean() / ceiling_rate_ - 1) - 2 * Sigma() > 2 * o_.min_gain) {
    lifted = " (the rate at the ceiling of " + std::to_string(ceiling_) + " workers moved from " +
             Rate(ceiling_rate_) + ": it is lifted)";
    ceiling_ = 0;
    one_at_a_time_ = false;  // the workload changed: its demand counts again
  } else if (ceiling_ > 0 && t_s >= ceiling_until_) {
    lifted = " (the ceiling of " + std::to_string(ceiling_) + " workers is tried again after " +
             Fixed(o_.ceiling_retry_s, 0) + " s)";
    ceiling_ = 0;
    retry = true;
  }
  // A count is measured over two periods at least before it is changed.
  if (current_.rates.size() < 2 || remove_hold_ > 0) return std::nullopt;
  const double current_rate = current_.Mean();
  const std::string now = Rate(current_rate) + " over " + std::to_string(current_.rates.size()) +
                          " periods, data wait " + Percent(stall);
  const int top = ceiling_ > 0 ? std::min(Max(), ceiling_) : Max();
  if (stall > o_.stall_high && workers < top) {
    // As many as the trainer's demand needs at the rate each worker makes now
    // (rate / (1 - wait) over rate / workers), as far as the limits allow.
    const double busy = std::max(1 - stall, kMinBusy);
    const double needed = std::ceil(static_cast<double>(workers) / busy - 1e-9);
    const int k = retry || one_at_a_time_
                      ? 1
                      : static_cast<int>(
                            std::clamp(needed - workers, 1.0, static_cast<double>(top - workers)));
    pending_ = +k;
    undone_in_a_row_ = 0;  // the trainer waits: what the run needs has changed
    Change(+k);
    std::string why = "data wait " + Percent(stall) + " above " + Percent(o_.stall_high) + " (" +
                      now + "): adding " + Workers(k);
    if (k > 1) {
      why += " (the trainer's demand of " + Rate(current_rate / busy) + " at " +
             Rate(current_rate / workers) + " a worker)";
    }
    return ScaleDecision{+k, why + lifted};
  }
  if (stall < o_.stall_low && workers > o_.min_workers) {
    pending_ = -1;
    Change(-1);
    return ScaleDecision{-1, "data wait " + Percent(stall) + " below " + Percent(o_.stall_low) +
                                 " (" + now + "): trying one worker fewer"};
  }
  return std::nullopt;
}

}  // namespace gm
