// Scenario tests of the coordinator's state machine. Time is a number passed in.
#include "launcher/coordinator_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace gm {
namespace {

using Kind = Assignment::Kind;

EpochPlan Plan(uint64_t epoch, const std::vector<std::pair<uint64_t, uint64_t>>& splits) {
  EpochPlan plan;
  plan.epoch = epoch;
  for (auto [split, count] : splits) plan.splits.push_back({split, count});
  return plan;
}

CoordinatorState Make(int world_size, const EpochPlan& plan, int inflight = 2) {
  auto state = CoordinatorState::Create({world_size, inflight, 10.0});
  EXPECT_TRUE(state.ok()) << state.status().message();
  Status started = state->StartEpoch(plan);
  EXPECT_TRUE(started.ok()) << started.message();
  return std::move(state).value();
}

Assignment Request(CoordinatorState& state, WorkerId worker) {
  auto answer = state.RequestSplit(worker);
  EXPECT_TRUE(answer.ok()) << answer.status().message();
  return answer.ok() ? *answer : Assignment{};
}

// Acknowledges batches [from, to) of an assignment's split; each must be new.
void AckRange(CoordinatorState& state, const Assignment& a, uint64_t from, uint64_t to) {
  for (uint64_t b = from; b < to; ++b) {
    auto outcome = state.Ack(a.rank, a.epoch, a.split, b);
    ASSERT_TRUE(outcome.ok()) << outcome.status().message();
    EXPECT_EQ(*outcome, AckOutcome::kAcked) << "split " << a.split << " batch " << b;
  }
}

// The worker makes the whole assignment and the rank acknowledges every batch.
void Finish(CoordinatorState& state, WorkerId worker, const Assignment& a) {
  ASSERT_EQ(a.kind, Kind::kAssign);
  ASSERT_TRUE(state.SplitDone(worker, a.epoch, a.split, a.batch_count).ok());
  AckRange(state, a, a.start_batch, a.end_batch);
}

TEST(CoordinatorStateTest, GivenOneWorkerOneRankWhenEverySplitIsMadeThenTheEpochEnds) {
  CoordinatorState state = Make(1, Plan(0, {{5, 3}, {6, 2}}));
  WorkerId w = state.RegisterWorker(0);
  Assignment a = Request(state, w);
  ASSERT_EQ(a.kind, Kind::kAssign);
  EXPECT_EQ(a.split, 5u);
  EXPECT_EQ(a.start_batch, 0u);
  EXPECT_EQ(a.end_batch, 3u);
  Finish(state, w, a);
  EXPECT_EQ(state.RankPosition(0), 3u);
  EXPECT_FALSE(state.EpochDone());
  Finish(state, w, Request(state, w));
  EXPECT_TRUE(state.EpochDone());
  EXPECT_EQ(Request(state, w).kind, Kind::kEpochDone);
  CoordinatorStats stats = state.Stats();
  EXPECT_EQ(stats.acks, 5u);
  EXPECT_EQ(stats.rank_positions, std::vector<uint64_t>{5});
  ASSERT_EQ(stats.workers.size(), 1u);
  EXPECT_EQ(stats.workers[0].splits_done, 2u);
  EXPECT_EQ(stats.workers[0].splits_completed, 2u);
  EXPECT_EQ(stats.workers[0].batches, 5u);
}

TEST(CoordinatorStateTest, GivenSplitsWhenWorkersAskThenTheyComeInPlanOrder) {
  CoordinatorState state = Make(1, Plan(0, {{9, 1}, {2, 1}, {7, 1}, {4, 1}}), 4);
  WorkerId w = state.RegisterWorker(0);
  std::vector<uint64_t> order;
  for (int i = 0; i < 4; ++i) order.push_back(Request(state, w).split);
  EXPECT_EQ(order, (std::vector<uint64_t>{9, 2, 7, 4}));
  EXPECT_EQ(Request(state, w).kind, Kind::kWait);
}

TEST(CoordinatorStateTest, GivenTheInflightLimitWhenReachedThenTheWorkerWaitsUntilSplitDone) {
  CoordinatorState state = Make(1, Plan(0, {{1, 2}, {2, 2}, {3, 2}}), 2);
  WorkerId w = state.RegisterWorker(0);
  Assignment first = Request(state, w);
  EXPECT_EQ(Request(state, w).kind, Kind::kAssign);
  EXPECT_EQ(Request(state, w).kind, Kind::kWait);
  // Made but not yet acknowledged: the slot is free, the split stays the worker's.
  ASSERT_TRUE(state.SplitDone(w, 0, first.split, 2).ok());
  Assignment third = Request(state, w);
  EXPECT_EQ(third.split, 3u);
}

TEST(CoordinatorStateTest, GivenTwoWorkersWhenBothAskThenEachSplitGoesToOne) {
  CoordinatorState state = Make(1, Plan(0, {{1, 2}, {2, 2}, {3, 2}, {4, 2}}), 1);
  WorkerId a = state.RegisterWorker(0);
  WorkerId b = state.RegisterWorker(0);
  Assignment a1 = Request(state, a);
  Assignment b1 = Request(state, b);
  EXPECT_EQ(a1.split, 1u);
  EXPECT_EQ(b1.split, 2u);
  Finish(state, b, b1);
  Finish(state, a, a1);
  Finish(state, a, Request(state, a));
  Finish(state, b, Request(state, b));
  EXPECT_TRUE(state.EpochDone());
  CoordinatorStats stats = state.Stats();
  EXPECT_EQ(stats.workers[0].splits_done + stats.workers[1].splits_done, 4u);
  EXPECT_EQ(stats.duplicate_acks, 0u);
}

TEST(CoordinatorStateTest, GivenAWorkerSilentPastTheTimeoutThenItsSplitResumesAtTheAckedPrefix) {
  CoordinatorState state = Make(1, Plan(0, {{1, 5}, {2, 3}}), 1);
  WorkerId lost = state.RegisterWorker(0);
  Assignment a = Request(state, lost);
  AckRange(state, a, 0, 2);
  ASSERT_TRUE(state.Ack(0, 0, 1, 3).ok());  // batch 3 arrived, 2 did not
  WorkerId other = state.RegisterWorker(5);
  Assignment b = Request(state, other);
  EXPECT_EQ(b.split, 2u);
  ASSERT_TRUE(state.Heartbeat(other, 10).ok());
  EXPECT_TRUE(state.Tick(10).empty());  // exactly the timeout: not yet
  EXPECT_EQ(state.Tick(10.5), std::vector<WorkerId>{lost});
  EXPECT_EQ(Request(state, lost).kind, Kind::kExit);
  EXPECT_EQ(state.Heartbeat(lost, 11).code(), Code::kUnavailable);
  Finish(state, other, b);
  Assignment again = Request(state, other);
  ASSERT_EQ(again.kind, Kind::kAssign);
  EXPECT_EQ(again.split, 1u);
  EXPECT_EQ(again.start_batch, 2u);
  ASSERT_TRUE(state.SplitDone(other, 0, 1, 5).ok());
  AckRange(state, again, 2, 3);
  EXPECT_EQ(*state.Ack(0, 0, 1, 3), AckOutcome::kDuplicate);  // re-sent copy
  AckRange(state, again, 4, 5);
  EXPECT_TRUE(state.EpochDone());
  CoordinatorStats stats = state.Stats();
  EXPECT_EQ(stats.acks, 8u);
  EXPECT_EQ(stats.reassignments, 1u);
  EXPECT_EQ(stats.workers[0].reassigned, 1u);
  EXPECT_EQ(stats.workers[0].status, WorkerStatus::kGone);
}

TEST(CoordinatorStateTest, GivenALostSplitThenItGoesBeforeLaterPendingSplits) {
  CoordinatorState state = Make(1, Plan(0, {{1, 1}, {2, 1}, {3, 1}}), 1);
  WorkerId lost = state.RegisterWorker(0);
  EXPECT_EQ(Request(state, lost).split, 1u);
  ASSERT_TRUE(state.WorkerExited(lost).ok());
  ASSERT_TRUE(state.WorkerExited(lost).ok());  // idempotent
  WorkerId next = state.RegisterWorker(1);
  EXPECT_EQ(Request(state, next).split, 1u);
  EXPECT_EQ(state.Stats().reassignments, 1u);
}

TEST(CoordinatorStateTest, GivenADrainMidEpochThenTheWorkerFinishesItsSplitsAndExits) {
  CoordinatorState state = Make(1, Plan(0, {{1, 2}, {2, 2}, {3, 2}}), 1);
  WorkerId draining = state.RegisterWorker(0);
  WorkerId staying = state.RegisterWorker(0);
  Assignment a = Request(state, draining);
  ASSERT_TRUE(state.Drain(draining).ok());
  EXPECT_FALSE(state.ShouldExit(draining));
  EXPECT_EQ(Request(state, draining).kind, Kind::kDrain);
  ASSERT_TRUE(state.SplitDone(draining, 0, a.split, 2).ok());
  EXPECT_EQ(Request(state, draining).kind, Kind::kDrain);  // acks still outstanding
  AckRange(state, a, 0, 2);
  EXPECT_TRUE(state.ShouldExit(draining));
  EXPECT_EQ(Request(state, draining).kind, Kind::kExit);
  ASSERT_TRUE(state.WorkerExited(draining).ok());
  Finish(state, staying, Request(state, staying));
  Finish(state, staying, Request(state, staying));
  EXPECT_TRUE(state.EpochDone());
  EXPECT_EQ(state.Stats().reassignments, 0u);
}

TEST(CoordinatorStateTest, GivenAWorkerAddedMidEpochThenItGetsThePendingWork) {
  CoordinatorState state = Make(1, Plan(0, {{1, 1}, {2, 1}, {3, 1}}), 1);
  WorkerId first = state.RegisterWorker(0);
  Assignment a = Request(state, first);
  WorkerId added = state.RegisterWorker(3);
  Assignment b = Request(state, added);
  ASSERT_EQ(b.kind, Kind::kAssign);
  EXPECT_EQ(b.split, 2u);
  Finish(state, first, a);
  Finish(state, added, b);
  Finish(state, added, Request(state, added));
  EXPECT_TRUE(state.EpochDone());
}

TEST(CoordinatorStateTest, GivenALostWorkerWhenItRegistersAgainThenItIsANewWorkerWithWork) {
  CoordinatorState state = Make(1, Plan(0, {{1, 4}}), 1);
  WorkerId old_id = state.RegisterWorker(0);
  Assignment a = Request(state, old_id);
  AckRange(state, a, 0, 1);
  EXPECT_EQ(state.Tick(20), std::vector<WorkerId>{old_id});
  WorkerId new_id = state.RegisterWorker(21);
  EXPECT_NE(new_id, old_id);
  Assignment b = Request(state, new_id);
  EXPECT_EQ(b.split, 1u);
  EXPECT_EQ(b.start_batch, 1u);
  // The old incarnation's late report is accepted as stale and changes nothing.
  ASSERT_TRUE(state.SplitDone(old_id, 0, 1, 4).ok());
  EXPECT_EQ(state.Stats().stale_split_done, 1u);
  Finish(state, new_id, b);
  EXPECT_TRUE(state.EpochDone());
}

// Runs a whole epoch with one worker per assignment; returns each rank's (split, batch).
std::vector<std::vector<std::pair<uint64_t, uint64_t>>> RunShares(int world_size,
                                                                  const EpochPlan& plan) {
  CoordinatorState state = Make(world_size, plan, 1);
  WorkerId w = state.RegisterWorker(0);
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> got(static_cast<size_t>(world_size));
  for (Assignment a = Request(state, w); a.kind == Kind::kAssign; a = Request(state, w)) {
    for (uint64_t b = a.start_batch; b < a.end_batch; ++b) {
      got[static_cast<size_t>(a.rank)].emplace_back(a.split, b);
    }
    Finish(state, w, a);
  }
  EXPECT_TRUE(state.EpochDone());
  return got;
}

TEST(CoordinatorStateTest, GivenTwoRanksWithUnequalCountsThenSharesAreDisjointAndEqual) {
  // Rank 0: 1 (4) + 3 (1) = 5; rank 1: 2 (2) + 4 (6) = 8 -> 3 surplus batches of 4.
  auto got = RunShares(2, Plan(0, {{1, 4}, {2, 2}, {3, 1}, {4, 6}}));
  using Batches = std::vector<std::pair<uint64_t, uint64_t>>;
  EXPECT_EQ(got[0], (Batches{{1, 0}, {1, 1}, {1, 2}, {1, 3}, {3, 0}}));
  EXPECT_EQ(got[1], (Batches{{2, 0}, {2, 1}, {4, 0}, {4, 1}, {4, 2}}));
}

TEST(CoordinatorStateTest, GivenFourRanksWithUnequalCountsThenEveryRankGetsTheMinimum) {
  EpochPlan plan = Plan(0, {{0, 3}, {1, 1}, {2, 5}, {3, 2}, {4, 2}, {5, 4}, {6, 0}, {7, 2}});
  auto got = RunShares(4, plan);  // totals 5, 5, 5, 4
  std::set<std::pair<uint64_t, uint64_t>> seen;
  for (size_t r = 0; r < got.size(); ++r) {
    EXPECT_EQ(got[r].size(), 4u) << "rank " << r;
    for (auto batch : got[r]) {
      EXPECT_EQ(batch.first % 4, r);
      EXPECT_TRUE(seen.insert(batch).second);
    }
  }
}

TEST(CoordinatorStateTest, GivenUnknownCountsWithSeveralRanksThenTheEpochIsRejected) {
  auto state = CoordinatorState::Create({2, 2, 10.0});
  ASSERT_TRUE(state.ok());
  Status st = state->StartEpoch(Plan(0, {{1, 3}, {2, kUnknownCount}}));
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("world size 2"), std::string::npos) << st.message();
  EXPECT_FALSE(state->epoch_started());
}

