// Unit tests for launcher/run_plan.h: what `goldminer run --plan` takes from a plan.
#include "launcher/run_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace gm {
namespace {

// Two workers of 3 and 2 threads, the first on the trainer's node with 1 GiB;
// 2 CPUs kept for the trainer; 2 ranks running train.py.
Plan TwoWorkerPlan(const std::string& pipeline) {
  Plan p;
  p.run.pipeline = pipeline;
  p.run.workers = 2;
  p.run.threads_per_worker = 3;
  p.run.slots = {WorkerSlot{3, false, 0}, WorkerSlot{2, true, 0}};
  p.run.world_size = 2;
  p.run.command = {"python3", "train.py"};
  p.workers = {PlanWorker{"n0", "", 3, 1 << 30, true, 0}, PlanWorker{"n1", "", 2, 0, false, 0}};
  p.trainer_nodes = {PlanTrainerNode{"n0", 2, 2}};
  p.prediction.samples_per_s = 1234.5;
  p.prediction.limit = "cpus";
  return p;
}

TEST(RunPlanTest, GivenNoFlagsThenTheSpecIsThePlansAndEachSlotKeepsItsThreadsPlaceAndMemory) {
  testing::TempDir dir;
  const std::string pipeline = dir.Write("pipeline.json", "{}");
  RunFromPlan run;
  auto notes = ApplyRunPlan(TwoWorkerPlan(pipeline), dir.path() + "/plan.json", {}, false, {}, run);
  ASSERT_TRUE(notes.ok()) << notes.status().message();
  EXPECT_EQ(run.spec.pipeline, pipeline);
  EXPECT_EQ(run.spec.workers, 2);
  EXPECT_EQ(run.spec.threads_per_worker, 3);
  EXPECT_EQ(run.spec.world_size, 2);
  EXPECT_EQ(run.spec.command, (std::vector<std::string>{"python3", "train.py"}));
  ASSERT_EQ(run.spec.slots.size(), 2u);
  EXPECT_EQ(run.spec.slots[0], (WorkerSlot{3, false, 1 << 30}));
  EXPECT_EQ(run.spec.slots[1], (WorkerSlot{2, true, 0}));
  EXPECT_EQ(run.trainer_cpus, "");  // not local: no pinning
  EXPECT_TRUE(notes->warnings.empty());
  ASSERT_EQ(notes->info.size(), 1u);
  EXPECT_EQ(notes->info[0], "run: plan " + dir.path() +
                                "/plan.json: 2 worker(s), 3+2 thread(s), predicted 1234 "
                                "samples/s (limit: cpus)");
}

TEST(RunPlanTest, GivenFlagsThenEachWinsOverThePlanAndTheCommandGivenStays) {
  testing::TempDir dir;
  RunFromPlan run;
  run.spec.pipeline = "mine.json";
  run.spec.workers = 5;
  run.spec.threads_per_worker = 4;
  run.spec.world_size = 1;
  run.spec.command = {"./train"};
  run.offload = "off";
  PlanFlagsGiven given;
  given.pipeline = given.workers = given.threads_per_worker = given.world_size = given.offload =
      true;
  Plan plan = TwoWorkerPlan("absent.json");
  plan.run.offload = "native";
  plan.run.dataloader_workers = 6;
  auto notes = ApplyRunPlan(plan, dir.path() + "/plan.json", given, false, {}, run);
  ASSERT_TRUE(notes.ok()) << notes.status().message();
  EXPECT_EQ(run.spec.pipeline, "mine.json");
  EXPECT_EQ(run.spec.workers, 5);
  EXPECT_EQ(run.spec.world_size, 1);
  EXPECT_EQ(run.spec.command, std::vector<std::string>{"./train"});
  EXPECT_EQ(run.offload, "off");
  EXPECT_FALSE(run.dataloader_workers);  // the offload is off: no virtual workers
  // --threads-per-worker sizes every slot; the plan still says where each belongs.
  ASSERT_EQ(run.spec.slots.size(), 2u);
  EXPECT_EQ(run.spec.slots[0], (WorkerSlot{4, false, 1 << 30}));
  EXPECT_EQ(run.spec.slots[1], (WorkerSlot{4, true, 0}));
  EXPECT_NE(notes->info.back().find("5 worker(s), 4 thread(s) each"), std::string::npos)
      << notes->info.back();
}

TEST(RunPlanTest, GivenAnUnchangedProgramsPlanThenItsOffloadAndDataLoaderWorkersAreTaken) {
  RunFromPlan run;
  Plan plan = TwoWorkerPlan("");  // no pipeline: the workers serve its DataLoaders
  plan.run.offload = "native";
  plan.run.dataloader_workers = 6;
  auto notes = ApplyRunPlan(plan, "plan.json", {}, false, {}, run);
  ASSERT_TRUE(notes.ok()) << notes.status().message();
  EXPECT_EQ(run.spec.pipeline, "");
  EXPECT_EQ(run.offload, "native");
  EXPECT_EQ(run.dataloader_workers, 6);
}

TEST(RunPlanTest, GivenARelativePipelineBesideThePlanThenItIsFoundThereElseTheErrorNamesTheField) {
  testing::TempDir dir;
  dir.Write("plans/pipe-beside.json", "{}");
  RunFromPlan run;
  auto notes = ApplyRunPlan(TwoWorkerPlan("pipe-beside.json"), dir.path() + "/plans/plan.json", {},
                            false, {}, run);
  ASSERT_TRUE(notes.ok()) << notes.status().message();
  EXPECT_EQ(run.spec.pipeline, dir.path() + "/plans/pipe-beside.json");

  RunFromPlan missing;
  auto bad = ApplyRunPlan(TwoWorkerPlan("nowhere.json"), dir.path() + "/plans/plan.json", {}, false,
                          {}, missing);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kNotFound);
  EXPECT_EQ(bad.status().message(), dir.path() +
                                        "/plans/plan.json: $.run.pipeline: nowhere.json does "
                                        "not exist (give --pipeline FILE)");
}

