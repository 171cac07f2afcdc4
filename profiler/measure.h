// `goldminer profile`'s measurement, whole: the pipeline's stage costs on this
// machine, then the trainer fed by it (or by its own DataLoader) with its data
// wait and GPU timeline, and the verdict. cmd/verb_profile.cc keeps the flags,
// the files and the exit status.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/profile.h"
#include "core/run_spec.h"
#include "core/status.h"
#include "profiler/trace.h"

namespace gm {

struct MeasureOptions {
  // The pipeline (empty: none) and the trainer command (empty: none), with the
  // workers that feed it; at least one of the two.
  RunSpec spec;
  uint64_t samples = 512;       // per measured pipeline run
  uint64_t warmup = 64;         // pipeline samples not measured
  uint64_t warmup_steps = 5;    // trainer steps not measured
  uint64_t steps = 100;         // trainer steps measured (0: no limit)
  double seconds = 0;           // trainer run time limit (0: none)
  double step_timeout_s = 120;  // stop the trainer after this long without a step
  bool inject_cupti = true;
  bool price_native = false;  // profile --offload native (profiler/trainer_profile.h)
  bool trace = false;         // keep the spans, steps and GPU records for a trace
  std::string goldminer_version;
  std::function<void(const std::string&)> progress;  // status lines; may be empty
};

struct Measurement {
  Profile profile;   // with its verdict (profiler/verdict.h)
  TraceInput trace;  // when options.trace
  // Non-OK when the trainer part could not be measured (the pipeline part is still
  // in the profile); says why and what to do.
  Status trainer_problem;
  // The trainer exited non-zero before the profile stopped it.
  bool trainer_failed = false;
};

// Errors: the pipeline cannot be loaded or profiled, a temporary directory cannot
// be made. A trainer that fails is reported in the Measurement, not as an error.
Result<Measurement> MeasureProfile(const MeasureOptions& options);

}  // namespace gm