TEST(CoordinatorStateTest, GivenUnknownCountsWithOneRankThenSplitDoneTeachesTheCount) {
  CoordinatorState state = Make(1, Plan(0, {{1, kUnknownCount}}));
  WorkerId w = state.RegisterWorker(0);
  Assignment a = Request(state, w);
  EXPECT_EQ(a.end_batch, kUnknownCount);
  AckRange(state, a, 0, 3);
  EXPECT_FALSE(state.EpochDone());
  EXPECT_FALSE(state.SplitDone(w, 0, 1, 2).ok());  // batch 2 was acknowledged
  ASSERT_TRUE(state.SplitDone(w, 0, 1, 3).ok());
  EXPECT_EQ(state.BatchCount(1), 3u);
  EXPECT_TRUE(state.EpochDone());
  EXPECT_FALSE(state.Ack(0, 0, 1, 3).ok());
}

TEST(CoordinatorStateTest, GivenDuplicateAcksThenTheyAreIgnoredAndCounted) {
  CoordinatorState state = Make(1, Plan(0, {{1, 2}}));
  EXPECT_EQ(*state.Ack(0, 0, 1, 0), AckOutcome::kAcked);
  EXPECT_EQ(*state.Ack(0, 0, 1, 0), AckOutcome::kDuplicate);
  EXPECT_EQ(*state.Ack(0, 0, 1, 0), AckOutcome::kDuplicate);
  EXPECT_EQ(state.RankPosition(0), 1u);
  CoordinatorStats stats = state.Stats();
  EXPECT_EQ(stats.acks, 1u);
  EXPECT_EQ(stats.duplicate_acks, 2u);
}

