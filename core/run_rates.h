// A run's time series: what it measures at one moment (RunSample) and the
// figures of the interval between two samples (RunRates), which the recorder
// stores, the autoscaler decides on and the status line shows.
#pragma once

#include <cstdint>

namespace gm {

// What a run measures for its time series at one moment.
struct RunSample {
  double t_s = 0;           // seconds since the run started
  uint64_t samples = 0;     // delivered to the trainers so far (their step logs)
  uint64_t wait_ns = 0;     // the trainers' data wait so far
  int workers = 0;          // running now
  double worker_cpu_s = 0;  // CPU the workers have used so far
  uint64_t epoch = 0;       // the coordinator's current epoch
  int workers_ready = -1;   // of the workers, ready: they finished a split (-1: not known)
  int workers_live = -1;    // of the workers, registered with the coordinator (-1: not known)
};

// The figures of one interval between two samples.
struct RunRates {
  double t_s = 0;  // the interval's end
  double samples_per_s = 0;
  double data_wait_fraction = 0;  // of the interval times the ranks
  int workers = 0;
  double worker_cpus = 0;  // CPU seconds per second
  uint64_t epoch = 0;
  int workers_ready = -1;  // ready: they finished a split (-1: not known)
  int workers_live = -1;   // registered: running, not waiting for Slurm (-1: not known)
};

}  // namespace gm