TEST(RunPlanTest, GivenACutRunDoesNotExecuteThenItIsRefusedNamingThePlan) {
  Plan plan = TwoWorkerPlan("");
  plan.cut.runnable = false;
  plan.cut.after_stage = 2;
  RunFromPlan run;
  auto r = ApplyRunPlan(plan, "p.json", {}, false, {}, run);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind("p.json: the plan cuts the pipeline after stage 2", 0), 0u)
      << r.status().message();
}

TEST(RunPlanTest, GivenTheLocalBackendThenTheTrainerIsPinnedToTheFirstCpusThePlanKeeps) {
  RunFromPlan run;
  auto notes = ApplyRunPlan(TwoWorkerPlan(""), "plan.json", {}, true, {4, 5, 6, 7}, run);
  ASSERT_TRUE(notes.ok()) << notes.status().message();
  EXPECT_EQ(run.trainer_cpus, "4-5");
  ASSERT_EQ(notes->warnings.size(), 1u);  // the plan's second worker is off the node
  EXPECT_EQ(notes->warnings[0],
            "run: the plan puts 1 worker(s) on other nodes; the local backend starts every "
            "worker on this machine");
  EXPECT_EQ(notes->info[0],
            "run: the plan keeps 2 CPU(s) for the trainer: --trainer-cpus 4-5 (--trainer-cpus "
            "none: no pinning)");

  // As many CPUs kept as this process may use: nothing left for the workers, no pinning.
  RunFromPlan all;
  notes = ApplyRunPlan(TwoWorkerPlan(""), "plan.json", {}, true, {0, 1}, all);
  ASSERT_TRUE(notes.ok());
  EXPECT_EQ(all.trainer_cpus, "");
  EXPECT_EQ(notes->info[0],
            "run: the plan keeps 2 CPU(s) for the trainer, and this process may use 2: no "
            "pinning");

  // --trainer-cpus given: the plan does not pin.
  RunFromPlan given_run;
  given_run.trainer_cpus = "0";
  PlanFlagsGiven given;
  given.trainer_cpus = true;
  notes = ApplyRunPlan(TwoWorkerPlan(""), "plan.json", given, true, {}, given_run);
  ASSERT_TRUE(notes.ok());
  EXPECT_EQ(given_run.trainer_cpus, "0");
  EXPECT_EQ(notes->info.size(), 1u);
}

}  // namespace
}  // namespace gm
