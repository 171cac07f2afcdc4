// Tests of what `run` reads from the Slurm job it runs in (launcher/slurm_job.h),
// on text captured from Slurm 22.05 on the test cluster.
#include "launcher/slurm_job.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "launcher/process.h"
#include "launcher/slurm_query.h"

namespace gm {
namespace {

// `scontrol show job -o` read in the batch script's SIGTERM trap: after
// `scontrol requeue` (Restarts went from 0 to 1) and after `scancel` of the
// requeued attempt (SLURM_RESTART_COUNT=1, Restarts still 1).
const char* kRequeued =
    "JobId=2 JobName=job.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 "
    "Nice=0 Account=(null) QOS=(null) JobState=COMPLETING Reason=None Dependency=(null) "
    "Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 "
    "TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-30T08:46:29 EndTime=Unknown "
    "Partition=cpu NodeList=cpu1 BatchHost=cpu1 NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1";
const char* kCancelled =
    "JobId=2 JobName=job.sh UserId=root(0) GroupId=root(0) JobState=COMPLETING Reason=None "
    "Dependency=(null) Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0 "
    "RunTime=00:00:03 TimeLimit=365-00:00:00 TimeMin=N/A EndTime=2026-11-30T08:46:38";

TEST(SlurmJobTest, GivenScontrolAtSigtermThenARequeueIsToldFromACancel) {
  EXPECT_EQ(SlurmStopCause(kRequeued, 0), "requeued");
  EXPECT_EQ(SlurmStopCause(kCancelled, 1), "");
  EXPECT_EQ(SlurmStopCause("JobId=3 JobState=TIMEOUT Restarts=0", 0), "time limit");
  EXPECT_EQ(SlurmStopCause("JobId=3 JobState=PREEMPTED Restarts=0", 0), "preempted");
  EXPECT_EQ(SlurmStopCause("JobId=3 JobState=DEADLINE Restarts=0", 0), "deadline");
  // Still COMPLETING, but the run time reached the limit (HH:MM:SS, D-HH:MM:SS, MM).
  EXPECT_EQ(SlurmStopCause("JobState=COMPLETING Restarts=0 RunTime=00:10:00 TimeLimit=00:10:00", 0),
            "time limit");
  EXPECT_EQ(SlurmStopCause("JobState=COMPLETING Restarts=0 RunTime=1-00:00:01 TimeLimit=1440", 0),
            "time limit");
  EXPECT_EQ(SlurmStopCause("JobState=COMPLETING Restarts=0 RunTime=00:09:59 TimeLimit=10", 0), "");
  EXPECT_EQ(SlurmStopCause("", 0), "");  // scontrol said nothing: not known, a cancel
  EXPECT_EQ(SlurmStopCause("JobState=COMPLETING Restarts=x RunTime=junk TimeLimit=1:2:3:4", 0), "");
}

TEST(SlurmJobTest, GivenCpusPerNodeTextThenEachNodeIsListed) {
  EXPECT_EQ(*ParseCpusPerNode("8"), (std::vector<int>{8}));
  EXPECT_EQ(*ParseCpusPerNode("8(x2),4"), (std::vector<int>{8, 8, 4}));
  for (const char* bad : {"", "x", "8(x0)", "8(x2", "8,", "-1", "8(xa)", "99999999999"}) {
    auto r = ParseCpusPerNode(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("SLURM_JOB_CPUS_PER_NODE"), std::string::npos);
  }
}

TEST(SlurmJobTest, GivenWorkersAndAnAllocationThenTheyFitOrTheReasonIsGiven) {
  EXPECT_TRUE(CheckWorkersFit({2, 2}, {8}, "job 1").ok());
  EXPECT_TRUE(CheckWorkersFit({4, 4, 2}, {6, 4}, "job 1").ok());  // 4+2 | 4
  EXPECT_TRUE(CheckWorkersFit({}, {}, "job 1").ok());
  Status more = CheckWorkersFit({2, 2, 2}, {4}, "component 1 of job 7 (X=4)");
  ASSERT_FALSE(more.ok());
  EXPECT_NE(more.message().find("3 worker(s) of 6 CPUs in all do not fit in component 1 of job 7 "
                                "(X=4), which holds 4 CPUs"),
            std::string::npos)
      << more.message();
  Status wide = CheckWorkersFit({6}, {4, 4}, "job 1");
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.message().find("a worker of 6 CPUs does not fit on one node"), std::string::npos);
  Status split = CheckWorkersFit({3, 3, 2}, {4, 4}, "job 1");  // 8 CPUs, but 3+3 need two nodes
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.message().find("cannot be placed whole"), std::string::npos);
}

