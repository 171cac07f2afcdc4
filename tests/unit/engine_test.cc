// Engine tests on real JPEG photos through the real files source and image ops.
#include "worker/engine.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <set>

#include "core/json.h"
#include "tests/unit/test_util.h"
#include "worker/pipeline.h"
#include "worker/sinks.h"

namespace gm {
namespace {

namespace fs = std::filesystem;

// Records every batch's keys and sizes, and hashes the bytes.
class RecordingSink : public BatchSink {
 public:
  Status Consume(const Batch& batch) override {
    sizes.push_back(batch.size());
    for (const auto& k : batch.keys) keys.push_back(k);
    shapes.push_back(batch.data.shape);
    for (uint64_t index : batch.sample_indices) split_of_sample.emplace_back(batch.split, index);
    EXPECT_EQ(batch.labels.shape, std::vector<int64_t>{static_cast<int64_t>(batch.size())});
    if (batch.external) {
      ++external_batches;
      EXPECT_TRUE(batch.data.bytes.empty());  // no buffer of its own
      EXPECT_EQ(batch.data_size(), batch.data.num_elements() * DTypeSize(batch.data.dtype));
    }
    return digest.Consume(batch);
  }
  // Lends memory when `lend` is kLend (the size asked for) or kTooSmall (one
  // byte short, which must not be used). Called from the stage threads.
  enum Lend { kNone, kLend, kTooSmall };
  std::optional<Batch::External> Reserve(size_t bytes) override {
    if (lend == kNone) return std::nullopt;
    reserves->fetch_add(1);
    auto buffer = std::make_shared<std::vector<uint8_t>>(bytes - (lend == kTooSmall ? 1 : 0), 0xEE);
    return Batch::External{buffer->data(), buffer->size(), buffer};
  }
  Lend lend = kNone;
  std::shared_ptr<std::atomic<int>> reserves = std::make_shared<std::atomic<int>>(0);
  int external_batches = 0;
  std::vector<size_t> sizes;
  std::vector<std::string> keys;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::pair<size_t, uint64_t>> split_of_sample;
  DigestSink digest;
};

// Given a corpus of `copies` copies of each of the 6 fixture photos in two class
// directories, plus the bad files when `with_bad`.
class EngineTest : public ::testing::Test {
 protected:
  void MakeCorpus(int copies, bool with_bad = false) {
    for (int c = 0; c < copies; ++c) {
      for (int i = 0; i < 6; ++i) {
        std::string cls = i % 2 ? "cats" : "dogs";
        std::string name =
            "corpus/" + cls + "/" + std::to_string(c) + "_" + std::to_string(i) + ".jpg";
        dir_.Write(name, testing::ReadAll(Fixture("photo" + std::to_string(i) + ".jpg")));
      }
    }
    if (with_bad) {
      for (const char* bad : {"zero.jpg", "truncated.jpg", "png_named.jpg", "random.jpg"}) {
        dir_.Write(std::string("corpus/dogs/bad_") + bad, testing::ReadAll(Fixture(bad)));
      }
    }
  }

  static std::string Fixture(const std::string& name) {
    return testing::SourcePath("tests/data/engine/" + name);
  }

  nlohmann::json Spec(int batch = 8, int shuffle = 16, uint64_t seed = 1) {
    nlohmann::json spec = nlohmann::json::parse(R"({
      "version": 1,
      "source": {"type": "files", "root": "corpus", "pattern": "**/*.jpg", "label": "parent_dir"},
      "stages": [{"op": "decode_jpeg"},
                 {"op": "random_resized_crop", "size": [32, 48]},
                 {"op": "flip", "p": 0.5},
                 {"op": "color_jitter", "brightness": 0.4, "contrast": 0.4, "saturation": 0.4},
                 {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
                 {"op": "to_tensor", "layout": "CHW", "dtype": "float32"}]})");
    spec["batch"] = {{"size", batch}};
    spec["shuffle"] = {{"buffer", shuffle}};
    spec["seed"] = seed;
    return spec;
  }

