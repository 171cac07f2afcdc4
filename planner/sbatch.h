// The job script of a plan (`goldminer plan --sbatch job.sbatch`): a plain job when
// every worker shares the trainer's node(s), a heterogeneous job otherwise
// (component 0: the trainer's GPU node(s) with the workers placed there; component
// 1: the workers on CPU nodes). The script runs `goldminer run --plan PLAN --
// COMMAND`. Pure: a plan in, the script's text out.
#pragma once

#include <string>
#include <vector>

#include "core/plan.h"

namespace gm::planner {

struct SbatchOptions {
  std::string goldminer = "goldminer";  // the binary the script calls
  std::string plan_path = "plan.json";
  std::string job_name = "goldminer";
  std::string time_limit;  // #SBATCH --time; empty: the partition's default
};

// Every argument is quoted for bash.
std::string SbatchScript(const Plan& plan, const SbatchOptions& options);

// `arg` quoted for bash: unchanged when it holds only safe characters, else in
// single quotes.
std::string ShellQuote(const std::string& arg);

}  // namespace gm::planner
