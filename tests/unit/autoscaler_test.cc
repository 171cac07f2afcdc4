// The autoscaler's decisions (launcher/autoscaler.h) on figures fed by hand: a
// sample every 2 s, a decision period of 6 s; and on a noisy model of a run (a
// fake clock, rates drawn around a curve of rate vs workers).
#include "launcher/autoscaler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace gm {
namespace {

struct Feed {
  explicit Feed(AutoscalerOptions o) : scaler(o) {}
  // Feeds samples every 2 s until a decision (or `max_samples`); returns it.
  std::optional<ScaleDecision> Until(double rate, double stall, int max_samples = 10) {
    for (int i = 0; i < max_samples; ++i) {
      t += 2;
      RunRates r;
      r.t_s = t;
      r.samples_per_s = rate;
      r.data_wait_fraction = stall;
      if (auto d = scaler.Observe(r, workers)) {
        workers += d->delta;
        decisions.push_back(*d);
        return d;
      }
    }
    return std::nullopt;
  }
  Autoscaler scaler;
  double t = 0;
  int workers = 2;
  std::vector<ScaleDecision> decisions;
};

AutoscalerOptions Options() {
  AutoscalerOptions o;
  o.min_workers = 1;
  o.max_workers = 4;
  o.period_s = 6;
  o.hold_periods = 3;
  return o;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

TEST(JudgeGainTest, HandComputedVerdicts) {
  // 2 periods of 1000 against 2 of 1100: +10%, error 0.02 x sqrt(1/2 + 1/2) = 2%.
  GainVerdict v = JudgeGain({2, {1000, 1000}}, {3, {1100, 1100}}, 0.02, 0.05);
  EXPECT_NEAR(v.gain, 0.10, 1e-12);
  EXPECT_NEAR(v.error, 0.02, 1e-12);
  EXPECT_EQ(v.kind, GainVerdict::Kind::kPays) << "10% - 2 x 2% = 6% >= 5%";
  v = JudgeGain({2, {1000, 1000}}, {3, {1080, 1080}}, 0.02, 0.05);
  EXPECT_EQ(v.kind, GainVerdict::Kind::kUnsure) << "8% - 4% < 5% <= 8% + 4%";
  v = JudgeGain({2, {1000, 1000}}, {3, {1000, 1000}}, 0.02, 0.05);
  EXPECT_EQ(v.kind, GainVerdict::Kind::kDoesNotPay) << "0% + 4% < 5%";
  // One period on a side never says "does not pay", however clear it looks.
  v = JudgeGain({2, {1000, 1000}}, {3, {900}}, 0.001, 0.05);
  EXPECT_EQ(v.kind, GainVerdict::Kind::kUnsure);
  // ...but a clear gain may be seen in one period.
  v = JudgeGain({2, {1000, 1000}}, {3, {1500}}, 0.02, 0.05);
  EXPECT_EQ(v.kind, GainVerdict::Kind::kPays);
  EXPECT_NEAR(v.error, 0.02 * std::sqrt(1.5), 1e-12);
}

TEST(AutoscalerTest, GivenALimitBelowTheMostThenNoAdditionIsProposedAtItUntilItRises) {
  Feed f(Options());
  f.scaler.set_limit(2);  // e.g. a pool grants no worker beyond the allocation's 2
  EXPECT_FALSE(f.Until(1000, 0.5, 30)) << "the trainer waits, but no worker may be added";
  f.scaler.set_limit(3);  // the pool grants one
  std::optional<ScaleDecision> d = f.Until(1000, 0.5);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->delta, +1) << d->reason;
}

TEST(RateSegmentTest, Means) {
  RateSegment s{2, {90, 110}};
  EXPECT_DOUBLE_EQ(s.Mean(), 100);
  EXPECT_EQ(RateSegment{}.Mean(), 0);
  EXPECT_DOUBLE_EQ((RateSegment{1, {5, 100, 10, 20}}).RecentMean(), 15);
  EXPECT_DOUBLE_EQ((RateSegment{1, {5}}).RecentMean(), 5);
}

TEST(AutoscalerTest, TheNoiseIsTheRunsOwnSpreadPooledWithThePrior) {
  Feed f(Options());
  EXPECT_NEAR(f.scaler.Sigma(), 0.03, 1e-12) << "before any period: the prior";
  // Two periods of 90 and 110 at 2 workers: d = 110 / 90 - 1, one difference.
  f.Until(90, 0.05, 7);   // settles up to t = 8; a period ends at 14
  f.Until(110, 0.05, 3);  // the next at 20
  const double d = 110.0 / 90 - 1;
  EXPECT_NEAR(f.scaler.Sigma(), std::sqrt((2 * 0.03 * 0.03 + d * d / 2) / 3), 1e-12);
}

TEST(AutoscalerTest, AddsWhileTheTrainerWaitsAndEachAdditionPaysOff) {
  Feed f(Options());
  auto d = f.Until(100, 0.3);  // 2 workers at 50 each; the trainer's demand 143: one more
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, +1);
  EXPECT_EQ(d->reason,
            "data wait 30% above 10% (100 samples/s over 2 periods, data wait 30%): adding a "
            "worker");
  EXPECT_EQ(f.t, 20) << "the start-up's period left out, then two periods of figures";
  d = f.Until(150, 0.2);  // pays off (+50%) in its first period; a second one measures the count
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, +1);
  EXPECT_EQ(f.t, 20 + 6 + 12) << "a period settles, then two periods at the new count";
  EXPECT_EQ(f.workers, 4);
  d = f.Until(200, 0.2, 30);  // at max_workers: nothing more
  EXPECT_FALSE(d.has_value());
  EXPECT_EQ(f.workers, 4);
}