TEST(CoordinatorStateTest, GivenBadAcksThenEachIsRejectedWithItsReason) {
  auto fresh = CoordinatorState::Create({});
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(fresh->Ack(0, 0, 1, 0).status().message().find("before any epoch"), std::string::npos);
  CoordinatorState state = Make(2, Plan(4, {{1, 2}, {2, 2}}));
  EXPECT_NE(state.Ack(1, 4, 1, 0).status().message().find("belongs to rank 0"), std::string::npos);
  EXPECT_NE(state.Ack(0, 4, 1, 2).status().message().find("delivers only"), std::string::npos);
  EXPECT_NE(state.Ack(0, 4, 9, 0).status().message().find("not in the epoch's plan"),
            std::string::npos);
  EXPECT_NE(state.Ack(2, 4, 1, 0).status().message().find("outside world size"), std::string::npos);
  EXPECT_NE(state.Ack(0, 5, 1, 0).status().message().find("current epoch is 4"), std::string::npos);
  EXPECT_FALSE(state.SplitDone(99, 4, 1, 2).ok());
  WorkerId w = state.RegisterWorker(0);
  Assignment held = Request(state, w);
  ASSERT_EQ(held.split, 1u);
  EXPECT_NE(state.SplitDone(w, 4, 1, 3).message().find("known to have 2"), std::string::npos);
  EXPECT_EQ(state.Stats().acks, 0u);
}

TEST(CoordinatorStateTest, GivenBadOptionsThenCreateFails) {
  EXPECT_FALSE(CoordinatorState::Create({0, 2, 10.0}).ok());
  EXPECT_FALSE(CoordinatorState::Create({1, 0, 10.0}).ok());
  EXPECT_FALSE(CoordinatorState::Create({1, 2, 0.0}).ok());
}

TEST(CoordinatorStateTest, GivenAResumeMidEpochThenEarlierBatchesAreNotHandedOutAgain) {
  // Rank 0: 1 (3) + 3 (3); rank 1: 2 (3) + 4 (3). Rank 0 resumes at 4.
  CoordinatorState state = Make(2, Plan(0, {{1, 3}, {2, 3}, {3, 3}, {4, 3}}), 4);
  ASSERT_TRUE(state.Resume(0, 0, 4).ok());
  EXPECT_EQ(state.RankPosition(0), 4u);
  WorkerId w = state.RegisterWorker(0);
  std::vector<Assignment> got;
  for (Assignment a = Request(state, w); a.kind == Kind::kAssign; a = Request(state, w)) {
    got.push_back(a);
  }
  ASSERT_EQ(got.size(), 3u);  // split 1 is complete
  EXPECT_EQ(got[0].split, 2u);
  EXPECT_EQ(got[1].split, 3u);
  EXPECT_EQ(got[1].start_batch, 1u);
  for (const Assignment& a : got) Finish(state, w, a);
  EXPECT_TRUE(state.EpochDone());
  EXPECT_EQ(state.Stats().duplicate_acks, 0u);
  EXPECT_FALSE(state.Resume(0, 0, 7).ok());  // beyond the share
  EXPECT_FALSE(state.Resume(0, 1, 0).ok());  // another epoch
}

TEST(CoordinatorStateTest, GivenAResumeAtAKeyInANewRunThenEarlierSplitsNeedNoCounts) {
  // A new run: no count is known. Rank 0 consumed 5 batches, 1 of them of its third split.
  const uint64_t u = kUnknownCount;
  CoordinatorState state = Make(1, Plan(0, {{1, u}, {2, u}, {3, u}, {4, u}}), 4);
  ASSERT_TRUE(state.ResumeAt(0, 0, 5, {2, 1}).ok());
  EXPECT_EQ(state.RankPosition(0), 5u);
  EXPECT_TRUE(state.EpochTouched());
  WorkerId w = state.RegisterWorker(0);
  Assignment a = Request(state, w);
  ASSERT_EQ(a.kind, Kind::kAssign);
  EXPECT_EQ(a.split, 3u);
  EXPECT_EQ(a.start_batch, 1u);
  Assignment b = Request(state, w);
  EXPECT_EQ(b.split, 4u);
  EXPECT_EQ(b.start_batch, 0u);
  EXPECT_EQ(Request(state, w).kind, Kind::kWait);  // splits 1 and 2 were delivered before
  ASSERT_TRUE(state.SplitDone(w, 0, 3, 2).ok());
  AckRange(state, a, 1, 2);
  ASSERT_TRUE(state.SplitDone(w, 0, 4, 3).ok());
  AckRange(state, b, 0, 3);
  EXPECT_TRUE(state.EpochDone());
  EXPECT_EQ(state.RankPosition(0), 9u);
  // An ack of a split an earlier run delivered is a duplicate, not an error.
  EXPECT_EQ(*state.Ack(0, 0, 1, 0), AckOutcome::kDuplicate);
}