  Result<RecordingSink> Run(const nlohmann::json& spec, int threads, int epochs = 1,
                            int64_t limit = -1, RunStats* stats_out = nullptr,
                            RecordingSink::Lend lend = RecordingSink::kNone) {
    PipelineOptions po;
    po.threads = threads;
    po.samples_per_split = 5;  // many small splits: exercises the split order shuffle
    GM_ASSIGN_OR_RETURN(Pipeline p, Pipeline::FromJson(spec, "test.json", dir_.path(), po));
    EngineOptions eo;
    eo.threads = threads;
    eo.epochs = epochs;
    eo.limit = limit;
    RecordingSink sink;
    sink.lend = lend;
    GM_ASSIGN_OR_RETURN(RunStats stats, RunPipeline(p, eo, sink));
    if (stats_out) *stats_out = stats;
    return sink;
  }

  testing::TempDir dir_;
};

TEST_F(EngineTest, GivenAnyThreadCountWhenRunThenBatchesAreBitIdenticalInTheSameOrder) {
  MakeCorpus(5);
  auto one = Run(Spec(), 1);
  ASSERT_TRUE(one.ok()) << one.status().message();
  std::string reference = one->digest.FinishHex();
  for (int threads : {2, 3, 4}) {
    auto many = Run(Spec(), threads);
    ASSERT_TRUE(many.ok()) << many.status().message();
    EXPECT_EQ(many->keys, one->keys) << threads << " threads";
    EXPECT_EQ(many->digest.FinishHex(), reference) << threads << " threads";
  }
}

TEST_F(EngineTest, GivenDeviceStagesThenWorkersStopBeforeThemAndTheTailIsKept) {
  MakeCorpus(3);
  nlohmann::json spec = Spec();
  spec["stages"][4]["on"] = "device";
  spec["stages"][5]["on"] = "device";
  PipelineOptions po;
  auto p = Pipeline::FromJson(spec, "test.json", dir_.path(), po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->device_from(), 4);
  nlohmann::json tail = nlohmann::json::array({spec["stages"][4], spec["stages"][5]});
  for (auto& stage : tail) stage.erase("on");
  EXPECT_EQ(p->device_stages(), tail);
  ASSERT_EQ(p->stages().size(), 3u);  // decode+crop, flip, color_jitter
  EXPECT_EQ(p->stages().back()->name(), "color_jitter");
  auto out = Run(spec, 2);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->shapes.front(), (std::vector<int64_t>{8, 32, 48, 3}));  // uint8 HWC on the wire
  // The profiler builds every stage; the cut is not fused across.
  po.with_device_stages = true;
  auto all = Pipeline::FromJson(spec, "test.json", dir_.path(), po);
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->stages().size(), 4u);
  EXPECT_EQ(all->stages().back()->name(), "normalize+to_tensor");
  // "on": "worker" is the default written out.
  spec["stages"][4]["on"] = "worker";
  spec["stages"][5]["on"] = "worker";
  auto none = Pipeline::FromJson(spec, "test.json", dir_.path(), PipelineOptions{});
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->device_from(), -1);
  EXPECT_TRUE(none->device_stages().empty());
}

TEST_F(EngineTest, GivenAnEpochThenEverySampleIsDeliveredExactlyOnceInFullBatches) {
  MakeCorpus(5);  // 30 images
  RunStats stats;
  auto r = Run(Spec(8), 2, 1, -1, &stats);
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<size_t> sizes = r->sizes;
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, (std::vector<size_t>{6, 8, 8, 8}));
  std::set<std::string> unique(r->keys.begin(), r->keys.end());
  EXPECT_EQ(unique.size(), 30u);
  EXPECT_EQ(r->keys.size(), 30u);
  EXPECT_EQ(r->shapes[0], (std::vector<int64_t>{8, 3, 32, 48}));
  EXPECT_EQ(stats.samples, 30u);
  EXPECT_EQ(stats.skipped, 0u);
  ASSERT_EQ(stats.stages.size(), 4u);  // decode fused with the crop, normalize with to_tensor
  EXPECT_EQ(stats.stages[0].name, "decode_jpeg+random_resized_crop");
  for (const auto& st : stats.stages) {
    EXPECT_EQ(st.count, 30u) << st.name;
    EXPECT_GT(st.bytes_out, 0u) << st.name;
  }
  // float32 CHW 3x32x48 out of the last stage.
  EXPECT_EQ(stats.stages.back().bytes_out, 30u * 3 * 32 * 48 * 4);
}