TEST(AutoscalerTest, AddsAsManyAsTheTrainersDemandNeedsInOneStep) {
  AutoscalerOptions o = Options();
  o.max_workers = 10;
  Feed f(o);
  f.workers = 1;
  // 100 samples/s from one worker, the trainer waiting 80%: its demand is 500, 5
  // workers' worth.
  auto d = f.Until(100, 0.8);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, +4);
  EXPECT_EQ(d->reason,
            "data wait 80% above 10% (100 samples/s over 2 periods, data wait 80%): adding 4 "
            "workers (the trainer's demand of 500 samples/s at 100 samples/s a worker)")
      << d->reason;
  // They pay (+300%, beyond 4 x 5%): the usual rules go on; nothing waits, nothing changes.
  EXPECT_FALSE(f.Until(400, 0.05, 30).has_value());
  EXPECT_EQ(f.workers, 5);
  // Bounded by the limit (a pool's grant) and by max_workers.
  Feed limited(o);
  limited.workers = 1;
  limited.scaler.set_limit(3);
  EXPECT_EQ(limited.Until(100, 0.99)->delta, +2);
  Feed most(o);
  most.workers = 1;
  EXPECT_EQ(most.Until(100, 1.0)->delta, +9) << "a trainer that only waits: up to the most";
}

TEST(AutoscalerTest, AStepWhoseWorkersDoNotEachPayKeepsOneWhichIsJudgedAlone) {
  AutoscalerOptions o = Options();
  o.max_workers = 10;
  Feed f(o);
  f.workers = 1;
  ASSERT_EQ(f.Until(100, 0.8)->delta, +4);  // 1 -> 5
  // +10% over 4 workers: they do not each pay (20% needed): 3 go, one is judged.
  auto d = f.Until(110, 0.8, 20);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, -3);
  EXPECT_TRUE(
      StartsWith(d->reason, "the 4 workers added did not each pay off (100 samples/s with 1 over "))
      << d->reason;
  EXPECT_NE(d->reason.find("+20.0% needed): draining 3 workers; the one left is judged alone"),
            std::string::npos)
      << d->reason;
  EXPECT_EQ(f.workers, 2);
  // The one left makes the same +10%: it pays alone (5% needed) and stays; the
  // next addition is of one worker (the demand's count was wrong for this run).
  std::optional<ScaleDecision> next;
  for (int i = 0; i < 6 && !next; ++i) next = f.Until(110, 0.8, 3);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->delta, +1) << next->reason;
  EXPECT_EQ(f.workers, 3);
}

TEST(AutoscalerTest, NothingIsDecidedBeforeTheTrainerHasReceivedDataAndThePeriodAfter) {
  Feed f(Options());
  // Workers still starting: the trainer waits (100%) and receives nothing.
  EXPECT_FALSE(f.Until(0, 1.0, 20).has_value());
  const double first_data = f.t + 2;
  auto d = f.Until(100, 0.5);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(f.t, first_data + 18) << "the period after the first data left out, then two";
}