// A fake environment: Slurm's variables as a test gives them.
struct Env {
  std::map<std::string, std::string> vars;
  std::optional<SlurmJob> Read() const {
    return SlurmJob::FromEnvironment([this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    });
  }
};

TEST(SlurmJobTest, GivenNoJobIdThenThereIsNoJob) {
  EXPECT_FALSE(Env{}.Read().has_value());
  EXPECT_FALSE((Env{{{"SLURM_JOB_ID", ""}}}.Read().has_value()));
}

TEST(SlurmJobTest, GivenAPlainJobThenItHasOneComponentWithItsCpus) {
  const std::optional<SlurmJob> job = Env{
      {{"SLURM_JOB_ID", "12"},
       {"SLURM_JOB_CPUS_PER_NODE", "4(x2)"},
       {"SLURM_RESTART_COUNT", "2"}}}.Read();
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->job_id, "12");
  EXPECT_EQ(job->restart_count, 2);
  EXPECT_FALSE(job->heterogeneous());
  ASSERT_EQ(job->components.size(), 1u);
  EXPECT_EQ(job->components[0].job_id, "12");
  EXPECT_EQ(job->components[0].cpus_text, "4(x2)");
  EXPECT_EQ(job->GroupOf(true), 0) << "no het group to go to";
}

TEST(SlurmJobTest, GivenAHeterogeneousJobThenEachComponentHasItsIdAndCpus) {
  const std::optional<SlurmJob> job = Env{
      {{"SLURM_JOB_ID", "20"},
       {"SLURM_HET_SIZE", "2"},
       {"SLURM_JOB_ID_HET_GROUP_0", "20"},
       {"SLURM_JOB_ID_HET_GROUP_1", "21"},
       {"SLURM_JOB_CPUS_PER_NODE_HET_GROUP_0", "2"},
       {"SLURM_JOB_CPUS_PER_NODE_HET_GROUP_1", "4(x2)"},
       {"SLURM_RESTART_COUNT", "junk"}}}.Read();
  ASSERT_TRUE(job.has_value());
  EXPECT_TRUE(job->heterogeneous());
  EXPECT_EQ(job->restart_count, 0) << "junk reads as no restart";
  ASSERT_EQ(job->components.size(), 2u);
  EXPECT_EQ(job->components[1].job_id, "21");
  EXPECT_EQ(job->components[1].cpus_var, "SLURM_JOB_CPUS_PER_NODE_HET_GROUP_1");
  EXPECT_EQ(job->GroupOf(true), 1);
  EXPECT_EQ(job->GroupOf(false), 0);

  RunSpec spec;
  spec.threads_per_worker = 2;
  spec.slots = {{2, false, 0}, {4, true, 0}, {4, true, 0}};
  EXPECT_TRUE(job->CheckWorkersFit(spec, 3).ok()) << "2 CPUs on the trainer's node, 4+4 elsewhere";
  spec.slots[0].threads = 4;
  const Status st = job->CheckWorkersFit(spec, 3);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("component 0 of job 20 (SLURM_JOB_CPUS_PER_NODE_HET_GROUP_0=2)"),
            std::string::npos)
      << st.message();
}

