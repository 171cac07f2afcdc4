// One policy's replay of a trace's tasks on a cluster's nodes: what Simulate
// (simulator/sim.h) runs once per policy. Internal to simulator/. Pure.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "simulator/sim.h"

namespace gm::sim {

// A task to replay: its trace row, its curve family (null: CPU only), when it is
// submitted (after --load) and its work (seconds at full speed).
struct ReplayTask {
  const SimTask* src = nullptr;
  const Family* family = nullptr;
  double submit = 0;
  double work = 0;
};

// Replays `tasks` on `nodes` under `policy` (static, job or cluster); `checks`
// (may be null) is called at every event. Internal when a task never starts or
// ends with work left.
Result<PolicyResult> ReplayPolicy(const std::string& policy, const std::vector<ReplayTask>& tasks,
                                  const std::vector<SimNode>& nodes, const SimOptions& o,
                                  const SimInvariants* checks);

}  // namespace gm::sim
