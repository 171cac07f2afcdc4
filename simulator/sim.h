// `goldminer simulate`: what elastic data workers would do for a whole cluster,
// replayed on a trace, under several policies side by side. Pure and
// event-driven: the trace and the nodes in, figures out; every run is the same
// for the same inputs and seed. The model and every assumption are in
// goldminer-simulate(1), MODEL; in short:
//
//   - A GPU task's speed, as a fraction of what its GPUs allow, is the lower of 1
//     and (CPUs feeding it) / (kappa x GPUs): its family's curve (kappa: CPUs per
//     GPU its data pre-processing needs; CPU-hungry vision-like, moderate, flat
//     text-like, a seeded mix). Its work is its trace duration at the speed the
//     CPUs it asked for gave, so `static` replays the trace's own durations.
//   - static: each task holds the GPUs and CPUs it asked for, on one node.
//   - job: goldminer inside each job's allocation: a task holds its trainer's
//     CPUs on its GPUs' node and the worker CPUs its curve needs to saturate
//     (what `goldminer plan` asks for) on any nodes, all or nothing, for its life.
//   - cluster: a task holds only its trainer's CPUs; every CPU no task holds is a
//     pool that planner/pool.h divides between the running GPU tasks' data workers
//     by marginal gain (again at every arrival and end); a task being admitted
//     takes CPUs back from workers on its node (a preemption).
//   - Tasks start first come, first placed: in submit order, each that fits
//     (first fit over the nodes) starts; one that does not waits without
//     blocking those behind it.
// Thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/profile.h"
#include "core/status.h"
#include "planner/pool.h"
#include "simulator/trace.h"

