// The job script of a plan (`goldminer plan --sbatch job.sbatch`): a plain job when
// every worker shares the trainer's node(s), a heterogeneous job otherwise
// (component 0: the trainer's GPU node(s) with the workers placed there; component
// 1: the workers on CPU nodes). The script runs `goldminer run --plan PLAN --
// COMMAND`. Pure: a plan in, the script's text out.
//
// Each component asks --mem per node (never --mem-per-cpu: sbatch refuses a
// heterogeneous job that mixes the two): component 0, the trainer's default below
// plus the memory of the workers on its busiest node; component 1, the most workers
// the plan puts on one CPU node (also written as --ntasks-per-node, so Slurm packs
// no more there) times the largest such worker's memory. The script's comments say
// where each figure came from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/plan.h"

namespace gm::planner {

// The trainer's memory, which the profile does not measure, in MB per node: per GPU
// rank for a GPU trainer (a CUDA context, the model and its optimizer state on the
// host side, the DataLoader's client), or for a CPU trainer's one process.
inline constexpr uint64_t kGpuTrainerMemoryMb = 4096;
inline constexpr uint64_t kCpuTrainerMemoryMb = 2048;
// A worker whose plan gives no memory (memory_bytes 0: the profile did not measure
// its peak RSS) is counted at this many MB per CPU.
inline constexpr uint64_t kWorkerMemoryMbPerCpu = 1024;

struct SbatchOptions {
  std::string goldminer = "goldminer";  // the binary the script calls
  std::string plan_path = "plan.json";
  std::string job_name = "goldminer";
  std::string time_limit;  // #SBATCH --time; empty: the partition's default
};

// Every argument is quoted for bash.
std::string SbatchScript(const Plan& plan, const SbatchOptions& options);

// The memory a job script counts for `worker`, in MB: its memory_bytes rounded up
// (as `goldminer run` asks of its step), or kWorkerMemoryMbPerCpu per CPU when 0.
uint64_t WorkerMemoryMb(const PlanWorker& worker);

// `arg` quoted for bash: unchanged when it holds only safe characters, else in
// single quotes.
std::string ShellQuote(const std::string& arg);

}  // namespace gm::planner
