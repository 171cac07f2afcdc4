#include "planner/sbatch.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

namespace gm::planner {

namespace {

std::string Mb(uint64_t mb) { return std::to_string(mb) + "M"; }

// What the job script asks for each component, and the sentences that say where
// each figure came from.
struct Component0 {
  int nodes = 1;
  int cpus = 1;         // per node: the trainer's, its client's and its workers' CPUs
  int gpus = 0;         // per node; 0: no --gres
  uint64_t mem_mb = 0;  // per node: the trainer's default plus its workers'
  std::string why_mem;
};

struct Component1 {
  int tasks = 0;           // workers off the trainer's node(s); 0: a plain job
  int cpus = 0;            // per task: the largest such worker's CPUs
  int tasks_per_node = 0;  // the most workers the plan puts on one CPU node
  uint64_t mem_mb = 0;     // per node: tasks_per_node x the largest worker's memory
  std::string why_mem;
};

Component0 TrainerComponent(const Plan& plan) {
  struct NodeUse {
    int cpus = 0, gpus = 0, workers = 0;
    uint64_t trainer_mb = 0, workers_mb = 0;
  };
  const bool gpu = plan.model.gpus > 0;
  std::map<std::string, NodeUse> nodes;
  for (const PlanTrainerNode& t : plan.trainer_nodes) {
    NodeUse& n = nodes[t.name];
    n.cpus += t.cpus;
    n.gpus += t.gpus;
    n.trainer_mb += gpu ? kGpuTrainerMemoryMb * std::max(t.gpus, 1) : kCpuTrainerMemoryMb;
  }
  for (const PlanWorker& w : plan.workers) {
    if (!w.on_trainer_node) continue;
    NodeUse& n = nodes[w.node];
    n.cpus += w.cpus;
    n.workers += 1;
    n.workers_mb += WorkerMemoryMb(w);
  }
  Component0 c;
  c.nodes = std::max<int>(1, static_cast<int>(plan.trainer_nodes.size()));
  const NodeUse* most = nullptr;
  for (const auto& [name, n] : nodes) {
    c.cpus = std::max(c.cpus, n.cpus);
    if (gpu) c.gpus = std::max(c.gpus, n.gpus);
    if (most == nullptr || n.trainer_mb + n.workers_mb > most->trainer_mb + most->workers_mb)
      most = &n;
  }
  const uint64_t trainer_mb =
      most != nullptr ? most->trainer_mb : (gpu ? kGpuTrainerMemoryMb : kCpuTrainerMemoryMb);
  const uint64_t workers_mb = most != nullptr ? most->workers_mb : 0;
  c.mem_mb = trainer_mb + workers_mb;
  c.why_mem = "# --mem per node, component 0: " + Mb(trainer_mb) + " for the trainer (a default" +
              (gpu ? ", " + Mb(kGpuTrainerMemoryMb) + " per GPU rank" : " for a CPU trainer") +
              ":\n#   the profile does not measure the trainer's memory; raise it if yours "
              "needs more)\n#   + " +
              Mb(workers_mb) + " for the " + std::to_string(most != nullptr ? most->workers : 0) +
              " worker(s) on its busiest node (each the plan's memory_bytes,\n#   or " +
              Mb(kWorkerMemoryMbPerCpu) + " per CPU when not measured) = " + Mb(c.mem_mb) + ".\n";
  return c;
}

Component1 WorkerComponent(const Plan& plan) {
  Component1 c;
  std::map<std::string, int> per_node;
  uint64_t worker_mb = 0;
  for (const PlanWorker& w : plan.workers) {
    if (w.on_trainer_node) continue;
    ++c.tasks;
    c.cpus = std::max(c.cpus, w.cpus);
    worker_mb = std::max(worker_mb, WorkerMemoryMb(w));
    c.tasks_per_node = std::max(c.tasks_per_node, ++per_node[w.node]);
  }
  // Slurm may pack --ntasks onto fewer nodes than the plan chose; --ntasks-per-node
  // bounds that packing, so a node's --mem covers every worker Slurm can put there.
  c.mem_mb = worker_mb * static_cast<uint64_t>(c.tasks_per_node);
  c.why_mem = "# --mem per node, component 1: at most " + std::to_string(c.tasks_per_node) +
              " worker(s) on a node (--ntasks-per-node) x\n#   " + Mb(worker_mb) +
              " (the largest worker's memory_bytes, or " + Mb(kWorkerMemoryMbPerCpu) +
              " per CPU when not measured) = " + Mb(c.mem_mb) +
              ".\n#   --mem, not --mem-per-cpu: sbatch refuses a heterogeneous job that mixes "
              "them.\n";
  return c;
}

}  // namespace

uint64_t WorkerMemoryMb(const PlanWorker& worker) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  if (worker.memory_bytes > 0) return (worker.memory_bytes + kMiB - 1) / kMiB;
  return kWorkerMemoryMbPerCpu * static_cast<uint64_t>(std::max(worker.cpus, 1));
}

