// Turns what a trainer recorded (step logs, core/step_log.h) and what its GPU did
// (GPU logs, profiler/gpu_log.h) into the trainer's figures (TrainerProfile).
//
// A step is the time from one batch request to the next by the same process:
// step i waits for batch i (wait_begin..wait_end of record i), then computes until
// it asks for batch i+1 (wait_end of record i .. wait_begin of record i+1). The
// last record of a process closes no step. The first `warmup_steps` steps of each
// process are not measured (start-up: worker launch, imports, first compilation).
//
// Per process, over measured steps:
//   demand = samples / compute time  (the rate if data were never late),
//   stall fraction = data wait / (wait + compute),
// and with GPU activity of the same process (or, when none has the trainer's pid,
// of all processes): busy = union of kernel/memcpy/memset intervals inside the step,
// idle = step - busy, stall = the part of the data wait the GPU was idle for.
// Several processes (ranks) add their rates; fractions are over all their steps.
// The DataLoader figures (TrainerProfile::dataloader), from the "D" lines of the
// measured steps: CPU per sample = the workers' CPU from the batch before the first
// measured step's to the last measured step's, over the samples of the batches in
// between (a constant prefetch cancels out); bytes per sample = batch bytes over
// batch samples. Absent unless every such record of a process has a "D" line.
//
// Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/profile.h"
#include "core/step_log.h"
#include "profiler/gpu_log.h"

namespace gm {

struct StepAnalysisOptions {
  uint64_t warmup_steps = 5;
  uint64_t max_steps = 0;        // measured steps per process at most (0: all); the
                                 // trainer may step a little past the stop point
  size_t max_step_list = 10000;  // steps kept in TrainerProfile::step_list
  // Why there are no GPU logs, when known ("libgoldminer_cupti.so was not built");
  // used as GpuProfile::reason when no activity is found.
  std::string gpu_unavailable_reason;
};

// Fills the step figures, GPU figures and step list of a TrainerProfile (command,
// exit and source are left for the caller).
TrainerProfile AnalyzeSteps(const std::vector<StepLog>& steps, const std::vector<GpuLog>& gpu,
                            const StepAnalysisOptions& options);

// A half-open interval [begin, end) in nanoseconds.
struct Interval {
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Sorted, disjoint union of `intervals` (empty ones dropped).
std::vector<Interval> UnionOf(std::vector<Interval> intervals);
// Nanoseconds of `window` covered by `sorted_union` (from UnionOf).
uint64_t CoveredNanos(const std::vector<Interval>& sorted_union, Interval window);

}  // namespace gm
