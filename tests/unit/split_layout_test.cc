// SplitLayout and the pipeline's "shuffle" key: which layout a source gets, what
// each split of an epoch holds, and what the user is told.
#include "worker/split_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "worker/pipeline.h"

namespace gm {
namespace {

// A sequential source of `shards` splits of `per_shard` samples; sample index =
// shard * 1000 + position. Shard `broken` (if any) fails after its samples.
class ShardSource : public Source {
 public:
  ShardSource(size_t shards, uint64_t per_shard, size_t broken = SIZE_MAX)
      : per_shard_(per_shard), broken_(broken) {
    for (size_t i = 0; i < shards; ++i) splits_.push_back({i, "shard-" + std::to_string(i), 0});
  }
  const std::vector<Split>& splits() const override { return splits_; }
  uint64_t size_hint() const override { return 0; }
  Status ReadSplit(size_t id, const EmitFn& emit) const override {
    for (uint64_t i = 0; i < per_shard_; ++i) {
      Sample s;
      s.index = id * 1000 + i;
      s.key = splits_[id].name + "#" + std::to_string(i);
      if (!emit(std::move(s), Status::Ok())) return Status::Cancelled("stopped");
    }
    return id == broken_ ? Status::Corrupt(splits_[id].name + ": broken tar") : Status::Ok();
  }