// A restarted trainer's session takes over its rank (ResumeAt): what the old one
// was being sent is taken back, and who held it is told (Revoked), so that its
// batches still on their way are no fault.
TEST(CoordinatorStateTest, GivenARestartTakingSplitsBackThenRevokedNamesTheirFormerHolders) {
  const uint64_t u = kUnknownCount;
  CoordinatorState state = Make(1, Plan(0, {{1, u}, {2, u}, {3, u}}), 4);
  WorkerId w = state.RegisterWorker(0);
  WorkerId v = state.RegisterWorker(0);
  Assignment a = Request(state, w);
  Assignment b = Request(state, v);
  ASSERT_EQ(a.split, 1u);
  ASSERT_EQ(b.split, 2u);
  EXPECT_TRUE(state.Revoked(0).empty());
  ASSERT_TRUE(state.ResumeAt(0, 0, 0, {0, 0}).ok());  // the new session: nothing acknowledged
  EXPECT_EQ(state.Revoked(0), (std::vector<std::pair<uint64_t, WorkerId>>{{1, w}, {2, v}}));
  EXPECT_TRUE(state.Holders(0).empty());
  Assignment again = Request(state, v);  // split 1 goes out again, to v this time
  EXPECT_EQ(again.split, 1u);
  EXPECT_EQ(state.Holders(0), (std::vector<std::pair<uint64_t, WorkerId>>{{1, v}}));
}

TEST(CoordinatorStateTest, GivenAResumeAtAKeyThenAnEarlierResumeMakesSkippedSplitsDueAgain) {
  const uint64_t u = kUnknownCount;
  CoordinatorState state = Make(1, Plan(0, {{1, u}, {2, u}}), 4);
  ASSERT_TRUE(state.ResumeAt(0, 0, 3, {1, 0}).ok());
  ASSERT_TRUE(state.ResumeAt(0, 0, 0, {0, 0}).ok());  // back to the start
  EXPECT_EQ(state.RankPosition(0), 0u);
  WorkerId w = state.RegisterWorker(0);
  EXPECT_EQ(Request(state, w).split, 1u);
  EXPECT_EQ(Request(state, w).split, 2u);
}

TEST(CoordinatorStateTest, GivenAResumeAtAKeyThatContradictsTheRunThenItIsRefused) {
  CoordinatorState state = Make(1, Plan(0, {{1, 3}, {2, 2}}), 4);
  const auto refused = [&](uint64_t position, SequenceKey at, const std::string& why) {
    Status st = state.ResumeAt(0, 0, position, at);
    EXPECT_EQ(st.code(), Code::kInvalidArgument);
    EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
  };
  refused(5, {1, 1}, "another pipeline or source");  // split 1 has 3 batches, not 4
  refused(4, {0, 4}, "which has 3 batches in this run");
  refused(2, {3, 0}, "which has 2 splits in this run");
  refused(1, {1, 2}, "inconsistent");
  EXPECT_FALSE(state.EpochTouched());                                         // nothing was changed
  EXPECT_EQ(state.ResumeAt(0, 1, 0, {0, 0}).code(), Code::kInvalidArgument);  // another epoch
}

TEST(CoordinatorStateTest, GivenAFreshEpochWhenSkippedToALaterOneThenWorkersLoseTheirSplits) {
  CoordinatorState state = Make(1, Plan(0, {{1, 2}, {2, 2}}), 2);
  WorkerId w = state.RegisterWorker(0);
  Assignment a = Request(state, w);
  ASSERT_EQ(a.kind, Kind::kAssign);
  ASSERT_TRUE(state.SkipToEpoch(Plan(3, {{7, 2}, {8, 2}})).ok());
  EXPECT_EQ(state.epoch(), 3u);
  EXPECT_TRUE(state.SplitDone(w, 0, a.split, 2).ok());  // stale, accepted
  EXPECT_EQ(state.Stats().stale_split_done, 1u);
  Assignment b = Request(state, w);  // the in-flight limit counts the new epoch only
  EXPECT_EQ(b.epoch, 3u);
  EXPECT_EQ(b.split, 7u);
  AckRange(state, b, 0, 1);
  Status again = state.SkipToEpoch(Plan(5, {{9, 1}}));
  EXPECT_EQ(again.code(), Code::kInvalidArgument);  // epoch 3 has delivered a batch
  EXPECT_NE(again.message().find("has delivered batches"), std::string::npos) << again.message();
  EXPECT_FALSE(Make(1, Plan(2, {{1, 1}})).SkipToEpoch(Plan(1, {{1, 1}})).ok());  // not later
}

TEST(CoordinatorStateTest, GivenAResumeBehindTheAcksThenTheRestIsMadeAgain) {
  CoordinatorState state = Make(1, Plan(0, {{1, 2}, {2, 2}}), 2);
  WorkerId w = state.RegisterWorker(0);
  Assignment a = Request(state, w);
  Assignment b = Request(state, w);
  Finish(state, w, a);
  AckRange(state, b, 0, 1);
  // The trainer died after batch 3 of 4 and restarts from its checkpoint at 1.
  ASSERT_TRUE(state.Resume(0, 0, 1).ok());
  EXPECT_EQ(state.RankPosition(0), 1u);
  Assignment again = Request(state, w);
  ASSERT_EQ(again.kind, Kind::kAssign);
  EXPECT_EQ(again.split, 1u);
  EXPECT_EQ(again.start_batch, 1u);
  Assignment again2 = Request(state, w);
  EXPECT_EQ(again2.split, 2u);
  EXPECT_EQ(again2.start_batch, 0u);
  Finish(state, w, again);
  Finish(state, w, again2);
  EXPECT_TRUE(state.EpochDone());
  EXPECT_EQ(state.Stats().workers[0].reassigned, 1u);  // split 2 was taken back
}

TEST(CoordinatorStateTest, GivenAFinishedEpochThenTheNextStartsAndOldMessagesAreHarmless) {
  CoordinatorState state = Make(1, Plan(0, {{1, 1}}));
  WorkerId w = state.RegisterWorker(0);
  EXPECT_FALSE(state.StartEpoch(Plan(1, {{1, 1}})).ok());  // epoch 0 not done
  Finish(state, w, Request(state, w));
  EXPECT_FALSE(state.StartEpoch(Plan(0, {{1, 1}})).ok());  // not after epoch 0
  ASSERT_TRUE(state.StartEpoch(Plan(1, {{1, 2}})).ok());
  EXPECT_FALSE(state.EpochDone());
  EXPECT_EQ(*state.Ack(0, 0, 1, 0), AckOutcome::kDuplicate);
  EXPECT_TRUE(state.SplitDone(w, 0, 1, 1).ok());
  Assignment a = Request(state, w);
  EXPECT_EQ(a.epoch, 1u);
  Finish(state, w, a);
  EXPECT_TRUE(state.EpochDone());
  EXPECT_EQ(state.Stats().acks, 3u);
}

