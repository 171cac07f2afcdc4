// What `goldminer run --plan plan.json` takes from a plan: its pipeline, workers
// (count, threads, where each belongs, memory), world size and trainer command
// into the run's spec; for an unchanged program the --offload mode and the
// DataLoaders' virtual workers it was priced for; and, on the local backend, the
// CPUs it keeps for the trainer. A flag the user gave wins over the plan. Pure but
// for looking up the pipeline's file. Thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/plan.h"
#include "core/run_spec.h"
#include "core/status.h"

namespace gm {

// Which of run's flags were given on the command line (they win over the plan).
struct PlanFlagsGiven {
  bool pipeline = false;
  bool workers = false;
  bool threads_per_worker = false;
  bool world_size = false;
  bool offload = false;
  bool trainer_cpus = false;
};

// What a plan may set: the spec and run's own flags beside it.
struct RunFromPlan {
  RunSpec spec;
  std::string offload = "exact";          // --offload
  std::optional<int> dataloader_workers;  // --dataloader-workers
  std::string trainer_cpus;               // --trainer-cpus LIST ("": not pinned)
};

// What applying it has to say: info lines, and warnings a user must act on.
struct PlanNotes {
  std::vector<std::string> info;
  std::vector<std::string> warnings;
};

// Applies `plan` (read from `plan_path`, whose folder a relative pipeline may be
// in) to `run`. `local`: the local backend, where everything runs on this
// machine, on `allowed_cpus` (the CPUs this process may use, in order), and the
// trainer is pinned to the first of them the plan keeps for it. InvalidArgument
// for a cut `run` does not execute; NotFound, naming the file and field, for a
// pipeline that is neither where it says nor beside the plan.
Result<PlanNotes> ApplyRunPlan(const Plan& plan, const std::string& plan_path,
                               const PlanFlagsGiven& given, bool local,
                               const std::vector<int>& allowed_cpus, RunFromPlan& run);

}  // namespace gm
