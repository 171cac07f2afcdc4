// The planner's model (planner/model.h), one hand-computed case per binding limit,
// the cut choice, CPU division across jobs, the sbatch writer, the cluster readers
// and plan.json. The figures: a pipeline of 0.01 CPU-s per sample whose 4-thread run
// made 320 samples/s, so the scaling efficiency is 320 * 0.01 / 4 = 0.8 and one
// worker CPU delivers 0.8 / 0.01 = 80 samples/s at the full cut. Its 1-thread run
// made 80 samples/s: the same efficiency, so worker size does not matter here.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/plan.h"
#include "core/store/run_store_fake.h"
#include "core/store/sqlite_run_store.h"
#include "planner/cluster.h"
#include "planner/divide.h"
#include "planner/model.h"
#include "planner/sbatch.h"
#include "tests/unit/test_util.h"

namespace gm::planner {
namespace {

Profile TestProfile(double demand) {
  Profile p;
  p.created_utc = "2026-11-30T06:00:00Z";
  p.host = "dev";
  p.cores = 4;
  p.verdict = "input-bound";
  PipelineProfile pipe;
  pipe.path = "pipeline.json";
  pipe.sha256 = "ab";
  pipe.batch_size = 32;
  pipe.samples = 100;
  pipe.cpu_s_per_sample = 0.01;
  pipe.samples_per_s_per_core = 100;
  pipe.peak_rss_bytes = 1ull << 30;
  pipe.runs = {{1, 100, 1.25, 1.0, 80, 100}, {4, 400, 1.25, 4.0, 320, 100}};
  StageProfile decode;
  decode.index = 0;
  decode.name = "decode";
  decode.cpu_s_per_sample = 0.006;
  decode.bytes_in_per_sample = 50000;
  decode.bytes_out_per_sample = 150000;
  StageProfile normalize;
  normalize.index = 1;
  normalize.name = "normalize";
  normalize.cpu_s_per_sample = 0.002;
  normalize.bytes_in_per_sample = 150000;
  normalize.bytes_out_per_sample = 100000;
  pipe.stages = {decode, normalize};
  pipe.stage_cpu_s_per_sample = 0.008;
  pipe.cuts = {{-1, true, 50000, 0, 0.008, ""},
               {0, true, 150000, 0.006, 0.002, ""},
               {1, true, 100000, 0.008, 0, ""}};
  p.pipeline = pipe;
  if (demand > 0) {
    TrainerProfile t;
    t.command = {"python3", "train.py"};
    t.demand_samples_per_s = demand;
    t.batch_size = 32;
    p.trainer = t;
  }
  return p;
}

ClusterNode Node(const std::string& name, const std::string& partition, int cpus, int gpus,
                 uint64_t memory_mb = 64000) {
  ClusterNode n;
  n.name = name;
  n.partitions = {partition};
  n.cpus = cpus;
  n.gpus = gpus;
  n.memory_mb = memory_mb;
  return n;
}

// gpu1: 8 CPUs and 2 GPUs; cpu1, cpu2: 16 CPUs each, in the default partition.
Cluster TestCluster(uint64_t cpu_node_memory_mb = 64000) {
  Cluster c;
  c.source = "test";
  c.partitions = {{"gpu", false, true}, {"cpu", true, true}};
  c.nodes = {Node("gpu1", "gpu", 8, 2), Node("cpu1", "cpu", 16, 0, cpu_node_memory_mb),
             Node("cpu2", "cpu", 16, 0, cpu_node_memory_mb)};
  return c;
}

int Cpus(const Plan& p) {
  int n = 0;
  for (const PlanWorker& w : p.workers) n += w.cpus;
  return n;
}

TEST(PlannerTest, EfficiencyAndRatePerCpuComeFromTheProfile) {
  auto r = MeasuredCpuRate(TestProfile(400), "profile.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->efficiency(4), 0.8);
  EXPECT_DOUBLE_EQ(r->samples_per_s_per_cpu(4), 80);
}

TEST(PlannerTest, EfficiencyIsInterpolatedBetweenTheMeasuredRuns) {
  // 1 thread: 100/s at 0.01 CPU-s per sample = 100% of a CPU; 4 threads: 80%.
  Profile p = TestProfile(400);
  p.pipeline->runs[0].samples_per_s = 100;
  auto r = MeasuredCpuRate(p, "profile.json");
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->efficiency(1), 1.0);
  EXPECT_NEAR(r->efficiency(2), 1.0 - 0.2 / 3, 1e-12);
  EXPECT_NEAR(r->efficiency(3), 1.0 - 0.4 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(r->efficiency(4), 0.8);
  EXPECT_DOUBLE_EQ(r->efficiency(16), 0.8);
  // 400/s on gpu1's 7 spare CPUs: a 4-CPU worker (320/s), then the smallest worker
  // that covers the last 80/s: 1 CPU at 100/s.
  auto plan = MakePlan(p, TestCluster(), {});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->workers.size(), 2u);
  EXPECT_EQ(plan->workers[1].cpus, 1);
  EXPECT_NEAR(plan->workers[1].samples_per_s, 80, 1e-9);
  PlanOptions two;
  two.cpus_per_worker = 2;  // 2-CPU workers: 2 x 93.3/s each
  plan = MakePlan(p, TestCluster(), two);
  ASSERT_TRUE(plan.ok());
  EXPECT_NEAR(plan->model.scaling_efficiency, 1.0 - 0.2 / 3, 1e-12);
  EXPECT_NEAR(plan->workers[0].samples_per_s, 2 * 100 * (1.0 - 0.2 / 3), 1e-9);
  EXPECT_EQ(plan->workers.size(), 3u);  // 186.7 + 186.7 + 26.7 (a 1-CPU worker)
  EXPECT_EQ(plan->workers[2].cpus, 1);
}

PlanOptions Fast(double nic_gbps = 100) {
  PlanOptions o;
  o.nic_gbps = nic_gbps;
  return o;
}

TEST(PlannerTest, ARunOnOneCpuPricesASampleByThatCpusRate) {
  // The 1-thread run confined to one CPU made 125/s: 8 ms of that CPU per sample,
  // whatever the process's CPU figures say; its 4-thread run 320/s is 64% of 4 such
  // CPUs.
  Profile p = TestProfile(400);
  p.pipeline->runs[0].samples_per_s = 125;
  p.pipeline->runs[0].cpus = 1;
  auto r = MeasuredCpuRate(p, "profile.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->cpu_s_per_sample, 0.008);
  EXPECT_DOUBLE_EQ(r->efficiency(1), 1.0);
  EXPECT_DOUBLE_EQ(r->efficiency(4), 0.64);
  EXPECT_NE(r->efficiency_source.find("the 1-thread run on one CPU delivered 125 samples/s"),
            std::string::npos)
      << r->efficiency_source;
  // A run on more CPUs may deliver more per CPU (its reader and batcher no longer
  // share one CPU with the stages), up to 1.5x.
  p.pipeline->runs[1].samples_per_s = 4 * 125 * 1.2;
  r = MeasuredCpuRate(p, "profile.json");
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->efficiency(4), 1.2, 1e-12);
  p.pipeline->runs[1].samples_per_s = 4 * 125 * 3;
  r = MeasuredCpuRate(p, "profile.json");
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->efficiency(4), 1.5);
}

// A frame costs 32 us (1 us per sample of a batch of 32); a byte over TCP 1 ns:
// 0.1 ms per sample of 100 kB at the full cut, 0.101 ms with the frame.
Profile WithDelivery(double demand) {
  Profile p = TestProfile(demand);
  p.pipeline->delivery.frame_cpu_s = 32e-6;
  p.pipeline->delivery.tcp_cpu_s_per_byte = 1e-9;
  return p;
}

TEST(PlannerTest, AWorkerOffTheTrainersNodePaysForTheWireAndOneOnItForTheFrame) {
  // 5000/s is more than the cluster makes: gpu1's 7 spare CPUs, then 4-CPU workers
  // on cpu1 and cpu2, each CPU at efficiency 0.8.
  auto plan = MakePlan(WithDelivery(5000), TestCluster(), Fast());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->workers.size(), 10u);
  EXPECT_TRUE(plan->workers[0].on_trainer_node);
  EXPECT_NEAR(plan->workers[0].samples_per_s, 4 * 0.8 / (0.01 + 1e-6), 1e-9);
  EXPECT_FALSE(plan->workers[2].on_trainer_node);
  EXPECT_NEAR(plan->workers[2].samples_per_s, 4 * 0.8 / (0.01 + 1e-6 + 1e-4), 1e-9);
  EXPECT_NEAR(plan->model.worker_cpu_s_per_sample, 0.01 + 1e-6, 1e-15);
  const auto note = std::find_if(plan->notes.begin(), plan->notes.end(), [](const std::string& n) {
    return n.starts_with("delivery, measured on the profile's host");
  });
  ASSERT_NE(note, plan->notes.end());
  EXPECT_NE(note->find("one frame per batch of 32 costs 32 us"), std::string::npos) << *note;
  EXPECT_NE(note->find("over TCP each MB costs 1.049 ms, 0.101 ms per sample of 100.0 kB"),
            std::string::npos)
      << *note;

