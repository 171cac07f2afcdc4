// The autoscaler's decisions (launcher/autoscaler.h) on figures fed by hand: a
// sample every 2 s, a decision period of 6 s.
#include "launcher/autoscaler.h"

#include <gtest/gtest.h>

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

TEST(AutoscalerTest, AddsWhileTheTrainerWaitsAndEachAdditionPaysOff) {
  Feed f(Options());
  auto d = f.Until(100, 0.5);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, +1);
  EXPECT_EQ(d->reason, "data wait 50% above 10% (100 samples/s, data wait 50%): adding a worker");
  EXPECT_EQ(f.t, 14) << "the start-up's period left out, then a period of figures";
  d = f.Until(150, 0.3);  // paid off: +50%
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, +1);
  EXPECT_EQ(f.workers, 4);
  d = f.Until(200, 0.2);  // at max_workers: nothing more
  EXPECT_FALSE(d.has_value());
  EXPECT_EQ(f.workers, 4);
}

TEST(AutoscalerTest, NothingIsDecidedBeforeTheTrainerHasReceivedDataAndThePeriodAfter) {
  Feed f(Options());
  // Workers still starting: the trainer waits (100%) and receives nothing.
  EXPECT_FALSE(f.Until(0, 1.0, 20).has_value());
  const double first_data = f.t + 2;
  auto d = f.Until(100, 0.5);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(f.t, first_data + 12) << "the period after the first data left out, then a period";
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
  // Ready: one period settles, then a period of figures decides.
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
  EXPECT_EQ(t, last_starting + 12)
      << "a period settles after the last start, then a period decides";
}

TEST(AutoscalerTest, AnAdditionThatDoesNotPayIsDrainedAndTheCountIsACeiling) {
  // The trainer waits, but more workers do not make it faster (e.g. the network or
  // the trainer's own receive path binds): one try, then no more.
  Feed f(Options());
  ASSERT_EQ(f.Until(100, 0.5)->delta, +1);
  auto d = f.Until(101, 0.5);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, -1);
  EXPECT_EQ(d->reason,
            "the worker added did not pay off (100 samples/s -> 101 samples/s, data wait 50%): "
            "draining it; no more than 2 workers while the rate holds");
  EXPECT_EQ(f.workers, 2);
  // However long the trainer keeps waiting at the same rate: never 3 again.
  EXPECT_FALSE(f.Until(100, 0.5, 60).has_value());
  EXPECT_EQ(f.workers, 2);
  // The workload changes (the rate at 2 workers moves by more than 10%): it tries again.
  d = f.Until(80, 0.5);
  ASSERT_TRUE(d.has_value()) << "the ceiling lifts";
  EXPECT_EQ(d->delta, +1);
}

TEST(AutoscalerTest, WhenTheTrainerIsTheBottleneckItRemovesWhatCostsNothingAndNeverAdds) {
  Feed f(Options());
  f.workers = 3;
  auto d = f.Until(500, 0.0);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, -1);
  EXPECT_EQ(d->reason,
            "data wait 0% below 2% (500 samples/s, data wait 0%): trying one worker fewer");
  ASSERT_EQ(f.Until(500, 0.0)->delta, -1);  // 2 -> 1: the rate held, so on
  EXPECT_EQ(f.workers, 1);
  EXPECT_FALSE(f.Until(500, 0.0, 20).has_value()) << "at min_workers";
  for (const ScaleDecision& s : f.decisions) EXPECT_EQ(s.delta, -1);
}

TEST(AutoscalerTest, ARemovalThatCostsIsUndone) {
  Feed f(Options());
  f.workers = 3;
  ASSERT_EQ(f.Until(500, 0.0)->delta, -1);
  auto d = f.Until(400, 0.15);  // -20%
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->delta, +1);
  EXPECT_NE(d->reason.find("removing a worker cost 20%"), std::string::npos) << d->reason;
  EXPECT_EQ(f.workers, 3);
  // Two periods settle after the undo: the trainer catching up on what the drained
  // worker handed back (a wait at the old rate) adds nothing.
  EXPECT_FALSE(f.Until(500, 0.3, 6).has_value()) << "12 s: two periods left out";
  // Removals are held even though the data wait is low again.
  EXPECT_FALSE(f.Until(500, 0.0, 8).has_value());
}

TEST(AutoscalerTest, ARemovalAfterWhichTheTrainerWaitsIsUndoneNotFollowedByAnAddition) {
  Feed f(Options());
  f.workers = 2;
  ASSERT_EQ(f.Until(50, 0.0)->delta, -1);         // trainer-bound: try one fewer
  EXPECT_FALSE(f.Until(50, 0.0, 9).has_value());  // settle, then two calm periods
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

TEST(AutoscalerTest, APeriodAfterAChangeIsLeftOut) {
  Feed f(Options());
  ASSERT_EQ(f.Until(100, 0.5)->delta, +1);
  const double t_change = f.t;
  auto d = f.Until(150, 0.5);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(f.t, t_change + 6 + 6) << "a period to settle, then a period of figures";
}

}  // namespace
}  // namespace gm
