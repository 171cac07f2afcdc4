// The line a run shows while it goes ("run ID: 812 samples/s, data wait 12%, 3
// worker(s) (2.9 CPUs), epoch 2"), from the figures of its latest interval.
#pragma once

#include <string>

#include "core/run_rates.h"

namespace gm::reports {

// "812 samples/s, data wait 12%, 3 worker(s) (2.9 CPUs), epoch 2".
std::string RatesLine(const RunRates& rates);

}  // namespace gm::reports
