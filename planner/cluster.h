// The cluster a plan is made for: partitions and nodes with their CPUs, memory,
// GPUs and what is already allocated. Read from Slurm's own words (the text of
// `scontrol show node --oneliner` and `scontrol show partition --oneliner`; cmd/
// runs the commands) or from a cluster.json of the same shape
// ({"schema": "goldminer.cluster", "version": 1, ...}, man/goldminer-plan.1).
// Pure: text and JSON in, values out. Thread-compatible plain values.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/scontrol.h"
#include "core/status.h"

namespace gm::planner {

inline constexpr int kClusterVersion = 1;
inline constexpr const char* kClusterSchema = "goldminer.cluster";

struct ClusterNode {
  std::string name;
  std::vector<std::string> partitions;
  int cpus = 0;
  int cpus_alloc = 0;
  uint64_t memory_mb = 0;  // 0: unknown (memory is then not checked on this node)
  uint64_t memory_alloc_mb = 0;
  int gpus = 0;
  int gpus_alloc = 0;
  std::string state = "idle";  // Slurm's words, lower case: "idle", "mixed", "down+drain", ...
  double nic_gbps = 0;         // 0: unknown (the plan's --nic-gbps applies)

  int free_cpus() const { return cpus > cpus_alloc ? cpus - cpus_alloc : 0; }
  int free_gpus() const { return gpus > gpus_alloc ? gpus - gpus_alloc : 0; }
  uint64_t free_memory_mb() const {
    return memory_mb > memory_alloc_mb ? memory_mb - memory_alloc_mb : 0;
  }
  // Takes new work: idle, mixed (or allocated), and not down, drained, failing,
  // in maintenance, reserved for a reboot or not responding.
  bool usable() const;
  bool in(const std::string& partition) const;

  bool operator==(const ClusterNode&) const = default;
};

struct ClusterPartition {
  std::string name;
  bool is_default = false;
  bool up = true;

  bool operator==(const ClusterPartition&) const = default;
};

struct Cluster {
  std::string source;  // "slurm", "file:<path>", "local:<host>"
  std::vector<ClusterPartition> partitions;
  std::vector<ClusterNode> nodes;

  const ClusterPartition* partition(const std::string& name) const;
  bool operator==(const Cluster&) const = default;
};

// cluster.json. Errors name `origin` and the JSON path; a node's partitions must
// be listed under "partitions".
Result<Cluster> ClusterFromJson(const nlohmann::json& j, const std::string& origin);
nlohmann::json ClusterToJson(const Cluster& cluster);

// `scontrol show node --oneliner` and `scontrol show partition --oneliner` output,
// and `sinfo -h -N -O NodeList:|,GresUsed:|` ("gpu1|gpu:1(IDX:0)|" per line; may be
// empty). Errors name `origin` and the line. GPUs come from Gres= (gpu:N,
// gpu:type:N); the allocated ones from GresUsed, or AllocTRES= (gres/gpu=N) where
// the cluster accounts GPUs as a TRES, whichever says more.
Result<Cluster> ClusterFromScontrol(const std::string& nodes_text,
                                    const std::string& partitions_text,
                                    const std::string& gres_used_text, const std::string& origin);

using gm::ScontrolFields;  // core/scontrol.h

}  // namespace gm::planner
