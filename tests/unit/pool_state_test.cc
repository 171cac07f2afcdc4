// The pool service's rules (planner/pool_state.h) on a fake clock: the curve a
// run's report gives, divisions computed by hand for 2 and 3 runs, the GPUs as
// weights, hysteresis, a run that stops reporting, a run that reports for another
// (refused), bad reports, and a restarted pool that rebuilds its view.
#include "planner/pool_state.h"

#include <gtest/gtest.h>

namespace gm::planner {
namespace {

RunReport Report(const std::string& id, double demand, int base,
                 std::vector<std::pair<int, double>> rates, int cpus_per_worker = 2,
                 double gpus = 1, int extra = 0) {
  RunReport r;
  r.run_id = id;
  r.gpus = gpus;
  r.cpus_per_worker = cpus_per_worker;
  r.base_workers = base;
  r.extra_workers = extra;
  r.demand_samples_per_s = demand;
  r.rates = std::move(rates);
  return r;
}

PoolStateOptions Options(int cpus) {
  PoolStateOptions o;
  o.cpus = cpus;
  o.division.min_gain = 0;
  o.division.min_lifetime_s = 0;
  o.report_timeout_s = 60;
  return o;
}

// Grants as "id:workers" in run id order.
std::vector<std::string> Grants(PoolState& pool, double now_s,
                                std::vector<std::string>* forgotten = nullptr) {
  auto grants = pool.Divide(now_s, forgotten);
  EXPECT_TRUE(grants.ok()) << grants.status().message();
  std::vector<std::string> out;
  if (!grants.ok()) return out;
  for (const PoolGrant& g : *grants) {
    EXPECT_EQ(g.cpus % 2, 0) << "whole workers of 2 CPUs";
    out.push_back(g.run_id + ":" + std::to_string(g.extra_workers));
  }
  return out;
}

TEST(RunCurveTest, MeasuredCountsGiveTheirPointsAndTheRestFollowTheLastStep) {
  // Demand 1000; 2 workers of its own made 500 (0.5), 3 made 700 (0.7): the third
  // added 0.2, 0.1 per CPU; the fourth is assumed to add as much (0.9); the fifth
  // reaches the demand (1.0: 0.05 per CPU).
  const auto curve = RunCurve(Report("a", 1000, 2, {{2, 500}, {3, 700}}), 20);
  ASSERT_EQ(curve.size(), 2u);
  EXPECT_EQ(curve[0].cpus, 4);
  EXPECT_NEAR(curve[0].slope, 0.1, 1e-12);
  EXPECT_EQ(curve[1].cpus, 2);
  EXPECT_NEAR(curve[1].slope, 0.05, 1e-12);
  // Never more workers than the budget holds.
  EXPECT_EQ(RunCurve(Report("a", 1000, 2, {{2, 500}, {3, 700}}), 2).size(), 1u);
  // Its own workers not measured yet: nothing to divide by.
  EXPECT_TRUE(RunCurve(Report("b", 1000, 2, {}), 20).empty());
  // A worker that made it slower counts for nothing, and none after it counts more.
  const auto flat = RunCurve(Report("c", 1000, 1, {{1, 400}, {2, 380}, {3, 600}}), 20);
  EXPECT_TRUE(flat.empty()) << "the second worker added nothing: the curve stops there";
  // At the demand already: no gain to give.
  EXPECT_TRUE(RunCurve(Report("d", 100, 1, {{1, 150}}), 20).empty());
}

TEST(PoolStateTest, TwoRunsAreDividedByMarginalGainAsComputedByHand) {
  // 8 CPUs, workers of 2. Run a: 1 worker makes 250 of 1000: each more adds 0.25,
  // 0.125 per CPU, up to 3 more (6 CPUs). Run b: 1 made 500, 2 made 600: each more
  // adds 0.1, 0.05 per CPU. Steepest first: a gets 6 CPUs (3 workers), b the last 2.
  PoolState pool(Options(8));
  ASSERT_TRUE(pool.Report("", Report("a", 1000, 1, {{1, 250}}), 0).ok());
  ASSERT_TRUE(pool.Report("", Report("b", 1000, 1, {{1, 500}, {2, 600}}), 0).ok());
  EXPECT_EQ(Grants(pool, 1), (std::vector<std::string>{"a:3", "b:1"}));
  // b's GPUs weigh: with 4 GPUs its 0.05 per CPU is worth 0.2, above a's 0.125.
  PoolState weighted(Options(8));
  ASSERT_TRUE(weighted.Report("", Report("a", 1000, 1, {{1, 250}}), 0).ok());
  ASSERT_TRUE(weighted.Report("", Report("b", 1000, 1, {{1, 500}, {2, 600}}, 2, 4), 0).ok());
  EXPECT_EQ(Grants(weighted, 1), (std::vector<std::string>{"a:0", "b:4"}));
}

TEST(PoolStateTest, EachGrantSaysWhyInFiguresAPersonCanCheck) {
  PoolState pool(Options(8));  // the division of the test above: a:3, b:1
  ASSERT_TRUE(pool.Report("", Report("a", 1000, 1, {{1, 250}}), 0).ok());
  ASSERT_TRUE(pool.Report("", Report("b", 1000, 1, {{1, 500}, {2, 600}}), 0).ok());
  auto grants = pool.Divide(1, nullptr);
  ASSERT_TRUE(grants.ok());
  ASSERT_EQ(grants->size(), 2u);
  // a's 3 workers take it from 25% to its demand (+75%); a fourth adds nothing.
  EXPECT_EQ((*grants)[0].reason,
            "divided anew: a budget of 8 CPUs over 2 run(s) by gain per GPU; its 6 CPU(s) add "
            "75% to its GPUs' speed; a worker more would add 0%");
  EXPECT_EQ((*grants)[1].reason,
            "divided anew: a budget of 8 CPUs over 2 run(s) by gain per GPU; its 2 CPU(s) add "
            "10% to its GPUs' speed; a worker more would add 10%");
  // Held as divided, with a gain threshold: kept, and it says so.
  PoolStateOptions o = Options(8);
  o.division.min_gain = 0.5;
  PoolState kept(o);
  ASSERT_TRUE(kept.Report("", Report("a", 1000, 1, {{1, 250}}, 2, 1, 2), 0).ok());
  ASSERT_TRUE(kept.Report("", Report("b", 1000, 1, {{1, 500}, {2, 600}}, 2, 1, 2), 0).ok());
  grants = kept.Divide(1, nullptr);
  ASSERT_TRUE(grants.ok());
  EXPECT_EQ((*grants)[0].reason.rfind("kept as held (a new division gains too little): ", 0), 0u)
      << (*grants)[0].reason;
  // The budget falls below what one run holds: cut to it, and the budget says why.
  PoolState one(o);
  ASSERT_TRUE(one.Report("", Report("a", 1000, 1, {{1, 250}, {3, 750}}, 2, 1, 2), 0).ok());
  one.set_cpus(2, "jobs waiting for CPUs want 6");
  grants = one.Divide(2, nullptr);
  ASSERT_TRUE(grants.ok());
  EXPECT_EQ((*grants)[0].extra_workers, 1);
  EXPECT_EQ((*grants)[0].reason.rfind("cut to the budget: a budget of 2 CPUs (jobs waiting for "
                                      "CPUs want 6) over 1 run(s)",
                                      0),
            0u)
      << (*grants)[0].reason;
}

TEST(PoolStateTest, ThreeRunsAreDividedByMarginalGainAsComputedByHand) {
  // As above, and run c: 2 workers make 400 of 500 (0.8), a third reaches the
  // demand: 0.2 for 2 CPUs, 0.1 per CPU. Pieces: a 0.125 x 6, c 0.1 x 2, b 0.05 x 8.
  PoolState pool(Options(8));
  ASSERT_TRUE(pool.Report("", Report("a", 1000, 1, {{1, 250}}), 0).ok());
  ASSERT_TRUE(pool.Report("", Report("b", 1000, 1, {{1, 500}, {2, 600}}), 0).ok());
  ASSERT_TRUE(pool.Report("", Report("c", 500, 2, {{2, 400}}), 0).ok());
  EXPECT_EQ(Grants(pool, 1), (std::vector<std::string>{"a:3", "b:0", "c:1"}));
  // 12 CPUs: the 4 more go to b (its 0.05 is all that is left).
  PoolState bigger(Options(12));
  ASSERT_TRUE(bigger.Report("", Report("a", 1000, 1, {{1, 250}}), 0).ok());
  ASSERT_TRUE(bigger.Report("", Report("b", 1000, 1, {{1, 500}, {2, 600}}), 0).ok());
  ASSERT_TRUE(bigger.Report("", Report("c", 500, 2, {{2, 400}}), 0).ok());
  EXPECT_EQ(Grants(bigger, 1), (std::vector<std::string>{"a:3", "b:2", "c:1"}));
}

TEST(PoolStateTest, WhatRunsHoldIsKeptWhileTheBestDivisionIsWorthLittleMore) {
  // They hold a:2 (0.5 of a's speed bought) and b:2 (0.2): 0.7. The best division,
  // a:3 b:1, buys 0.75 + 0.1 = 0.85: 21% more.
  auto divide = [](double min_gain) {
    PoolStateOptions o = Options(8);
    o.division.min_gain = min_gain;
    PoolState pool(o);
    EXPECT_TRUE(pool.Report("", Report("a", 1000, 1, {{1, 250}}, 2, 1, 2), 0).ok());
    EXPECT_TRUE(pool.Report("", Report("b", 1000, 1, {{1, 500}, {2, 600}}, 2, 1, 2), 0).ok());
    return Grants(pool, 1);
  };
  EXPECT_EQ(divide(0.25), (std::vector<std::string>{"a:2", "b:2"})) << "worth < 25% more: kept";
  EXPECT_EQ(divide(0.10), (std::vector<std::string>{"a:3", "b:1"})) << "worth > 10% more: moved";
  // Once there, a slightly better measure of b (its next worker would add 0.12, not
  // 0.1) moves nothing: no oscillation on noise.
  PoolStateOptions o = Options(8);
  o.division.min_gain = 0.10;
  PoolState pool(o);
  ASSERT_TRUE(pool.Report("", Report("a", 1000, 1, {{1, 250}}, 2, 1, 3), 0).ok());
  ASSERT_TRUE(pool.Report("", Report("b", 1000, 1, {{1, 500}, {2, 620}}, 2, 1, 1), 0).ok());
  for (double t = 1; t < 50; t += 10) {
    EXPECT_EQ(Grants(pool, t), (std::vector<std::string>{"a:3", "b:1"})) << t;
  }
}

TEST(PoolStateTest, AGrantThatJustRoseIsNotTakenBackBeforeTheMinLifetime) {
  PoolStateOptions o = Options(8);
  o.division.min_lifetime_s = 60;
  PoolState pool(o);
  ASSERT_TRUE(pool.Report("", Report("b", 1000, 1, {{1, 500}, {2, 600}}), 0).ok());
  EXPECT_EQ(Grants(pool, 0), (std::vector<std::string>{"b:4"})) << "alone: all of it";
  // b starts its 4 workers; a arrives with steeper gains 30 s later: b keeps them.
  ASSERT_TRUE(pool.Report("", Report("b", 1000, 1, {{1, 500}, {2, 600}}, 2, 1, 4), 20).ok());
  ASSERT_TRUE(pool.Report("", Report("a", 1000, 1, {{1, 250}}), 30).ok());
  EXPECT_EQ(Grants(pool, 30), (std::vector<std::string>{"a:0", "b:4"}));
  // Past the lifetime: the division by marginal gain.
  ASSERT_TRUE(pool.Report("", Report("b", 1000, 1, {{1, 500}, {2, 600}}, 2, 1, 4), 65).ok());
  ASSERT_TRUE(pool.Report("", Report("a", 1000, 1, {{1, 250}}), 65).ok());
  EXPECT_EQ(Grants(pool, 70), (std::vector<std::string>{"a:3", "b:1"}));
}

TEST(PoolStateTest, ARunThatStopsReportingIsForgottenAndItsCpusGoToTheOthers) {
  PoolState pool(Options(8));
  ASSERT_TRUE(pool.Report("", Report("a", 1000, 1, {{1, 250}}), 0).ok());
  ASSERT_TRUE(pool.Report("", Report("b", 1000, 1, {{1, 500}, {2, 600}}), 0).ok());
  EXPECT_EQ(Grants(pool, 1), (std::vector<std::string>{"a:3", "b:1"}));
  ASSERT_TRUE(pool.Report("", Report("b", 1000, 1, {{1, 500}, {2, 600}}, 2, 1, 1), 50).ok());
  std::vector<std::string> forgotten;
  EXPECT_EQ(Grants(pool, 61, &forgotten), (std::vector<std::string>{"b:4"}));
  EXPECT_EQ(forgotten, (std::vector<std::string>{"a"}));
  EXPECT_EQ(pool.runs(), 1u);
  // It comes back: it is divided for again.
  ASSERT_TRUE(pool.Report("", Report("a", 1000, 1, {{1, 250}}), 70).ok());
  EXPECT_EQ(pool.runs(), 2u);
}

TEST(PoolStateTest, ARunThatReportsForAnotherIsRefused) {
  PoolState pool(Options(8));
  ASSERT_TRUE(pool.Report("a", Report("a", 1000, 1, {{1, 250}}), 0).ok());
  Status lie = pool.Report("a", Report("b", 1000, 1, {{1, 900}}), 1);
  ASSERT_FALSE(lie.ok());
  EXPECT_EQ(lie.code(), Code::kInvalidArgument);
  EXPECT_NE(lie.message().find("a run reports for itself only"), std::string::npos)
      << lie.message();
  EXPECT_EQ(pool.runs(), 1u) << "nothing of the lie was kept";
}

TEST(PoolStateTest, BadReportsAreRefusedNamingTheField) {
  PoolState pool(Options(8));
  auto refused = [&](RunReport r, const std::string& says) {
    Status st = pool.Report("", r, 0);
    EXPECT_FALSE(st.ok()) << says;
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
  };
  refused(Report("", 1000, 1, {}), "run_id must be 1..128 characters");
  refused(Report(std::string(129, 'x'), 1000, 1, {}), "run_id must be 1..128 characters");
  refused(Report("a", 1000, 1, {}, 2, 0), "gpus must be positive");
  refused(Report("a", 1000, 1, {}, 0), "cpus_per_worker must be at least 1");
  refused(Report("a", 0, 1, {}), "demand_samples_per_s must be positive");
  refused(Report("a", 1000, -1, {}), "a negative worker count");
  refused(Report("a", 1000, 1, {{0, 5}}), "a rate at a worker count below 1");
  refused(Report("a", 1000, 1, {{1, -5}}), "a negative or non-finite rate");
  refused(Report("a", 1000, 1, {{1, 5}, {1, 6}}), "worker count 1 given twice");
  std::vector<std::pair<int, double>> many;
  for (int i = 1; i <= static_cast<int>(kMaxReportedCounts) + 1; ++i) many.push_back({i, 1});
  refused(Report("a", 1000, 1, many), "more than 1024 worker counts");
  EXPECT_EQ(pool.runs(), 0u);
}

TEST(PoolStateTest, ARestartedPoolRebuildsItsViewFromReportsAndKeepsWhatRunsHold) {
  // The runs held a:3, b:1 from the pool before it restarted; they report that to
  // the new one, which divides again from there (nothing is taken on a whim).
  PoolStateOptions o = Options(8);
  o.division.min_gain = 0.05;
  PoolState restarted(o);
  ASSERT_TRUE(restarted.Report("", Report("a", 1000, 1, {{1, 250}}, 2, 1, 3), 500).ok());
  ASSERT_TRUE(restarted.Report("", Report("b", 1000, 1, {{1, 500}, {2, 600}}, 2, 1, 1), 500).ok());
  EXPECT_EQ(Grants(restarted, 501), (std::vector<std::string>{"a:3", "b:1"}));
}

}  // namespace
}  // namespace gm::planner
