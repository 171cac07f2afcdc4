// Slurm's `scontrol show ... --oneliner` text, shared by the planner (nodes and
// partitions) and the launcher (the job it runs in).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gm {

// The plain "KEY=value KEY=value ..." of one scontrol --oneliner line; a value
// that holds spaces (OS=, Reason=) keeps them.
std::vector<std::pair<std::string, std::string>> ScontrolFields(const std::string& line);

}  // namespace gm
