// `goldminer pool --status` as text: the pool's CPUs, each run's grant and the
// latest changes, from the state document that --json prints (POOL_STATE's
// meta, goldminer-protocol(7)).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gm::reports {

// The table; a field the document lacks reads as 0 or empty.
std::string PoolStateText(const nlohmann::json& state);

}  // namespace gm::reports