// An attack: a registered worker claims splits it never held are empty. Nothing of
// it counts: the counts stay unknown, the epoch goes on, and the real holder's
// count is the one learned.
TEST(CoordinatorStateTest, GivenSplitDoneFromAWorkerThatDoesNotHoldTheSplitThenItIsIgnored) {
  CoordinatorState state = Make(1, Plan(0, {{0, kUnknownCount}, {1, kUnknownCount}}));
  WorkerId holder = state.RegisterWorker(0);
  WorkerId liar = state.RegisterWorker(0);
  Assignment a = Request(state, holder);
  ASSERT_EQ(a.kind, Kind::kAssign);
  ASSERT_TRUE(state.SplitDone(liar, 0, a.split, 0).ok());  // stale: counted, ignored
  ASSERT_TRUE(state.SplitDone(liar, 0, 1, 0).ok());        // never assigned at all
  EXPECT_EQ(state.BatchCount(a.split), kUnknownCount);
  EXPECT_EQ(state.BatchCount(1), kUnknownCount);
  EXPECT_FALSE(state.EpochDone());
  ASSERT_TRUE(state.SplitDone(holder, 0, a.split, 3).ok());
  EXPECT_EQ(state.BatchCount(a.split), kUnknownCount);  // the maker's word, until acknowledged
  AckRange(state, a, 0, 3);
  EXPECT_EQ(state.BatchCount(a.split), 3u);
  EXPECT_EQ(state.Stats().stale_split_done, 2u);
}

// An attack: a holder says its split has more batches than it sends (and skipped
// samples), then is dropped (its process ends). Its word goes with it: the next
// holder's count is taken, and the split completes with what it sent.
TEST(CoordinatorStateTest,
     GivenAHolderThatOverCountsWhenItIsDropped_ThenTheNextHoldersCountStands) {
  CoordinatorState state = Make(1, Plan(0, {{0, kUnknownCount}}));
  WorkerId liar = state.RegisterWorker(0);
  Assignment a = Request(state, liar);
  ASSERT_EQ(a.kind, Kind::kAssign);
  for (uint64_t b : {0, 1}) ASSERT_TRUE(state.Ack(0, 0, a.split, b, 8).ok());
  ASSERT_TRUE(state.SplitDone(liar, 0, a.split, 9, 4).ok());  // 9 batches, 4 skipped: sent 2
  EXPECT_EQ(state.BatchCount(a.split), kUnknownCount);        // not told to trainers
  ASSERT_TRUE(state.WorkerExited(liar).ok());
  WorkerId honest = state.RegisterWorker(0);
  Assignment again = Request(state, honest);
  ASSERT_EQ(again.kind, Kind::kAssign);
  EXPECT_EQ(again.split, a.split);
  EXPECT_EQ(again.start_batch, 2u);
  EXPECT_EQ(again.end_batch, kUnknownCount);  // the liar's 9 forgotten
  ASSERT_TRUE(state.Ack(0, 0, a.split, 2, 8).ok());
  ASSERT_TRUE(state.SplitDone(honest, 0, a.split, 3, 0).ok()) << "the liar's count was kept";
  EXPECT_TRUE(state.EpochDone());
  EXPECT_EQ(state.BatchCount(a.split), 3u);
  auto delivered = state.Delivered(a.split);
  ASSERT_TRUE(delivered.has_value());
  EXPECT_EQ(delivered->skipped, 0u);  // the liar's 4 forgotten too
}

TEST(CoordinatorStateTest,
     GivenEverySplitHandedOut_ThenTheNextEpochsSplitsGoOutAheadAndAreAdopted) {
  CoordinatorState state = Make(1, Plan(0, {{0, 1}, {1, 1}}));
  const WorkerId a = state.RegisterWorker(0), b = state.RegisterWorker(0);
  const Assignment a0 = Request(state, a);
  EXPECT_FALSE(state.WantsAhead()) << "epoch 0 still has a split to hand out";
  EXPECT_FALSE(state.PlanAhead(Plan(1, {{1, 1}, {0, 1}})).ok());
  const Assignment b0 = Request(state, b);
  EXPECT_EQ(b0.epoch, 0u);
  ASSERT_TRUE(state.WantsAhead());
  EXPECT_FALSE(state.PlanAhead(Plan(2, {{1, 1}, {0, 1}})).ok()) << "only the next epoch";
  ASSERT_TRUE(state.PlanAhead(Plan(1, {{1, 1}, {0, 1}})).ok());
  EXPECT_FALSE(state.WantsAhead());
  EXPECT_EQ(state.ahead_epoch(), std::optional<uint64_t>(1));
  const Assignment b1 = Request(state, b);
  ASSERT_EQ(b1.kind, Kind::kAssign);
  EXPECT_EQ(b1.epoch, 1u);
  EXPECT_EQ(b1.split, 1u) << "epoch 1's plan order";
  ASSERT_TRUE(state.SplitDone(b, 1, 1, 1).ok()) << "made ahead";
  EXPECT_FALSE(state.Ack(0, 1, 1, 0).ok()) << "nothing of epoch 1 is read before it starts";
  // A worker lost while it holds a split of epoch 0: that split goes out before
  // anything else of epoch 1.
  ASSERT_TRUE(state.WorkerExited(a).ok());
  const Assignment again = Request(state, b);
  EXPECT_EQ(again.epoch, 0u) << "the current epoch's splits first";
  EXPECT_EQ(again.split, a0.split);
  Finish(state, b, again);
  Finish(state, b, b0);
  ASSERT_TRUE(state.EpochDone());
  ASSERT_TRUE(state.StartEpoch(Plan(1, {{1, 1}, {0, 1}})).ok());
  EXPECT_EQ(state.epoch(), 1u);
  EXPECT_FALSE(state.ahead_epoch().has_value());
  EXPECT_EQ(state.Holders(0), (std::vector<std::pair<uint64_t, WorkerId>>{{1, b}}))
      << "made ahead, held until acknowledged";
  EXPECT_EQ(state.BatchCount(1), 1u);
  AckRange(state, b1, 0, 1);
  const WorkerId c = state.RegisterWorker(0);
  Finish(state, c, Request(state, c));
  EXPECT_TRUE(state.EpochDone());
  const CoordinatorStats stats = state.Stats();
  EXPECT_EQ(stats.reassignments, 1u);
}

