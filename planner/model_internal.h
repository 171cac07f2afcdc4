// The plan's model, inside planner/: what the placement (planner/placement.cc)
// and the plan's assembly (planner/model.cc) share. Not installed; pure.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/text_format.h"
#include "planner/model.h"

namespace gm::planner {

inline constexpr double kMiB = 1024.0 * 1024.0;

inline std::string Num(double v, int digits = 1) { return Fixed(v, digits); }
inline std::string Rate(double v) { return SamplesPerS(v); }

// The partitions' names, comma-separated ("(none)" when there is none).
std::string PartitionNames(const Cluster& c);

// A node's state of use while the plan places work on it.
struct NodeUse {
  const ClusterNode* node = nullptr;
  int free_cpus = 0;
  double free_memory_bytes = 0;  // infinity when the node's memory is unknown
  double nic_bytes_per_s = 0;
  double nic_used = 0;
  int ranks = 0;  // trainer processes on it
  int gpus = 0;   // GPUs the trainer uses on it
};

// A worker's CPU seconds per sample at a cut: making it, and sending it to the
// trainer: on the trainer's node in shared memory (a frame per batch), elsewhere
// over TCP (the frame and the bytes). See goldminer-plan(1), MODEL.
struct WorkerCost {
  double made = 0;
  double on_trainer = 0;
  double elsewhere = 0;
};

struct Placement {
  std::vector<PlanTrainerNode> trainer_nodes;  // with the CPUs kept for trainer and tail
  std::vector<PlanWorker> workers;
  double samples_per_s = 0;
  double network_bytes_per_s = 0;
  std::string limit = "none";
  std::string detail;
  double cpus_needed = 0;
  double per_cpu = 0;
  WorkerCost cost;  // cost.on_trainer is model.worker_cpu_s_per_sample
};

struct Setup {
  const Profile* profile = nullptr;
  const PlanOptions* options = nullptr;
  CpuRate rate;
  double target = 0;
  std::optional<double> demand;  // all ranks
  std::string gpu_partition;
  std::string partition;
  int world_size = 1;
  std::vector<NodeUse> trainer;  // trainer nodes, with their ranks
  std::vector<NodeUse> others;   // CPU nodes for workers, best first
  uint64_t memory_per_worker = 0;
};

// CPU seconds per sample the client's stages after `cut` take on the trainer's
// node(s): none when they could all run on the device and the trainer has GPUs
// (goldminer.torch.DeviceLoader applies them there), else what the profile measured.
double ClientCpuPerSample(const Setup& s, const CutPoint& cut);

// The plan for one cut: the target (or the trainer's demand, if lower) when it
// fits, else the highest rate that fits, with the limit that stopped the target.
Placement Evaluate(const Setup& s, const CutPoint& cut);

// The cuts the model may choose from (allowed ones), with whether `run` executes
// them: `run` follows pipeline.json, so the runnable cut is the file's own: after
// the last worker stage when stages are "on": "device" (the trainer's client
// applies those), else after the last stage.
std::vector<std::pair<CutPoint, bool>> Candidates(const PipelineProfile& pipe);

}  // namespace gm::planner