  // Without shared memory ($GOLDMINER_SAME_HOST off) the trainer's node pays the wire too.
  PlanOptions tcp = Fast();
  tcp.same_host = false;
  plan = MakePlan(WithDelivery(5000), TestCluster(), tcp);
  ASSERT_TRUE(plan.ok());
  EXPECT_NEAR(plan->workers[0].samples_per_s, 4 * 0.8 / (0.01 + 1e-6 + 1e-4), 1e-9);
}

TEST(PlannerTest, AProfileWithoutDeliveryCostsSaysSendingIsNotPriced) {
  auto plan = MakePlan(TestProfile(400), TestCluster(), {});
  ASSERT_TRUE(plan.ok());
  EXPECT_NEAR(plan->workers[0].samples_per_s, 320, 1e-9);
  EXPECT_TRUE(std::any_of(plan->notes.begin(), plan->notes.end(), [](const std::string& n) {
    return n.starts_with("the profile has no delivery costs");
  }));
}

TEST(PlannerTest, TargetMetOnTheTrainersNodeSpareCpus) {
  // 400/s needs 5 CPUs: gpu1 has 8 - 1 (trainer) = 7 spare: a 4-CPU and a 1-CPU worker.
  auto plan = MakePlan(TestProfile(400), TestCluster(), {});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->prediction.limit, "none");
  EXPECT_NEAR(plan->prediction.samples_per_s, 400, 1e-6);
  ASSERT_EQ(plan->workers.size(), 2u);
  EXPECT_EQ(plan->workers[0].node, "gpu1");
  EXPECT_EQ(plan->workers[0].cpus, 4);
  EXPECT_NEAR(plan->workers[0].samples_per_s, 320, 1e-9);
  EXPECT_EQ(plan->workers[1].cpus, 1);
  EXPECT_TRUE(plan->workers[1].on_trainer_node);
  ASSERT_EQ(plan->trainer_nodes.size(), 1u);
  EXPECT_EQ(plan->trainer_nodes[0].name, "gpu1");
  EXPECT_EQ(plan->trainer_nodes[0].gpus, 1);
  EXPECT_EQ(plan->trainer_nodes[0].cpus, 1);
  EXPECT_NEAR(*plan->prediction.stall_fraction, 0, 1e-9);
  EXPECT_NEAR(plan->model.cpus_needed, 5, 1e-9);
  EXPECT_NEAR(plan->prediction.cpu_hours_per_million_samples, 5 * (1e6 / 400) / 3600, 1e-9);
  EXPECT_EQ(plan->run.workers, 2);
  EXPECT_EQ(plan->run.threads_per_worker, 4);
  EXPECT_EQ(plan->run.world_size, 1);
  EXPECT_EQ(plan->run.command, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_EQ(plan->cut.after_stage, 1);
  EXPECT_TRUE(plan->cut.runnable);
}

