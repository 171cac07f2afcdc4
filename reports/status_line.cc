#include "reports/status_line.h"

#include <algorithm>
#include <cstdio>

namespace gm::reports {

std::string RatesLine(const RunRates& r) {
  // Workers that run, not workers asked for: one Slurm has not started yet counts
  // apart.
  char workers[64];
  if (r.workers_live >= 0 && r.workers_live < r.workers) {
    std::snprintf(workers, sizeof workers, "%d of %d worker(s) running", r.workers_live, r.workers);
  } else {
    std::snprintf(workers, sizeof workers, "%d worker(s)", r.workers);
  }
  char line[200];
  std::snprintf(line, sizeof line, "%.0f samples/s, data wait %.0f%%, %s (%.1f CPUs), epoch %llu",
                r.samples_per_s, 100 * r.data_wait_fraction, workers, r.worker_cpus,
                static_cast<unsigned long long>(r.epoch));
  return line;
}

std::string WorkerProgressLine(uint64_t epoch, uint64_t samples, uint64_t total, double seconds,
                               uint64_t skipped) {
  const std::string of = total > 0 ? "/" + std::to_string(total) : "";
  char line[200];
  std::snprintf(line, sizeof line, "epoch %llu  %llu%s samples  %.1f samples/s  skipped %llu",
                static_cast<unsigned long long>(epoch), static_cast<unsigned long long>(samples),
                of.c_str(), static_cast<double>(samples) / std::max(1e-9, seconds),
                static_cast<unsigned long long>(skipped));
  return line;
}

}  // namespace gm::reports
