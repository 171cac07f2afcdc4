// Dividing one pool of CPUs across several jobs (`goldminer plan --jobs ... --cpus
// N`): the paper's cluster insight. Each job's normalised throughput is
// min(x * rate_per_cpu, demand) / demand for x CPUs; CPUs go one at a time to the
// job whose normalised throughput gains most from it (greedy is optimal: each
// job's curve is concave), ties to the job listed first. Pure. Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "core/division.h"
#include "core/status.h"

namespace gm::planner {

using gm::Division;
using gm::JobDemand;
using gm::JobShare;

// InvalidArgument when there are no jobs, cpus < 1, or a job's figures are not positive.
Result<Division> DivideCpus(const std::vector<JobDemand>& jobs, int cpus, int cpus_per_worker);

}  // namespace gm::planner
