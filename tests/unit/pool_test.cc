// The pool's division (planner/pool.h): hand-computed divisions by marginal gain,
// the hysteresis rules on the caller's clock, and bad input.
#include "planner/pool.h"

#include <gtest/gtest.h>

namespace gm::planner {
namespace {

// A job of `gpus` GPUs whose speed rises by 1/(kappa x gpus) a CPU up to `cpus`.
PoolJob Linear(const std::string& id, double gpus, double kappa, int cpus, int held = 0) {
  PoolJob j;
  j.id = id;
  j.weight = gpus;
  j.curve = {{cpus, 1 / (kappa * gpus)}};
  j.held = held;
  return j;
}

TEST(DividePoolTest, GivenSpareCpusThenTheSteepestGainsAreFilledFirst) {
  // Text-like (kappa 2) gains 1/2 a CPU, vision-like (kappa 8) 1/8: the text job
  // is filled to its 4 CPUs first, the vision job gets the other 6 of 10.
  const std::vector<PoolJob> jobs = {Linear("vision", 1, 8, 8), Linear("text", 2, 2, 4)};
  auto d = DividePool(jobs, 10, 0, {});
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->cpus, (std::vector<int>{6, 4}));
  EXPECT_NEAR(d->value, 6.0 / 8 + 2 * 4 * (1.0 / 4), 1e-12);
  EXPECT_TRUE(d->changed);
  EXPECT_NEAR(PoolValue(jobs[1], 100), 2, 1e-12);  // saturated: its 2 GPUs at full speed
}

TEST(DividePoolTest, GivenHoldingsWithinMinGainThenTheyAreKept) {
  PoolOptions o;
  o.min_gain = 0.15;
  o.min_lifetime_s = 0;
  // Best: text 4 (value 2) + vision 6 (0.75) = 2.75. Held: text 3 (1.5) + vision 7
  // (0.875) = 2.375, 14% less, but text would go 0.25 of its speed faster (more
  // than 0.15): changed. Held text 4, vision 5: 2.625, 4.5% less, and vision would
  // gain 0.125 of its speed: kept.
  auto moved = DividePool({Linear("vision", 1, 8, 8, 7), Linear("text", 2, 2, 4, 3)}, 10, 0, o);
  ASSERT_TRUE(moved.ok());
  EXPECT_TRUE(moved->changed);
  EXPECT_EQ(moved->cpus, (std::vector<int>{6, 4}));
  auto kept = DividePool({Linear("vision", 1, 8, 8, 5), Linear("text", 2, 2, 4, 4)}, 10, 0, o);
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(kept->changed);
  EXPECT_EQ(kept->cpus, (std::vector<int>{5, 4}));
}

TEST(DividePoolTest, GivenWorkersYoungerThanTheMinLifetimeThenTheyAreNotTakenBack) {
  PoolOptions o;
  o.min_gain = 0;
  o.min_lifetime_s = 60;
  PoolJob vision = Linear("vision", 1, 8, 8, 8);
  vision.held_since_s = 100;  // grew at t = 100
  const PoolJob text = Linear("text", 2, 2, 4);
  auto young = DividePool({vision, text}, 10, 130, o);  // 30 s later: kept, text gets 2
  ASSERT_TRUE(young.ok());
  EXPECT_EQ(young->cpus, (std::vector<int>{8, 2}));
  auto old = DividePool({vision, text}, 10, 170, o);  // 70 s later: the best division
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->cpus, (std::vector<int>{6, 4}));
  // Fewer spare CPUs than the young workers hold (a task was admitted): no floor.
  auto admitted = DividePool({vision, text}, 6, 130, o);
  ASSERT_TRUE(admitted.ok());
  EXPECT_EQ(admitted->cpus, (std::vector<int>{2, 4}));
}