TEST(SlurmJobTest, GivenAWorkerRequestThenSrunMakesItAStepOfItsComponentAndNamesIt) {
  const std::optional<SlurmJob> job = Env{{{"SLURM_JOB_ID", "20"}, {"SLURM_HET_SIZE", "2"}}}.Read();
  ASSERT_TRUE(job.has_value());
  LaunchRequest r;
  r.role = ProcessRole::kWorker;
  r.threads = 3;
  r.off_trainer_node = true;
  r.memory_bytes = (5u << 20) + 1;
  r.argv = {"/opt/goldminer", "worker", "--coordinator", "h:1"};
  const std::vector<std::string> argv = SrunArgv(*job, r);
  const std::vector<std::string> want = {
      "srun",
      "--exact",
      "--nodes=1",
      "--ntasks=1",
      "--cpus-per-task=3",
      "--job-name=goldminer-worker",
      "--gres=none",
      "--quiet",
      "--het-group=1",
      "--mem=6M",
      "/bin/sh",
      "-c",
      "exec \"$@\" --step-name \"${SLURM_JOB_ID_HET_GROUP_1:-$SLURM_JOB_ID}.$SLURM_STEP_ID\"",
      "sh",
      "/opt/goldminer",
      "worker",
      "--coordinator",
      "h:1"};
  EXPECT_EQ(argv, want);
  r.off_trainer_node = false;
  r.memory_bytes = 0;
  const std::vector<std::string> plain = SrunArgv(*Env{{{"SLURM_JOB_ID", "7"}}}.Read(), r);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), "--het-group=0"), 0);
  EXPECT_EQ(plain[9], "-c");
  EXPECT_EQ(plain[10], "exec \"$@\" --step-name \"$SLURM_JOB_ID.$SLURM_STEP_ID\"");
}

TEST(SlurmJobTest, GivenAnElasticWorkerThenItIsAJobOfItsOwnInThePartitionWithoutTheRunsJobVars) {
  LaunchRequest r;
  r.role = ProcessRole::kWorker;
  r.elastic = true;
  r.memory_bytes = 2u << 20;
  r.argv = {"/opt/goldminer", "worker", "--coordinator", "h:1"};
  std::optional<SlurmJob> job = Env{{{"SLURM_JOB_ID", "7"}}}.Read();
  ElasticWorkers elastic{"scavenger", 2, 0, "7.99"};
  EXPECT_EQ(elastic.JobName(), "goldminer-worker.7.99");
  const std::vector<std::string> argv = ElasticSrunArgv(
      *job, elastic, {"PATH", "SLURM_JOB_ID", "SLURM_CONF", "SLURM_CPUS_PER_TASK", "HOME"}, r);
  const std::vector<std::string> want = {"env",
                                         "-u",
                                         "SLURM_JOB_ID",
                                         "-u",
                                         "SLURM_CPUS_PER_TASK",
                                         "srun",
                                         "--partition=scavenger",
                                         "--nodes=1",
                                         "--ntasks=1",
                                         "--cpus-per-task=2",
                                         "--job-name=goldminer-worker.7.99",
                                         "--dependency=after:7",
                                         "--gres=none",
                                         "--quiet",
                                         "--mem=2M",
                                         "/bin/sh",
                                         "-c",
                                         "exec \"$@\" --step-name \"$SLURM_JOB_ID.$SLURM_STEP_ID\"",
                                         "sh",
                                         "/opt/goldminer",
                                         "worker",
                                         "--coordinator",
                                         "h:1"};
  EXPECT_EQ(argv, want);
  // No secret on the command line: the key travels as a file named in the environment.
  for (const std::string& a : argv) EXPECT_EQ(a.find("SECRET"), std::string::npos) << a;
  // Without a plan's memory, a bounded request, not the whole node's.
  r.memory_bytes = 0;
  const std::vector<std::string> bare = ElasticSrunArgv(*job, elastic, {}, r);
  EXPECT_EQ(std::count(bare.begin(), bare.end(), "--mem=2048M"), 1) << "1024 MB per CPU";
  EXPECT_EQ(bare[0], "env");
  EXPECT_EQ(bare[1], "srun");
  // The run's figure (--worker-mem, or its job's memory per CPU) wins over both.
  elastic.memory_mb = 700;
  r.memory_bytes = 2u << 20;
  const std::vector<std::string> sized = ElasticSrunArgv(*job, elastic, {}, r);
  EXPECT_EQ(std::count(sized.begin(), sized.end(), "--mem=700M"), 1);
}

