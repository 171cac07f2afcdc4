// The performance model of `goldminer plan`: from a profile and a cluster to a
// plan (worker count and size, placement, the pipeline cut, the prediction and the
// limit that binds). Every formula is in man/goldminer-plan.1 (MODEL). Pure: values
// in, values out. Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/plan.h"
#include "core/profile.h"
#include "core/status.h"
#include "planner/cluster.h"

namespace gm::planner {

struct PlanOptions {
  std::optional<double> target_samples_per_s;  // absent: the trainer's demand
  int gpus = -1;  // -1: 1 when the cluster has GPUs, else 0 (trainer without a GPU)
  int max_workers = 64;
  int cpus_per_worker = 4;
  double nic_gbps = 10;  // for nodes whose NIC speed the cluster does not say
  // Workers on the trainer's node hand batches over in shared memory (false:
  // $GOLDMINER_SAME_HOST is "off", and they send them over TCP as the others do).
  bool same_host = true;
  int trainer_cpus = 1;       // kept for each trainer process on its node
  std::string partition;      // CPU nodes' partition; "": the default partition
  std::string gpu_partition;  // "": the partition with the most free GPUs
  bool all_cuts = false;      // also consider cuts this goldminer's `run` cannot execute
  std::optional<uint64_t> epoch_samples;
  std::vector<std::string> command;  // the trainer's argv; empty: the profile's
  // Labels copied into the plan.
  std::string profile_path;
  std::string created_utc;
  std::string goldminer_version;
};

// How well `profile`'s pipeline scales over cores, from its measured runs.
// efficiency(k) is what a k-thread worker on k CPUs delivers against k CPUs at the
// 1-thread CPU cost per sample: measured at 1 thread and at N threads (the run
// with the most), interpolated linearly between them, the N-thread figure beyond.
// The 1-thread cost is the CPU-seconds of one CPU per sample when the profile
// confined its 1-thread run to one CPU (runs[].cpus 1; efficiency_1 is then 1),
// else the process's CPU per sample (older profiles).
struct CpuRate {
  double cpu_s_per_sample = 0;  // the 1-thread cost (above)
  double efficiency_1 = 0;      // 1 thread, 0..1
  double efficiency_n = 0;      // `threads_n` threads, 0..1.5
  int threads_n = 1;
  std::string efficiency_source;  // how it was measured, for the plan's notes

  double efficiency(int cpus) const;
  // Samples/s of one worker CPU in a worker of `cpus` CPUs, whole pipeline.
  double samples_per_s_per_cpu(int cpus) const { return efficiency(cpus) / cpu_s_per_sample; }
};
// InvalidArgument naming `origin` when the profile has no pipeline part or its
// figures cannot give a rate (zero or negative CPU per sample, no runs).
Result<CpuRate> MeasuredCpuRate(const Profile& profile, const std::string& origin);

// The plan. Errors (InvalidArgument, naming the input): no pipeline part in the
// profile; no target (no --target-rate and no trainer demand); an empty cluster; a
// partition that does not exist or is down; a GPU partition without enough free
// GPUs; no usable node. A target the cluster cannot meet is not an error here:
// the plan names the limit (prediction.limit), and the caller decides.
Result<Plan> MakePlan(const Profile& profile, const Cluster& cluster, const PlanOptions& options);

}  // namespace gm::planner