TEST(PlannerTest, CpusBind) {
  // 5000/s needs 62.5 CPUs; gpu1 gives 7 (4 + 3), cpu1 and cpu2 four 4-CPU workers
  // each: 39 CPUs = 3120/s.
  auto plan = MakePlan(TestProfile(5000), TestCluster(), Fast());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->prediction.limit, "cpus");
  EXPECT_NEAR(plan->prediction.samples_per_s, 3120, 0.01);
  EXPECT_EQ(Cpus(*plan), 39);
  EXPECT_EQ(plan->workers.size(), 10u);
  EXPECT_NEAR(plan->prediction.shortfall_samples_per_s, 1880, 0.01);
  EXPECT_NEAR(*plan->prediction.stall_fraction, 1 - 3120.0 / 5000, 1e-5);
  EXPECT_NE(plan->prediction.limit_detail.find("needs 62.5 CPUs (23.5 more)"), std::string::npos)
      << plan->prediction.limit_detail;
}

TEST(PlannerTest, NetworkBinds) {
  // 1 Gb/s into gpu1 = 1.25e8 B/s / 1e5 B per sample = 1250/s from CPU nodes, plus
  // 560/s from gpu1's own 7 CPUs.
  auto plan = MakePlan(TestProfile(5000), TestCluster(), Fast(1));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->prediction.limit, "network");
  EXPECT_NEAR(plan->prediction.samples_per_s, 1810, 0.01);
  EXPECT_NEAR(plan->prediction.network_bytes_per_s, 1.25e8, 1e3);
}

TEST(PlannerTest, MemoryBinds) {
  // 3000 MB per CPU node holds two workers of 1 GiB: 7 + 4 x 4 CPUs = 23 CPUs = 1840/s.
  auto plan = MakePlan(TestProfile(5000), TestCluster(3000), Fast());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->prediction.limit, "memory");
  EXPECT_NEAR(plan->prediction.samples_per_s, 1840, 0.01);
  EXPECT_EQ(plan->workers.size(), 6u);
}

TEST(PlannerTest, WorkersOnTheTrainersNodeCountTheSegmentsTheyLend) {
  auto plan = MakePlan(TestProfile(5000), TestCluster(), Fast());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  // 8 batches of 32 samples at the cut's bytes per sample, on gpu1 only.
  const uint64_t segments = static_cast<uint64_t>(8 * 32 * plan->cut.bytes_per_sample);
  ASSERT_GT(segments, 0u);
  int on_trainer = 0;
  for (const PlanWorker& w : plan->workers) {
    EXPECT_EQ(w.memory_bytes, (1ull << 30) + (w.on_trainer_node ? segments : 0)) << w.node;
    on_trainer += w.on_trainer_node ? 1 : 0;
  }
  EXPECT_EQ(on_trainer, 2);
  // gpu1 with memory for one worker's peak RSS but not its segments too: no
  // worker there; the CPU nodes still take theirs.
  Cluster tight = TestCluster();
  tight.nodes[0].memory_mb = 1030;  // 1 GiB fits, 1 GiB + 8 batches does not
  auto squeezed = MakePlan(TestProfile(5000), tight, Fast());
  ASSERT_TRUE(squeezed.ok()) << squeezed.status().message();
  for (const PlanWorker& w : squeezed->workers) EXPECT_FALSE(w.on_trainer_node) << w.node;
  EXPECT_FALSE(squeezed->workers.empty());
}

TEST(PlannerTest, MaxWorkersBinds) {
  PlanOptions o = Fast();
  o.max_workers = 3;  // gpu1: 4 + 3 CPUs, then one 4-CPU worker on cpu1: 11 CPUs = 880/s
  auto plan = MakePlan(TestProfile(5000), TestCluster(), o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->prediction.limit, "max-workers");
  EXPECT_NEAR(plan->prediction.samples_per_s, 880, 0.01);
  EXPECT_EQ(plan->workers.size(), 3u);
}

TEST(PlannerTest, TheTrainerBinds) {
  PlanOptions o;
  o.target_samples_per_s = 600;  // the trainer consumes 400/s
  auto plan = MakePlan(TestProfile(400), TestCluster(), o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->prediction.limit, "trainer");
  EXPECT_NEAR(plan->prediction.samples_per_s, 400, 1e-6);
  EXPECT_NEAR(plan->prediction.shortfall_samples_per_s, 200, 1e-6);
  EXPECT_EQ(plan->model.target_source, "--target-rate");
  EXPECT_EQ(Cpus(*plan), 5);  // no CPU wasted beyond what the trainer can take
}

Profile StatefulTail() {
  Profile p = TestProfile(5000);
  p.pipeline->stages[1].stateless = false;
  p.pipeline->cuts[2].allowed = false;
  p.pipeline->cuts[2].reason = "stage 1 keeps state";
  return p;
}