TEST(SlurmJobTest, GivenAJobsMemoryVariablesThenEachComponentKnowsItsMemory) {
  const std::optional<SlurmJob> plain = Env{
      {{"SLURM_JOB_ID", "5"},
       {"SLURM_JOB_CPUS_PER_NODE", "4"},
       {"SLURM_MEM_PER_NODE", "3000"}}}.Read();
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->components[0].mem_per_node_mb, 3000u);
  EXPECT_EQ(plain->components[0].mem_var, "SLURM_MEM_PER_NODE=3000");
  EXPECT_EQ(plain->MemoryPerCpuMb(), 750u);
  const std::optional<SlurmJob> per_cpu = Env{
      {{"SLURM_JOB_ID", "6"},
       {"SLURM_JOB_CPUS_PER_NODE", "2"},
       {"SLURM_MEM_PER_CPU", "1000"}}}.Read();
  EXPECT_EQ(per_cpu->components[0].mem_per_cpu_mb, 1000u);
  EXPECT_EQ(per_cpu->components[0].NodeMemoryMb(2), 2000u);
  const std::optional<SlurmJob> het = Env{
      {{"SLURM_JOB_ID", "8"},
       {"SLURM_HET_SIZE", "2"},
       {"SLURM_JOB_CPUS_PER_NODE_HET_GROUP_0", "2"},
       {"SLURM_JOB_CPUS_PER_NODE_HET_GROUP_1", "4"},
       {"SLURM_MEM_PER_NODE_HET_GROUP_0", "2000"},
       {"SLURM_MEM_PER_NODE_HET_GROUP_1",
        "1400"}}}.Read();
  EXPECT_EQ(het->components[0].mem_per_node_mb, 2000u);
  EXPECT_EQ(het->components[1].mem_per_node_mb, 1400u);
  const std::optional<SlurmJob> none = Env{{{"SLURM_JOB_ID", "9"}}}.Read();
  EXPECT_EQ(none->components[0].mem_var, "");
  EXPECT_EQ(none->MemoryPerCpuMb(), 0u);
}

TEST(SlurmJobTest, GivenAGpuJobsMemoryThenWorkersShareHalfOfTheTrainersNodeAndFit) {
  // The job: -c4 --gres=gpu:1 --mem=3000M, three workers of one CPU.
  const std::optional<SlurmJob> job = Env{
      {{"SLURM_JOB_ID", "1"},
       {"SLURM_JOB_CPUS_PER_NODE", "4"},
       {"SLURM_MEM_PER_NODE", "3000"}}}.Read();
  RunSpec spec;
  spec.workers = 3;
  const std::string said = job->ShareWorkerMemory(spec, 3);
  EXPECT_EQ(spec.MemoryOf(0), 500u << 20) << "half of 3000 MB over 3 worker CPUs";
  EXPECT_EQ(spec.MemoryOf(7), 500u << 20) << "an added worker asks the same";
  EXPECT_NE(said.find("--mem=500M"), std::string::npos) << said;
  EXPECT_NE(said.find("SLURM_MEM_PER_NODE=3000"), std::string::npos) << said;
  EXPECT_TRUE(job->CheckWorkersFit(spec, 3).ok());
  EXPECT_TRUE(job->CheckWorkersFit(spec, 4).ok()) << "4 CPUs, 2000 MB of 3000";
  // One worker of one CPU: its CPU's share (750 MB), below half the node.
  RunSpec one;
  one.workers = 1;
  job->ShareWorkerMemory(one, 1);
  EXPECT_EQ(one.MemoryOf(0), 750u << 20);
  // A planned figure is kept.
  RunSpec planned;
  planned.slots = {WorkerSlot{1, false, 900u << 20}, WorkerSlot{1, false, 0}};
  job->ShareWorkerMemory(planned, 2);
  EXPECT_EQ(planned.MemoryOf(0), 900u << 20);
  EXPECT_EQ(planned.MemoryOf(1), 750u << 20);
  // Per CPU: Slurm's own share; no memory said: none asked.
  const std::optional<SlurmJob> per_cpu = Env{
      {{"SLURM_JOB_ID", "2"},
       {"SLURM_JOB_CPUS_PER_NODE", "8"},
       {"SLURM_MEM_PER_CPU", "400"}}}.Read();
  RunSpec two;
  two.threads_per_worker = 2;
  per_cpu->ShareWorkerMemory(two, 2);
  EXPECT_EQ(two.MemoryOf(0), 800u << 20);
  RunSpec bare;
  const std::optional<SlurmJob> no_memory = Env{{{"SLURM_JOB_ID", "3"}}}.Read();
  EXPECT_EQ(no_memory->ShareWorkerMemory(bare, 2), "");
  EXPECT_EQ(bare.MemoryOf(0), 0u);
}

