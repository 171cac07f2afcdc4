// Tests of dataplane/reorder.h: the client's re-order buffer, on hand-made batches.
#include "dataplane/reorder.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace gm {
namespace {

// A batch of `keys` with `bytes` bytes of data. A sample's index is its key's
// hash, so that distinct keys have distinct indices, as from a real source.
Batch MakeBatch(uint64_t epoch, uint64_t split, uint64_t split_batch, std::vector<std::string> keys,
                size_t bytes = 16) {
  Batch b;
  b.epoch = epoch;
  b.split = split;
  b.split_batch = split_batch;
  for (const std::string& key : keys) b.sample_indices.push_back(std::hash<std::string>{}(key));
  b.keys = std::move(keys);
  b.data.bytes.assign(bytes, 1);
  b.labels.bytes.assign(8 * b.keys.size(), 0);
  return b;
}

// Tells `buffer` who holds which split of `epoch` (split -> source), as the
// client does with each view of the coordinator's.
void Hold(ReorderBuffer& buffer, uint64_t epoch, const std::map<uint64_t, uint64_t>& holders) {
  std::set<uint64_t> listed;
  for (const auto& [split, source] : holders) listed.insert(source);
  EXPECT_TRUE(buffer.SetHolders(epoch, holders, listed, buffer.AskView()).empty());
}

// Two splits of two batches each, one rank.
EpochPlan TwoSplits(uint64_t epoch) { return EpochPlan{epoch, {{0, 2}, {1, 2}}}; }

TEST(ReorderTest, GivenTheNextEpochsBatchWhileTheCurrentIsRead_ThenItWaitsUnverifiedForItsView) {
  // Epochs in flight: a worker makes a split of epoch 1 while this rank reads
  // epoch 0. Its batch is kept, counted as its source's unverified, and taken
  // only after epoch 1 started and a view of epoch 1 named its source.
  ReorderBuffer buffer;
  ASSERT_TRUE(buffer.StartEpoch(TwoSplits(0), 1, 0, 0).ok());
  std::string why;
  ASSERT_EQ(buffer.Offer(MakeBatch(1, 0, 0, {"a"}), 7, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered)
      << why;
  EXPECT_EQ(buffer.held_from(7).batches, 1u);
  Hold(buffer, 0, {{0, 7}, {1, 7}});  // epoch 0's view verifies nothing of epoch 1
  EXPECT_EQ(buffer.held_from(7).batches, 1u);
  // Two epochs ahead is past the look-ahead: no honest worker sends it.
  EXPECT_EQ(buffer.Offer(MakeBatch(2, 0, 0, {"b"}), 7, std::nullopt, &why),
            ReorderBuffer::Outcome::kRejected);
  EXPECT_NE(why.find("beyond the look-ahead"), std::string::npos) << why;
  for (uint64_t split : {0, 1}) {
    for (uint64_t b : {0, 1}) {
      ASSERT_EQ(buffer.Offer(MakeBatch(0, split, b, {"k" + std::to_string(split * 2 + b)}), 7,
                             std::nullopt, &why),
                ReorderBuffer::Outcome::kBuffered)
          << why;
    }
  }
  Hold(buffer, 0, {{0, 7}, {1, 7}});
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(buffer.TakeNext().has_value());
  ASSERT_TRUE(buffer.done());
  ASSERT_TRUE(buffer.StartEpoch(TwoSplits(1), 1, 0, 0).ok());
  EXPECT_FALSE(buffer.TakeNext().has_value()) << "not verified yet";
  EXPECT_TRUE(buffer.AwaitsView()) << "the new epoch's batch asks for a view at once";
  Hold(buffer, 1, {{0, 7}});
  EXPECT_TRUE(buffer.TakeNext().has_value());
}

TEST(ReorderTest, GivenAViewNamingNoHolderOfTheAwaitedSplit_ThenItIsOrphanedUntilItsBatchComes) {
  ReorderBuffer buffer;
  ASSERT_TRUE(buffer.StartEpoch(TwoSplits(0), 1, 0, 0).ok());
  EXPECT_FALSE(buffer.AwaitedOrphaned()) << "no view yet";
  Hold(buffer, 0, {{0, 1}});
  EXPECT_FALSE(buffer.AwaitedOrphaned()) << "split 0 has its holder";
  Hold(buffer, 0, {{1, 2}});
  EXPECT_TRUE(buffer.AwaitedOrphaned()) << "split 0 is queued at the coordinator";
  std::string why;
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a"}), 3, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  EXPECT_FALSE(buffer.AwaitedOrphaned()) << "its batch came; the next view checks it";
}

TEST(ReorderTest, GivenTheNextEpochsBatchFromANonHolder_ThenTheNextEpochsViewDropsIt) {
  ReorderBuffer buffer;
  ASSERT_TRUE(buffer.StartEpoch(EpochPlan{0, {{0, 1}}}, 1, 0, 0).ok());
  std::string why;
  ASSERT_EQ(buffer.Offer(MakeBatch(1, 0, 0, {"x"}), 9, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  Hold(buffer, 0, {{0, 1}});
  ASSERT_TRUE(buffer.TakeNext().has_value());
  ASSERT_TRUE(buffer.StartEpoch(EpochPlan{1, {{0, 1}}}, 1, 0, 0).ok());
  const uint64_t view = buffer.AskView();
  const std::set<uint64_t> liars = buffer.SetHolders(1, {{0, 1}}, {1, 9}, view);
  EXPECT_EQ(liars, std::set<uint64_t>{9}) << "it sent a split it never held";
  EXPECT_FALSE(buffer.TakeNext().has_value());
  EXPECT_EQ(buffer.held_from(9).batches, 0u);
}

TEST(ReorderTest, GivenTheCurrentEpochDone_ThenTheNextEpochsBatchesAreKept) {
  ReorderBuffer buffer;
  ASSERT_TRUE(buffer.StartEpoch(EpochPlan{0, {{0, 1}}}, 1, 0, 0).ok());
  std::string why;
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  Hold(buffer, 0, {{0, 1}});
  ASSERT_TRUE(buffer.TakeNext().has_value());
  ASSERT_TRUE(buffer.done());
  EXPECT_EQ(buffer.Offer(MakeBatch(1, 0, 0, {"a"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered)
      << why;
  ASSERT_TRUE(buffer.StartEpoch(EpochPlan{1, {{0, 1}}}, 1, 0, 0).ok());
  Hold(buffer, 1, {{0, 1}});
  EXPECT_TRUE(buffer.TakeNext().has_value());
}

TEST(ReorderTest, GivenRepeatedSampleKeys_ThenTheBatchIsRejected) {
  ReorderBuffer buffer;
  ASSERT_TRUE(buffer.StartEpoch(TwoSplits(0), 1, 0, 0).ok());
  std::string why;
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a", "a"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kRejected);
  EXPECT_NE(why.find("repeats sample \"a\""), std::string::npos) << why;
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a", "b"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered)
      << why;
  // A later batch of the same split that repeats one of its samples.
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 0, 1, {"c", "b"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kRejected);
  EXPECT_NE(why.find("of an earlier batch of the split"), std::string::npos) << why;
  // Another split may hold the same key only if it is another sample: keys are
  // checked within a split, where a repeat is always a copy.
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 1, 0, {"d"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  // A copy from the same source is dropped (it is not a repeat within the split).
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a", "b"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kDropped);
}

TEST(ReorderTest, GivenASourceDisowned_ThenTheCountItToldGivesWayToTheNextWorkers) {
  ReorderBuffer buffer;
  ASSERT_TRUE(buffer.StartEpoch(EpochPlan{0, {{0, kUnknownCount}}}, 1, 0, 0).ok());
  std::string why;
  // Source 1 says split 0 has 3 batches, sends batch 0, then nothing more.
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a"}), 1, 3, &why), ReorderBuffer::Outcome::kBuffered)
      << why;
  Hold(buffer, 0, {{0, 1}});
  ASSERT_TRUE(buffer.TakeNext().has_value());
  // Before it is disowned, the next worker's count contradicts it.
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 0, 1, {"b"}), 2, 2, &why), ReorderBuffer::Outcome::kRejected);
  EXPECT_NE(why.find("was known to have 3 batches, now told 2"), std::string::npos) << why;
  buffer.Disown(1);
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 0, 1, {"b"}), 2, 2, &why), ReorderBuffer::Outcome::kBuffered)
      << why;
  Hold(buffer, 0, {{0, 2}});
  ASSERT_TRUE(buffer.TakeNext().has_value());
  EXPECT_TRUE(buffer.done());
}

TEST(ReorderTest,
     GivenAHolderDisownedAfterSendingASplitWithoutEnd_ThenTheNextHoldersCountEndsTheSplit) {
  ReorderBuffer buffer;
  ASSERT_TRUE(buffer.StartEpoch(EpochPlan{0, {{0, kUnknownCount}}}, 1, 0, 0).ok());
  Hold(buffer, 0, {{0, 1}});
  std::string why;
  // Source 1 holds split 0 and sends batches 0 to 5, never the split's end.
  for (uint64_t b = 0; b < 6; ++b) {
    ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, b, {"s" + std::to_string(b)}), 1, std::nullopt, &why),
              ReorderBuffer::Outcome::kBuffered)
        << why;
  }
  ASSERT_TRUE(buffer.TakeNext().has_value());
  // Reported (it stalled elsewhere): what it sent is its word only, not read...
  buffer.Disown(1);
  EXPECT_FALSE(buffer.TakeNext().has_value());
  EXPECT_EQ(buffer.held_from(1).batches, 5u);
  // ... even by a view asked before the coordinator dropped it ...
  Hold(buffer, 0, {{0, 1}});
  EXPECT_FALSE(buffer.TakeNext().has_value());
  // ... and what it sends later is dropped.
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 0, 6, {"s6"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kDropped);
  // The split's next holder makes it from where the rank stands, before the
  // client's view names it: its count (2) ends the split there, and its copy
  // waits aside until the view ...
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 1, {"s1"}), 2, 2, &why), ReorderBuffer::Outcome::kAside)
      << why;
  EXPECT_EQ(buffer.kept_from(1).batches, 1u);
  EXPECT_FALSE(buffer.TakeNext().has_value());
  // ... replaces source 1's batch.
  Hold(buffer, 0, {{0, 2}});
  auto next = buffer.TakeNext();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->second, 2u);
  EXPECT_EQ(next->first.keys, std::vector<std::string>{"s1"});
  EXPECT_TRUE(buffer.done());
  EXPECT_EQ(buffer.kept().batches, 0u);
}

