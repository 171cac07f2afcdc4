#include "planner/divide.h"

#include <algorithm>
#include <cmath>

namespace gm::planner {
namespace {

double RateWith(const JobDemand& j, int cpus) {
  return std::min(cpus * j.samples_per_s_per_cpu, j.demand_samples_per_s);
}

}  // namespace

Result<Division> DivideCpus(const std::vector<JobDemand>& jobs, int cpus, int cpus_per_worker) {
  if (jobs.empty()) return Status::InvalidArgument("--jobs needs at least one profile.json");
  if (cpus < 1) return Status::InvalidArgument("--cpus must be at least 1");
  if (cpus_per_worker < 1) return Status::InvalidArgument("--cpus-per-worker must be at least 1");
  for (const JobDemand& j : jobs) {
    if (!(j.demand_samples_per_s > 0) || !(j.samples_per_s_per_cpu > 0) ||
        !std::isfinite(j.demand_samples_per_s) || !std::isfinite(j.samples_per_s_per_cpu)) {
      return Status::InvalidArgument(j.name +
                                     ": the job's demand and rate per CPU must be "
                                     "positive (a profile with a trainer part)");
    }
  }
  Division d;
  std::vector<int> given(jobs.size(), 0);
  int left = cpus;
  while (left > 0) {
    int best = -1;
    double best_gain = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const JobDemand& j = jobs[i];
      const double gain =
          (RateWith(j, given[i] + 1) - RateWith(j, given[i])) / j.demand_samples_per_s;
      if (gain > best_gain + 1e-12) best_gain = gain, best = static_cast<int>(i);
    }
    if (best < 0) break;
    ++given[static_cast<size_t>(best)];
    --left;
  }
  d.cpus_unused = left;
  const int n = static_cast<int>(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobDemand& j = jobs[i];
    JobShare s;
    s.name = j.name;
    s.cpus = given[i];
    s.workers = (s.cpus + cpus_per_worker - 1) / cpus_per_worker;
    s.samples_per_s = RateWith(j, s.cpus);
    s.normalized = s.samples_per_s / j.demand_samples_per_s;
    s.equal_cpus = cpus / n + (static_cast<int>(i) < cpus % n ? 1 : 0);
    s.equal_samples_per_s = RateWith(j, s.equal_cpus);
    s.speedup = s.equal_samples_per_s > 0 ? s.samples_per_s / s.equal_samples_per_s : 0;
    d.normalized_sum += s.normalized;
    d.equal_normalized_sum += s.equal_samples_per_s / j.demand_samples_per_s;
    d.jobs.push_back(s);
  }
  return d;
}

}  // namespace gm::planner