TEST(AutoscalerTest, AWorkerStillStartingIsWaitedForBeforeTheFiguresCount) {
  Autoscaler scaler(Options());
  double t = 0;
  // 2 workers running, 1 registered for 20 s (a slow start): nothing is decided on
  // the figures of that time, however long the trainer waits.
  for (int i = 0; i < 10; ++i) {
    RunRates r;
    r.t_s = t += 2;
    r.samples_per_s = 50;
    r.data_wait_fraction = 0.6;
    r.workers = 2;
    r.workers_ready = 1;
    EXPECT_FALSE(scaler.Observe(r, 2).has_value()) << "at " << t << " s";
  }
  // Ready: one period settles, then two periods of figures decide.
  std::optional<ScaleDecision> d;
  const double last_starting = t;
  while (!d && t < 200) {
    RunRates r;
    r.t_s = t += 2;
    r.samples_per_s = 80;
    r.data_wait_fraction = 0.3;
    r.workers = 2;
    r.workers_ready = 2;
    d = scaler.Observe(r, 2);
  }
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, +1);
  EXPECT_EQ(t, last_starting + 18)
      << "a period settles after the last start, then two periods decide";
}

TEST(AutoscalerTest, AnAdditionThatDoesNotPayIsDrainedAndTheCountIsACeiling) {
  // The trainer waits, but more workers do not make it faster (e.g. the network or
  // the trainer's own receive path binds): one try, then no more.
  Feed f(Options());
  ASSERT_EQ(f.Until(100, 0.3)->delta, +1);
  const double t_added = f.t;
  auto d = f.Until(101, 0.3, 20);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, -1);
  EXPECT_GE(f.t, t_added + 6 + 12) << "never judged on one period at the new count";
  EXPECT_TRUE(StartsWith(d->reason,
                         "the worker added did not pay off (100 samples/s with 2 over 2 "
                         "period(s), 101 samples/s with 3 over "))
      << d->reason;
  EXPECT_NE(d->reason.find("draining it; no more than 2 workers while the rate holds (tried "
                           "again in 300 s)"),
            std::string::npos)
      << d->reason;
  EXPECT_EQ(f.workers, 2);
  // However long the trainer keeps waiting at the same rate: never 3 again.
  EXPECT_FALSE(f.Until(100, 0.3, 60).has_value());
  EXPECT_EQ(f.workers, 2);
  // The workload changes (the rate at 2 workers moves by more than 10%): it tries again.
  d = f.Until(80, 0.3);
  ASSERT_TRUE(d.has_value()) << "the ceiling lifts";
  EXPECT_EQ(d->delta, +1);
  EXPECT_NE(d->reason.find("it is lifted"), std::string::npos) << d->reason;
}

TEST(AutoscalerTest, ACeilingIsTriedAgainAfterItsTime) {
  AutoscalerOptions o = Options();
  o.ceiling_retry_s = 100;
  Feed f(o);
  ASSERT_EQ(f.Until(100, 0.3)->delta, +1);
  ASSERT_EQ(f.Until(100, 0.3, 20)->delta, -1);
  const double t_ceiling = f.t;
  auto d = f.Until(100, 0.3, 80);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, +1);
  EXPECT_GE(f.t, t_ceiling + 100);
  EXPECT_LE(f.t, t_ceiling + 100 + 6);
  EXPECT_NE(d->reason.find("the ceiling of 2 workers is tried again after 100 s"),
            std::string::npos)
      << d->reason;
}

TEST(AutoscalerTest, OneBadPeriodAfterAnAdditionDoesNotDrainIt) {
  // The case: 1,096 -> 1,045 in the first period after the third worker
  // came, though the third pays off in the long run.
  Feed f(Options());
  ASSERT_EQ(f.Until(1096, 0.3)->delta, +1);
  EXPECT_FALSE(f.Until(1045, 0.3, 6).has_value()) << "a period settles, one period judges";
  for (int i = 0; i < 10 && f.workers == 3; ++i) {
    auto d = f.Until(1300, 0.2, 3);
    if (d) {
      EXPECT_EQ(d->delta, +1) << d->reason;
    }
  }
  EXPECT_EQ(f.workers, 4) << "the third paid off; the run went on adding";
  for (const ScaleDecision& s : f.decisions) EXPECT_EQ(s.delta, +1) << s.reason;
}

TEST(AutoscalerTest, WhenTheTrainerIsTheBottleneckItRemovesWhatCostsNothingAndNeverAdds) {
  Feed f(Options());
  f.workers = 3;
  auto d = f.Until(500, 0.0);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, -1);
  EXPECT_EQ(d->reason,
            "data wait 0% below 2% (500 samples/s over 2 periods, data wait 0%): trying one "
            "worker fewer");
  ASSERT_EQ(f.Until(500, 0.0, 20)->delta, -1);  // 2 -> 1: the rate held, so on
  EXPECT_EQ(f.workers, 1);
  EXPECT_FALSE(f.Until(500, 0.0, 20).has_value()) << "at min_workers";
  for (const ScaleDecision& s : f.decisions) EXPECT_EQ(s.delta, -1);
}

