#include "reports/pool_text.h"

#include <cstdio>

#include "core/text_format.h"

namespace gm::reports {

std::string PoolStateText(const nlohmann::json& state) {
  if (!state.is_object()) return "pool: no state\n";
  const nlohmann::json none = nlohmann::json::array();
  const nlohmann::json& runs = state.contains("runs") ? state["runs"] : none;
  const nlohmann::json& history = state.contains("history") ? state["history"] : none;
  long long granted = 0;
  for (const nlohmann::json& r : runs) granted += r.value("cpus", 0LL);
  std::string out = "pool: " + std::to_string(state.value("cpus", 0LL)) + " CPUs, " +
                    std::to_string(granted) + " granted to " + std::to_string(runs.size()) +
                    " run(s)\n";
  if (runs.empty()) return out;
  out += "run                               GPUs  granted workers  CPUs  holds  last report\n";
  for (const nlohmann::json& r : runs) {
    std::string id = r.value("run_id", std::string());
    if (id.size() < 32) id.append(32 - id.size(), ' ');
    char line[256];
    std::snprintf(line, sizeof line, "%s %6s  %15lld %5lld %6lld  %.0f s ago\n", id.c_str(),
                  Fixed(r.value("gpus", 0.0), 1).c_str(), r.value("extra_workers", 0LL),
                  r.value("cpus", 0LL), r.value("held_workers", 0LL), r.value("age_s", 0.0));
    out += line;
  }
  if (history.empty()) return out;
  out += "changes (newest last):\n";
  for (const nlohmann::json& c : history) {
    out += "  " + Fixed(c.value("age_s", 0.0), 0) + " s ago: " + c.value("run_id", std::string()) +
           " " + std::to_string(c.value("from_cpus", 0LL)) + " -> " +
           std::to_string(c.value("to_cpus", 0LL)) + " CPUs: " + c.value("reason", std::string()) +
           "\n";
  }
  return out;
}

}  // namespace gm::reports