TEST(ReorderTest, GivenASourceSkippingAhead_ThenItsBatchIsRejected) {
  ReorderBuffer buffer;
  ASSERT_TRUE(
      buffer.StartEpoch(EpochPlan{0, {{0, kUnknownCount}, {1, kUnknownCount}}}, 1, 0, 0).ok());
  std::string why;
  // A split nobody started must begin at batch 0 ...
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 1, 5, {"x"}), 3, std::nullopt, &why),
            ReorderBuffer::Outcome::kRejected);
  EXPECT_NE(why.find("first, where the rank stands at batch 0"), std::string::npos) << why;
  // ... and go on without a gap.
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 1, 0, {"x"}), 3, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 1, 2, {"y"}), 3, std::nullopt, &why),
            ReorderBuffer::Outcome::kRejected);
  EXPECT_NE(why.find("after batch 0"), std::string::npos) << why;
  // Sending a batch again is no gap.
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 1, 0, {"x"}), 3, std::nullopt, &why),
            ReorderBuffer::Outcome::kDropped);
  // A worker that took split 1 over sends what another sent first (copies),
  // then goes on from there.
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 1, 0, {"x"}), 4, std::nullopt, &why),
            ReorderBuffer::Outcome::kAside);
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 1, 1, {"y"}), 4, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered)
      << why;
  // Where the rank stands inside the current split, a worker taking it over
  // starts there (or before).
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  Hold(buffer, 0, {{0, 1}});
  ASSERT_TRUE(buffer.TakeNext().has_value());
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 0, 1, {"b"}), 2, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered)
      << why;
}

