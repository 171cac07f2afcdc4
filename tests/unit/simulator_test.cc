// goldminer simulate's model (simulator/): hand-built traces with answers
// computed by hand, invariants checked at every event of random traces, the same
// sim.json for the same seed, and bad input named by file and line.
#include <gtest/gtest.h>

#include <random>

#include "simulator/sim.h"
#include "simulator/trace.h"

namespace gm::sim {
namespace {

// One family, kappa 4 CPUs per GPU, no network limit.
SimOptions Options() {
  SimOptions o;
  o.families = {{"k4", 4, 1000, 0, 1}};
  o.pool.min_gain = 0;
  o.pool.min_lifetime_s = 0;
  return o;
}

Trace TraceOf(const std::string& csv) {
  auto t = ParseTrace(csv, "t.csv");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? *t : Trace{};
}

std::vector<SimNode> NodesOf(const std::string& csv) {
  auto n = ParseNodes(csv, "n.csv");
  EXPECT_TRUE(n.ok()) << n.status().message();
  return n.ok() ? *n : std::vector<SimNode>{};
}

const PolicyResult& Of(const SimResult& r, const std::string& policy) {
  for (const PolicyResult& p : r.policies) {
    if (p.policy == policy) return p;
  }
  static const PolicyResult none;
  ADD_FAILURE() << "no policy " << policy;
  return none;
}

TEST(SimulatorTest, GivenOneNodeAndTwoJobsThenTheFiguresAreTheHandComputedOnes) {
  // 8 CPUs, 1 GPU. Two jobs asking 1 GPU and 2 CPUs for 100 s, at t = 0 and 10.
  // static: speed 2/4 = 0.5, work 50 each; the second waits for the GPU until 100:
  //   JCT 100 and 190. job and cluster: 4 CPUs feed each (1 trainer + 3 workers),
  //   speed 1: the first ends at 50, the second runs 50..100: JCT 50 and 90.
  const Trace t = TraceOf("submit_s,duration_s,gpus,cpus\n0,100,1,2\n10,100,1,2\n");
  const auto nodes = NodesOf("name,cpus,memory_mib,gpus\nn0,8,1000,1\n");
  auto r = Simulate(t, nodes, Options());
  ASSERT_TRUE(r.ok()) << r.status().message();
  const PolicyResult& s = Of(*r, "static");
  EXPECT_DOUBLE_EQ(s.jct_mean_s, 145);
  EXPECT_DOUBLE_EQ(s.jct_p99_s, 190);
  EXPECT_DOUBLE_EQ(s.queue_mean_s, 45);
  EXPECT_DOUBLE_EQ(s.makespan_s, 200);
  EXPECT_DOUBLE_EQ(s.gpu_util_allocated, 1.0);
  EXPECT_DOUBLE_EQ(s.gpu_util_effective, 0.5);
  for (const char* p : {"job", "cluster"}) {
    EXPECT_DOUBLE_EQ(Of(*r, p).jct_mean_s, 70) << p;
    EXPECT_DOUBLE_EQ(Of(*r, p).makespan_s, 100) << p;
    EXPECT_DOUBLE_EQ(Of(*r, p).gpu_util_effective, 1.0) << p;
  }
  EXPECT_EQ(Of(*r, "cluster").worker_cpus_started, 6u);  // 3 + 3
  EXPECT_EQ(Of(*r, "cluster").worker_cpus_preempted, 0u);
  const nlohmann::json j = SimToJson(*r);
  EXPECT_DOUBLE_EQ(j["ratios"]["jct_static_over_cluster"].get<double>(), 145.0 / 70);
  EXPECT_DOUBLE_EQ(j["ratios"]["gpu_util_effective_cluster_over_static"].get<double>(), 2.0);
}

TEST(SimulatorTest, GivenALongTailThenUtilizationOverTheSubmissionWindowIsItsOwn) {
  // 8 CPUs, 2 GPUs. Jobs at t = 0 (1 GPU, 100 s at speed 1 under static: 4 CPUs)
  // and t = 100 (1 GPU, 1000 s). Submission window 0..100: one GPU of two held:
  // 50% allocated and effective. Makespan 0..1100: 1100 GPU-s of 2200.
  const Trace t = TraceOf("submit_s,duration_s,gpus,cpus\n0,100,1,4\n100,1000,1,4\n");
  const auto nodes = NodesOf("name,cpus,memory_mib,gpus\nn0,8,1000,2\n");
  SimOptions o = Options();
  o.policies = {"static"};
  auto r = Simulate(t, nodes, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const PolicyResult& s = Of(*r, "static");
  EXPECT_DOUBLE_EQ(s.makespan_s, 1100);
  EXPECT_DOUBLE_EQ(s.gpu_util_allocated, 0.5);
  EXPECT_DOUBLE_EQ(s.window_s, 100);
  EXPECT_DOUBLE_EQ(s.gpu_util_allocated_window, 0.5);
  EXPECT_DOUBLE_EQ(s.gpu_util_effective_window, 0.5);
  // One job submitted at once: no window, no figure (not a division by zero).
  auto one = Simulate(TraceOf("submit_s,duration_s,gpus,cpus\n0,100,1,4\n"), nodes, o);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(Of(*one, "static").window_s, 0);
  EXPECT_EQ(Of(*one, "static").gpu_util_effective_window, 0);
  const nlohmann::json j = SimToJson(*r);
  EXPECT_DOUBLE_EQ(j["policies"][0]["gpu_util_allocated_window"].get<double>(), 0.5);
}

TEST(SimulatorTest, GivenAProfileThenItsFamilyIsItsDemandAndCpuPerSample) {
  // A trainer that would take 500 samples/s, a pipeline of 8 ms of CPU per sample
  // putting out 12,288 bytes: kappa 4 CPUs per GPU.
  Profile p;
  p.trainer.emplace();
  p.trainer->demand_samples_per_s = 500;
  p.pipeline.emplace();
  p.pipeline->cpu_s_per_sample = 0.008;
  p.pipeline->stages.resize(2);
  p.pipeline->stages[1].bytes_out_per_sample = 12288;
  auto f = FamilyFromProfile(p, "resnet", "resnet.json");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->name, "resnet");
  EXPECT_DOUBLE_EQ(f->cpus_per_gpu, 4);
  EXPECT_DOUBLE_EQ(f->samples_per_s_per_gpu, 500);
  EXPECT_DOUBLE_EQ(f->bytes_per_sample, 12288);
  // An unchanged program: its DataLoader's workers measure the CPU per sample.
  Profile torch;
  torch.trainer.emplace();
  torch.trainer->demand_samples_per_s = 200;
  torch.trainer->dataloader = DataLoaderProfile{2, 4, 400, 0.01, 600};
  f = FamilyFromProfile(torch, "bert", "bert.json");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_DOUBLE_EQ(f->cpus_per_gpu, 2);
  EXPECT_DOUBLE_EQ(f->bytes_per_sample, 600);
  // No trainer, or no CPU measured: an error naming the file.
  Profile none;
  none.pipeline = p.pipeline;
  EXPECT_NE(FamilyFromProfile(none, "x", "x.json").status().message().find("x.json: no trainer"),
            std::string::npos);
  Profile no_cpu;
  no_cpu.trainer = torch.trainer;
  no_cpu.trainer->dataloader.reset();
  EXPECT_NE(FamilyFromProfile(no_cpu, "y", "y.json").status().message().find("y.json: no CPU"),
            std::string::npos);
}

TEST(SimulatorTest, GivenAJobShortOfCpusThenStaticQueuesItAndClusterPreemptsAWorkerToAdmitIt) {
  // 4 CPUs, 2 GPUs; two jobs asking 1 GPU and 3 CPUs for 100 s at t = 0.
  // static: speed 3/4, work 75; the second waits for CPUs: 0..100, 100..200.
  // cluster: A takes its trainer and 3 workers; B's admission takes one of them
  // back (a preemption). A: 1 + 2 CPUs, speed 3/4, ends at 100; B: its trainer
  // alone (1/4) until 100 (25 done), then 1 + 3 (speed 1): ends at 150.
  const Trace t = TraceOf("submit_s,duration_s,gpus,cpus\n0,100,1,3\n0,100,1,3\n");
  const auto nodes = NodesOf("name,cpus,memory_mib,gpus\nn0,4,1000,2\n");
  SimOptions o = Options();
  o.policies = {"static", "cluster"};
  auto r = Simulate(t, nodes, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(Of(*r, "static").queue_mean_s, 50);
  EXPECT_DOUBLE_EQ(Of(*r, "static").jct_mean_s, 150);
  const PolicyResult& c = Of(*r, "cluster");
  EXPECT_DOUBLE_EQ(c.queue_mean_s, 0);
  EXPECT_DOUBLE_EQ(c.jct_mean_s, 125);
  EXPECT_EQ(c.worker_cpus_preempted, 1u);
  EXPECT_EQ(c.worker_cpus_started, 6u);  // A's 3, then B's 3 once A ended
}

TEST(SimulatorTest, GivenANodeWhoseCpusWorkersHoldThenClusterAdmitsWhereItTakesNoWorker) {
  // n0: 4 CPUs, 2 GPUs; n1: 4 CPUs, 1 GPU. A (1 GPU) at t = 0 goes to n0 and its
  // 3 workers fill n0. B (1 GPU) at t = 10 would fit n0 by taking a worker back,
  // but n1 takes it with no preemption, as Slurm tries first: nothing preempted,
  // both at full speed (4 CPUs each).
  const Trace t = TraceOf("submit_s,duration_s,gpus,cpus\n0,100,1,4\n10,100,1,4\n");
  const auto nodes = NodesOf("name,cpus,memory_mib,gpus\nn0,4,1000,2\nn1,4,1000,1\n");
  SimOptions o = Options();
  o.policies = {"cluster"};
  auto r = Simulate(t, nodes, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const PolicyResult& c = Of(*r, "cluster");
  EXPECT_EQ(c.worker_cpus_preempted, 0u);
  EXPECT_EQ(c.worker_cpus_started, 6u);
  EXPECT_DOUBLE_EQ(c.jct_mean_s, 100);
}

TEST(SimulatorTest, GivenWorkersWithinTheirTasksBaselineThenClusterAdmitsNoTaskByTakingThem) {
  // 4 CPUs, 2 GPUs. A (1 GPU, 4 CPUs: trainer 1, baseline 3 = its 3 workers) at
  // t = 0; B (1 GPU, 1 CPU) at t = 10 finds A's workers all within A's baseline,
  // the run's own allocation: it waits, as under static, until A ends at 100.
  // B's work is 100 s at the 1/4 speed its one CPU gave (25), done at speed 1
  // (trainer + 3 workers): 100..125. JCT (100 + 115) / 2, queue 90 / 2.
  const Trace t = TraceOf("submit_s,duration_s,gpus,cpus\n0,100,1,4\n10,100,1,1\n");
  const auto nodes = NodesOf("name,cpus,memory_mib,gpus\nn0,4,1000,2\n");
  SimOptions o = Options();
  o.policies = {"cluster"};
  auto r = Simulate(t, nodes, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const PolicyResult& c = Of(*r, "cluster");
  EXPECT_EQ(c.worker_cpus_preempted, 0u);
  EXPECT_DOUBLE_EQ(c.queue_mean_s, 45);
  EXPECT_DOUBLE_EQ(c.jct_mean_s, 107.5);
}

TEST(SimulatorTest, GivenNodeCpusPerGpuThenGpuNodesAndAsksShrinkAndTheWorkStays) {
  // The what-if: 2 CPUs per GPU. n0 (4 GPUs) has 8 CPUs instead of 48; the CPU
  // node keeps its 16. A task asking 1 GPU and 12 CPUs (speed 1 at kappa 4: work
  // 100) asks 2: static runs it at 2/4, JCT 200; cluster feeds it 1 + 3, JCT 100.
  const Trace t = TraceOf("submit_s,duration_s,gpus,cpus\n0,100,1,12\n");
  const auto nodes = NodesOf("name,cpus,memory_mib,gpus\nn0,48,1000,4\nc0,16,1000,0\n");
  SimOptions o = Options();
  o.policies = {"static", "cluster"};
  o.node_cpus_per_gpu = 2;
  auto r = Simulate(t, nodes, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->cpus, 8 + 16);
  EXPECT_DOUBLE_EQ(Of(*r, "static").jct_mean_s, 200);
  EXPECT_DOUBLE_EQ(Of(*r, "cluster").jct_mean_s, 100);
  EXPECT_EQ(SimToJson(*r)["options"]["node_cpus_per_gpu"], 2.0);
  o.node_cpus_per_gpu = -1;
  auto bad = Simulate(t, nodes, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--node-cpus-per-gpu"), std::string::npos);
}

TEST(SimulatorTest, GivenRandomTracesThenNoNodeIsEverOverfullAndEveryTaskEndsOnce) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 30; ++round) {
    std::string nodes_csv = "name,cpus,memory_mib,gpus\n";
    std::vector<SimNode> shape;
    const int node_count = 1 + static_cast<int>(rng() % 4);
    for (int n = 0; n < node_count; ++n) {
      const int cpus = 4 + static_cast<int>(rng() % 29), gpus = 1 + static_cast<int>(rng() % 8);
      nodes_csv += "n" + std::to_string(n) + "," + std::to_string(cpus) + ",64000," +
                   std::to_string(gpus) + "\n";
      shape.push_back({"", cpus, 64000, gpus});
    }
    std::string trace_csv = "submit_s,duration_s,gpus,cpus,memory_mib,class\n";
    const char* classes[] = {"vision", "moderate", "text", ""};
    const int tasks = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < tasks; ++i) {
      const int gpus = static_cast<int>(rng() % 3);                         // 0: a CPU-only task
      const double frac = (rng() % 2 == 0) ? 1.0 : 0.25 * (1 + rng() % 3);  // sharing a GPU
      trace_csv += std::to_string(rng() % 500) + "," + std::to_string(1 + rng() % 300) + "," +
                   std::to_string(gpus * frac) + "," + std::to_string(1 + rng() % 4) + "," +
                   std::to_string(rng() % 32000) + "," + classes[rng() % 4] + "\n";
    }
    const Trace t = TraceOf(trace_csv);
    const auto nodes = NodesOf(nodes_csv);
    SimInvariants checks;
    uint64_t events = 0;
    checks.on_event = [&](double, const std::vector<int>& cpus, const std::vector<int>& gpus,
                          const std::vector<uint64_t>& mem) -> Status {
      ++events;
      for (size_t n = 0; n < shape.size(); ++n) {
        if (cpus[n] > shape[n].cpus || cpus[n] < 0 || gpus[n] > shape[n].gpus * 1000 ||
            gpus[n] < 0 || mem[n] > shape[n].memory_mib) {
          return Status::Internal("node " + std::to_string(n) + " overfull");
        }
      }
      return Status::Ok();
    };
    SimOptions o;
    o.seed = round;
    const bool delays = round % 2 == 1;  // start-up and worker delays add events of their own
    if (delays) {
      o.task_start_s = 3;
      o.worker_delay_s = 20;
      o.trainer_cpus_per_gpu = round % 4 == 3 ? 0 : 1;
    }
    auto r = Simulate(t, nodes, o, &checks);
    if (!r.ok() && r.status().message().find("fits no node") != std::string::npos) continue;
    ASSERT_TRUE(r.ok()) << "round " << round << ": " << r.status().message() << "\n" << trace_csv;
    for (const PolicyResult& p : r->policies) {
      EXPECT_EQ(p.gpu_tasks + p.cpu_tasks, r->tasks) << p.policy;
      if (!delays) {
        EXPECT_EQ(p.events, 2 * r->tasks) << p.policy << ": one arrival and one end each";
      }
      EXPECT_GE(p.events, 2 * r->tasks) << p.policy;
      EXPECT_LE(p.gpu_util_effective, p.gpu_util_allocated + 1e-9) << p.policy;
      EXPECT_LE(p.gpu_util_allocated, 1 + 1e-9) << p.policy;
      EXPECT_LE(p.cpu_util, 1 + 1e-9) << p.policy;
    }
    if (!delays) {
      EXPECT_EQ(events, 3 * 2 * r->tasks);
    }
  }
}

// Tasks given by their samples, trainers holding no CPU, a start-up and a delay
// before granted workers feed a task (the options simulate's fidelity to a real
// pool rests on: bench/pool_bench.sh --simulate).
TEST(SimulatorTest, GivenSamplesAStartUpAndAWorkerDelayThenTheTimesAreTheHandComputedOnes) {
  // kappa 4, 1000 samples/s per GPU: A reads 100,000 samples (100 s of work at full
  // speed), B 20,000 (20 s); each asks 1 GPU and 1 CPU, its data worker's.
  const Trace t =
      TraceOf("submit_s,duration_s,gpus,cpus,class,samples\n0,,1,1,k4,100000\n0,,1,1,k4,20000\n");
  const auto nodes = NodesOf("name,cpus,memory_mib,gpus\nn0,8,1000,2\n");
  SimOptions o = Options();
  o.policies = {"static", "cluster"};
  o.trainer_cpus_per_gpu = 0;
  o.task_start_s = 5;
  o.worker_delay_s = 10;
  auto r = Simulate(t, nodes, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // static: 1 CPU of 4, speed 1/4 after 5 s of start-up: 5 + 400 and 5 + 80.
  const PolicyResult& s = Of(*r, "static");
  ASSERT_EQ(s.tasks.size(), 2u);
  EXPECT_DOUBLE_EQ(s.tasks[0].end_s, 405);
  EXPECT_DOUBLE_EQ(s.tasks[1].end_s, 85);
  // cluster: the pool's 8 CPUs, each task's baseline (1) at once, 3 more each
  // granted at 0 that feed from 10: speed 0 to 5, 1/4 to 10 (1.25 s of work),
  // then 1: A ends at 10 + 98.75, B at 10 + 18.75.
  const PolicyResult& c = Of(*r, "cluster");
  ASSERT_EQ(c.tasks.size(), 2u);
  EXPECT_DOUBLE_EQ(c.tasks[0].end_s, 108.75);
  EXPECT_DOUBLE_EQ(c.tasks[1].end_s, 28.75);
  EXPECT_EQ(c.tasks[1].line, 3u);
  EXPECT_EQ(c.tasks[1].family, "k4");
  EXPECT_EQ(c.worker_cpus_started, 8u);
  const nlohmann::json j = SimToJson(*r);
  EXPECT_EQ(j["options"]["worker_delay_s"], 10);
  EXPECT_EQ(j["options"]["task_start_s"], 5);
  EXPECT_FALSE(j["policies"][0].contains("tasks")) << "per-task times stay out of sim.json";
  const std::string csv = TasksCsv(*r);
  EXPECT_NE(csv.find("policy,line,family,submit_s,start_s,end_s,jct_s\n"), std::string::npos);
  EXPECT_NE(csv.find("cluster,3,k4,0.000,0.000,28.750,28.750\n"), std::string::npos) << csv;
  // Without the delay the grant feeds at once: B at 5 + 20, A at 5 + 100.
  o.worker_delay_s = 0;
  auto at_once = Simulate(t, nodes, o);
  ASSERT_TRUE(at_once.ok());
  EXPECT_DOUBLE_EQ(Of(*at_once, "cluster").tasks[1].end_s, 25);
  EXPECT_DOUBLE_EQ(Of(*at_once, "cluster").tasks[0].end_s, 105);
}

TEST(SimulatorTest, GivenTheSameSeedThenSimJsonIsTheSameByteForByte) {
  std::string csv = "submit_s,duration_s,gpus,cpus\n";
  for (int i = 0; i < 200; ++i) {
    csv += std::to_string(i * 7 % 300) + "," + std::to_string(20 + i % 90) + "," +
           std::to_string(1 + i % 2) + "," + std::to_string(2 + i % 9) + "\n";
  }
  const Trace t = TraceOf(csv);
  const auto nodes = NodesOf("name,cpus,memory_mib,gpus\na,32,1000,4\nb,16,1000,2\nc,64,1000,0\n");
  SimOptions o;
  o.seed = 5;
  auto a = Simulate(t, nodes, o), b = Simulate(t, nodes, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(SimToJson(*a).dump(), SimToJson(*b).dump());
  o.seed = 6;  // another family mix
  auto c = Simulate(t, nodes, o);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(SimToJson(*a)["policies"].dump(), SimToJson(*c)["policies"].dump());
}

TEST(SimulatorTest, GivenGpusThenNodesAreDrawnAndTheWholeTraceReplayedOnThem) {
  std::string nodes_csv = "name,cpus,memory_mib,gpus\n",
              trace_csv = "submit_s,duration_s,gpus,cpus\n";
  for (int n = 0; n < 40; ++n) nodes_csv += "g" + std::to_string(n) + ",32,1000,4\n";
  for (int i = 0; i < 1000; ++i) trace_csv += std::to_string(i) + ",50,1,4\n";
  trace_csv += "5,50,8,4\n";  // fits none of the 4-GPU nodes: left out, counted
  SimOptions o;
  o.gpus = 16;
  o.policies = {"static"};
  auto r = Simulate(TraceOf(trace_csv), NodesOf(nodes_csv), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->gpus, 16);
  EXPECT_EQ(r->nodes, 4u);
  EXPECT_EQ(r->tasks, 1000u);
  EXPECT_EQ(r->dropped, 1u);
  // 1000 tasks of 50 GPU-seconds on 16 GPUs, one a second: they queue.
  EXPECT_GT(Of(*r, "static").queue_mean_s, 0);
}

TEST(SimulatorTest, GivenACurvesDocumentThenItsFamiliesAreReadAndABadOneIsNamedByItsPath) {
  auto ok = ParseCurves(nlohmann::json::parse(R"({"families": [
      {"name": "flat", "cpus_per_gpu": 2, "share": 0.25},
      {"name": "hungry", "cpus_per_gpu": 16, "samples_per_s_per_gpu": 800,
       "bytes_per_sample": 150000, "share": 0.75}]})"),
                        "c.json");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].name, "flat");
  EXPECT_DOUBLE_EQ((*ok)[0].samples_per_s_per_gpu, 1);  // the default
  EXPECT_DOUBLE_EQ((*ok)[1].cpus_per_gpu, 16);
  EXPECT_DOUBLE_EQ((*ok)[1].bytes_per_sample, 150000);
  EXPECT_DOUBLE_EQ((*ok)[1].share, 0.75);