TEST(CoordinatorStateTest,
     GivenAWorkerLostWithASplitOfTheNextEpoch_ThenAnotherMakesItFromItsStart) {
  CoordinatorState state = Make(1, Plan(0, {{0, 1}}));
  const WorkerId a = state.RegisterWorker(0), b = state.RegisterWorker(0);
  const Assignment a0 = Request(state, a);
  ASSERT_TRUE(state.PlanAhead(Plan(1, {{0, 2}})).ok());
  const Assignment b1 = Request(state, b);
  ASSERT_EQ(b1.epoch, 1u);
  ASSERT_TRUE(state.SplitDone(b, 1, 0, 2).ok());
  ASSERT_TRUE(state.Tick(5).empty());
  ASSERT_TRUE(state.Heartbeat(a, 20).ok());
  EXPECT_EQ(state.Tick(20), std::vector<WorkerId>{b}) << "silent past the timeout";
  Finish(state, a, a0);
  ASSERT_TRUE(state.StartEpoch(Plan(1, {{0, 2}})).ok());
  EXPECT_TRUE(state.Holders(0).empty());
  const Assignment again = Request(state, a);
  ASSERT_EQ(again.kind, Kind::kAssign);
  EXPECT_EQ(again.epoch, 1u);
  EXPECT_EQ(again.start_batch, 0u);
  EXPECT_TRUE(state.SplitDone(b, 1, 0, 2).ok()) << "the lost worker's late word is stale";
  EXPECT_EQ(state.Stats().stale_split_done, 1u);
  Finish(state, a, again);
  EXPECT_TRUE(state.EpochDone());
}

TEST(CoordinatorStateTest,
     GivenADrainWhileAWorkerHoldsSplitsAhead_ThenItLeavesWithoutWaitingForThem) {
  CoordinatorState state = Make(1, Plan(0, {{0, 1}}));
  const WorkerId a = state.RegisterWorker(0), b = state.RegisterWorker(0);
  const Assignment a0 = Request(state, a);
  ASSERT_TRUE(state.PlanAhead(Plan(1, {{0, 1}})).ok());
  const Assignment b1 = Request(state, b);
  ASSERT_EQ(b1.epoch, 1u);
  ASSERT_TRUE(state.SplitDone(b, 1, 0, 1).ok());
  ASSERT_TRUE(state.Drain(b).ok());
  EXPECT_TRUE(state.ShouldExit(b)) << "epoch 1 is not read yet: its split went back";
  EXPECT_EQ(Request(state, b).kind, Kind::kExit);
  ASSERT_TRUE(state.WorkerExited(b).ok());
  Finish(state, a, a0);
  ASSERT_TRUE(state.StartEpoch(Plan(1, {{0, 1}})).ok());
  EXPECT_EQ(state.Revoked(0), (std::vector<std::pair<uint64_t, WorkerId>>{{0, b}}))
      << "its batches of the split were on their way: no fault";
  const Assignment again = Request(state, a);
  ASSERT_EQ(again.kind, Kind::kAssign);
  EXPECT_EQ(again.start_batch, 0u);
  Finish(state, a, again);
  EXPECT_TRUE(state.EpochDone());
}

TEST(CoordinatorStateTest, GivenARankResumedOrTheRunSkipped_ThenSplitsMadeAheadAreTakenBack) {
  CoordinatorState state = Make(2, Plan(0, {{0, 2}, {1, 2}}));
  const WorkerId a = state.RegisterWorker(0), b = state.RegisterWorker(0);
  ASSERT_EQ(Request(state, a).epoch, 0u);
  ASSERT_EQ(Request(state, b).epoch, 0u);
  ASSERT_TRUE(state.PlanAhead(Plan(1, {{0, 2}, {1, 2}})).ok());
  const Assignment a1 = Request(state, a), b1 = Request(state, b);
  ASSERT_EQ(a1.epoch, 1u);
  ASSERT_EQ(b1.epoch, 1u);
  ASSERT_NE(a1.rank, b1.rank);
  // Rank 0's trainer restarts in epoch 0: what was made ahead for it went to the
  // old trainer, so it is made again; rank 1's stays with its maker.
  ASSERT_TRUE(state.Resume(0, 0, 0).ok());
  ASSERT_TRUE(state.SplitDone(a, 1, a1.split, 2).ok());
  ASSERT_TRUE(state.SplitDone(b, 1, b1.split, 2).ok());
  EXPECT_EQ(state.Stats().stale_split_done, 1u) << "rank 0's was taken back, rank 1's stands";
  EXPECT_EQ(state.Stats().reassignments, 2u) << "its split of epoch 0 and the one made ahead";
  // A new run's trainers skipping to epoch 3 drop epoch 1's splits with the rest.
  CoordinatorState fresh = Make(1, Plan(0, {{0, 1}}));
  const WorkerId w = fresh.RegisterWorker(0), v = fresh.RegisterWorker(0);
  (void)Request(fresh, w);
  ASSERT_TRUE(fresh.PlanAhead(Plan(1, {{0, 1}})).ok());
  ASSERT_EQ(Request(fresh, v).epoch, 1u);
  ASSERT_TRUE(fresh.SkipToEpoch(Plan(3, {{0, 1}})).ok());
  EXPECT_FALSE(fresh.ahead_epoch().has_value());
  EXPECT_TRUE(fresh.SplitDone(v, 1, 0, 1).ok());
  EXPECT_EQ(fresh.Stats().stale_split_done, 1u);
  EXPECT_FALSE(fresh.ShouldExit(v));
  ASSERT_TRUE(fresh.Drain(v).ok());
  EXPECT_TRUE(fresh.ShouldExit(v)) << "it holds nothing any more";
}

// A model of a one-rank run of kEpochs epochs whose steps come in an order drawn
// from a seed: workers ask for splits and make their batches; the batches, the
// SPLIT_DONEs and the trainer's acknowledgements travel on their own connections
// (each in order, none with another); workers are killed at any step (what they
// sent still arrives, then their connection's end) and replaced; the trainer
// takes batches in plan order, drops copies, and learns a split's count from its
// last batch, the plan, or the coordinator's PLAN while it waits. A worker may
// also be declared lost while it runs on (silent past the timeout), until its
// next request. Once every split of an epoch is handed out, the next epoch's
// are handed out ahead (PlanAhead, as the coordinator does when asked for a
// split); the trainer keeps their batches until it reaches that epoch, which it
// does once the coordinator started it (its PLAN). Whatever the order, every
// epoch must end with every batch delivered once, in order: a split made again
// after the trainer had all of it once left the awaited split without a holder
// (a hang).
class RunModel {
 public:
  explicit RunModel(uint32_t seed) : rng_(seed) {
    std::vector<uint64_t> ids;
    for (uint64_t i = 0; i < kSplits; ++i) ids.push_back(10 + i);
    for (uint64_t id : ids) truth_[id] = 1 + Draw(4);
    for (uint64_t e = 0; e < kEpochs; ++e) {
      std::shuffle(ids.begin(), ids.end(), rng_);
      EpochPlan plan;
      plan.epoch = e;
      for (uint64_t id : ids)
        plan.splits.push_back({id, Draw(2) == 0 ? truth_[id] : kUnknownCount});
      plans_.push_back(plan);
      orders_.push_back(ids);
    }
    auto state = CoordinatorState::Create({1, 2, 10.0});
    EXPECT_TRUE(state.ok());
    state_.emplace(std::move(state).value());
    EXPECT_TRUE(state_->StartEpoch(plans_[0]).ok());
    LearnPlanned();
    for (int i = 0; i < 2; ++i) AddWorker();
  }