TEST(SlurmJobTest, GivenWorkersAskingMoreMemoryThanTheJobHoldsThenTheFitCheckSaysTheNumbers) {
  const std::optional<SlurmJob> job = Env{
      {{"SLURM_JOB_ID", "1"},
       {"SLURM_JOB_CPUS_PER_NODE", "4"},
       {"SLURM_MEM_PER_NODE", "3000"}}}.Read();
  RunSpec spec;
  spec.worker_memory_bytes = 1200u << 20;
  EXPECT_TRUE(job->CheckWorkersFit(spec, 2).ok());
  const Status st = job->CheckWorkersFit(spec, 3);
  ASSERT_FALSE(st.ok());
  for (const char* part : {"3 CPUs and 3600 MB", "holds 4 CPUs and 3000 MB",
                           "SLURM_MEM_PER_NODE=3000", "--worker-mem"}) {
    EXPECT_NE(st.message().find(part), std::string::npos) << part << ": " << st.message();
  }
  // Enough memory in all, but not on one node: 3 x 1200 on two nodes of 2000.
  EXPECT_TRUE(CheckWorkersFit({1, 1}, {4, 4}, "job 1", {1200, 1200}, {2000, 2000}).ok());
  Status split = CheckWorkersFit({1, 1, 1}, {4, 4}, "job 1", {1200, 1200, 1200}, {2000, 2000});
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.message().find("cannot be placed whole"), std::string::npos) << split.message();
}

TEST(SlurmJobTest, GivenMemorySizesThenTheyAreReadAsSrunReadsThem) {
  EXPECT_EQ(*ParseMemoryMb("500", "--worker-mem"), 500u);
  EXPECT_EQ(*ParseMemoryMb("500M", "--worker-mem"), 500u);
  EXPECT_EQ(*ParseMemoryMb("2G", "--worker-mem"), 2048u);
  EXPECT_EQ(*ParseMemoryMb("2g", "--worker-mem"), 2048u);
  EXPECT_EQ(*ParseMemoryMb("1T", "--worker-mem"), 1u << 20);
  EXPECT_EQ(*ParseMemoryMb("1500K", "--worker-mem"), 2u);
  for (const char* bad : {"", "M", "0", "-5M", "2.5G", "12Q", "1e3"}) {
    Result<uint64_t> r = ParseMemoryMb(bad, "--worker-mem");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--worker-mem '"), std::string::npos);
  }
}

TEST(SlurmJobTest, GivenScontrolDetailThenTheJobsGpusAreCountedAndAJobNotRunningIsNotFound) {
  // As slurmctld 22.05 prints a GPU job (scontrol -d show job --oneliner).
  const std::string running =
      "JobId=1 JobName=wrap JobState=RUNNING Reason=None NumNodes=1 "
      "TRES=cpu=2,mem=2000M,node=1,billing=2 JOB_GRES=gpu:1   Nodes=gpu1 CPU_IDs=6-7 "
      "Mem=2000 GRES=gpu:1(IDX:0) MinCPUsNode=2 TresPerNode=gres:gpu:1 \n";
  EXPECT_EQ(*ParseJobGpus(running, "1"), 1);
  EXPECT_EQ(*ParseJobGpus("JobState=RUNNING JOB_GRES=gpu:a100:2(IDX:0-1),shard:4,gpu:v100:1 ", "1"),
            3);
  EXPECT_EQ(*ParseJobGpus("JobState=RUNNING JOB_GRES=(null) Nodes=a GRES=gpu:2(IDX:0,1) Nodes=b "
                          "GRES=gpu:2(IDX:0-1)",
                          "1"),
            4)
      << "the nodes' GRES when JOB_GRES says nothing";
  EXPECT_EQ(*ParseJobGpus("JobState=RUNNING TRES=cpu=8,mem=8G,node=2,gres/gpu=4", "1"), 4);
  EXPECT_EQ(*ParseJobGpus("JobState=RUNNING TRES=cpu=2,mem=2000M,node=1", "1"), 0) << "a CPU job";
  Result<double> pending = ParseJobGpus("JobId=7 JobState=PENDING JOB_GRES=gpu:1", "7");
  ASSERT_FALSE(pending.ok());
  EXPECT_EQ(pending.status().code(), Code::kNotFound);
  EXPECT_NE(pending.status().message().find("Slurm job 7 is not running (JobState=PENDING)"),
            std::string::npos);
  Result<double> bad = ParseJobGpus("JobState=RUNNING JOB_GRES=gpu:two", "7");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("GRES \"gpu:two\" has no GPU count"), std::string::npos)
      << bad.status().message();
}