  const auto refused = [](const char* text) {
    auto r = ParseCurves(nlohmann::json::parse(text), "c.json");
    EXPECT_FALSE(r.ok()) << text;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(refused(R"({"families": [{"name": "x", "cpus_per_gpu": 0, "share": 1}]})")
                .find("c.json: $.families[0].cpus_per_gpu"),
            std::string::npos);
  EXPECT_NE(refused(R"({"families": []})").find("at least one family"), std::string::npos);
  EXPECT_NE(refused(R"({"curves": []})").find("c.json"), std::string::npos);
  EXPECT_NE(refused(R"({"families": [{"cpus_per_gpu": 1, "share": 1}]})").find("name"),
            std::string::npos);
}

TEST(SimulatorTest, GivenBadInputThenTheErrorNamesTheFileAndLine) {
  struct Case {
    std::string csv, says;
  };
  const std::vector<Case> cases = {
      {"submit_s,duration_s,gpus\n0,1,1\n", "t.csv:1: no column \"cpus\""},
      {"submit_s,duration_s,gpus,cpus\n0,1,1,2\n-5,1,1,2\n", "t.csv:3: submit_s is negative"},
      {"submit_s,duration_s,gpus,cpus\n0,x,1,2\n", "t.csv:2: duration_s is \"x\", not a number"},
      {"submit_s,duration_s,gpus,cpus\n0,0,1,2\n", "t.csv:2: duration_s must be positive"},
      {"submit_s,duration_s,gpus,cpus\n0,1,1\n", "t.csv:2: 3 fields, the header has 4"},
      {"submit_s,duration_s,gpus,cpus\n", "t.csv: no task to replay"},
      {"submit_s,duration_s,gpus,cpus,class,samples\n0,10,1,2,k4,500\n",
       "t.csv:2: both duration_s and samples"},
      {"submit_s,duration_s,gpus,cpus,samples\n0,,1,2,500\n",
       "t.csv:2: samples needs a GPU task with a class"},
      {"submit_s,duration_s,gpus,cpus,class,samples\n0,,1,2,k4,\n",
       "t.csv:2: duration_s is \"\", not a number"},
      {"", "t.csv: empty"},
      {"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
       "deletion_time,scheduled_time\np,1000,10,1,1000,,LS,Running,30,40,45\n",
       "t.csv:2: deletion_time is not after scheduled_time"},
      {"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
       "deletion_time,scheduled_time\np,1000,10,1,1000,,LS,Running,50,90,45\n",
       "t.csv:2: scheduled_time is before creation_time"},
  };
  for (const Case& c : cases) {
    auto t = ParseTrace(c.csv, "t.csv");
    ASSERT_FALSE(t.ok()) << c.csv;
    EXPECT_NE(t.status().message().find(c.says), std::string::npos) << t.status().message();
  }
  EXPECT_NE(ParseNodes("name,cpus,memory_mib,gpus\na,8,100,0\n", "n.csv")
                .status()
                .message()
                .find("n.csv: no GPU node"),
            std::string::npos);
  // A task bigger than every node of the whole cluster.
  auto big = Simulate(TraceOf("submit_s,duration_s,gpus,cpus\n0,10,1,2\n5,10,16,2\n"),
                      NodesOf("name,cpus,memory_mib,gpus\na,8,100,8\n"), Options());
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("t.csv:3: task-3 (16.000000 GPUs"), std::string::npos)
      << big.status().message();
  SimOptions bad = Options();
  bad.policies = {"static", "fifo"};
  EXPECT_NE(Simulate(TraceOf("submit_s,duration_s,gpus,cpus\n0,1,1,1\n"),
                     NodesOf("name,cpus,memory_mib,gpus\na,8,100,1\n"), bad)
                .status()
                .message()
                .find("\"fifo\" is not one of static, job, cluster"),
            std::string::npos);
}

TEST(SimulatorTest,
     GivenTheV2023PodListThenNeverScheduledPodsAreCountedAndSharingPodsHoldAFraction) {
  const std::string pods =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\r\n"
      "a,12000,16384,1,1000,,LS,Running,0,100,0\r\n"
      "b,6000,12288,1,460,,LS,Running,10,60,20\r\n"
      "c,11908,47104,1,1000,,BE,Pending,30,40,\r\n"
      "d,0,0,0,0,,BE,Succeeded,5,15,5\r\n";
  auto t = ParseTrace(pods, "pods.csv");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->tasks.size(), 3u);
  EXPECT_EQ(t->never_scheduled, 1u);
  EXPECT_EQ(t->tasks[0].cpus, 12);
  EXPECT_EQ(t->tasks[1].gpu_milli, 460);
  EXPECT_DOUBLE_EQ(t->tasks[1].submit_s, 10);
  EXPECT_DOUBLE_EQ(t->tasks[1].duration_s, 40);  // deletion - scheduled
  EXPECT_EQ(t->tasks[2].gpu_milli, 0);           // CPU only
  EXPECT_EQ(t->tasks[2].cpus, 1);                // 0 CPUs read as 1
  auto nodes = ParseNodes("sn,cpu_milli,memory_mib,gpu,model\r\nx,64000,262144,2,P100\r\n", "n");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_EQ((*nodes)[0].cpus, 64);
  auto r = Simulate(*t, *nodes, SimOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Of(*r, "static").gpu_tasks, 2u);
  EXPECT_EQ(Of(*r, "static").cpu_tasks, 1u);
}