TEST(AutoscalerTest, ARemovalThatCostsIsUndone) {
  Feed f(Options());
  f.workers = 3;
  ASSERT_EQ(f.Until(500, 0.0)->delta, -1);
  auto d = f.Until(400, 0.05);  // -20%
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, +1);
  EXPECT_TRUE(StartsWith(d->reason,
                         "removing a worker cost 20% (400 samples/s with 2 over 1 "
                         "period(s), 500 samples/s with 3 over 2: +25.0% +/- "))
      << d->reason;
  EXPECT_EQ(f.workers, 3);
  // Two periods settle after the undo: the trainer catching up on what the drained
  // worker did not make (a wait at the old rate) adds nothing.
  EXPECT_FALSE(f.Until(500, 0.3, 6).has_value()) << "12 s: two periods left out";
  // Removals are held even though the data wait is low again.
  EXPECT_FALSE(f.Until(500, 0.0, 8).has_value());
}

TEST(AutoscalerTest, ARemovalAfterWhichTheTrainerWaitsIsUndoneNotFollowedByAnAddition) {
  Feed f(Options());
  f.workers = 2;
  ASSERT_EQ(f.Until(50, 0.0)->delta, -1);         // trainer-bound: try one fewer
  EXPECT_FALSE(f.Until(50, 0.0, 6).has_value());  // settle, then two calm periods
  auto d = f.Until(50, 0.2);  // the period after: the trainer waited, the rate held
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, +1);
  EXPECT_EQ(d->reason,
            "removing a worker made the trainer wait (50 samples/s, data wait 20%): "
            "adding it back; no change for 3 periods");
  EXPECT_EQ(f.workers, 2);
  EXPECT_FALSE(f.Until(50, 0.3, 8).has_value()) << "additions held while the trainer catches up";
  EXPECT_FALSE(f.Until(50, 0.0, 4).has_value()) << "removals held";
}

// A run that needs every worker it has is probed with a removal, which is undone;
// each probe costs a period of waiting, so each one undone in a row doubles the
// hold before the next (3, 6, 12 periods here), and a removal that stands starts
// the count again.
TEST(AutoscalerTest, RemovalsUndoneInARowAreTriedLessAndLessOften) {
  Feed f(Options());  // hold 3 periods of 6 s; ceiling_retry_s 300 (50 periods)
  f.workers = 2;
  std::vector<double> probes;  // when each removal was tried
  std::vector<std::string> undos;
  for (int round = 0; round < 4; ++round) {
    auto removal = f.Until(50, 0.0, 200);
    ASSERT_TRUE(removal.has_value()) << "round " << round;
    ASSERT_EQ(removal->delta, -1);
    probes.push_back(f.t);
    auto undo = f.Until(50, 0.2);  // the trainer waited: the worker was needed
    ASSERT_TRUE(undo.has_value());
    ASSERT_EQ(undo->delta, +1);
    undos.push_back(undo->reason);
  }
  EXPECT_TRUE(undos[0].ends_with("adding it back; no change for 3 periods")) << undos[0];
  EXPECT_TRUE(undos[1].ends_with("no change for 6 periods (2 removals undone in a row)"))
      << undos[1];
  EXPECT_TRUE(undos[2].ends_with("no change for 12 periods (3 removals undone in a row)"))
      << undos[2];
  // The gaps between probes grow with the hold (each 6 s period held, plus the
  // periods that settle and measure).
  const double gap1 = probes[1] - probes[0], gap2 = probes[2] - probes[1];
  const double gap3 = probes[3] - probes[2];
  EXPECT_GE(gap2 - gap1, 3 * 6) << gap1 << " " << gap2;
  EXPECT_GE(gap3 - gap2, 6 * 6) << gap2 << " " << gap3;
  // A removal that stands (the rate held, no wait) starts the count again.
  ASSERT_EQ(f.Until(50, 0.0, 200)->delta, -1);
  EXPECT_FALSE(f.Until(50, 0.0, 12).has_value()) << "the removal stands";
  f.workers = 2;  // (a worker added by hand: a fresh segment)
  ASSERT_EQ(f.Until(50, 0.0, 200)->delta, -1);
  auto undo = f.Until(50, 0.2);
  ASSERT_TRUE(undo.has_value());
  EXPECT_TRUE(undo->reason.ends_with("adding it back; no change for 3 periods")) << undo->reason;
}