 private:
  uint64_t per_shard_;
  size_t broken_;
  std::vector<Split> splits_;
};

std::vector<uint64_t> ReadAll(const SplitLayout& l, const Source& src, uint64_t seed,
                              uint64_t epoch, size_t id, Status* status = nullptr) {
  std::vector<uint64_t> out;
  Status st = l.Read(src, seed, epoch, id, [&](Sample&& s, const Status&) {
    out.push_back(s.index);
    return true;
  });
  if (status != nullptr) *status = st;
  return out;
}

TEST(SplitLayoutTest, GivenNoShuffleThenSplitsAreTheSourcesInSourceOrder) {
  ShardSource src(3, 5);
  SplitLayout l = SplitLayout::Make(src, false, 4);
  EXPECT_EQ(l.mode(), SplitMode::kInOrder);
  ASSERT_EQ(l.splits().size(), 3u);
  EXPECT_EQ(ReadAll(l, src, 1, 0, 1), (std::vector<uint64_t>{1000, 1001, 1002, 1003, 1004}));
}

TEST(SplitLayoutTest, GivenASequentialSourceWhenShuffledThenEachSplitInterleavesShardsFromAllOver) {
  ShardSource src(12, 10);
  SplitLayout l = SplitLayout::Make(src, true, 4);
  EXPECT_EQ(l.mode(), SplitMode::kInterleaved);
  ASSERT_EQ(l.splits().size(), 3u);  // 12 shards, 4 per split
  EXPECT_EQ(l.splits()[0].name, "shard-0 and 3 more, interleaved");
  std::set<uint64_t> all;
  for (size_t id = 0; id < 3; ++id) {
    std::vector<uint64_t> got = ReadAll(l, src, 1, 0, id);
    ASSERT_EQ(got.size(), 40u);
    std::set<uint64_t> shards;
    for (uint64_t i : got) shards.insert(i / 1000);
    // Split g holds shards g, g+3, g+6, g+9: spread over the source.
    EXPECT_EQ(shards, (std::set<uint64_t>{id, id + 3, id + 6, id + 9}));
    // Interleaved: the first 10 samples already come from several shards, and each
    // shard keeps its own order.
    std::set<uint64_t> early;
    for (size_t k = 0; k < 10; ++k) early.insert(got[k] / 1000);
    EXPECT_GE(early.size(), 3u);
    std::map<uint64_t, uint64_t> last;
    for (uint64_t i : got) {
      if (last.count(i / 1000)) {
        EXPECT_LT(last[i / 1000], i);
      }
      last[i / 1000] = i;
    }
    all.insert(got.begin(), got.end());
  }
  EXPECT_EQ(all.size(), 120u);
  // The merge is drawn from (seed, epoch, split): reproducible, and new each epoch.
  EXPECT_EQ(ReadAll(l, src, 1, 0, 0), ReadAll(l, src, 1, 0, 0));
  EXPECT_NE(ReadAll(l, src, 1, 0, 0), ReadAll(l, src, 1, 1, 0));
}

TEST(SplitLayoutTest, GivenABrokenShardWhenInterleavedThenTheOthersAreReadAndTheErrorNamesIt) {
  ShardSource src(4, 3, /*broken=*/2);
  SplitLayout l = SplitLayout::Make(src, true, 4);
  Status st;
  std::vector<uint64_t> got = ReadAll(l, src, 1, 0, 0, &st);
  EXPECT_EQ(got.size(), 12u);
  EXPECT_EQ(st.code(), Code::kCorrupt);
  EXPECT_NE(st.message().find("shard-2"), std::string::npos) << st.message();
}

TEST(SplitLayoutTest, GivenMoreShardsPerSplitThanShardsThenOneSplitHoldsThemAll) {
  ShardSource src(2, 3);
  SplitLayout l = SplitLayout::Make(src, true, 8);
  ASSERT_EQ(l.splits().size(), 1u);
  EXPECT_EQ(l.shards_per_split(), 2u);
  EXPECT_EQ(ReadAll(l, src, 1, 0, 0).size(), 6u);
}

TEST(SplitLayoutTest, GivenAnUnknownSplitThenInvalidArgument) {
  ShardSource src(2, 3);
  SplitLayout l = SplitLayout::Make(src, true, 1);
  Status st;
  ReadAll(l, src, 1, 0, 9, &st);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
}

Result<Pipeline> Load(const std::string& shuffle,
                      const std::string& source = R"({"type": "range", "count": 100})") {
  auto doc = nlohmann::json::parse(R"({"version": 1, "source": )" + source +
                                   R"(, "stages": [], "batch": {"size": 10})" +
                                   (shuffle.empty() ? "" : R"(, "shuffle": )" + shuffle) + "}");
  PipelineOptions po;
  po.samples_per_split = 30;  // rounded up to 30: splits of 30, 30, 30, 10
  return Pipeline::FromJson(doc, "p.json", "", po);
}

TEST(SplitLayoutTest, GivenAnIndexableSourceWhenShuffledThenSplitsAreRunsOfOnePermutation) {
  auto p = Load("true");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->layout().mode(), SplitMode::kPermuted);
  ASSERT_EQ(p->splits().size(), 4u);
  EXPECT_EQ(p->splits()[3].count, 10u);
  for (uint64_t epoch : {0u, 1u}) {
    std::vector<uint64_t> order;
    for (size_t id = 0; id < 4; ++id) {
      std::vector<uint64_t> got = ReadAll(p->layout(), p->source(), p->seed(), epoch, id);
      EXPECT_EQ(got.size(), p->splits()[id].count);
      order.insert(order.end(), got.begin(), got.end());
    }
    std::vector<uint64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (uint64_t i = 0; i < 100; ++i) ASSERT_EQ(sorted[i], i) << "epoch " << epoch;
    // Split 0 is a random subset: not the first 30 indices.
    EXPECT_GT(*std::max_element(order.begin(), order.begin() + 30), 29u);
  }
  EXPECT_NE(ReadAll(p->layout(), p->source(), p->seed(), 0, 0),
            ReadAll(p->layout(), p->source(), p->seed(), 1, 0));
  EXPECT_EQ(p->OrderNotice(), "");
}

TEST(SplitLayoutTest, GivenTheShuffleKeyInEachFormThenTheLayoutFollows) {
  EXPECT_EQ(Load("").value().layout().mode(), SplitMode::kInOrder);
  EXPECT_EQ(Load("false").value().layout().mode(), SplitMode::kInOrder);
  EXPECT_EQ(Load(R"({"buffer": 0})").value().layout().mode(), SplitMode::kInOrder);
  EXPECT_EQ(Load(R"({"buffer": 64})").value().layout().mode(), SplitMode::kPermuted);
  EXPECT_EQ(Load("{}").value().shuffle_buffer(), kDefaultShuffleBuffer);
  EXPECT_EQ(Load("true").value().shuffle_buffer(), kDefaultShuffleBuffer);
  auto in_order = Load("");
  EXPECT_NE(in_order->OrderNotice().find("source order"), std::string::npos);
  EXPECT_NE(in_order->OrderNotice().find("p.json"), std::string::npos);
}

TEST(SplitLayoutTest, GivenABadShuffleKeyThenTheErrorNamesThePathAndWhatIsExpected) {
  struct Case {
    const char* shuffle;
    const char* expected;
  };
  for (const Case& c :
       {Case{"1", "true, false or an object"}, Case{R"({"buffer": -1})", "$.shuffle.buffer"},
        Case{R"({"shards": 0})", "from 1 to 4096"}, Case{R"({"shards": 5000})", "$.shuffle.shards"},
        Case{R"({"bufer": 4})", "bufer"}}) {
    auto p = Load(c.shuffle);
    ASSERT_FALSE(p.ok()) << c.shuffle;
    EXPECT_NE(p.status().message().find(c.expected), std::string::npos)
        << c.shuffle << ": " << p.status().message();
  }
}

}  // namespace
}  // namespace gm