  // Splits handed out again from a batch past 0, and of those the ones the trainer
  // already had whole (their remaker sends nothing, only its count); splits
  // handed out ahead of their epoch, and batches the trainer kept ahead.
  uint64_t remade() const { return remade_; }
  uint64_t remade_whole() const { return remade_whole_; }
  uint64_t assigned_ahead() const { return assigned_ahead_; }
  uint64_t kept_ahead() const { return kept_ahead_; }

  // Runs steps until the last epoch ended; false (with why) when it did not
  // within the step bound, or at the first step that went wrong.
  bool Run(std::string* why) {
    for (int step = 0; step < 200000; ++step) {
      if (Done()) return Check(why);
      if (!Step(why)) return false;
    }
    *why = Describe("no end after 200000 steps");
    return false;
  }

 private:
  static constexpr uint64_t kSplits = 8;
  static constexpr uint64_t kEpochs = 3;
  struct Msg {
    enum Kind { kBatch, kDone, kClose } kind;
    uint64_t epoch = 0, split = 0, batch = 0, count = 0;
    bool last = false;
  };
  struct Worker {
    WorkerId id = 0;
    bool alive = true;
    std::deque<Assignment> jobs;
    bool started = false;  // on jobs.front(), at `next`
    uint64_t next = 0;
    std::deque<Msg> to_client, to_coordinator;
  };
  using Key = std::tuple<uint64_t, uint64_t, uint64_t>;  // epoch, split, batch

  uint64_t Draw(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }
  void AddWorker() {
    Worker w;
    w.id = state_->RegisterWorker(now_);
    workers_.push_back(std::move(w));
  }
  Worker* Pick(const std::function<bool(const Worker&)>& ok) {
    std::vector<Worker*> can;
    for (Worker& w : workers_)
      if (ok(w)) can.push_back(&w);
    return can.empty() ? nullptr : can[Draw(can.size())];
  }
  const std::vector<uint64_t>& order() const { return orders_[epoch_]; }
  bool Done() const {
    return epoch_ + 1 == kEpochs && at_ == order().size() && acks_.empty() && state_->EpochDone();
  }
  // The trainer's plan of its epoch: the counts it names.
  void LearnPlanned() {
    known_.clear();
    for (const PlanSplit& s : plans_[epoch_].splits)
      if (s.batch_count != kUnknownCount) known_[s.split] = s.batch_count;
  }

  bool Step(std::string* why) {
    switch (Draw(kills_left_ > 0 ? 16 : 15)) {
      case 0:
      case 1:
        Request();
        return true;
      case 2:
      case 3:
      case 4:
        Make();
        return true;
      case 5:
      case 6:
        return ToClient(why);
      case 7:
      case 8:
        return ToCoordinator(why);
      case 9:
      case 10:
        return Consume(why);
      case 11:
      case 12:
        return Acknowledge(why);
      case 13:
        return Refresh(why);
      case 14:
        return NextEpoch(why);
      default:
        if (Draw(2) == 0) {
          Kill();
        } else {
          Silence();
        }
        return true;
    }
  }

  void Request() {
    Worker* w = Pick([](const Worker& x) { return x.alive; });
    if (w == nullptr) return;
    if (state_->WantsAhead() && state_->epoch() + 1 < kEpochs) {
      EXPECT_TRUE(state_->PlanAhead(plans_[state_->epoch() + 1]).ok());
    }
    auto answer = state_->RequestSplit(w->id);
    if (answer.ok() && answer->kind == Kind::kExit) {  // declared lost: it leaves
      Leave(*w);
      return;
    }
    if (!answer.ok() || answer->kind != Kind::kAssign) return;
    w->jobs.push_back(*answer);
    if (answer->epoch > state_->epoch()) ++assigned_ahead_;
    if (answer->start_batch > 0) ++remade_;
    if (answer->start_batch >= truth_[answer->split]) ++remade_whole_;
  }

  // The worker's next batch of its first split, or its SPLIT_DONE once it made the
  // window (the engine marks the split's real last batch, when in the window).
  void Make() {
    Worker* w = Pick([](const Worker& x) { return x.alive && !x.jobs.empty(); });
    if (w == nullptr) return;
    const Assignment& job = w->jobs.front();
    if (!w->started) {
      w->started = true;
      w->next = job.start_batch;
    }
    const uint64_t count = truth_[job.split];
    if (w->next < std::min(job.end_batch, count)) {
      w->to_client.push_back({Msg::kBatch, job.epoch, job.split, w->next, 0, w->next + 1 == count});
      ++w->next;
      return;
    }
    w->to_coordinator.push_back({Msg::kDone, job.epoch, job.split, 0, count});
    w->jobs.pop_front();
    w->started = false;
  }

  bool ToClient(std::string* why) {
    Worker* w = Pick([](const Worker& x) { return !x.to_client.empty(); });
    if (w == nullptr) return true;
    const Msg m = w->to_client.front();
    w->to_client.pop_front();
    if (m.batch >= truth_[m.split]) {
      *why = Describe("a batch beyond its split's end");
      return false;
    }
    // Its epoch read, a trainer may meet batches of the two after it: the
    // coordinator moved to the next and hands out the one after ahead.
    if (m.epoch > epoch_ + 1 + (at_ == order().size() ? 1 : 0)) {
      *why = Describe("a batch past the look-ahead");
      return false;
    }
    if (m.epoch < epoch_) return true;  // a copy
    if (m.epoch > epoch_) {             // made ahead: kept until the trainer gets there
      ++kept_ahead_;
      buffered_.insert({m.epoch, m.split, m.batch});
      return true;
    }
    if (m.last) known_[m.split] = m.batch + 1;
    const size_t index = std::find(order().begin(), order().end(), m.split) - order().begin();
    if (index < at_ || (index == at_ && m.batch < position_)) return true;  // a copy
    buffered_.insert({m.epoch, m.split, m.batch});
    return true;
  }

  bool ToCoordinator(std::string* why) {
    Worker* w = Pick([](const Worker& x) { return !x.to_coordinator.empty(); });
    if (w == nullptr) return true;
    const Msg m = w->to_coordinator.front();
    w->to_coordinator.pop_front();
    Status st = m.kind == Msg::kClose ? state_->WorkerExited(w->id)
                                      : state_->SplitDone(w->id, m.epoch, m.split, m.count, 0);
    if (!st.ok()) *why = Describe("the coordinator refused an honest worker: " + st.message());
    return st.ok() && Advance();
  }