TEST(PlannerTest, TheTrainerNodesCpusBindTheClientsTail) {
  // Only cuts -1 and 0 are allowed (stage 1 keeps state). At cut 0 the client's
  // stage needs 0.002 / 0.8 CPU-s per sample on gpu1, whose 7 spare CPUs allow
  // 2800/s; workers (0.008 CPU-s per sample: 100/s per CPU) need 28 CPUs of cpu1
  // and cpu2's 32. Cut -1 leaves 0.008 per sample to the client: 700/s.
  PlanOptions o = Fast();
  o.all_cuts = true;
  auto plan = MakePlan(StatefulTail(), TestCluster(), o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->prediction.limit, "trainer-node-cpus");
  EXPECT_NEAR(plan->prediction.samples_per_s, 2800, 0.01);
  EXPECT_EQ(plan->cut.after_stage, 0);
  EXPECT_FALSE(plan->cut.runnable);
  ASSERT_EQ(plan->cuts.size(), 2u);
  EXPECT_NEAR(plan->cuts[0].samples_per_s, 700, 0.01);
  EXPECT_TRUE(plan->cuts[1].chosen);
  EXPECT_EQ(plan->trainer_nodes[0].cpus, 8);
  // The plan says how to make its cut the file's.
  const bool says = std::any_of(plan->notes.begin(), plan->notes.end(), [](const std::string& n) {
    return n.find("the chosen cut (after stage 0) is not the one pipeline.json makes") !=
               std::string::npos &&
           n.find("mark the stages after it \"on\": \"device\"") != std::string::npos;
  });
  EXPECT_TRUE(says) << "no note on how to run the chosen cut";
}

TEST(PlannerTest, ADeviceTailOnTheTrainersGpuTakesNoCpuOfItsNode) {
  // Stage 1 (normalize) could run on the device: at cut 0 the trainer's GPU
  // applies it, so gpu1's 7 spare CPUs all go to workers: 39 worker CPUs at
  // 0.8 / 0.008 = 100/s each, 3900/s (against 3120/s at the last cut, 80/s per CPU).
  Profile p = TestProfile(5000);
  p.pipeline->cuts[1].device_tail = true;
  PlanOptions o = Fast();
  o.all_cuts = true;
  auto plan = MakePlan(p, TestCluster(), o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->cut.after_stage, 0);
  EXPECT_NEAR(plan->prediction.samples_per_s, 3900, 0.01);
  EXPECT_EQ(plan->prediction.limit, "cpus");
  EXPECT_EQ(plan->trainer_nodes[0].cpus, 1) << "only the trainer's own CPU is kept";
  const bool says = std::any_of(plan->notes.begin(), plan->notes.end(), [](const std::string& n) {
    return n.find("the stages after stage 0 run on the trainer's GPU") != std::string::npos;
  });
  EXPECT_TRUE(says);
  // The same cut without the flag: the tail takes CPUs of gpu1 (0.002 / 0.8 CPU-s
  // per sample), and fewer are left for workers.
  p.pipeline->cuts[1].device_tail = false;
  auto on_cpu = MakePlan(p, TestCluster(), o);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status().message();
  EXPECT_LT(on_cpu->cuts[1].samples_per_s, 3900 - 1);
}

TEST(PlannerTest, ThePipelinesDeviceCutIsTheRunnableOne) {
  // pipeline.json leaves the stage after stage 0 "on": "device": run executes
  // that cut, not the one after the last stage.
  Profile p = TestProfile(5000);
  p.pipeline->cuts[1].pipeline_cut = true;
  ASSERT_EQ(p.pipeline->cuts[1].after_stage, 0);
  auto plan = MakePlan(p, TestCluster(), Fast());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->cut.after_stage, 0);
  EXPECT_TRUE(plan->cut.runnable);
  for (const PlanCutOption& c : plan->cuts) EXPECT_EQ(c.runnable, c.after_stage == 0);
}

TEST(PlannerTest, NoRunnableCutIsAnError) {
  auto plan = MakePlan(StatefulTail(), TestCluster(), Fast());
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("no allowed cut is runnable"), std::string::npos);
}

TEST(PlannerTest, AmongCutsThatMeetTheTargetTheFewestBytesWin) {
  PlanOptions o;
  o.all_cuts = true;  // at 400/s every cut fits on gpu1; cut -1 ships 50 kB per sample
  auto plan = MakePlan(TestProfile(400), TestCluster(), o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->cut.after_stage, -1);
  EXPECT_EQ(plan->prediction.limit, "none");
  for (const PlanCutOption& c : plan->cuts) EXPECT_NEAR(c.samples_per_s, 400, 1e-6);
}

TEST(PlannerTest, AnUnchangedProgramIsPlannedFromItsDataLoaderWorkers) {
  // A profile of a program with its own DataLoader: 2 worker processes at 10 ms CPU
  // per sample (one CPU each: 100 samples/s per CPU), 150 kB per sample. 400/s needs
  // 4 CPUs: one 4-CPU worker on gpu1's spare CPUs, each CPU a virtual worker.
  Profile p = TestProfile(400);
  p.pipeline.reset();
  p.trainer->dataloader = DataLoaderProfile{2, 1.5, 150, 0.01, 150000};
  auto plan = MakePlan(p, TestCluster(), {});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->prediction.limit, "none");
  EXPECT_NEAR(plan->prediction.samples_per_s, 400, 1e-6);
  EXPECT_NEAR(plan->model.cpus_needed, 4, 1e-9);
  EXPECT_NEAR(plan->model.scaling_efficiency, 1, 1e-12);
  EXPECT_EQ(Cpus(*plan), 4);
  EXPECT_EQ(plan->run.pipeline, "");  // the workers serve only its DataLoaders
  EXPECT_EQ(plan->sources.pipeline_path, "");
  EXPECT_EQ(plan->run.dataloader_workers, 4);
  EXPECT_NEAR(plan->cut.bytes_per_sample, 150000, 1e-9);
  ASSERT_FALSE(plan->notes.empty());
  EXPECT_NE(plan->notes[0].find("an unchanged program: its DataLoader's 2 worker process(es) "
                                "used 10.000 ms CPU per sample"),
            std::string::npos)
      << plan->notes[0];
  EXPECT_NE(plan->notes[0].find("give --dataloader-workers 2 to keep them"), std::string::npos);
  for (const std::string& n : plan->notes) EXPECT_FALSE(n.starts_with("scaling efficiency ")) << n;
  auto back = PlanFromJson(PlanToJson(*plan), "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, *plan);

  // As many worker processes as the CPUs planned, or more: its own count stays.
  p.trainer->dataloader->workers = 8;
  plan = MakePlan(p, TestCluster(), {});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->run.dataloader_workers, 0);

  // A pipeline part wins over the DataLoader figures.
  p = TestProfile(400);
  p.trainer->dataloader = DataLoaderProfile{2, 1.5, 150, 0.5, 1};
  plan = MakePlan(p, TestCluster(), {});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->run.pipeline, "pipeline.json");
  EXPECT_EQ(plan->run.dataloader_workers, 0);
}

