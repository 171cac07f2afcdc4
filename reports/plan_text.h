// The terminal view of a Plan (core/plan.h) and of a CPU division across jobs
// (core/division.h): what, where, why, the predicted rate and the limit that
// binds, for people. plan.json is the view for programs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/division.h"
#include "core/plan.h"

namespace gm::reports {

// Text ending with a newline.
std::string PlanText(const Plan& plan);
std::string DivisionText(const Division& division, int cpus);
// `plan --jobs ... --json`: {schema "goldminer.division", version 1, cpus,
// cpus_per_worker, cpus_unused, normalized_sum, equal_normalized_sum, jobs: [{profile,
// demand_samples_per_s, samples_per_s_per_cpu, cpus, workers, samples_per_s,
// normalized, equal_cpus, equal_samples_per_s, speedup}]}; `jobs` are the demands
// the division was made from, in its order. A stable interface (goldminer-plan(1)).
nlohmann::json DivisionJson(const Division& division, const std::vector<JobDemand>& jobs, int cpus,
                            int cpus_per_worker);

}  // namespace gm::reports
