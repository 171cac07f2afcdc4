// The trainer side of `goldminer profile`: runs the user's training command for a
// bounded number of steps or seconds and measures how long it waited for data.
//
// Two sources of batches:
//  - with a pipeline, the trainer is fed by local data workers (launcher/training_run.h)
//    and the goldminer client records each batch request (core/step_log.h);
//  - without one, the program runs unchanged with its own torch DataLoader, and an
//    import hook (python/goldminer/_profile_hook, put first on its PYTHONPATH)
//    records each DataLoader __next__.
// In both, when libgoldminer_cupti.so exists it is injected through
// CUDA_INJECTION64_PATH, so a trainer that initializes CUDA writes its GPU activity
// (profiler/gpu_log.h). The trainer is stopped (SIGTERM, then SIGKILL after a
// grace period) once it has made warm-up + `steps` steps, after `seconds`, or when
// it makes no step for `step_timeout_s`; a trainer that exits by itself ends the
// run too. Nothing here hangs: every wait is bounded by these limits.
//
// Threads: blocks the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/profile.h"
#include "core/run_spec.h"
#include "core/status.h"
#include "core/step_log.h"
#include "profiler/gpu_log.h"

namespace gm {

struct TrainerRunOptions {
  // The trainer command and, with a pipeline (spec.pipeline non-empty), the workers
  // that feed it (core/run_spec.h); without one, the program's own torch DataLoader.
  RunSpec spec;
  uint64_t warmup_steps = 5;
  uint64_t steps = 100;         // measured steps before stopping the trainer; 0: no limit
  double seconds = 0;           // stop after this many seconds of trainer run time; 0: none
  double step_timeout_s = 120;  // stop when no step is recorded for this long
  bool inject_cupti = true;     // when the library exists
  // Price each recognised torch DataLoader on the native engine (profile --offload
  // native): $GOLDMINER_PROFILE_NATIVE=1 for the PyTorch hook.
  bool price_native = false;
  std::string work_dir;  // an existing, empty directory for the logs (caller owns it)
  std::function<void(const std::string&)> progress;  // status lines; may be empty
};

struct TrainerRunOutcome {
  int exit_code = 0;  // the trainer's (128+signal when killed)
  std::string exit;   // how it ended, for people
  bool stopped_by_profile = false;
  std::string stop_reason;    // "100 steps measured", "no step for 120 s", ...
  bool step_timeout = false;  // stopped because no step came
  double seconds = 0;         // wall time of the trainer run
  std::vector<StepLog> steps;
  std::vector<GpuLog> gpu;
  std::string gpu_unavailable_reason;  // set when no injection was done
};

// Runs the trainer once. Errors: the command cannot be started (naming it), the
// pipeline cannot be loaded, the logs cannot be read. A trainer that fails or
// makes no step is not an error here (see ProfileTrainer).
Result<TrainerRunOutcome> RunTrainer(const TrainerRunOptions& options);

struct TrainerMeasurement {
  TrainerProfile profile;
  TrainerRunOutcome outcome;  // the raw logs (for traces)
  // Non-OK when nothing could be measured (no step, or the trainer failed before
  // its second step): says why and what the trainer must do. The profile then
  // holds what is known (command, exit, steps recorded).
  Status problem;
};

// Runs the trainer, analyzes its steps (profiler/step_analysis.h) and, when GPU
// activity was recorded, runs it again without CUPTI to measure CUPTI's overhead.
// Errors are those of RunTrainer.
Result<TrainerMeasurement> ProfileTrainer(const TrainerRunOptions& options);

}  // namespace gm