std::string ShellQuote(const std::string& arg) {
  if (!arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) ||
               std::string("@%_+=:,./-").find(c) != std::string::npos;
      })) {
    return arg;
  }
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string SbatchScript(const Plan& plan, const SbatchOptions& o) {
  const Component0 c0 = TrainerComponent(plan);
  const Component1 c1 = WorkerComponent(plan);

  char line[512];
  std::string s = "#!/bin/bash\n";
  s += "# Written by `goldminer plan` from " + plan.sources.profile_path +
       " (cluster: " + plan.sources.cluster + ").\n";
  std::snprintf(line, sizeof line,
                "# Predicted: %.1f samples/s with %d worker(s), %d worker CPU(s); limit: %s.\n",
                plan.prediction.samples_per_s, static_cast<int>(plan.workers.size()),
                plan.prediction.worker_cpus, plan.prediction.limit.c_str());
  s += line;
  s += "# Component 0: the trainer's node(s)";
  s += c1.tasks > 0 ? "; component 1: the workers on CPU nodes.\n" : " with every worker.\n";
  s += c0.why_mem;
  if (c1.tasks > 0) s += c1.why_mem;
  s += "#SBATCH --job-name=" + ShellQuote(o.job_name) + "\n";
  if (!o.time_limit.empty()) s += "#SBATCH --time=" + ShellQuote(o.time_limit) + "\n";
  const std::string part0 =
      !plan.sources.gpu_partition.empty() ? plan.sources.gpu_partition : plan.sources.partition;
  if (!part0.empty()) s += "#SBATCH --partition=" + ShellQuote(part0) + "\n";
  s += "#SBATCH --nodes=" + std::to_string(c0.nodes) + "\n";
  s += "#SBATCH --ntasks-per-node=1\n";
  s += "#SBATCH --cpus-per-task=" + std::to_string(c0.cpus) + "\n";
  if (c0.gpus > 0) s += "#SBATCH --gres=gpu:" + std::to_string(c0.gpus) + "\n";
  s += "#SBATCH --mem=" + Mb(c0.mem_mb) + "\n";
  if (c1.tasks > 0) {
    s += "#SBATCH hetjob\n";
    if (!plan.sources.partition.empty()) {
      s += "#SBATCH --partition=" + ShellQuote(plan.sources.partition) + "\n";
    }
    s += "#SBATCH --ntasks=" + std::to_string(c1.tasks) + "\n";
    s += "#SBATCH --ntasks-per-node=" + std::to_string(c1.tasks_per_node) + "\n";
    s += "#SBATCH --cpus-per-task=" + std::to_string(c1.cpus) + "\n";
    s += "#SBATCH --mem=" + Mb(c1.mem_mb) + "\n";
  }
  s += "set -euo pipefail\n";
  s += "exec " + ShellQuote(o.goldminer) + " run --plan " + ShellQuote(o.plan_path) + " --";
  for (const std::string& a : plan.run.command) s += " " + ShellQuote(a);
  s += "\n";
  return s;
}

}  // namespace gm::planner