TEST_F(EngineTest, GivenASinkThatLendsMemoryThenSamplesAreWrittenInPlaceWithTheSameBytes) {
  MakeCorpus(5);  // 30 images, 4 batches
  auto own = Run(Spec(8), 2);
  ASSERT_TRUE(own.ok()) << own.status().message();
  EXPECT_EQ(own->external_batches, 0);
  const std::string own_digest = own->digest.FinishHex();
  RunStats stats;
  auto lent = Run(Spec(8), 2, 1, -1, &stats, RecordingSink::kLend);
  ASSERT_TRUE(lent.ok()) << lent.status().message();
  EXPECT_EQ(lent->external_batches, 4);
  EXPECT_EQ(stats.batches_in_place, 4u);
  // One loan per batch: each sample's last stage wrote into its slot of the
  // batch's buffer, so no batch needed a second one to be collated into.
  EXPECT_EQ(lent->reserves->load(), 4);
  EXPECT_EQ(lent->keys, own->keys);
  EXPECT_EQ(lent->digest.FinishHex(), own_digest);
  // Memory too small for the batch is not used: the batches have their own.
  auto small = Run(Spec(8), 2, 1, -1, nullptr, RecordingSink::kTooSmall);
  ASSERT_TRUE(small.ok()) << small.status().message();
  EXPECT_EQ(small->external_batches, 0);
  EXPECT_EQ(small->digest.FinishHex(), own_digest);
}

TEST_F(EngineTest, GivenAFlipLastWhenMemoryIsLentThenItWritesTheRowsIntoTheSlots) {
  // The pipeline of a device tail: uint8 HWC crops, flipped or not, are the
  // workers' last stage. The flip mirrors (or copies) each crop into its slot.
  MakeCorpus(5);
  auto spec = Spec(8);
  spec["stages"] = nlohmann::json::parse(R"([{"op": "decode_jpeg"},
      {"op": "random_resized_crop", "size": [32, 48]}, {"op": "flip", "p": 0.5},
      {"op": "to_tensor", "layout": "CHW", "dtype": "float32", "on": "device"}])");
  auto own = Run(spec, 2);
  ASSERT_TRUE(own.ok()) << own.status().message();
  RunStats stats;
  auto lent = Run(spec, 2, 1, -1, &stats, RecordingSink::kLend);
  ASSERT_TRUE(lent.ok()) << lent.status().message();
  EXPECT_EQ(lent->external_batches, 4);
  EXPECT_EQ(lent->reserves->load(), 4);
  EXPECT_EQ(stats.batches_in_place, 4u) << "the flip did not write the rows into the slots";
  EXPECT_EQ(lent->keys, own->keys);
  EXPECT_EQ(lent->digest.FinishHex(), own->digest.FinishHex());
  ASSERT_FALSE(lent->shapes.empty());
  EXPECT_EQ(lent->shapes.front(), (std::vector<int64_t>{8, 32, 48, 3}));
}

TEST_F(EngineTest, GivenSkippedSamplesThenBatchesAfterThemAreCopiedAndStillTheSame) {
  MakeCorpus(5, /*with_bad=*/true);  // bad files fail at the decode, after their slots were given
  auto spec = Spec(8);
  spec["on_error"] = "skip";
  auto own = Run(spec, 2);
  ASSERT_TRUE(own.ok()) << own.status().message();
  auto lent = Run(spec, 2, 1, -1, nullptr, RecordingSink::kLend);
  ASSERT_TRUE(lent.ok()) << lent.status().message();
  EXPECT_EQ(lent->keys.size(), 30u);
  EXPECT_EQ(lent->keys, own->keys);
  EXPECT_EQ(lent->digest.FinishHex(), own->digest.FinishHex());
  EXPECT_EQ(lent->external_batches, static_cast<int>(lent->sizes.size()));
  // A skipped sample moved the later ones off their slots: those batches
  // borrowed a second buffer to be copied into.
  EXPECT_GT(lent->reserves->load(), static_cast<int>(lent->sizes.size()));
}