TEST(ReorderTest, GivenTheHolders_ThenBatchesOfSplitsTheirSourceNeverHeldAreDroppedAndNamed) {
  ReorderBuffer buffer;
  ASSERT_TRUE(buffer.StartEpoch(EpochPlan{0, {{0, 1}, {1, 2}}}, 1, 0, 0).ok());
  std::string why;
  // Source 9 sends split 1 (held by source 2) before anyone asked who holds what.
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 1, 0, {"forged"}, 1000), 9, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  EXPECT_EQ(buffer.held_from(9).bytes, 1008u);
  // The holder's real batch arrives as a copy: kept aside, not dropped.
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 1, 0, {"real"}), 2, std::nullopt, &why),
            ReorderBuffer::Outcome::kAside);
  // And a batch of split 0 from its holder, source 1.
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  const uint64_t view = buffer.AskView();
  // Source 9 sends again after the question: not proven yet.
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 1, 1, {"forged2"}), 9, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  const std::set<uint64_t> liars = buffer.SetHolders(0, {{0, 1}, {1, 2}}, {1, 2, 9}, view);
  EXPECT_EQ(liars, std::set<uint64_t>{9});
  EXPECT_EQ(buffer.held_from(1).batches, 0u);  // verified: no longer counted
  EXPECT_EQ(buffer.held_from(2).batches, 0u);
  EXPECT_EQ(buffer.held_from(9).batches, 1u);  // forged2 waits for the next view
  ASSERT_TRUE(buffer.TakeNext().has_value());
  auto second = buffer.TakeNext();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->first.keys, std::vector<std::string>{"real"});
  EXPECT_EQ(second->second, 2u);
}

