// Renderers for the engine's RunStats: a table for people, JSON for programs.
// The JSON field names are a stable interface (goldminer-worker(1)).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/engine_stats.h"

namespace gm::reports {

// {samples, skipped, batches, seconds, samples_per_s, threads, epochs, cpu_s,
//  stages: [{name, count, cpu_s_per_sample, wall_s_per_sample, bytes_in_per_sample,
//  bytes_out_per_sample}], digest (when non-empty)}
nlohmann::json RunStatsJson(const RunStats& stats, const std::string& digest);

// A summary line and a per-stage table, ending with a newline.
std::string RunStatsTable(const RunStats& stats, const std::string& digest);

}  // namespace gm::reports
