// Tests of epoch plan layout and the client-side rank sequence.
#include "dataplane/batch_order.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace gm {
namespace {

EpochPlan Plan(uint64_t epoch, const std::vector<std::pair<uint64_t, uint64_t>>& splits) {
  EpochPlan plan;
  plan.epoch = epoch;
  for (auto [split, count] : splits) plan.splits.push_back({split, count});
  return plan;
}

TEST(LayOutPlanTest, GivenKnownCountsWhenLaidOverTwoRanksThenShareIsTheSmallerTotal) {
  // Rank 0: splits 10 (4) and 12 (3) = 7 batches; rank 1: 11 (2) and 13 (2) = 4.
  auto layout = LayOutPlan(Plan(3, {{10, 4}, {11, 2}, {12, 3}, {13, 2}}), 2);
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  EXPECT_EQ(layout->share, 4u);
  EXPECT_EQ(layout->slots[0].rank, 0);
  EXPECT_EQ(layout->slots[1].rank, 1);
  EXPECT_EQ(layout->slots[0].deliver, 4u);
  EXPECT_EQ(layout->slots[2].offset, 4u);
  EXPECT_EQ(layout->slots[2].deliver, 0u);  // the cut falls before split 12
  EXPECT_EQ(layout->slots[3].deliver, 2u);
  EXPECT_EQ(layout->rank_slots[1], (std::vector<size_t>{1, 3}));
  EXPECT_EQ(*layout->Find(13), 3u);
  EXPECT_NE(layout->Find(99).status().message().find("split 99"), std::string::npos);
}

TEST(LayOutPlanTest, GivenBadPlansWhenLaidOutThenErrorsNameTheProblem) {
  auto twice = LayOutPlan(Plan(1, {{5, 1}, {5, 2}}), 1);
  EXPECT_NE(twice.status().message().find("appears twice"), std::string::npos);
  auto unknown = LayOutPlan(Plan(1, {{5, 1}, {6, kUnknownCount}}), 2);
  EXPECT_NE(unknown.status().message().find("split 6 has no batch count"), std::string::npos);
  EXPECT_FALSE(LayOutPlan(Plan(1, {{5, kMaxSplitBatches + 1}}), 1).ok());
  EXPECT_FALSE(LayOutPlan(Plan(1, {{5, 1}}), 0).ok());
  EXPECT_TRUE(LayOutPlan(Plan(1, {{5, 1}, {6, kUnknownCount}}), 1).ok());
}

TEST(RankSequenceTest, GivenArrivalsOutOfOrderWhenClassifiedThenNextFutureDuplicateBeyond) {
  // Rank 1 of 2: split 11 (3 batches) then 13 (5, cut to 1: rank 0 has 4 batches).
  auto seq = RankSequence::Create(Plan(0, {{10, 2}, {11, 3}, {12, 2}, {13, 5}}), 2, 1);
  ASSERT_TRUE(seq.ok()) << seq.status().message();
  EXPECT_EQ(seq->share(), 4u);
  EXPECT_EQ(*seq->Classify(11, 0), Arrival::kNext);
  EXPECT_EQ(*seq->Classify(13, 0), Arrival::kFuture);
  EXPECT_EQ(*seq->Classify(13, 1), Arrival::kBeyondShare);
  EXPECT_EQ(*seq->Position(13, 0), 3u);
  seq->Advance();
  EXPECT_EQ(*seq->Classify(11, 0), Arrival::kDuplicate);
  EXPECT_EQ(seq->position(), 1u);
  EXPECT_LT(*seq->Key(11, 2), *seq->Key(13, 0));
  seq->Advance();
  seq->Advance();
  EXPECT_EQ(seq->next_split(), 13u);
  EXPECT_EQ(*seq->Classify(13, 0), Arrival::kNext);
  seq->Advance();
  EXPECT_TRUE(seq->done());
  EXPECT_EQ(seq->position(), 4u);
}

TEST(RankSequenceTest, GivenBatchesOfAnotherRankOrPastTheSplitThenClassifyFails) {
  auto seq = RankSequence::Create(Plan(0, {{10, 2}, {11, 3}}), 2, 0);
  ASSERT_TRUE(seq.ok());
  EXPECT_NE(seq->Classify(11, 0).status().message().find("belongs to rank 1"), std::string::npos);
  EXPECT_FALSE(seq->Classify(10, 2).ok());
  EXPECT_FALSE(seq->Classify(77, 0).ok());
  EXPECT_FALSE(RankSequence::Create(Plan(0, {{10, 2}}), 2, 2).ok());
}

TEST(RankSequenceTest, GivenUnknownCountsWhenCountsAreLearnedThenTheCursorMovesOn) {
  auto seq = RankSequence::Create(Plan(0, {{7, kUnknownCount}, {8, kUnknownCount}}), 1, 0);
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(*seq->Classify(7, 0), Arrival::kNext);
  EXPECT_EQ(*seq->Classify(8, 0), Arrival::kFuture);
  seq->Advance();
  seq->Advance();
  EXPECT_EQ(*seq->Classify(8, 0), Arrival::kFuture);  // split 7 may have more batches
  EXPECT_FALSE(seq->Position(8, 0).ok());
  EXPECT_FALSE(seq->SetBatchCount(7, 1).ok());  // two were consumed already
  ASSERT_TRUE(seq->SetBatchCount(7, 2).ok());
  EXPECT_EQ(*seq->Classify(8, 0), Arrival::kNext);
  EXPECT_EQ(*seq->Position(8, 0), 2u);
  EXPECT_FALSE(seq->SetBatchCount(7, 3).ok());
  seq->Advance();
  ASSERT_TRUE(seq->SetBatchCount(8, 1).ok());
  EXPECT_TRUE(seq->done());
  EXPECT_EQ(seq->position(), 3u);
}

TEST(RankSequenceTest, GivenALearnedCountForgotten_ThenAnotherCountMayBeLearned) {
  auto seq = RankSequence::Create(Plan(0, {{7, kUnknownCount}, {8, 2}}), 1, 0);
  ASSERT_TRUE(seq.ok());
  ASSERT_TRUE(seq->SetBatchCount(7, 3).ok());  // told by a worker that then stalls
  seq->Advance();
  EXPECT_FALSE(seq->SetBatchCount(7, 2).ok());  // contradicts the count told
  ASSERT_TRUE(seq->ForgetBatchCount(7));
  EXPECT_EQ(*seq->Classify(8, 0), Arrival::kFuture);  // split 7's count is open again
  ASSERT_TRUE(seq->SetBatchCount(7, 2).ok());         // the next worker's count
  seq->Advance();
  EXPECT_EQ(*seq->Classify(8, 0), Arrival::kNext);
  EXPECT_FALSE(seq->ForgetBatchCount(7));  // passed: nothing to undo
  EXPECT_FALSE(seq->ForgetBatchCount(8));  // planned, not learned
}

TEST(RankSequenceTest, GivenAStartPositionWhenCreatedThenEarlierBatchesAreDuplicates) {
  auto plan = Plan(0, {{1, 3}, {2, 0}, {3, 4}});
  auto seq = RankSequence::Create(plan, 1, 0, 3);
  ASSERT_TRUE(seq.ok()) << seq.status().message();
  EXPECT_EQ(seq->position(), 3u);
  EXPECT_EQ(*seq->Classify(1, 2), Arrival::kDuplicate);
  EXPECT_EQ(*seq->Classify(3, 0), Arrival::kNext);
  auto middle = RankSequence::Create(plan, 1, 0, 5);
  ASSERT_TRUE(middle.ok());
  EXPECT_EQ(*middle->Classify(3, 2), Arrival::kNext);
  EXPECT_TRUE(RankSequence::Create(plan, 1, 0, 7)->done());
  EXPECT_FALSE(RankSequence::Create(plan, 1, 0, 8).ok());
  EXPECT_FALSE(RankSequence::Create(Plan(0, {{1, kUnknownCount}}), 1, 0, 1).ok());
}

TEST(RankSequenceTest, GivenAStartKeyWhenCountsAreUnknownThenTheSequenceStartsThere) {
  // A new run knows no count; the checkpoint says position 5 is batch 1 of split 3.
  const uint64_t u = kUnknownCount;
  auto plan = Plan(0, {{1, u}, {2, u}, {3, u}});
  auto seq = RankSequence::CreateAt(plan, 1, 0, 5, {2, 1});
  ASSERT_TRUE(seq.ok()) << seq.status().message();
  EXPECT_EQ(seq->position(), 5u);
  EXPECT_EQ(*seq->Classify(1, 0), Arrival::kDuplicate);  // an earlier run delivered it
  EXPECT_EQ(*seq->Classify(3, 0), Arrival::kDuplicate);
  EXPECT_EQ(*seq->Classify(3, 1), Arrival::kNext);
  seq->Advance();
  EXPECT_EQ(seq->position(), 6u);
  ASSERT_TRUE(seq->SetBatchCount(3, 2).ok());
  EXPECT_TRUE(seq->done());
  // Past the share, and a key that contradicts known counts, are refused.
  EXPECT_FALSE(RankSequence::CreateAt(plan, 1, 0, 5, {3, 1}).ok());
  EXPECT_TRUE(RankSequence::CreateAt(plan, 1, 0, 9, {3, 0})->done());
  EXPECT_FALSE(RankSequence::CreateAt(plan, 1, 0, 0, {0, 1}).ok());  // batch beyond the position
  auto known = Plan(0, {{1, 3}, {2, 2}});
  EXPECT_TRUE(RankSequence::CreateAt(known, 1, 0, 4, {1, 1}).ok());
  auto wrong = RankSequence::CreateAt(known, 1, 0, 5, {1, 1});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("is batch 4 of the rank's share"), std::string::npos)
      << wrong.status().message();
  EXPECT_FALSE(RankSequence::CreateAt(known, 1, 0, 4, {0, 4}).ok());  // split 1 has 3
}

TEST(RankSequenceTest, GivenFewerSplitsThanRanksThenEveryShareIsEmpty) {
  auto seq = RankSequence::Create(Plan(0, {{1, 3}}), 2, 0);
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(seq->share(), 0u);
  EXPECT_TRUE(seq->done());
  EXPECT_EQ(*seq->Classify(1, 0), Arrival::kBeyondShare);
}

}  // namespace
}  // namespace gm