TEST(ReorderTest, GivenBatchesFromTwoSources_ThenWhatEachHoldsIsCountedUntilTaken) {
  ReorderBuffer buffer;
  ASSERT_TRUE(buffer.StartEpoch(TwoSplits(0), 1, 0, 0).ok());
  std::string why;
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 1, 0, {"x"}, 100), 2, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 1, 1, {"y"}, 100), 2, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a"}, 10), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  EXPECT_EQ(buffer.held_from(2).batches, 2u);
  EXPECT_EQ(buffer.held_from(2).bytes, 216u);  // data + one 8-byte label each
  EXPECT_EQ(buffer.held_from(1).batches, 1u);
  EXPECT_EQ(buffer.buffered_bytes(), 234u);
  Hold(buffer, 0, {{0, 1}, {1, 2}});
  auto taken = buffer.TakeNext();
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->second, 1u);
  EXPECT_EQ(buffer.held_from(1).batches, 0u);
  EXPECT_EQ(buffer.buffered_bytes(), 216u);
  EXPECT_EQ(buffer.held_from(3).batches, 0u);
}

TEST(ReorderTest, GivenVerifiedBatches_ThenTheyCountInWhatIsKeptButNotInWhatIsHeld) {
  ReorderBuffer buffer;
  ASSERT_TRUE(buffer.StartEpoch(TwoSplits(0), 1, 0, 0).ok());
  Hold(buffer, 0, {{0, 1}, {1, 2}});
  std::string why;
  // Source 2 holds split 1, which is not awaited yet: its batches are verified
  // at once, so they are no longer "held" but still kept.
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 1, 0, {"x"}, 100), 2, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 1, 1, {"y"}, 100), 2, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  // Source 9 holds nothing: its batch is held (not verified) and kept.
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"f"}, 50), 9, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  EXPECT_EQ(buffer.held_from(2).batches, 0u);
  EXPECT_EQ(buffer.kept_from(2).batches, 2u);
  EXPECT_EQ(buffer.kept_from(2).bytes, 216u);
  EXPECT_EQ(buffer.held_from(9).bytes, 58u);
  EXPECT_EQ(buffer.kept_from(9).bytes, 58u);
  EXPECT_EQ(buffer.kept().batches, 3u);
  EXPECT_EQ(buffer.kept().bytes, 274u);
  // The holder's copy of split 0 batch 0 replaces source 9's.
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a"}, 10), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kDropped);
  EXPECT_EQ(buffer.kept_from(9).batches, 0u);
  EXPECT_EQ(buffer.kept_from(1).bytes, 18u);
  EXPECT_EQ(buffer.kept().bytes, 234u);
  ASSERT_TRUE(buffer.TakeNext().has_value());
  EXPECT_EQ(buffer.kept().batches, 2u);
  EXPECT_EQ(buffer.kept().bytes, 216u);
}

