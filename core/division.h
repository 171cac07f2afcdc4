// A division of one pool of CPUs across several jobs (planner/divide.h makes it,
// reports/plan_text.h shows it): each job's demand, and what it gets.
#pragma once

#include <string>
#include <vector>

namespace gm {

struct JobDemand {
  std::string name;                  // e.g. the profile's path
  double demand_samples_per_s = 0;   // what the trainer consumes
  double samples_per_s_per_cpu = 0;  // what one worker CPU delivers
};

struct JobShare {
  std::string name;
  int cpus = 0;
  int workers = 0;  // ceil(cpus / cpus_per_worker)
  double samples_per_s = 0;
  double normalized = 0;  // samples_per_s / demand
  int equal_cpus = 0;     // its share of an equal split
  double equal_samples_per_s = 0;
  double speedup = 0;  // samples_per_s / equal_samples_per_s (0 when both are 0)
};

struct Division {
  std::vector<JobShare> jobs;  // in the order given
  int cpus_unused = 0;         // every job is saturated before the pool runs out
  double normalized_sum = 0;
  double equal_normalized_sum = 0;
};

}  // namespace gm
