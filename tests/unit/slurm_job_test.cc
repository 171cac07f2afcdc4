// Tests of what `run` reads from the Slurm job it runs in (launcher/slurm_job.h),
// on text captured from Slurm 22.05 on the test cluster.
#include "launcher/slurm_job.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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

}  // namespace
}  // namespace gm