TEST_F(EngineTest, GivenDropLastThenThePartialBatchIsDropped) {
  MakeCorpus(5);
  auto spec = Spec(8);
  spec["batch"]["drop_last"] = true;
  auto r = Run(spec, 2);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->sizes, (std::vector<size_t>{8, 8, 8}));
}

TEST_F(EngineTest, GivenSplitsThenABatchNeverSpansTwoSplits) {
  MakeCorpus(5);  // 30 files; splits of 5 rounded up to the batch size 4 -> 8 files
  auto r = Run(Spec(4, /*shuffle=*/0), 3);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->split_of_sample.size(), 30u);
  for (const auto& [split, index] : r->split_of_sample) EXPECT_EQ(split, index / 8) << index;
  std::vector<size_t> sizes = r->sizes;
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 4, 4, 4, 4, 4, 4, 4}));
}

// Shuffled, a split of an indexable source is a run of the epoch's permutation: the
// same sizes, but a random subset of the files instead of 8 neighbours.
TEST_F(EngineTest, GivenAShuffleThenASplitIsARandomSubsetOfTheDataset) {
  MakeCorpus(5);
  auto r = Run(Spec(4), 3);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->split_of_sample.size(), 30u);
  std::map<size_t, std::set<uint64_t>> members;
  for (const auto& [split, index] : r->split_of_sample) members[split].insert(index);
  ASSERT_EQ(members.size(), 4u);
  size_t neighbours_only = 0;
  for (const auto& [split, indices] : members) {
    EXPECT_EQ(indices.size(), split == 3 ? 6u : 8u) << "split " << split;
    if (*indices.rbegin() - *indices.begin() < 8) ++neighbours_only;
  }
  EXPECT_EQ(neighbours_only, 0u);
  std::vector<size_t> sizes = r->sizes;
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 4, 4, 4, 4, 4, 4, 4}));
}

TEST_F(EngineTest, GivenSeedsAndEpochsThenOrderDependsOnThemOnly) {
  MakeCorpus(5);
  auto a = Run(Spec(8, 16, 1), 2, 2);
  auto b = Run(Spec(8, 16, 1), 1, 2);
  auto c = Run(Spec(8, 16, 2), 2, 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->keys, b->keys);
  EXPECT_NE(a->keys, c->keys);
  // Two epochs: each holds every key once, in different orders.
  std::vector<std::string> e0(a->keys.begin(), a->keys.begin() + 30);
  std::vector<std::string> e1(a->keys.begin() + 30, a->keys.end());
  EXPECT_NE(e0, e1);
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e0, e1);
}

TEST_F(EngineTest, GivenNoShuffleThenSamplesComeInSortedPathOrder) {
  MakeCorpus(2);
  auto r = Run(Spec(4, 0), 3);
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<std::string> sorted = r->keys;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(r->keys, sorted);
}

TEST_F(EngineTest, GivenLimitThenOnlyThatManySamplesAreRead) {
  MakeCorpus(5);
  auto r = Run(Spec(4), 2, 2, 10);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->keys.size(), 20u);
}

TEST_F(EngineTest, GivenBadFilesAndOnErrorSkipThenTheyAreSkippedAndCounted) {
  MakeCorpus(2, /*with_bad=*/true);
  RunStats stats;
  auto r = Run(Spec(5), 2, 1, -1, &stats);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(stats.skipped, 4u);
  EXPECT_EQ(stats.samples, 12u);
  for (const auto& k : r->keys) EXPECT_EQ(k.find("bad_"), std::string::npos) << k;
}

// The lowest descriptor number free now: with the soft limit there, no new one opens.
int LowestFreeDescriptor() {
  const int fd = ::dup(0);
  ::close(fd);
  return fd;
}

