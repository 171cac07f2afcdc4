// The terminal view of a Plan (core/plan.h) and of a CPU division across jobs
// (planner/divide.h): what, where, why, the predicted rate and the limit that
// binds, for people. plan.json is the view for programs.
#pragma once

#include <string>

#include "core/plan.h"
#include "planner/divide.h"

namespace gm::cli {

// Text ending with a newline.
std::string PlanText(const Plan& plan);
std::string DivisionText(const planner::Division& division, int cpus);

}  // namespace gm::cli