namespace gm::sim {

inline constexpr int kSimVersion = 1;
inline constexpr const char* kSimSchema = "goldminer.sim";

// A curve family: kappa CPUs per GPU saturate its GPUs; its samples/s per GPU
// and bytes per sample give the network a remote worker uses.
struct Family {
  std::string name;
  double cpus_per_gpu = 1;           // kappa, > 0
  double samples_per_s_per_gpu = 1;  // at full speed
  double bytes_per_sample = 0;       // what a worker sends the trainer
  double share = 0;                  // of the tasks without a class (the mix)
};
// vision (kappa 12, 0.4), moderate (6, 0.4), text (1.5, 0.2): goldminer-simulate(1).
std::vector<Family> DefaultFamilies();

// The family a goldminer profile measures (--profiles; share 1, the caller divides
// the mix): one rank drives one GPU, so samples_per_s_per_gpu is the trainer's
// demand (what it would consume with data always ready); kappa is that demand x
// the CPU seconds per sample of its pipeline (one stage thread), or of its
// DataLoader's worker processes when it has no pipeline; bytes_per_sample is what
// the pipeline's last stage puts out, or the DataLoader's batch bytes per sample.
// InvalidArgument naming `origin` when the profile has no trainer demand or no
// CPU per sample.
Result<Family> FamilyFromProfile(const Profile& profile, const std::string& name,
                                 const std::string& origin);

// The curve families of a --curves document, {"families": [{name, cpus_per_gpu,
// samples_per_s_per_gpu, bytes_per_sample, share}, ...]} (goldminer-simulate(1),
// Curve families): at least one. InvalidArgument naming `origin` and the JSON path.
Result<std::vector<Family>> ParseCurves(const nlohmann::json& doc, const std::string& origin);

struct SimOptions {
  std::vector<std::string> policies = {"static", "job", "cluster"};
  int gpus = 0;     // 0: every node; else GPU nodes drawn (seeded) until N GPUs: the
                    // whole trace on a smaller cluster
  double load = 1;  // arrival times are divided by this (> 0)
  uint64_t seed = 1;
  double trainer_cpus_per_gpu = 1;  // what a trainer keeps under job and cluster (0: none)
  double nic_gbps = 25;             // each node's, for workers off a task's node
  // What if GPU nodes were short of CPUs: each GPU node's CPUs set to this x its
  // GPUs, and a GPU task asks at most this x its GPUs (at least 1), its work still
  // that of the CPUs it asked in the trace. 0: the node list's CPUs.
  double node_cpus_per_gpu = 0;
  // Seconds a GPU task makes no progress after it starts (its processes' start),
  // under every policy; 0: none.
  double task_start_s = 0;
  // cluster: seconds before worker CPUs granted to a running task beyond its
  // baseline feed it (a worker job's start, its registration, and the run's
  // autoscaler's decision to use it); 0: at once.
  double worker_delay_s = 0;
  planner::PoolOptions pool;
  std::vector<Family> families = DefaultFamilies();
  size_t series_points = 100;  // samples of queue and utilization over time
};

// One point of a policy's time series.
struct SimPoint {
  double t_s = 0;
  size_t queued = 0;         // tasks waiting
  double gpu_allocated = 0;  // fraction of the GPUs held
  double gpu_effective = 0;  // held x speed
  bool operator==(const SimPoint&) const = default;
};

// One GPU task's replay under a policy (its line in the trace; times in seconds
// from the trace's clock, after --load).
struct TaskTimes {
  size_t line = 0;
  std::string family;
  double submit_s = 0, start_s = 0, end_s = 0;
  bool operator==(const TaskTimes&) const = default;
};

struct PolicyResult {
  std::string policy;
  size_t gpu_tasks = 0, cpu_tasks = 0;
  double jct_mean_s = 0, jct_p50_s = 0, jct_p95_s = 0, jct_p99_s = 0;  // GPU tasks
  double queue_mean_s = 0, queue_p50_s = 0, queue_p95_s = 0;           // GPU tasks
  double makespan_s = 0;                                               // first submit to last end
  double gpu_util_allocated = 0;  // GPU-seconds held / (GPUs x makespan)
  double gpu_util_effective = 0;  // GPU-seconds held x speed / (GPUs x makespan)
  double cpu_util = 0;            // CPU-seconds held (workers' too) / (CPUs x makespan)
  // The same two over the submission window (first to last arrival), where tasks
  // keep coming: the makespan's tail is a few long tasks on an emptying cluster.
  double window_s = 0;
  double gpu_util_allocated_window = 0;
  double gpu_util_effective_window = 0;
  uint64_t worker_cpus_started = 0;    // cluster: CPUs given to workers, summed
  uint64_t worker_cpus_preempted = 0;  // cluster: taken back to admit a task
  uint64_t events = 0;
  std::vector<SimPoint> series;
  std::vector<TaskTimes> tasks;  // GPU tasks, in the trace's order (not in sim.json)
  bool operator==(const PolicyResult&) const = default;
};

struct SimResult {
  std::string trace_origin, nodes_origin;
  size_t trace_tasks = 0, never_scheduled = 0;
  size_t tasks = 0;    // replayed (after sampling)
  size_t dropped = 0;  // fit none of the nodes drawn (--gpus)
  size_t nodes = 0;
  int gpus = 0;
  int cpus = 0;
  SimOptions options;
  std::vector<std::string> assumptions;  // sentences, as the man page states them
  std::vector<PolicyResult> policies;
};

// Checks run at every event when given (tests): InvalidArgument/Internal ends the
// simulation with that error. `node_cpus`, `node_gpu_milli`, `node_memory_mib`:
// what each node's tasks and workers hold now.
struct SimInvariants {
  std::function<Status(double t_s, const std::vector<int>& node_cpus,
                       const std::vector<int>& node_gpu_milli,
                       const std::vector<uint64_t>& node_memory_mib)>
      on_event;
};

// Runs every policy of options.policies. InvalidArgument for an unknown policy,
// an option out of range, a class no family has, or, with every node (gpus 0), a
// task that fits no node (naming its line).
Result<SimResult> Simulate(const Trace& trace, const std::vector<SimNode>& nodes,
                           const SimOptions& options, const SimInvariants* checks = nullptr);

// sim.json (versioned; goldminer-simulate(1), OUTPUT).
nlohmann::json SimToJson(const SimResult& result);

// Every GPU task under every policy, a CSV (simulate --tasks): policy, line,
// family, submit_s, start_s, end_s, jct_s.
std::string TasksCsv(const SimResult& result);

}  // namespace gm::sim