TEST_F(EngineTest,
       GivenNoFreeDescriptorAndOnErrorSkip_ThenTheRunFailsAsShortOfAResourceSkippingNothing) {
  MakeCorpus(1);
  auto spec = Spec(4, 0);
  spec["on_error"] = "skip";
  PipelineOptions po;
  po.threads = 2;
  auto p = Pipeline::FromJson(spec, "test.json", dir_.path(), po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(LowestFreeDescriptor());  // no descriptor left to open a file
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  EngineOptions eo;
  eo.threads = 2;
  RecordingSink sink;
  auto r = RunPipeline(*p, eo, sink);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  RunStats stats = r.ok() ? *r : RunStats{};
  ASSERT_FALSE(r.ok()) << "every file failed to open, and the run succeeded";
  EXPECT_EQ(r.status().code(), Code::kResourceExhausted) << r.status().message();
  EXPECT_NE(r.status().message().find("Too many open files"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("not skipped"), std::string::npos) << r.status().message();
  EXPECT_EQ(stats.skipped, 0u);
  EXPECT_TRUE(sink.keys.empty()) << sink.keys.size() << " samples delivered with no file readable";
}

TEST_F(EngineTest, GivenBadFilesAndOnErrorFailThenTheRunStopsNamingTheFile) {
  MakeCorpus(1, /*with_bad=*/true);
  auto spec = Spec(4, 0);
  spec["on_error"] = "fail";
  auto r = Run(spec, 2);
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("bad_"), std::string::npos) << m;
  EXPECT_NE(m.find("decode_jpeg"), std::string::npos) << m;
  EXPECT_NE(m.find("on_error"), std::string::npos) << m;
}

TEST_F(EngineTest, GivenSamplesOfDifferentShapesThenTheOddOnesAreSkippedWithAReason) {
  MakeCorpus(1);
  auto spec = nlohmann::json::parse(R"({"version": 1,
      "source": {"type": "files", "root": "corpus", "pattern": "**/*.jpg"},
      "stages": [{"op": "decode_jpeg"}], "batch": {"size": 6}})");
  RunStats stats;
  auto r = Run(spec, 1, 1, -1, &stats);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // The six fixture photos all have different sizes: one sample per batch survives.
  EXPECT_EQ(stats.samples, 1u);
  EXPECT_EQ(stats.skipped, 5u);
}

TEST_F(EngineTest, GivenATinyInflightBoundThenTheRunStillCompletes) {
  MakeCorpus(3);
  PipelineOptions po;
  auto p = Pipeline::FromJson(Spec(4), "test.json", dir_.path(), po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EngineOptions eo;
  eo.threads = 4;
  eo.inflight = 1;
  RecordingSink sink;
  auto stats = RunPipeline(*p, eo, sink);
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->samples, 18u);
}

