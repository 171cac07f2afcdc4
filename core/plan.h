// The plan model: what `goldminer plan` computed, what plan.json holds and what
// `goldminer run --plan` reads. Plain values, no behaviour beyond (de)serializing.
//
// plan.json is versioned: {"schema": "goldminer.plan", "version": 1, ...}. Field
// names are stable and carry their units (_s seconds, _bytes bytes, _per_s per
// second); a reader ignores unknown fields and refuses another major version with
// a message naming the file. Documented field by field in man/goldminer-plan.1.
//
// Thread-compatible plain values.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/run_spec.h"
#include "core/status.h"

namespace gm {

inline constexpr int kPlanVersion = 1;
inline constexpr const char* kPlanSchema = "goldminer.plan";
// Where the plan's inputs came from.
struct PlanSources {
  std::string profile_path;         // profile.json as given
  std::string profile_created_utc;  // identifies the measurement
  std::string profile_host;
  std::string profile_sha256;   // the profile's digest (core/store/run_records.h ProfileDigest)
  std::string pipeline_path;    // the profiled pipeline.json (what the workers run)
  std::string pipeline_sha256;  // of its bytes when profiled
  std::string cluster;          // "slurm", "file:<path>" or "local:<host>"
  std::string gpu_partition;    // where the trainer goes ("" without GPUs)
  std::string partition;        // where CPU-only nodes' workers go ("" when none)

  bool operator==(const PlanSources&) const = default;
};

// The figures the model computed from, and the knobs it was given.
struct PlanModel {
  double target_samples_per_s = 0;             // what the plan aims to deliver to the trainer
  std::string target_source;                   // "--target-rate" or "trainer demand"
  std::optional<double> demand_samples_per_s;  // the trainer's (all ranks); absent: unknown
  int gpus = 0;                                // GPUs (trainer ranks) the trainer uses
  double cpu_s_per_sample = 0;                 // the pipeline's CPU per sample, 1 stage thread
  double scaling_efficiency = 0;               // 0..1, measured (see goldminer-plan(1))
  double worker_cpu_s_per_sample = 0;          // at the chosen cut, before efficiency
  double samples_per_s_per_cpu = 0;            // one worker CPU, efficiency applied
  double cpus_needed = 0;                      // worker CPUs the target needs
  uint64_t memory_per_worker_bytes = 0;        // peak RSS from the profile; 0: not checked
  int cpus_per_worker = 0;
  int max_workers = 0;
  int trainer_cpus = 0;  // CPUs kept for each trainer process
  double nic_gbps = 0;   // for nodes whose NIC speed the cluster does not say

  bool operator==(const PlanModel&) const = default;
};

// The chosen cut: stages up to after_stage on workers, the rest in the trainer's
// client.
struct PlanCut {
  int after_stage = -1;
  double bytes_per_sample = 0;        // what crosses the network
  double local_cpu_s_per_sample = 0;  // stage CPU left on the trainer's node
  bool runnable = true;               // this goldminer's `run` executes it

  bool operator==(const PlanCut&) const = default;
};

// One cut the model evaluated, and what it would deliver.
struct PlanCutOption {
  int after_stage = -1;
  double bytes_per_sample = 0;
  double samples_per_s = 0;
  std::string limit;  // what binds at this cut ("none" when the target is met)
  bool runnable = true;
  bool chosen = false;

  bool operator==(const PlanCutOption&) const = default;
};

// A node that holds (part of) the trainer.
struct PlanTrainerNode {
  std::string name;
  int gpus = 0;  // GPUs (trainer ranks) on it
  int cpus = 0;  // CPUs kept for the trainer processes and the client's tail stages
  bool operator==(const PlanTrainerNode&) const = default;
};

// One data worker.
struct PlanWorker {
  std::string node;
  std::string partition;
  int cpus = 0;  // also its stage threads
  uint64_t memory_bytes = 0;
  bool on_trainer_node = false;  // its batches stay on the node (no NIC)
  double samples_per_s = 0;      // what the model expects it to deliver

  bool operator==(const PlanWorker&) const = default;
};

struct PlanPrediction {
  double samples_per_s = 0;                  // delivered to the trainer
  std::optional<double> stall_fraction;      // trainer's data wait share; absent: demand unknown
  int worker_cpus = 0;                       // CPUs the workers are given
  double network_bytes_per_s = 0;            // across NICs (workers off the trainer's nodes)
  double cpu_hours_per_million_samples = 0;  // worker CPUs x time for 1e6 samples
  std::optional<uint64_t> epoch_samples;     // when given to the plan
  std::optional<double> cpu_hours_per_epoch;
  // What binds: "none" (target met), "cpus", "memory", "network", "max-workers",
  // "trainer-node-cpus" (the client's tail stages), "trainer" (its own speed).
  std::string limit = "none";
  double shortfall_samples_per_s = 0;  // target - predicted (0 when met)
  std::string limit_detail;            // a sentence: the limit and by how much

  bool operator==(const PlanPrediction&) const = default;
};

// What `goldminer run --plan` starts.
// plan.json's "run" section: the planned fields of a RunSpec (pipeline, workers,
// threads_per_worker, each slot's threads as "worker_threads", world_size,
// command); the others keep their defaults, and `run --plan` fills each slot's
// place (remote) and memory from the plan's workers.
using PlanRun = RunSpec;

struct Plan {
  int version = kPlanVersion;
  std::string created_utc;
  std::string goldminer_version;
  PlanSources sources;
  PlanModel model;
  PlanCut cut;
  std::vector<PlanCutOption> cuts;
  std::vector<PlanTrainerNode> trainer_nodes;
  std::vector<PlanWorker> workers;
  PlanPrediction prediction;
  PlanRun run;
  std::vector<std::string> notes;  // explanations a person reads (why, assumptions)

  bool operator==(const Plan&) const = default;
};

// plan.json's document (every field, plus "schema" and "version").
nlohmann::json PlanToJson(const Plan& plan);
// Reads a plan.json document; errors name `origin` and the JSON path. Required: the
// schema, version, run.pipeline, run.workers, run.threads_per_worker and
// prediction.samples_per_s; everything else keeps its default when absent.
Result<Plan> PlanFromJson(const nlohmann::json& j, const std::string& origin);
Result<Plan> LoadPlan(const std::string& path);

}  // namespace gm