TEST(AutoscalerTest, AWorkerCountChangedWithoutADecisionStartsAFreshSegment) {
  Feed f(Options());
  ASSERT_EQ(f.Until(100, 0.3)->delta, +1);  // 3 workers, being judged
  f.workers = 2;                            // a worker was lost meanwhile
  auto d = f.Until(100, 0.3);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, +1) << "nothing judged against the lost worker's count: " << d->reason;
}

// A run modelled on bench/autoscale_bench.py's first report: fixed 1, 2, 3 workers
// give 861, 1,126 and 1,365 samples/s; a fourth adds nothing (the trainer takes
// 2,000 at most, so it keeps waiting). Each period's rate is drawn with a relative
// spread of `noise` around the curve. Returns the workers over the run, per period.
struct Outcome {
  std::vector<int> workers;  // at each period's end
  std::vector<ScaleDecision> decisions;
  double delivered = 0;  // samples over the run
};

Outcome Model(uint32_t seed, double noise, double seconds) {
  AutoscalerOptions o;
  o.max_workers = 5;  // the bench's --max-fixed + 1 and one more
  const std::vector<double> curve = {0, 861, 1126, 1365, 1365, 1365};
  std::mt19937 rng(seed);
  std::normal_distribution<double> draw(0, noise);
  Autoscaler scaler(o);
  Outcome out;
  int workers = 1;
  double period_noise = draw(rng);
  for (double t = 1; t <= seconds; t += 1) {
    if (static_cast<int>(t) % 10 == 0) period_noise = draw(rng);  // noise per 10 s
    RunRates r;
    r.t_s = t;
    r.samples_per_s = curve[workers] * (1 + period_noise);
    r.data_wait_fraction = std::max(0.0, 1 - r.samples_per_s / 2000);
    r.workers = r.workers_ready = workers;
    out.delivered += r.samples_per_s;
    if (auto d = scaler.Observe(r, workers)) {
      workers += d->delta;
      out.decisions.push_back(*d);
    }
    if (static_cast<int>(t) % 10 == 0) out.workers.push_back(workers);
  }
  return out;
}

TEST(AutoscalerTest, OnANoisyRunItFindsTheBestCountAndHoldsAtMostOneMore) {
  // Five runs of five, each with its own noise (3% per period), as the issue asks
  // of the benchmark: none settles below the best count, none holds more than one
  // worker beyond it for long, and each delivers at least 95% of what the best
  // fixed count would have in its second half.
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    const Outcome out = Model(seed, 0.03, 600);
    ASSERT_EQ(out.workers.size(), 60u);
    std::string log;
    for (const ScaleDecision& d : out.decisions) log += "\n  " + d.reason;
    int beyond = 0;
    for (size_t i = 30; i < out.workers.size(); ++i) {
      EXPECT_GE(out.workers[i], 3) << "seed " << seed << ", period " << i << log;
      if (out.workers[i] > 4) ++beyond;
    }
    EXPECT_EQ(beyond, 0) << "seed " << seed << log;
    const int at_best =
        static_cast<int>(std::count(out.workers.begin() + 30, out.workers.end(), 3));
    EXPECT_GE(at_best, 20) << "seed " << seed << ": most of the second half at 3 workers" << log;
  }
}

TEST(AutoscalerTest, NoisierRunsAreJudgedOnMorePeriods) {
  // A third worker that adds nothing, on a run whose periods swing by 1% and by 8%
  // around the same rate: the calm run drains it sooner; the noisy one judges it
  // on max_judge_periods periods, then on the mean alone.
  auto periods_to_drain = [](double swing) {
    Feed f(Options());
    f.Until(1000, 0.3, 7);
    EXPECT_EQ(f.Until(1000 * (1 + swing), 0.3, 3)->delta, +1);
    EXPECT_FALSE(f.Until(1000, 0.3, 3).has_value()) << "a period settles";
    for (int period = 1; period <= 10; ++period) {
      const double rate = 1000 * (1 + (period % 2 ? -swing : swing));
      if (auto d = f.Until(rate, 0.3, 3)) {
        EXPECT_EQ(d->delta, -1) << d->reason;
        return period;
      }
    }
    return -1;
  };
  const int calm = periods_to_drain(0.01), noisy = periods_to_drain(0.08);
  EXPECT_GE(calm, 2) << "never on one period";
  EXPECT_LT(calm, noisy);
  EXPECT_EQ(noisy, Options().max_judge_periods);
}

}  // namespace
}  // namespace gm