TEST(CollateTest, GivenSamplesThenDataIsStackedAndLabelsKept) {
  std::vector<Sample> samples(2);
  for (int i = 0; i < 2; ++i) {
    samples[i].key = "k" + std::to_string(i);
    samples[i].label = 10 + i;
    samples[i].index = 100 + i;
    samples[i].tensor.Reset(DType::kUInt8, {2});
    samples[i].tensor.bytes = {static_cast<uint8_t>(i), static_cast<uint8_t>(i + 5)};
  }
  Batch b = Collate(samples, 3, 7);
  EXPECT_EQ(b.data.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(b.data.bytes, (std::vector<uint8_t>{0, 5, 1, 6}));
  EXPECT_EQ(b.labels.data<int64_t>()[1], 11);
  EXPECT_EQ(b.keys, (std::vector<std::string>{"k0", "k1"}));
  EXPECT_EQ(b.epoch, 3u);
  EXPECT_EQ(b.index, 7u);
}

TEST(NpyTest, HeaderIsPaddedTo64BytesAndDescribesTheTensor) {
  Tensor t;
  t.Reset(DType::kFloat32, {2, 3});
  std::string npy = EncodeNpy(t);
  ASSERT_GE(npy.size(), 10u);
  EXPECT_EQ(npy.substr(0, 6), "\x93NUMPY");
  size_t header_len = static_cast<uint8_t>(npy[8]) | (static_cast<uint8_t>(npy[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_NE(npy.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(npy.find("'shape': (2, 3)"), std::string::npos);
  EXPECT_EQ(npy.size(), 10 + header_len + 24);
}

}  // namespace
}  // namespace gm

namespace gm {
namespace {

// Records each batch's split, split_batch, keys and bytes.
class SplitRecorder : public BatchSink {
 public:
  struct Entry {
    size_t split;
    uint64_t split_batch;
    std::vector<std::string> keys;
    Bytes data;
  };
  Status Consume(const Batch& b) override {
    entries.push_back({b.split, b.split_batch, b.keys, b.data.bytes});
    return Status::Ok();
  }
  std::vector<Entry> entries;
};

TEST(RunSplitTest, GivenEachSplitThenItsBatchesEqualThoseOfTheWholeEpoch) {
  testing::TempDir dir;
  for (int c = 0; c < 4; ++c) {
    for (int i = 0; i < 6; ++i) {
      dir.Write("corpus/" + std::to_string(c) + "_" + std::to_string(i) + ".jpg",
                testing::ReadAll(
                    testing::SourcePath("tests/data/engine/photo" + std::to_string(i) + ".jpg")));
    }
  }
  // Add bad files so skipped samples move batch boundaries inside splits.
  dir.Write("corpus/0_bad.jpg", "not a jpeg");
  auto spec = nlohmann::json::parse(R"({"version": 1,
      "source": {"type": "files", "root": "corpus", "pattern": "*.jpg"},
      "stages": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [16, 16]},
                 {"op": "flip", "p": 0.5}],
      "batch": {"size": 3}, "shuffle": {"buffer": 4}, "seed": 5})");
  PipelineOptions po;
  po.samples_per_split = 6;
  auto p = Pipeline::FromJson(spec, "test.json", dir.path(), po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EngineOptions eo;
  eo.threads = 2;
  eo.epochs = 2;
  SplitRecorder whole;
  ASSERT_TRUE(RunPipeline(*p, eo, whole).ok());

  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<SplitRecorder::Entry> expected;
    size_t per_epoch = whole.entries.size() / 2;
    for (size_t i = epoch * per_epoch; i < (epoch + 1) * per_epoch; ++i) {
      expected.push_back(whole.entries[i]);
    }
    std::vector<size_t> order = EpochSplitOrder(*p, epoch);
    ASSERT_EQ(order.size(), 5u);  // 25 files in splits of 6
    size_t next = 0;
    for (size_t split : order) {
      SplitRecorder one;
      ASSERT_TRUE(RunSplit(*p, eo, SplitTask{epoch, split}, one).ok());
      for (const auto& e : one.entries) {
        ASSERT_LT(next, expected.size());
        EXPECT_EQ(e.split, expected[next].split);
        EXPECT_EQ(e.split_batch, expected[next].split_batch);
        EXPECT_EQ(e.keys, expected[next].keys);
        EXPECT_TRUE(e.data == expected[next].data) << "epoch " << epoch << " split " << split;
        ++next;
      }
    }
    EXPECT_EQ(next, expected.size());
  }
}

TEST(RunSplitTest, GivenABatchWindowThenOnlyThoseBatchesAreDelivered) {
  testing::TempDir dir;
  for (int i = 0; i < 12; ++i) {
    dir.Write("corpus/" + std::to_string(10 + i) + ".jpg",
              testing::ReadAll(
                  testing::SourcePath("tests/data/engine/photo" + std::to_string(i % 6) + ".jpg")));
  }
  auto spec = nlohmann::json::parse(R"({"version": 1,
      "source": {"type": "files", "root": "corpus"},
      "stages": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": 8}],
      "batch": {"size": 2}})");
  PipelineOptions po;
  po.samples_per_split = 12;
  auto p = Pipeline::FromJson(spec, "test.json", dir.path(), po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  SplitRecorder sink;
  auto stats = RunSplit(*p, EngineOptions{}, SplitTask{0, 0, 2, 4}, sink);
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  ASSERT_EQ(sink.entries.size(), 2u);
  EXPECT_EQ(sink.entries[0].split_batch, 2u);
  EXPECT_EQ(sink.entries[1].split_batch, 3u);
  EXPECT_EQ(sink.entries[0].keys, (std::vector<std::string>{"14.jpg", "15.jpg"}));
  EXPECT_EQ(stats->samples, 4u);
  EXPECT_FALSE(RunSplit(*p, EngineOptions{}, SplitTask{0, 7}, sink).ok());
}

}  // namespace
}  // namespace gm