TEST(SlurmJobTest, GivenSinfoCpuTextThenTheIdleCpusAreSummed) {
  EXPECT_EQ(*ParseSinfoIdleCpus("2/6/0/8\n"), 6);
  EXPECT_EQ(*ParseSinfoIdleCpus(" 2/6/0/8\n10/22/0/32\n\n"), 28) << "one line a state group";
  for (const char* bad : {"", "\n", "2/6/0", "a/b/c/d", "2/-6/0/8", "2/6/0/8/9", "2//0/8"}) {
    EXPECT_FALSE(ParseSinfoIdleCpus(bad).ok()) << "'" << bad << "'";
  }
  EXPECT_NE(ParseSinfoIdleCpus("x").status().message().find("\"x\" is not allocated/idle"),
            std::string::npos);
}

TEST(SlurmJobTest, GivenPendingJobsThenTheCpusWaitingOnThePartitionsNodesAreSummed) {
  // cpu1 and cpu2 in "cpu"; cpu2 also in "scavenger"; gpu1 in "gpu" only.
  const std::string nodes = "cpu1|cpu\ncpu2|cpu\ncpu2|scavenger\ngpu1|gpu\n";
  const std::string jobs =
      "8|Resources|N/A|cpu|big\n"                         // shares cpu2: counts
      "4|Priority|N/A|cpu|later\n"                        // waits for its turn, not for CPUs
      "2|Resources|gres:gpu:1|cpu|trainer\n"              // waits for a GPU
      "1|Resources|N/A|scavenger|goldminer-worker.7.9\n"  // a pool worker of ours
      "16|Resources|N/A|gpu|elsewhere\n"                  // no node of the partition
      "3|Resources|N/A|gpu,cpu|either|with|bars\n";       // one of its partitions shares
  Result<int> pending = ParsePendingCpus(jobs, nodes, "scavenger");
  ASSERT_TRUE(pending.ok()) << pending.status().message();
  EXPECT_EQ(*pending, 11);
  EXPECT_EQ(*ParsePendingCpus("", nodes, "scavenger"), 0) << "nothing pending";
  EXPECT_EQ(*ParsePendingCpus("8|Resources|N/A|gpu|x\n", nodes, "cpu"), 0);
  Result<int> none = ParsePendingCpus(jobs, nodes, "nosuch");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no node is in partition nosuch"), std::string::npos);
  for (const char* bad :
       {"x|Resources|N/A|cpu|j\n", "8|Resources|N/A\n", "-1|Resources|N/A|cpu|j"}) {
    EXPECT_FALSE(ParsePendingCpus(bad, nodes, "cpu").ok()) << bad;
  }
  EXPECT_FALSE(ParsePendingCpus("", "cpu1 cpu\n", "cpu").ok()) << "sinfo not in its form";
}

TEST(SlurmJobTest, GivenScontrolTextThenHowAJobEndedIsRead) {
  // A worker that drained inside GraceTime exits 0: COMPLETED, with a PreemptTime.
  EXPECT_EQ(SlurmJobEnd("JobId=2 JobName=w JobState=COMPLETED Reason=None "
                        "PreemptEligibleTime=2026-12-03T13:24:46 PreemptTime=2026-12-03T13:24:47"),
            "preempted");
  EXPECT_EQ(SlurmJobEnd("JobId=2 JobState=PREEMPTED Reason=None PreemptTime=None"), "preempted");
  EXPECT_EQ(SlurmJobEnd("JobId=2 JobState=CANCELLED Reason=None PreemptTime=None"), "cancelled");
  EXPECT_EQ(SlurmJobEnd("JobId=2 JobState=TIMEOUT PreemptTime=None"), "time limit");
  EXPECT_EQ(SlurmJobEnd("JobId=2 JobState=COMPLETED PreemptTime=None"), "");
  EXPECT_EQ(SlurmJobEnd(""), "");
}

TEST(SlurmJobTest, GivenAnElasticRequestWithoutAPartitionThenTheLauncherRefusesIt) {
  std::unique_ptr<ProcessLauncher> launcher =
      MakeSlurmStepLauncher(*Env{{{"SLURM_JOB_ID", "7"}}}.Read());
  LaunchRequest r;
  r.role = ProcessRole::kWorker;
  r.elastic = true;
  r.argv = {"/bin/true"};
  Result<pid_t> pid = launcher->Start(r);
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.status().message().find("--elastic-partition"), std::string::npos);
}

