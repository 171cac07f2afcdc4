#include "planner/sbatch.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

namespace gm::planner {

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
  // Per trainer node: the CPUs kept for the trainer plus its workers' CPUs.
  std::map<std::string, int> node_cpus;
  int max_gpus = 0;
  for (const PlanTrainerNode& t : plan.trainer_nodes) {
    node_cpus[t.name] += t.cpus;
    max_gpus = std::max(max_gpus, t.gpus);
  }
  int remote = 0, remote_cpus = 0;
  uint64_t remote_memory = 0;
  for (const PlanWorker& w : plan.workers) {
    if (w.on_trainer_node) {
      node_cpus[w.node] += w.cpus;
    } else {
      ++remote;
      remote_cpus = std::max(remote_cpus, w.cpus);
      remote_memory = std::max(remote_memory, w.memory_bytes);
    }
  }
  int cpus0 = 1;
  for (const auto& [name, c] : node_cpus) cpus0 = std::max(cpus0, c);
  const int nodes0 = std::max<int>(1, static_cast<int>(plan.trainer_nodes.size()));

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
  s += remote > 0 ? "; component 1: the workers on CPU nodes.\n" : " with every worker.\n";
  s += "# No --mem for the trainer's node(s): the profile does not measure the trainer's\n"
       "# memory; add one if the cluster needs it.\n";
  s += "#SBATCH --job-name=" + ShellQuote(o.job_name) + "\n";
  if (!o.time_limit.empty()) s += "#SBATCH --time=" + ShellQuote(o.time_limit) + "\n";
  const std::string part0 =
      !plan.sources.gpu_partition.empty() ? plan.sources.gpu_partition : plan.sources.partition;
  if (!part0.empty()) s += "#SBATCH --partition=" + ShellQuote(part0) + "\n";
  s += "#SBATCH --nodes=" + std::to_string(nodes0) + "\n";
  s += "#SBATCH --ntasks-per-node=1\n";
  s += "#SBATCH --cpus-per-task=" + std::to_string(cpus0) + "\n";
  if (max_gpus > 0 && plan.model.gpus > 0)
    s += "#SBATCH --gres=gpu:" + std::to_string(max_gpus) + "\n";
  if (remote > 0) {
    s += "#SBATCH hetjob\n";
    if (!plan.sources.partition.empty()) {
      s += "#SBATCH --partition=" + ShellQuote(plan.sources.partition) + "\n";
    }
    s += "#SBATCH --ntasks=" + std::to_string(remote) + "\n";
    s += "#SBATCH --cpus-per-task=" + std::to_string(remote_cpus) + "\n";
    if (remote_memory > 0 && remote_cpus > 0) {
      const double mib = std::ceil(double(remote_memory) / (1024.0 * 1024.0) / remote_cpus);
      s += "#SBATCH --mem-per-cpu=" + std::to_string(static_cast<long long>(mib)) + "M\n";
    }
  }
  s += "set -euo pipefail\n";
  s += "exec " + ShellQuote(o.goldminer) + " run --plan " + ShellQuote(o.plan_path) + " --";
  for (const std::string& a : plan.run.command) s += " " + ShellQuote(a);
  s += "\n";
  return s;
}

}  // namespace gm::planner
