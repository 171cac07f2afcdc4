// The run's record (launcher/run_recorder.h) on the memory store: the time series
// from two samples, workers, events, the end, and a failing store that never
// stops the run.
#include "launcher/run_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "core/store/run_store_fake.h"

namespace gm {
namespace {

constexpr const char* kNow = "2026-11-30T07:00:00Z";
std::string FixedClock() { return kNow; }

RunRecord TestRun() {
  RunRecord r;
  r.id = "r";
  r.started_utc = "2026-11-30T06:59:00Z";
  r.backend = "local";
  r.command = {"train"};
  r.world_size = 2;
  return r;
}

double Metric(MemoryRunStore& store, const std::string& name) {
  const std::vector<MetricPoint> points = *store.ListMetrics("r");
  for (const MetricPoint& p : points) {
    if (p.name == name) return p.value;
  }
  ADD_FAILURE() << "no " << name;
  return -1;
}

TEST(RunRecorderTest, TwoSamplesGiveOnePointOfEachMeasure) {
  MemoryRunStore store(FixedClock);
  RunRecorder rec(&store, "r", /*world_size=*/2);
  ASSERT_TRUE(rec.Begin(TestRun()).ok());
  rec.Sample({0.0, 0, 0, 0, 0.0, 0});
  EXPECT_TRUE(store.ListMetrics("r")->empty()) << "the first sample is the baseline";
  EXPECT_EQ(store.GetRun("r")->heartbeat_utc, kNow);
  // 2 s later: 1000 samples delivered, the two ranks waited 1 s together, 3 workers
  // used 4 CPU-seconds.
  rec.Sample({2.0, 1000, 1000000000ull, 3, 4.0, 1});
  EXPECT_EQ(store.ListMetrics("r")->size(), 5u);
  EXPECT_DOUBLE_EQ(Metric(store, "samples_per_s"), 500);
  EXPECT_DOUBLE_EQ(Metric(store, "data_wait_fraction"), 0.25);  // 1 s of 2 ranks x 2 s
  EXPECT_DOUBLE_EQ(Metric(store, "workers"), 3);
  EXPECT_DOUBLE_EQ(Metric(store, "worker_cpus"), 2);
  EXPECT_DOUBLE_EQ(Metric(store, "epoch"), 1);
  EXPECT_EQ(store.ListMetrics("r")->front().t_s, 2.0);
}

TEST(RunRecorderTest, WorkersEventsAndTheEnd) {
  MemoryRunStore store(FixedClock);
  RunRecorder rec(&store, "r", 1);
  ASSERT_TRUE(rec.Begin(TestRun()).ok());
  rec.WorkerStarted(0, 1234, "node-a", false);
  rec.WorkerEnded(0, "was killed by signal 9 (Killed)");
  rec.Event("worker", "worker 0 replaced");
  rec.End("succeeded", 0);
  const std::vector<WorkerRecord> workers = *store.ListWorkers("r");
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].pid, 1234);
  EXPECT_EQ(workers[0].exit, "was killed by signal 9 (Killed)");
  EXPECT_EQ(store.ListEvents()->back().message, "worker 0 replaced");
  EXPECT_EQ(store.GetRun("r")->status, "succeeded");
  EXPECT_EQ(store.GetRun("r")->exit_code, 0);
  EXPECT_EQ(rec.failures(), 0u);
}

TEST(RunRecorderTest, ATakenNameStopsTheStartButAFailingStoreLaterDoesNot) {
  MemoryRunStore store(FixedClock);
  ASSERT_TRUE(store.BeginRun(TestRun()).ok());
  RunRecorder taken(&store, "r", 1);
  EXPECT_EQ(taken.Begin(TestRun()).code(), Code::kInvalidArgument);
  EXPECT_FALSE(taken.enabled());

  MemoryRunStore failing(FixedClock);
  RunRecorder rec(&failing, "r", 1);
  ASSERT_TRUE(rec.Begin(TestRun()).ok());
  failing.FailWrites(Status::IoError("disk full"));
  rec.Sample({0, 0, 0, 0, 0, 0});
  rec.Sample({1, 10, 0, 1, 0, 0});
  rec.End("succeeded", 0);
  EXPECT_GT(rec.failures(), 0u);
  EXPECT_EQ(failing.GetRun("r")->status, "running") << "nothing written after the failure";
}

TEST(RunRecorderTest, WithoutAStoreNothingHappens) {
  RunRecorder rec(nullptr, "r", 1);
  EXPECT_TRUE(rec.Begin(TestRun()).ok());
  EXPECT_FALSE(rec.enabled());
  rec.Sample({0, 0, 0, 0, 0, 0});
  rec.End("failed", 1);
  EXPECT_EQ(rec.failures(), 0u);
}

StageStats Stage(const char* name, uint64_t count, double cpu_s, double wall_s, uint64_t bytes_in,
                 uint64_t bytes_out) {
  StageStats s;
  s.name = name;
  s.count = count;
  s.cpu_s = cpu_s;
  s.wall_s = wall_s;
  s.bytes_in = bytes_in;
  s.bytes_out = bytes_out;
  return s;
}

TEST(RunRecorderTest, StageCostsSumTheWorkersReportsByPosition) {
  const std::vector<StageStats> a = {
      Stage("decode_jpeg+random_resized_crop", 100, 0.2, 0.25, 5000000, 15000000),
      Stage("flip", 100, 0.01, 0.01, 15000000, 15000000)};
  const std::vector<StageStats> b = {
      Stage("decode_jpeg+random_resized_crop", 300, 0.6, 0.7, 15000000, 45000000),
      Stage("flip", 300, 0, 0, 45000000, 0), Stage("unused", 0, 0, 0, 0, 0)};
  const std::vector<StageProfile> s = StageCostsFromReports({a, b, {}});
  ASSERT_EQ(s.size(), 2u) << "a stage no sample went through is left out";
  EXPECT_EQ(s[0].name, "decode_jpeg+random_resized_crop");
  EXPECT_EQ(s[0].index, 0);
  EXPECT_DOUBLE_EQ(s[0].cpu_s_per_sample, 0.8 / 400);
  EXPECT_DOUBLE_EQ(s[0].wall_s_per_sample, 0.95 / 400);
  EXPECT_DOUBLE_EQ(s[0].bytes_in_per_sample, 2e7 / 400);
  EXPECT_DOUBLE_EQ(s[0].bytes_out_per_sample, 6e7 / 400);
  EXPECT_EQ(s[1].index, 2) << "the fused stage covers ops 0 and 1";
  EXPECT_DOUBLE_EQ(s[1].cpu_s_per_sample, 0.01 / 400);
  EXPECT_DOUBLE_EQ(s[1].bytes_in_per_sample, 6e7 / 400);
  EXPECT_TRUE(StageCostsFromReports({}).empty());
}

}  // namespace
}  // namespace gm