TEST(PlannerTest, AnUnchangedProgramPricedOnTheNativeEngineIsPlannedByTheEnginesCost) {
  // Its own 2 workers: 10 ms CPU per sample; the engine: 2.5 ms to the end (602 kB,
  // float32), 2.2 ms to the uint8 cut (150 kB). 400/s needs 1 CPU, not 4.
  Profile p = TestProfile(400);
  p.pipeline.reset();
  p.trainer->dataloader = DataLoaderProfile{2, 1.5, 150, 0.01, 602112};
  p.trainer->native = NativeProfile{32, 0.0025, 602112, 0.0022, 150528};
  auto plan = MakePlan(p, TestCluster(), {});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_NEAR(plan->model.cpus_needed, 1, 1e-9);
  EXPECT_EQ(Cpus(*plan), 1);
  EXPECT_EQ(plan->run.offload, "native");
  EXPECT_EQ(plan->run.pipeline, "");
  EXPECT_EQ(plan->run.dataloader_workers, 1) << "the engine's samples do not depend on it";
  EXPECT_NEAR(plan->cut.bytes_per_sample, 150528, 1e-9) << "uint8 from other hosts";
  ASSERT_FALSE(plan->notes.empty());
  EXPECT_NE(plan->notes[0].find("an unchanged program on goldminer's native engine (profile "
                                "--offload native): 2.500 ms CPU per sample, against 10.000 ms "
                                "in its 2 DataLoader worker process(es) (4.00x)"),
            std::string::npos)
      << plan->notes[0];
  EXPECT_NE(plan->notes[0].find("run --plan runs it with --offload native and 1 virtual workers"),
            std::string::npos)
      << plan->notes[0];
  auto back = PlanFromJson(PlanToJson(*plan), "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, *plan);
  EXPECT_EQ(PlanToJson(*plan).at("run").at("offload"), "native");

  // A program whose DataLoader has no worker processes (num_workers=0) is priced too.
  p.trainer->dataloader.reset();
  plan = MakePlan(p, TestCluster(), {});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->run.offload, "native");
  EXPECT_EQ(plan->notes[0].find("against"), std::string::npos) << plan->notes[0];

  // A plan.json whose offload is not one run knows is an error naming it.
  nlohmann::json j = PlanToJson(*plan);
  j["run"]["offload"] = "fast";
  auto bad = PlanFromJson(j, "plan.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "plan.json: $.run.offload: expected \"native\" or absent, got \"fast\"");
}