TEST(ReorderTest, GivenASampleIndexTwiceInASplit_ThenTheBatchIsRejected) {
  ReorderBuffer buffer;
  ASSERT_TRUE(buffer.StartEpoch(TwoSplits(0), 1, 0, 0).ok());
  std::string why;
  Batch twice = MakeBatch(0, 0, 0, {"a", "b"});
  twice.sample_indices = {5, 5};  // two names for one sample
  EXPECT_EQ(buffer.Offer(twice, 1, std::nullopt, &why), ReorderBuffer::Outcome::kRejected);
  EXPECT_NE(why.find("repeats sample index 5"), std::string::npos) << why;
  Batch first = MakeBatch(0, 0, 0, {"a"});
  first.sample_indices = {5};
  ASSERT_EQ(buffer.Offer(first, 1, std::nullopt, &why), ReorderBuffer::Outcome::kBuffered);
  Batch again = MakeBatch(0, 0, 1, {"b"});
  again.sample_indices = {5};
  EXPECT_EQ(buffer.Offer(again, 1, std::nullopt, &why), ReorderBuffer::Outcome::kRejected);
  EXPECT_NE(why.find("sample index 5 of an earlier batch of the split"), std::string::npos) << why;
  // The next split may hold index 5 (the layout decides what a split holds).
  Batch other = MakeBatch(0, 1, 0, {"c"});
  other.sample_indices = {5};
  EXPECT_EQ(buffer.Offer(other, 2, std::nullopt, &why), ReorderBuffer::Outcome::kBuffered) << why;
}

TEST(ReorderTest, GivenTheHolders_ThenTheAwaitedSplitsHolderIsKnownUntilTheEpochMoves) {
  ReorderBuffer buffer;
  ASSERT_TRUE(buffer.StartEpoch(TwoSplits(0), 1, 0, 0).ok());
  EXPECT_EQ(buffer.AwaitedHolder(), std::nullopt);  // nobody asked yet
  (void)buffer.SetHolders(0, {{0, 7}, {1, 8}}, {7, 8}, buffer.AskView());
  EXPECT_EQ(buffer.AwaitedHolder(), std::optional<uint64_t>(7));
  std::string why;
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a"}), 7, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 1, {"b"}), 7, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  ASSERT_TRUE(buffer.TakeNext().has_value());
  ASSERT_TRUE(buffer.TakeNext().has_value());
  EXPECT_EQ(buffer.AwaitedHolder(), std::optional<uint64_t>(8));  // split 1 now
  // A view that no longer lists split 1 (its holder was lost): no holder.
  (void)buffer.SetHolders(0, {}, {7}, buffer.AskView());
  EXPECT_EQ(buffer.AwaitedHolder(), std::nullopt);
  // A view of the epoch is not one of the next epoch's.
  (void)buffer.SetHolders(0, {{1, 8}}, {8}, buffer.AskView());
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 1, 0, {"c"}), 8, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 1, 1, {"d"}), 8, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  ASSERT_TRUE(buffer.TakeNext().has_value());
  ASSERT_TRUE(buffer.TakeNext().has_value());
  ASSERT_TRUE(buffer.StartEpoch(TwoSplits(1), 1, 0, 0).ok());
  EXPECT_EQ(buffer.AwaitedHolder(), std::nullopt);
}

TEST(ReorderTest, GivenTheBatchSize_ThenOnlyASplitsLastBatchMayHoldFewerSamples) {
  ReorderBuffer buffer;
  buffer.set_batch_size(2);
  ASSERT_TRUE(buffer.StartEpoch(EpochPlan{0, {{0, kUnknownCount}, {1, 2}}}, 1, 0, 0).ok());
  std::string why;
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kRejected);
  EXPECT_NE(why.find("holds 0 samples: a worker sends no empty batch"), std::string::npos) << why;
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a", "b", "c"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kRejected);
  EXPECT_NE(why.find("more than the run's batch size 2"), std::string::npos) << why;
  // One sample in a batch that is not the split's last: the rest of it was cut.
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kRejected);
  EXPECT_NE(why.find("only a split's last batch holds fewer"), std::string::npos) << why;
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 1, 0, {"x"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kRejected);  // the plan says split 1 has 2
  // The last: said so with its count, or by the plan's count.
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a"}), 1, uint64_t{1}, &why),
            ReorderBuffer::Outcome::kBuffered);
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 1, 0, {"x", "y"}), 2, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 1, 1, {"z"}), 2, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered)
      << why;
  Hold(buffer, 0, {{0, 1}, {1, 2}});
  ASSERT_TRUE(buffer.TakeNext().has_value());
  // Split 0 was read: a copy from a worker that made it again is dropped, even
  // one that contradicts the count the first worker sent.
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 0, 1, {"b", "c"}), 3, uint64_t{2}, &why),
            ReorderBuffer::Outcome::kDropped);
}

