// AnalyzeSteps on synthetic step and GPU logs: the arithmetic of demand, stall and
// GPU alignment, with exact expected values.
#include "profiler/step_analysis.h"

#include <gtest/gtest.h>

namespace gm {
namespace {

constexpr uint64_t kMs = 1000000;  // nanoseconds

// A process that waits `wait_ms` then computes `compute_ms` per step, `n` requests.
StepLog Regular(int pid, int n, uint64_t wait_ms, uint64_t compute_ms, uint64_t samples,
                uint64_t t0 = 1000 * kMs) {
  StepLog log;
  log.pid = pid;
  log.source = "goldminer";
  uint64_t t = t0;
  for (int i = 0; i < n; ++i) {
    log.steps.push_back({t, t + wait_ms * kMs, samples});
    t += (wait_ms + compute_ms) * kMs;
  }
  return log;
}

GpuActivity Kernel(uint64_t start, uint64_t end) {
  GpuActivity a;
  a.start_ns = start;
  a.end_ns = end;
  a.name = "k";
  return a;
}

TEST(UnionOf, MergesOverlapsAndDropsEmpty) {
  auto u = UnionOf({{10, 20}, {15, 30}, {40, 40}, {35, 50}, {0, 5}});
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u[0].begin, 0u);
  EXPECT_EQ(u[1].begin, 10u);
  EXPECT_EQ(u[1].end, 30u);
  EXPECT_EQ(u[2].begin, 35u);
  EXPECT_EQ(CoveredNanos(u, {0, 100}), 5u + 20u + 15u);
  EXPECT_EQ(CoveredNanos(u, {12, 37}), 18u + 2u);
  EXPECT_EQ(CoveredNanos(u, {30, 35}), 0u);
  EXPECT_EQ(CoveredNanos({}, {0, 100}), 0u);
}

TEST(AnalyzeSteps, GivenSteadyStepsThenDemandAndStallAreExact) {
  StepAnalysisOptions o;
  o.warmup_steps = 2;
  // 12 requests: 11 closed steps, 2 warm-up, 9 measured; 5 ms wait + 20 ms compute.
  TrainerProfile t = AnalyzeSteps({Regular(7, 12, 5, 20, 8)}, {}, o);
  EXPECT_EQ(t.steps_recorded, 12u);
  EXPECT_EQ(t.warmup_steps, 2u);
  EXPECT_EQ(t.steps, 9u);
  EXPECT_NEAR(t.compute_s_median, 0.020, 1e-9);
  EXPECT_NEAR(t.wait_s_median, 0.005, 1e-9);
  EXPECT_NEAR(t.step_s_median, 0.025, 1e-9);
  EXPECT_NEAR(t.demand_samples_per_s, 8 / 0.020, 1e-6);
  EXPECT_NEAR(t.samples_per_s, 8 / 0.025, 1e-6);
  EXPECT_NEAR(t.stall_fraction, 0.2, 1e-9);
  EXPECT_EQ(t.batch_size, 8);
  EXPECT_FALSE(t.gpu.available);
  EXPECT_EQ(t.step_list.size(), 9u);
  EXPECT_EQ(t.step_list.front().step, 2u);
  EXPECT_FALSE(t.step_list.front().gpu_busy_s.has_value());
}

TEST(AnalyzeSteps, GivenDataLoaderLinesThenTheWorkersCpuPerSampleIsOverTheMeasuredSteps) {
  StepAnalysisOptions o;
  o.warmup_steps = 2;
  // 12 requests of 8 samples; the workers' CPU grows 40 ms a batch after 500 ms of
  // start-up, each batch 4,096 bytes.
  StepLog log = Regular(7, 12, 5, 20, 8);
  for (size_t i = 0; i < log.steps.size(); ++i) {
    log.steps[i].loader = LoaderRecord{2, (500 + 40 * i) * kMs, 4096};
  }
  StepLog other = Regular(8, 12, 5, 20, 8);  // a second rank, twice the cost
  for (size_t i = 0; i < other.steps.size(); ++i) {
    other.steps[i].loader = LoaderRecord{3, (900 + 80 * i) * kMs, 4096};
  }
  TrainerProfile t = AnalyzeSteps({log, other}, {}, o);
  ASSERT_TRUE(t.dataloader.has_value());
  // Measured steps 2..10: the CPU from record 2 to record 11, 9 batches of 8 samples each.
  EXPECT_EQ(t.dataloader->samples, 2u * 9 * 8);
  EXPECT_NEAR(t.dataloader->cpu_s, 9 * 0.040 + 9 * 0.080, 1e-9);
  EXPECT_NEAR(t.dataloader->cpu_s_per_sample, (0.360 + 0.720) / 144, 1e-12);
  EXPECT_NEAR(t.dataloader->bytes_per_sample, 512, 1e-9);
  EXPECT_EQ(t.dataloader->workers, 3);

  log.steps[5].loader.reset();  // a batch of no worker process: no figure for that process
  t = AnalyzeSteps({log}, {}, o);
  EXPECT_FALSE(t.dataloader.has_value());
  EXPECT_FALSE(AnalyzeSteps({Regular(7, 12, 5, 20, 8)}, {}, o).dataloader.has_value());
}

TEST(AnalyzeSteps, GivenNativeEngineLinesThenTheCostPerSampleIsOverAllOfThem) {
  StepLog log = Regular(7, 12, 5, 20, 8);
  log.native = {{32, 32 * kMs, 32 * 600000, 24 * kMs, 32 * 150000}};
  log.not_native = {"a DataLoader of Texts: no", "a DataLoader of Texts: no"};
  StepLog other = Regular(8, 12, 5, 20, 8);  // another process: 16 samples at 2 ms
  other.native = {{16, 32 * kMs, 16 * 600000, 16 * kMs, 16 * 150000}};
  for (int i = 0; i < 10; ++i) other.not_native.push_back("reason " + std::to_string(i));
  TrainerProfile t = AnalyzeSteps({log, other}, {}, {});
  ASSERT_TRUE(t.native.has_value());
  EXPECT_EQ(t.native->samples, 48u);
  EXPECT_NEAR(t.native->cpu_s_per_sample, 0.064 / 48, 1e-12);
  EXPECT_NEAR(t.native->cut_cpu_s_per_sample, 0.040 / 48, 1e-12);
  EXPECT_NEAR(t.native->bytes_per_sample, 600000, 1e-6);
  EXPECT_NEAR(t.native->cut_bytes_per_sample, 150000, 1e-6);
  ASSERT_EQ(t.not_native.size(), 8u) << "each reason once, at most 8";
  EXPECT_EQ(t.not_native[0], "a DataLoader of Texts: no");
  EXPECT_EQ(t.not_native[1], "reason 0");
  EXPECT_FALSE(AnalyzeSteps({Regular(7, 12, 5, 20, 8)}, {}, {}).native.has_value());
}

TEST(AnalyzeSteps, GivenFewStepsThenHalfAreWarmUp) {
  StepAnalysisOptions o;
  o.warmup_steps = 5;
  TrainerProfile t = AnalyzeSteps({Regular(1, 5, 1, 1, 4)}, {}, o);  // 4 closed steps
  EXPECT_EQ(t.warmup_steps, 2u);
  EXPECT_EQ(t.steps, 2u);
  TrainerProfile one = AnalyzeSteps({Regular(1, 1, 1, 1, 4)}, {}, o);  // nothing closed
  EXPECT_EQ(one.steps, 0u);
  EXPECT_EQ(one.steps_recorded, 1u);
  EXPECT_EQ(one.demand_samples_per_s, 0);
}

TEST(AnalyzeSteps, GivenMaxStepsThenStepsPastTheStopPointAreNotMeasured) {
  StepAnalysisOptions o;
  o.warmup_steps = 2;
  o.max_steps = 5;
  TrainerProfile t = AnalyzeSteps({Regular(1, 12, 1, 1, 4)}, {}, o);
  EXPECT_EQ(t.steps, 5u);
  EXPECT_EQ(t.steps_recorded, 12u);
  EXPECT_EQ(t.step_list.back().step, 6u);
}

TEST(AnalyzeSteps, GivenTwoRanksThenRatesAddAndFractionsPool) {
  StepAnalysisOptions o;
  o.warmup_steps = 0;
  TrainerProfile t = AnalyzeSteps({Regular(1, 11, 0, 10, 4), Regular(2, 11, 10, 10, 4)}, {}, o);
  EXPECT_EQ(t.steps, 20u);
  EXPECT_NEAR(t.demand_samples_per_s, 4 / 0.010 + 4 / 0.010, 1e-6);
  EXPECT_NEAR(t.samples_per_s, 4 / 0.010 + 4 / 0.020, 1e-6);
  EXPECT_NEAR(t.stall_fraction, 100.0 / 300.0, 1e-9);
}

TEST(AnalyzeSteps, GivenUnorderedRecordsThenTheyAreSortedByRequestTime) {
  StepLog log = Regular(3, 6, 2, 8, 2);
  std::swap(log.steps[1], log.steps[4]);
  StepAnalysisOptions o;
  o.warmup_steps = 0;
  TrainerProfile t = AnalyzeSteps({log}, {}, o);
  EXPECT_NEAR(t.compute_s_median, 0.008, 1e-9);
  EXPECT_NEAR(t.stall_fraction, 0.2, 1e-9);
}

TEST(AnalyzeSteps, GivenKernelsDuringComputeThenStallIsTheIdleWait) {
  // Each step: wait 10 ms (the previous step's last kernel runs through its first
  // 4 ms, so the GPU idles 6 ms of it), then compute 30 ms with a 20 ms kernel.
  StepLog log = Regular(9, 6, 10, 30, 16);
  GpuLog gpu;
  gpu.pid = 9;
  gpu.dropped_records = 3;
  for (size_t i = 0; i + 1 < log.steps.size(); ++i) {
    const uint64_t got = log.steps[i].wait_end_ns;
    gpu.activities.push_back(Kernel(got + 10 * kMs, got + 30 * kMs));  // compute part
    gpu.activities.push_back(Kernel(got + 30 * kMs, got + 34 * kMs));  // into next wait
  }
  StepAnalysisOptions o;
  o.warmup_steps = 1;
  TrainerProfile t = AnalyzeSteps({log}, {gpu}, o);
  ASSERT_TRUE(t.gpu.available);
  EXPECT_EQ(t.gpu.records, 10u);
  EXPECT_EQ(t.gpu.dropped_records, 3u);
  EXPECT_EQ(t.gpu.devices, 1);
  ASSERT_EQ(t.steps, 4u);
  // Steps 1..4: window = [wait_begin_i, wait_begin_i+1), 40 ms. The kernel of step
  // i-1 covers the first 4 ms of step i's wait; step i's own kernel 20 ms.
  for (const StepProfile& s : t.step_list) {
    ASSERT_TRUE(s.gpu_busy_s.has_value());
    EXPECT_NEAR(*s.gpu_busy_s, 0.024, 1e-9);
    EXPECT_NEAR(*s.gpu_idle_s, 0.016, 1e-9);
    EXPECT_NEAR(*s.gpu_stall_s, 0.006, 1e-9);
  }
  EXPECT_NEAR(t.gpu.busy_fraction, 0.6, 1e-9);
  EXPECT_NEAR(t.gpu.stall_fraction, 0.15, 1e-9);
  EXPECT_NEAR(t.stall_fraction, 0.25, 1e-9);  // data wait alone is larger
}

TEST(AnalyzeSteps, GivenGpuLogOfAnotherPidThenAllProcessesAreUsed) {
  StepLog log = Regular(5, 4, 10, 10, 1);
  GpuLog gpu;
  gpu.pid = 6;  // e.g. a launcher's child runs the CUDA work
  gpu.activities.push_back(Kernel(0, UINT64_MAX / 2));
  StepAnalysisOptions o;
  o.warmup_steps = 0;
  TrainerProfile t = AnalyzeSteps({log}, {gpu}, o);
  ASSERT_TRUE(t.gpu.available);
  EXPECT_NEAR(t.gpu.busy_fraction, 1.0, 1e-9);
  EXPECT_NEAR(t.gpu.stall_s, 0.0, 1e-12);
}

TEST(AnalyzeSteps, GivenNoGpuThenTheReasonSaysWhy) {
  StepAnalysisOptions o;
  o.gpu_unavailable_reason = "libgoldminer_cupti.so was not built";
  EXPECT_EQ(AnalyzeSteps({Regular(1, 3, 1, 1, 1)}, {}, o).gpu.reason, o.gpu_unavailable_reason);
  GpuLog failed;
  failed.pid = 1;
  failed.errors.push_back("cuptiActivityEnable: CUPTI_ERROR_NO_DEVICE");
  TrainerProfile t = AnalyzeSteps({Regular(1, 3, 1, 1, 1)}, {failed}, o);
  EXPECT_FALSE(t.gpu.available);
  EXPECT_EQ(t.gpu.reason, "CUPTI: cuptiActivityEnable: CUPTI_ERROR_NO_DEVICE");
  GpuLog empty;
  empty.pid = 1;
  EXPECT_NE(AnalyzeSteps({Regular(1, 3, 1, 1, 1)}, {empty}, {}).gpu.reason.find("no GPU activity"),
            std::string::npos);
  EXPECT_NE(
      AnalyzeSteps({Regular(1, 3, 1, 1, 1)}, {}, {}).gpu.reason.find("did not initialize CUDA"),
      std::string::npos);
}

TEST(AnalyzeSteps, GivenOverheadLinesThenCostPerStepIsReported) {
  StepLog log = Regular(1, 11, 0, 10, 1);
  log.overhead_s = 0.0011;
  log.overhead_records = 11;
  StepAnalysisOptions o;
  o.warmup_steps = 0;
  TrainerProfile t = AnalyzeSteps({log}, {}, o);
  EXPECT_NEAR(t.instrumentation_s_per_step, 0.0001, 1e-12);
  EXPECT_NEAR(t.instrumentation_overhead, 0.01, 1e-9);
}

}  // namespace
}  // namespace gm