TEST(PlannerTest, ErrorsNameTheInput) {
  Profile no_pipeline = TestProfile(400);
  no_pipeline.pipeline.reset();
  PlanOptions o;
  o.profile_path = "p.json";
  auto r = MakePlan(no_pipeline, TestCluster(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("p.json has no pipeline part"), std::string::npos);

  r = MakePlan(TestProfile(0), TestCluster(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("give --target-rate"), std::string::npos);

  Cluster empty;
  empty.source = "file:c.json";
  r = MakePlan(TestProfile(400), empty, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("(file:c.json) has no nodes"), std::string::npos);

  o.partition = "nosuch";
  r = MakePlan(TestProfile(400), TestCluster(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "--partition nosuch: no such partition in the cluster (test); it has: gpu, cpu");
  o.partition.clear();

  Cluster busy = TestCluster();
  busy.nodes[0].gpus_alloc = 2;
  r = MakePlan(TestProfile(400), busy, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("GPU partition gpu has 0 free GPU(s)"), std::string::npos)
      << r.status().message();

  Cluster cpus_only;
  cpus_only.source = "test";
  cpus_only.partitions = {{"cpu", true, true}};
  cpus_only.nodes = {Node("cpu1", "cpu", 16, 0)};
  o.gpus = 1;
  r = MakePlan(TestProfile(400), cpus_only, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("has no GPUs"), std::string::npos);
  o.gpus = -1;  // without GPUs the trainer goes to a CPU node
  r = MakePlan(TestProfile(400), cpus_only, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->model.gpus, 0);
  EXPECT_EQ(r->trainer_nodes[0].name, "cpu1");
}

TEST(PlannerTest, DownAndDrainedNodesTakeNoWorkers) {
  Cluster c = TestCluster();
  c.nodes[1].state = "down*";
  c.nodes[2].state = "idle+drain";
  auto plan = MakePlan(TestProfile(5000), c, Fast());
  ASSERT_TRUE(plan.ok());
  EXPECT_NEAR(plan->prediction.samples_per_s, 560, 0.01);  // gpu1's 7 spare CPUs only
  EXPECT_EQ(plan->prediction.limit, "cpus");
}

TEST(DivideCpusTest, MarginalGainAgainstAnEqualSplit) {
  // A needs 5 CPUs (400/s at 80/CPU), B 20 (1000/s at 50/CPU). A's CPUs gain 0.2 of
  // its need each, B's 0.05: A gets 5, B the other 7. Equal split: 6 and 6.
  auto d = DivideCpus({{"a", 400, 80}, {"b", 1000, 50}}, 12, 4);
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->jobs.size(), 2u);
  EXPECT_EQ(d->jobs[0].cpus, 5);
  EXPECT_EQ(d->jobs[1].cpus, 7);
  EXPECT_EQ(d->jobs[1].workers, 2);
  EXPECT_DOUBLE_EQ(d->jobs[0].samples_per_s, 400);
  EXPECT_DOUBLE_EQ(d->jobs[1].samples_per_s, 350);
  EXPECT_DOUBLE_EQ(d->jobs[1].equal_samples_per_s, 300);
  EXPECT_DOUBLE_EQ(d->jobs[0].speedup, 1.0);
  EXPECT_NEAR(d->jobs[1].speedup, 350.0 / 300, 1e-12);
  EXPECT_NEAR(d->normalized_sum, 1.35, 1e-12);
  EXPECT_NEAR(d->equal_normalized_sum, 1.3, 1e-12);
  EXPECT_EQ(d->cpus_unused, 0);

  auto all = DivideCpus({{"a", 400, 80}}, 12, 4);  // saturated after 5
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->cpus_unused, 7);
  EXPECT_FALSE(DivideCpus({}, 4, 1).ok());
  EXPECT_FALSE(DivideCpus({{"a", 0, 80}}, 4, 1).ok());
}

TEST(SbatchTest, PlainJobWhenEveryWorkerSharesTheTrainersNode) {
  auto plan = MakePlan(TestProfile(400), TestCluster(), {});
  ASSERT_TRUE(plan.ok());
  SbatchOptions o;
  o.goldminer = "/opt/goldminer/bin/goldminer";
  o.plan_path = "/home/u/plan.json";
  const std::string s = SbatchScript(*plan, o);
  EXPECT_EQ(s.find("hetjob"), std::string::npos);
  EXPECT_NE(s.find("#SBATCH --partition=gpu\n"), std::string::npos) << s;
  EXPECT_NE(s.find("#SBATCH --cpus-per-task=6\n"), std::string::npos) << s;  // 1 + 4 + 1
  EXPECT_NE(s.find("#SBATCH --gres=gpu:1\n"), std::string::npos) << s;
  // The trainer's default for its one GPU rank plus the memory of its node's workers.
  uint64_t workers_mb = 0;
  for (const PlanWorker& w : plan->workers) workers_mb += WorkerMemoryMb(w);
  EXPECT_GT(workers_mb, 2u * 1024) << s;  // 1 GiB peak RSS each, + the batches they lend
  EXPECT_NE(s.find("#SBATCH --mem=" + std::to_string(kGpuTrainerMemoryMb + workers_mb) + "M\n"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("#SBATCH --mem-per-cpu"), std::string::npos) << s;
  EXPECT_EQ(s.find("No --mem"), std::string::npos) << s;
  EXPECT_NE(s.find("exec /opt/goldminer/bin/goldminer run --plan /home/u/plan.json -- python3 "
                   "train.py\n"),
            std::string::npos)
      << s;
}

TEST(SbatchTest, HeterogeneousJobWhenWorkersGoToCpuNodes) {
  PlanOptions po = Fast();
  po.command = {"python3", "train.py", "--name", "it's a run"};
  auto plan = MakePlan(TestProfile(5000), TestCluster(), po);
  ASSERT_TRUE(plan.ok());
  const std::string s = SbatchScript(*plan, {});
  const size_t het = s.find("#SBATCH hetjob\n");
  ASSERT_NE(het, std::string::npos) << s;
  EXPECT_LT(s.find("#SBATCH --cpus-per-task=8\n"), het) << s;  // 1 + 4 + 3 on gpu1
  EXPECT_GT(s.find("#SBATCH --partition=cpu\n"), het);
  // cpu1 and cpu2 take 4 workers of 4 CPUs and 1 GiB each: at most 4 to a node, and
  // each node's --mem covers 4 of them.
  EXPECT_NE(s.find("#SBATCH --ntasks=8\n#SBATCH --ntasks-per-node=4\n#SBATCH "
                   "--cpus-per-task=4\n#SBATCH --mem=4096M\n"),
            std::string::npos)
      << s;
  // Component 0: --mem too, and no --mem-per-cpu anywhere (sbatch refuses the mix).
  const size_t mem0 = s.find("#SBATCH --mem=");
  EXPECT_LT(mem0, het) << s;
  EXPECT_EQ(s.find("#SBATCH --mem-per-cpu"), std::string::npos) << s;
  EXPECT_NE(s.find("-- python3 train.py --name 'it'\\''s a run'\n"), std::string::npos) << s;
}

TEST(SbatchTest, UnmeasuredMemoryGetsTheStatedDefaults) {
  // Given a profile without peak RSS and a cluster without GPUs,
  Profile p = TestProfile(5000);
  p.pipeline->peak_rss_bytes = 0;
  Cluster cpus_only;
  cpus_only.source = "test";
  cpus_only.partitions = {{"cpu", true, true}};
  cpus_only.nodes = {Node("cpu1", "cpu", 16, 0), Node("cpu2", "cpu", 16, 0)};
  auto plan = MakePlan(p, cpus_only, Fast());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->model.gpus, 0);
  // when its job script is written,
  const std::string s = SbatchScript(*plan, {});
  // then no GPU is asked, the trainer counts kCpuTrainerMemoryMb and each worker
  // kWorkerMemoryMbPerCpu per CPU, and the script's comments say so.
  EXPECT_EQ(s.find("--gres"), std::string::npos) << s;
  uint64_t on_node_mb = 0;
  int on_node_cpus = 0;
  for (const PlanWorker& w : plan->workers) {
    if (!w.on_trainer_node) continue;
    on_node_mb += WorkerMemoryMb(w);
    on_node_cpus += w.cpus;
  }
  EXPECT_EQ(on_node_mb, kWorkerMemoryMbPerCpu * static_cast<uint64_t>(on_node_cpus));
  EXPECT_NE(s.find("#SBATCH --mem=" + std::to_string(kCpuTrainerMemoryMb + on_node_mb) + "M\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("2048M for the trainer (a default for a CPU trainer"), std::string::npos) << s;
  EXPECT_NE(s.find("or 1024M per CPU when not measured"), std::string::npos) << s;
}

TEST(SbatchTest, WorkerMemoryMbRoundsUpOrCountsPerCpu) {
  PlanWorker w;
  w.cpus = 3;
  w.memory_bytes = (uint64_t{1} << 30) + 1;
  EXPECT_EQ(WorkerMemoryMb(w), 1025u);
  w.memory_bytes = 0;
  EXPECT_EQ(WorkerMemoryMb(w), 3 * kWorkerMemoryMbPerCpu);
}

TEST(SbatchTest, ShellQuote) {
  EXPECT_EQ(ShellQuote("a/b-c_d.py"), "a/b-c_d.py");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("$(rm -rf /)"), "'$(rm -rf /)'");
  EXPECT_EQ(ShellQuote("a'b"), "'a'\\''b'");
}

// From a real `scontrol show node --oneliner` of Slurm 22.05 (trimmed) and sinfo.
constexpr const char* kNodes =
    "NodeName=cpu1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=8 CPUTot=8 "
    "CPULoad=0.84 Gres=(null) NodeAddr=127.0.0.1 OS=Linux 6.18.44 #1 SMP PREEMPT_DYNAMIC @0  "
    "RealMemory=16000 AllocMem=0 FreeMem=18348 State=IDLE Partitions=cpu  "
    "CfgTRES=cpu=8,mem=16000M,billing=8 AllocTRES= CapWatts=n/a\n"
    "NodeName=gpu1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=3 CPUEfctv=8 CPUTot=8 "
    "Gres=gpu:2 OS=Linux 6.18.44 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=16000 AllocMem=1000 "
    "State=MIXED Partitions=gpu  AllocTRES=cpu=3 Reason=a reason with spaces [root@06:00]\n"
    "NodeName=gpu2 CPUAlloc=0 CPUTot=8 Gres=gpu:a100:4(S:0-1) RealMemory=16000 "
    "State=IDLE+DRAIN Partitions=gpu,debug AllocTRES=cpu=0,gres/gpu=1\n";
constexpr const char* kPartitions =
    "PartitionName=gpu AllowGroups=ALL Default=NO Nodes=gpu[1-2] State=UP TotalCPUs=16\n"
    "PartitionName=cpu AllowGroups=ALL Default=YES Nodes=cpu[1-2] State=UP\n"
    "PartitionName=debug Default=NO Nodes=gpu2 State=DOWN\n";
constexpr const char* kGresUsed = "cpu1|gpu:0|\ngpu1|gpu:1(IDX:0)|\ngpu2|gpu:a100:0(IDX:N/A)|\n";

TEST(ClusterTest, FromScontrolAndSinfo) {
  auto c = ClusterFromScontrol(kNodes, kPartitions, kGresUsed, "scontrol");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->partitions.size(), 3u);
  EXPECT_TRUE(c->partitions[1].is_default);
  EXPECT_FALSE(c->partitions[2].up);
  ASSERT_EQ(c->nodes.size(), 3u);
  const ClusterNode& gpu1 = c->nodes[1];
  EXPECT_EQ(gpu1.cpus, 8);
  EXPECT_EQ(gpu1.cpus_alloc, 3);
  EXPECT_EQ(gpu1.memory_mb, 16000u);
  EXPECT_EQ(gpu1.memory_alloc_mb, 1000u);
  EXPECT_EQ(gpu1.gpus, 2);
  EXPECT_EQ(gpu1.gpus_alloc, 1);  // from GresUsed: AllocTRES does not count GPUs here
  EXPECT_EQ(gpu1.state, "mixed");
  EXPECT_TRUE(gpu1.usable());
  const ClusterNode& gpu2 = c->nodes[2];
  EXPECT_EQ(gpu2.gpus, 4);
  EXPECT_EQ(gpu2.gpus_alloc, 1);  // from AllocTRES gres/gpu=1
  EXPECT_EQ(gpu2.partitions, (std::vector<std::string>{"gpu", "debug"}));
  EXPECT_FALSE(gpu2.usable());
  EXPECT_EQ(c->nodes[0].gpus, 0);

  auto twice = ClusterFromScontrol("NodeName=x CPUTot=2\nNodeName=x CPUTot=2\n", "", "", "s");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("node line 2: node x is listed twice"),
            std::string::npos);

  auto bad = ClusterFromScontrol("NodeName=x CPUTot=lots\n", "", "", "scontrol");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("scontrol: node line 1: CPUTot is not a positive integer"),
            std::string::npos);
}