TEST(ReorderTest, GivenTheAwaitedBatchFromASourceNotKnownToHoldItsSplit_ThenItWaitsForAView) {
  ReorderBuffer buffer;
  ASSERT_TRUE(buffer.StartEpoch(TwoSplits(0), 1, 0, 0).ok());
  std::string why;
  // Source 9 sends the awaited batch of split 0, which source 1 holds.
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"forged"}), 9, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  EXPECT_FALSE(buffer.TakeNext().has_value());  // not before a view says who holds it
  EXPECT_TRUE(buffer.AwaitsView());
  const uint64_t view = buffer.AskView();
  EXPECT_FALSE(buffer.AwaitsView());  // asked: no need to ask again
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"real"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kAside);
  EXPECT_EQ(buffer.SetHolders(0, {{0, 1}}, {1, 9}, view), std::set<uint64_t>{9});
  auto taken = buffer.TakeNext();
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->first.keys, std::vector<std::string>{"real"});
  EXPECT_EQ(taken->second, 1u);
  // Once the holders are known, the holder's batches go at once.
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 1, {"b"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  EXPECT_FALSE(buffer.AwaitsView());
  EXPECT_TRUE(buffer.TakeNext().has_value());
}

// A restarted trainer: the coordinator took split 0 back from source 9 and gave
// it to 1; 9's batch of it was on its way. Dropped, and 9 is no liar.
TEST(ReorderTest, GivenABatchOfASplitRevokedFromItsSource_ThenItIsDroppedAndTheSourceIsNoLiar) {
  ReorderBuffer buffer;
  ASSERT_TRUE(buffer.StartEpoch(TwoSplits(0), 1, 0, 0).ok());
  std::string why;
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"old"}), 9, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  const uint64_t view = buffer.AskView();
  EXPECT_TRUE(buffer.SetHolders(0, {{0, 1}}, {1, 9}, view, {{0, 9}}).empty());
  EXPECT_FALSE(buffer.TakeNext().has_value()) << "9's batch is not the holder's";
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"old"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered)
      << why;
  auto taken = buffer.TakeNext();
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->second, 1u);
  // Revoked for split 0 only: a batch of split 1 that 9 never held still makes it a liar.
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 1, 0, {"x"}), 9, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  EXPECT_EQ(buffer.SetHolders(0, {{1, 2}}, {2, 9}, buffer.AskView(), {{0, 9}}),
            std::set<uint64_t>{9});
}

TEST(ReorderTest, GivenALiarThatSentTheRealSampleKeysFirst_ThenTheHoldersBatchIsNoRepeat) {
  ReorderBuffer buffer;
  ASSERT_TRUE(buffer.StartEpoch(TwoSplits(0), 1, 0, 0).ok());
  std::string why;
  // Source 9 sends batch 0 of split 0 with the real keys before its holder ...
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a", "b"}), 9, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  const uint64_t view = buffer.AskView();
  // ... and split 1's while the coordinator is asked (not proven by that view).
  ASSERT_EQ(buffer.Offer(MakeBatch(0, 1, 0, {"x", "y"}), 9, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered);
  EXPECT_EQ(buffer.SetHolders(0, {{0, 1}, {1, 2}}, {1, 2, 9}, view), std::set<uint64_t>{9});
  // Split 0's batch went with the view; the holder's, with the same keys, is no repeat.
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 0, 0, {"a", "b"}), 1, std::nullopt, &why),
            ReorderBuffer::Outcome::kBuffered)
      << why;
  // Split 1's holder replaces the liar's batch with its copy; its next batch may
  // still not repeat the keys.
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 1, 0, {"x", "y"}), 2, std::nullopt, &why),
            ReorderBuffer::Outcome::kDropped);  // the liar's, replaced
  EXPECT_EQ(buffer.Offer(MakeBatch(0, 1, 1, {"y"}), 2, std::nullopt, &why),
            ReorderBuffer::Outcome::kRejected);
  EXPECT_NE(why.find("repeats sample \"y\""), std::string::npos) << why;
  auto first = buffer.TakeNext();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->second, 1u);
}

}  // namespace
}  // namespace gm