TEST(SlurmJobTest, GivenTheStepsShellThenTheWorkerGetsItsArgumentsAndTheStepName) {
  // What srun runs inside the step, run here with a step's variables: the worker's
  // arguments arrive whole (spaces and quotes included), then --step-name.
  LaunchRequest r;
  r.role = ProcessRole::kWorker;
  r.off_trainer_node = true;
  r.argv = {"printf", "[%s]", "a b", "c\"d"};
  std::optional<SlurmJob> job = Env{{{"SLURM_JOB_ID", "20"}, {"SLURM_HET_SIZE", "2"}}}.Read();
  std::vector<std::string> argv = SrunArgv(*job, r);
  argv.erase(argv.begin(), std::find(argv.begin(), argv.end(), "/bin/sh"));
  ::setenv("SLURM_JOB_ID", "20", 1);
  ::setenv("SLURM_JOB_ID_HET_GROUP_1", "21", 1);
  ::setenv("SLURM_STEP_ID", "4", 1);
  Result<CommandOutput> out = CaptureOutput(argv, 10);
  ::unsetenv("SLURM_JOB_ID_HET_GROUP_1");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->out, "[a b][c\"d][--step-name][21.4]");
  argv = SrunArgv(*Env{{{"SLURM_JOB_ID", "20"}}}.Read(), r);
  argv.erase(argv.begin(), std::find(argv.begin(), argv.end(), "/bin/sh"));
  out = CaptureOutput(argv, 10);
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_STEP_ID");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->out, "[a b][c\"d][--step-name][20.4]");
}

TEST(SlurmJobTest, GivenAnSrunTrainerCommandThenItsTasksAreCounted) {
  using V = std::vector<std::string>;
  const auto count = [](const V& argv) { return SrunTaskCount(argv).value(); };
  EXPECT_EQ(count({"python3", "train.py", "-n", "4"}), std::nullopt);  // not srun
  EXPECT_EQ(count({}), std::nullopt);
  EXPECT_EQ(count({"srun", "python3", "train.py"}), 1);
  EXPECT_EQ(count({"/usr/bin/srun", "-N2", "python3", "train.py"}), 2);
  EXPECT_EQ(count({"srun", "-N", "2", "--ntasks-per-node=3", "python3", "t.py"}), 6);
  EXPECT_EQ(count({"srun", "--nodes=2-4", "python3", "t.py"}), 2);  // a range: its lower bound
  EXPECT_EQ(count({"srun", "-n3", "-N2", "python3", "t.py"}), 3);   // -n wins
  EXPECT_EQ(count({"srun", "--ntasks", "5", "python3", "t.py"}), 5);
  // Values of other options are skipped, not taken for the program; the program's
  // own -n is not srun's.
  EXPECT_EQ(count({"srun", "-p", "cpu", "--cpus-per-task", "2", "-l", "--exact", "-N2", "python3",
                   "t.py", "-n", "9"}),
            2);
  EXPECT_EQ(count({"srun", "--", "python3", "-n", "9"}), 1);
  Result<std::optional<int>> bad = SrunTaskCount({"srun", "--ntasks=zero", "python3"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("srun option --ntasks zero"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("--world-size"), std::string::npos);
  EXPECT_FALSE(SrunTaskCount({"srun", "-N", "0", "x"}).ok());
}

// plan --slurm's query: where Slurm's commands are not on PATH, NotFound says so
// (the real cluster is read in e2e.plan_test).
TEST(SlurmJobTest, GivenNoSlurmCommandsOnPathThenAskClusterSaysSo) {
  const char* path = std::getenv("PATH");
  const std::string saved = path ? path : "";
  ASSERT_EQ(::setenv("PATH", "/nonexistent-goldminer-test", 1), 0);
  Result<planner::Cluster> cluster = AskCluster();
  ASSERT_EQ(::setenv("PATH", saved.c_str(), 1), 0);
  ASSERT_FALSE(cluster.ok());
  EXPECT_EQ(cluster.status().code(), Code::kNotFound);
  EXPECT_NE(cluster.status().message().find("scontrol is not on PATH"), std::string::npos)
      << cluster.status().message();
}

}  // namespace
}  // namespace gm