TEST(ClusterTest, ScontrolFieldsKeepValuesWithSpaces) {
  auto f = ScontrolFields("NodeName=a OS=Linux 6.1 #1 SMP State=IDLE");
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[1].second, "Linux 6.1 #1 SMP");
  EXPECT_EQ(f[2].second, "IDLE");
}

TEST(ClusterTest, NodeStates) {
  ClusterNode n;
  for (const char* s : {"idle", "mixed", "allocated", "mixed+completing"}) {
    n.state = s;
    EXPECT_TRUE(n.usable()) << s;
  }
  for (const char* s : {"down", "down*", "idle*", "idle+drain", "drained", "mixed+drain", "unknown",
                        "idle~", "future", "idle+maint", ""}) {
    n.state = s;
    EXPECT_FALSE(n.usable()) << s;
  }
}

TEST(ClusterTest, JsonRoundTripAndErrors) {
  const Cluster c = TestCluster();
  auto back = ClusterFromJson(ClusterToJson(c), "c.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  Cluster expected = c;
  expected.source = "file:c.json";
  EXPECT_EQ(*back, expected);

  nlohmann::json j = ClusterToJson(c);
  j["nodes"][1]["partitions"] = {"nosuch"};
  EXPECT_EQ(ClusterFromJson(j, "c.json").status().message(),
            "c.json: $.nodes[1]: partition \"nosuch\" is not listed under $.partitions");
  j = ClusterToJson(c);
  j["nodes"][0]["cpus_alloc"] = 9;
  EXPECT_EQ(ClusterFromJson(j, "c.json").status().message(),
            "c.json: $.nodes[0].cpus_alloc: expected an integer from 0 to the node's cpus, got 9");
  j = ClusterToJson(c);
  j["nodes"][2]["name"] = "cpu1";
  EXPECT_NE(ClusterFromJson(j, "c.json").status().message().find("listed twice"),
            std::string::npos);
  j = ClusterToJson(c);
  j["version"] = 2;
  EXPECT_NE(ClusterFromJson(j, "c.json").status().message().find("goldminer.cluster version 2"),
            std::string::npos);
}

TEST(PlanJsonTest, RoundTripAndErrors) {
  PlanOptions o;
  o.epoch_samples = 1281167;
  auto plan = MakePlan(TestProfile(400), TestCluster(), o);
  ASSERT_TRUE(plan.ok());
  auto back = PlanFromJson(PlanToJson(*plan), "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, *plan);

  nlohmann::json j = PlanToJson(*plan);
  j["version"] = 2;
  EXPECT_EQ(PlanFromJson(j, "plan.json").status().message(),
            "plan.json: $.version: this is goldminer.plan version 2; this goldminer reads "
            "version 1 (re-run `goldminer plan` with this goldminer, or use the goldminer that "
            "wrote it)");
  j = PlanToJson(*plan);
  j["schema"] = "goldminer.profile";
  EXPECT_NE(PlanFromJson(j, "plan.json").status().message().find("expected \"goldminer.plan\""),
            std::string::npos);
  j = PlanToJson(*plan);
  j["run"]["workers"] = 0;
  EXPECT_EQ(PlanFromJson(j, "plan.json").status().message(),
            "plan.json: $.run.workers: expected an integer from 1 to 1024, got 0");
  j = PlanToJson(*plan);
  j["run"].erase("pipeline");
  EXPECT_FALSE(PlanFromJson(j, "plan.json").ok());
  j = PlanToJson(*plan);
  j["run"]["dataloader_workers"] = 1025;
  EXPECT_EQ(PlanFromJson(j, "plan.json").status().message(),
            "plan.json: $.run.dataloader_workers: expected an integer from 0 to 1024, got 1025");
  j["run"].erase("dataloader_workers");  // a plan from before the field: each keeps its own
  ASSERT_TRUE(PlanFromJson(j, "plan.json").ok());
  EXPECT_EQ(PlanFromJson(j, "plan.json")->run.dataloader_workers, 0);
}

template <typename Store>
void ChecksPlansAreRecorded(Store& store) {
  auto profile_id = store.AddProfile(TestProfile(400));
  ASSERT_TRUE(profile_id.ok()) << profile_id.status().message();
  auto plan = MakePlan(TestProfile(400), TestCluster(), {});
  ASSERT_TRUE(plan.ok());
  auto id = store.AddPlan(*plan, *profile_id);
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ(*id, 1);
  auto unknown = store.AddPlan(*plan, 99);
  EXPECT_EQ(unknown.status().code(), Code::kNotFound);
  auto list = store.ListPlans();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].profile_id, *profile_id);
  auto doc = nlohmann::json::parse((*list)[0].json);
  EXPECT_EQ(*PlanFromJson(doc, "stored"), *plan);
  // Records point at each other by digest: the plan at its profile, a run at its plan.
  EXPECT_EQ(plan->sources.profile_sha256, ProfileDigest(TestProfile(400)));
  EXPECT_EQ(*store.FindProfile(plan->sources.profile_sha256), std::optional<int64_t>(*profile_id));
  EXPECT_EQ(*FindPlanProfile(store, *plan), std::optional<int64_t>(*profile_id));
  Plan unnamed = *plan;
  unnamed.sources.profile_sha256.clear();
  EXPECT_EQ(*FindPlanProfile(store, unnamed), std::nullopt) << "a plan that names no profile";
  EXPECT_EQ((*list)[0].sha256, PlanDigest(*plan));
  EXPECT_EQ(PlanDigest(*PlanFromJson(doc, "stored")), PlanDigest(*plan))
      << "read back, same digest";
  EXPECT_EQ(*store.FindPlan(PlanDigest(*plan)), std::optional<int64_t>(*id));
  EXPECT_EQ(*store.FindPlan("0000"), std::nullopt);
  EXPECT_EQ(store.GetPlan(*id)->json, (*list)[0].json);
  EXPECT_EQ(store.GetPlan(99).status().code(), Code::kNotFound);
  RunRecord run;
  run.id = "with-plan";
  run.command = {"true"};
  run.plan_id = *id;
  ASSERT_TRUE(store.BeginRun(run).ok());
  EXPECT_EQ(store.GetRun("with-plan")->plan_id, std::optional<int64_t>(*id));
  run.id = "unknown-plan";
  run.plan_id = 99;
  EXPECT_EQ(store.BeginRun(run).code(), Code::kNotFound);
  auto events = store.ListEvents();
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->back().kind, "plan");
  EXPECT_EQ(events->back().message,
            "plan recorded: 2 worker(s), 400.0 samples/s predicted, limit: none");
}

TEST(PlanStoreTest, SqliteRecordsPlans) {
  gm::testing::TempDir dir;
  auto store = SqliteRunStore::Open(dir.path() + "/runs.db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  ChecksPlansAreRecorded(**store);
}

TEST(PlanStoreTest, MemoryStoreRecordsPlans) {
  MemoryRunStore store;
  ChecksPlansAreRecorded(store);
}

}  // namespace
}  // namespace gm::planner