  bool Consume(std::string* why) {
    if (at_ == order().size()) return true;
    const uint64_t split = order()[at_];
    if (!buffered_.erase({epoch_, split, position_})) return true;
    consumed_.push_back({epoch_, split, position_});
    acks_.push_back({epoch_, split, position_});
    ++position_;
    return Walk(why);
  }

  // The awaited split is whole once its count is known and reached.
  bool Walk(std::string* why) {
    while (at_ < order().size()) {
      auto known = known_.find(order()[at_]);
      if (known == known_.end() || position_ < known->second) return true;
      if (position_ > known->second) {
        *why = Describe("more batches taken than the split's count");
        return false;
      }
      ++at_;
      position_ = 0;
    }
    return true;
  }

  // The trainer's next epoch: once its epoch is read and the coordinator started
  // the next (its PLAN says so). What it kept of that epoch is its own now: a
  // batch it already has, or a copy of one, is dropped as it arrives again.
  bool NextEpoch(std::string* why) {
    if (at_ < order().size() || epoch_ + 1 >= kEpochs || state_->epoch() <= epoch_) return true;
    ++epoch_;
    at_ = 0;
    position_ = 0;
    LearnPlanned();
    for (const auto& [e, split, batch] : buffered_) {
      if (e != epoch_ || batch + 1 != truth_[split]) continue;
      known_[split] = truth_[split];  // its last batch said so
    }
    return Walk(why);
  }

  // The coordinator starts the next epoch once this one is acknowledged whole.
  bool Advance() {
    while (state_->EpochDone() && state_->epoch() + 1 < kEpochs) {
      Status st = state_->StartEpoch(plans_[state_->epoch() + 1]);
      EXPECT_TRUE(st.ok()) << st.message();
      if (!st.ok()) return false;
    }
    return true;
  }

  bool Acknowledge(std::string* why) {
    if (acks_.empty()) return true;
    const auto [epoch, split, batch] = acks_.front();
    acks_.pop_front();
    auto outcome = state_->Ack(0, epoch, split, batch, 1);
    if (!outcome.ok()) *why = Describe("an acknowledgement refused: " + outcome.status().message());
    return outcome.ok() && Advance();
  }

  bool Refresh(std::string* why) {
    if (at_ == order().size() || known_.contains(order()[at_]) || state_->epoch() != epoch_)
      return true;
    const uint64_t count = state_->BatchCount(order()[at_]);
    if (count != kUnknownCount) known_[order()[at_]] = count;
    return Walk(why);
  }

  void Kill() {
    Worker* w = Pick([](const Worker& x) { return x.alive; });
    if (w == nullptr) return;
    --kills_left_;
    Leave(*w);
  }

  void Leave(Worker& w) {
    w.alive = false;
    w.jobs.clear();
    w.to_coordinator.push_back({Msg::kClose});
    AddWorker();  // (may move workers_)
  }

  // A worker silent past the liveness timeout (a loaded machine) is declared lost
  // while it still runs: it goes on with its splits until its next request.
  void Silence() {
    Worker* w = Pick([](const Worker& x) { return x.alive; });
    if (w == nullptr) return;
    --kills_left_;
    now_ += 100;
    for (const Worker& other : workers_)
      if (other.alive && other.id != w->id) (void)state_->Heartbeat(other.id, now_);
    (void)state_->Tick(now_);
  }

  bool Check(std::string* why) {
    std::vector<Key> expected;
    for (uint64_t e = 0; e < kEpochs; ++e)
      for (uint64_t split : orders_[e])
        for (uint64_t b = 0; b < truth_[split]; ++b) expected.push_back({e, split, b});
    if (consumed_ != expected) {
      *why = Describe("the batches came otherwise than once each, in order");
      return false;
    }
    return true;
  }

  std::string Describe(const std::string& what) const {
    std::string text = what + "; trainer at epoch " + std::to_string(epoch_) + " split index " +
                       std::to_string(at_) + " batch " + std::to_string(position_) +
                       "; coordinator at epoch " + std::to_string(state_->epoch()) + ", holders:";
    for (auto [split, worker] : state_->Holders(0))
      text += " " + std::to_string(split) + "@" + std::to_string(worker);
    const CoordinatorStats stats = state_->Stats();
    text += "; pending " + std::to_string(stats.pending_splits) + ", incomplete " +
            std::to_string(stats.incomplete_splits) + "; workers:";
    for (const Worker& w : workers_) {
      text += " " + std::to_string(w.id) + (w.alive ? "" : "(dead)") + " jobs " +
              std::to_string(w.jobs.size());
    }
    return text;
  }

  std::mt19937 rng_;
  std::optional<CoordinatorState> state_;
  std::vector<EpochPlan> plans_;
  std::vector<std::vector<uint64_t>> orders_;
  std::map<uint64_t, uint64_t> truth_, known_;
  std::vector<Worker> workers_;
  int kills_left_ = 3;
  double now_ = 0;
  uint64_t remade_ = 0, remade_whole_ = 0, assigned_ahead_ = 0, kept_ahead_ = 0;
  uint64_t epoch_ = 0;  // the trainer's
  size_t at_ = 0;
  uint64_t position_ = 0;
  std::set<Key> buffered_;
  std::vector<Key> consumed_;
  std::deque<Key> acks_;
};

TEST(CoordinatorStateTest,
     GivenKillsAndDelaysInAnyOrderOverEpochsInFlight_ThenEachEpochEndsWithEachBatchOnceInOrder) {
  uint64_t remade = 0, remade_whole = 0, ahead = 0, kept_ahead = 0;
  for (uint32_t seed = 1; seed <= 2000; ++seed) {
    RunModel model(seed);
    std::string why;
    ASSERT_TRUE(model.Run(&why)) << "seed " << seed << ": " << why;
    remade += model.remade();
    remade_whole += model.remade_whole();
    ahead += model.assigned_ahead();
    kept_ahead += model.kept_ahead();
  }
  // The orders drawn reach the windows in question, many times over.
  EXPECT_GT(remade, 100u);
  EXPECT_GT(remade_whole, 20u);
  EXPECT_GT(ahead, 1000u);
  EXPECT_GT(kept_ahead, 1000u);
  std::printf(
      "splits made again from a later batch: %llu, of which already whole: %llu; splits handed "
      "out ahead of their epoch: %llu, batches kept ahead by the trainer: %llu\n",
      static_cast<unsigned long long>(remade), static_cast<unsigned long long>(remade_whole),
      static_cast<unsigned long long>(ahead), static_cast<unsigned long long>(kept_ahead));
}

}  // namespace
}  // namespace gm
