#include "reports/status_line.h"

#include <cstdio>

namespace gm::reports {

std::string RatesLine(const RunRates& r) {
  char line[160];
  std::snprintf(line, sizeof line,
                "%.0f samples/s, data wait %.0f%%, %d worker(s) (%.1f CPUs), epoch %llu",
                r.samples_per_s, 100 * r.data_wait_fraction, r.workers, r.worker_cpus,
                static_cast<unsigned long long>(r.epoch));
  return line;
}

}  // namespace gm::reports