TEST(DividePoolTest, GivenYoungWorkersBeyondABaselineThenAJobArrivingGetsItsBaselineFirst) {
  // vision took all 8 spare CPUs a moment ago, 2 of them its baseline; text arrives
  // with a baseline of 2. Young workers beyond vision's baseline yield to it: text
  // runs as fast as it would alone, and vision keeps the rest.
  PoolOptions o;
  o.min_gain = 0;
  o.min_lifetime_s = 60;
  PoolJob vision = Linear("vision", 1, 8, 8, 8);
  vision.baseline = 2;
  vision.held_since_s = 100;
  PoolJob text = Linear("text", 1, 2, 2);
  text.baseline = 2;
  auto d = DividePool({vision, text}, 8, 110, o);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->cpus, (std::vector<int>{6, 2}));
  // Without a baseline, text waits for vision's young workers to come of age.
  text.baseline = 0;
  auto waits = DividePool({vision, text}, 8, 110, o);
  ASSERT_TRUE(waits.ok());
  EXPECT_EQ(waits->cpus, (std::vector<int>{8, 0}));
}

TEST(DividePoolTest, GivenOneJobFarBelowItsShareThenItIsServedThoughTheWholeGainsLittle) {
  // 20 saturated jobs and one with 1 of the 8 CPUs its best share gives it: the
  // division gains 7/8 of one GPU's speed of 20.9, under 5% of its value, but that
  // job would run 7/8 faster: changed.
  PoolOptions o;
  o.min_gain = 0.05;
  o.min_lifetime_s = 0;
  std::vector<PoolJob> jobs;
  for (int i = 0; i < 20; ++i) jobs.push_back(Linear("s" + std::to_string(i), 1, 4, 4, 4));
  jobs.push_back(Linear("starved", 1, 8, 8, 1));
  auto d = DividePool(jobs, 88, 0, o);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_TRUE(d->changed);
  EXPECT_EQ(d->cpus.back(), 8);
}

TEST(DividePoolTest, GivenBaselinesThenEachJobGetsItsOwnFirstAndTheRestGoesByGain) {
  // By gain alone text (1/2 a CPU) would take its 4 of 8 first and vision get 4.
  // With vision's baseline of 6 (what it would hold as submitted), vision gets its
  // 6 first; text the 2 left, then nothing more is spare.
  PoolJob vision = Linear("vision", 1, 8, 8);
  vision.baseline = 6;
  const PoolJob text = Linear("text", 2, 2, 4);
  auto d = DividePool({vision, text}, 8, 0, {});
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->cpus, (std::vector<int>{6, 2}));
  // Spare beyond the baselines goes by gain: text's 4, then vision's last 2.
  auto more = DividePool({vision, text}, 12, 0, {});
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->cpus, (std::vector<int>{8, 4}));
  // A baseline beyond the curve asks for nothing more than the curve.
  vision.baseline = 100;
  auto whole = DividePool({vision, text}, 20, 0, {});
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->cpus, (std::vector<int>{8, 4}));
  vision.baseline = -1;
  EXPECT_NE(DividePool({vision}, 4, 0, {}).status().message().find("pool job vision"),
            std::string::npos);
}

TEST(DividePoolTest, GivenBadJobsThenTheErrorNamesTheJob) {
  PoolJob rising = Linear("r", 1, 4, 2);
  rising.curve.push_back({2, 1.0});
  EXPECT_NE(DividePool({rising}, 4, 0, {})
                .status()
                .message()
                .find("pool job r: its curve's "
                      "slopes rise"),
            std::string::npos);
  PoolJob weightless = Linear("w", 1, 4, 2);
  weightless.weight = 0;
  EXPECT_NE(DividePool({weightless}, 4, 0, {}).status().message().find("pool job w"),
            std::string::npos);
  EXPECT_FALSE(DividePool({}, -1, 0, {}).ok());
  auto none = DividePool({}, 4, 0, {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->cpus.empty());
}

}  // namespace
}  // namespace gm::planner