TEST(SimulatorTest, GivenASlurmHistoryThenEachJobThatRanIsATaskAndMultiNodeJobsSplit) {
  const std::string line =
      " UserId=root(0) GroupId=root(0) Name=my job JobState=COMPLETED Partition=gpu "
      "TimeLimit=UNLIMITED ";
  const std::string jobcomp =
      "JobId=12" + line +
      "StartTime=2026-12-01T10:00:05 EndTime=2026-12-01T10:02:05 NodeList=gpu1 NodeCnt=1 "
      "ProcCnt=4 WorkDir=/tmp ReservationName= Tres=cpu=4,mem=2000M,node=1,gres/gpu=1 Account= "
      "QOS= WcKey= Cluster=gm SubmitTime=2026-12-01T10:00:00 EligibleTime=2026-12-01T10:00:00 "
      "DerivedExitCode=0:0 ExitCode=0:0\n"
      "JobId=13" +
      line +
      "StartTime=2026-12-01T11:00:00 EndTime=2026-12-01T11:00:00 NodeList=gpu[1-2] NodeCnt=2 "
      "ProcCnt=16 WorkDir=/tmp ReservationName= Tres=cpu=16,mem=4G,node=2,gres/gpu=4 Account= "
      "QOS= WcKey= Cluster=gm SubmitTime=2026-12-01T10:59:00 EligibleTime=2026-12-01T10:59:00 "
      "DerivedExitCode=0:0 ExitCode=0:0\n"
      "JobId=14" +
      line +
      "StartTime=Unknown EndTime=2026-12-01T12:00:00 NodeList=(null) NodeCnt=0 ProcCnt=0 "
      "WorkDir=/tmp ReservationName= Tres= Account= QOS= WcKey= Cluster=gm "
      "SubmitTime=2026-12-01T11:30:00 EligibleTime=2026-12-01T11:30:00 DerivedExitCode=0:0 "
      "ExitCode=0:0\n";
  auto t = ParseTrace(jobcomp, "jobcomp.txt");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->tasks.size(), 3u);
  EXPECT_EQ(t->never_scheduled, 1u);
  EXPECT_EQ(t->tasks[0].name, "job-12");
  EXPECT_DOUBLE_EQ(t->tasks[0].duration_s, 120);
  EXPECT_DOUBLE_EQ(t->tasks[1].submit_s - t->tasks[0].submit_s, 3540);
  EXPECT_EQ(t->tasks[0].cpus, 4);
  EXPECT_EQ(t->tasks[0].gpu_milli, 1000);
  EXPECT_EQ(t->tasks[0].memory_mib, 2000u);
  EXPECT_EQ(t->tasks[1].name, "job-13.0");  // two nodes: two tasks, each with half
  EXPECT_EQ(t->tasks[2].name, "job-13.1");
  EXPECT_EQ(t->tasks[1].cpus, 8);
  EXPECT_EQ(t->tasks[1].gpu_milli, 2000);
  EXPECT_EQ(t->tasks[1].memory_mib, 2048u);
  EXPECT_DOUBLE_EQ(t->tasks[1].duration_s, 1);  // ran for less than a second
  std::string reversed = jobcomp.substr(0, jobcomp.find('\n') + 1);
  reversed += "JobId=15" + line +
              "StartTime=2026-12-01T10:00:05 EndTime=2026-12-01T10:00:01 NodeCnt=1 ProcCnt=1 "
              "SubmitTime=2026-12-01T10:00:00\n";
  EXPECT_NE(ParseTrace(reversed, "jobcomp.txt")
                .status()
                .message()
                .find("jobcomp.txt:2: it ends before it starts"),
            std::string::npos);

  const std::string sacct =
      "JobID|Submit|Start|End|AllocCPUS|AllocTRES|NNodes|State\n"
      "7|2026-12-01T10:00:00|2026-12-01T10:00:10|2026-12-01T10:01:10|2|"
      "billing=2,cpu=2,gres/gpu=1,mem=1G,node=1|1|COMPLETED\n"
      "8|2026-12-01T10:00:00|None|None|0||0|CANCELLED\n";
  auto s = ParseTrace(sacct, "sacct.txt");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->tasks.size(), 1u);
  EXPECT_EQ(s->never_scheduled, 1u);
  EXPECT_DOUBLE_EQ(s->tasks[0].duration_s, 60);
  EXPECT_EQ(s->tasks[0].memory_mib, 1024u);
  EXPECT_EQ(s->tasks[0].gpu_milli, 1000);
  EXPECT_NE(ParseTrace("JobID|Submit|Start\n", "sacct.txt")
                .status()
                .message()
                .find("sacct.txt:1: no column End"),
            std::string::npos);
}

}  // namespace
}  // namespace gm::sim
