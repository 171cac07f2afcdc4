// The line a run shows while it goes ("run ID: 812 samples/s, data wait 12%, 3
// worker(s) (2.9 CPUs), epoch 2"), from the figures of its latest interval.
#pragma once

#include <cstdint>
#include <string>

#include "core/run_rates.h"

namespace gm::reports {

// "812 samples/s, data wait 12%, 3 worker(s) (2.9 CPUs), epoch 2".
std::string RatesLine(const RunRates& rates);

// `goldminer worker --local`'s line while its engine runs: "epoch 1  500/1000
// samples  250.0 samples/s  skipped 2" (`total` 0: not known, no "/N"), the rate
// over `seconds` since it started.
std::string WorkerProgressLine(uint64_t epoch, uint64_t samples, uint64_t total, double seconds,
                               uint64_t skipped);

}  // namespace gm::reports
