// The terminal summary of a simulation (`goldminer simulate`), from sim.json's
// document (simulator/sim.h SimToJson): the policies side by side, the ratios
// the paper reports, and the inputs. Pure. Thread-compatible.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gm::reports {

// Missing fields read as 0 or "" (the document is ours).
std::string SimText(const nlohmann::json& sim);

}  // namespace gm::reports
