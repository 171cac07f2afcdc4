// Chrome/Perfetto trace export of a profile: what `goldminer profile --trace` writes.
// The JSON Object Format of the Trace Event Format ({"traceEvents": [...]}), which
// chrome://tracing, ui.perfetto.dev and speedscope open:
//   - process "pipeline (1 stage thread)": one thread per stage thread, a complete
//     ("X") event per stage applied to a sample (the first spans of the first timed run);
//   - process "trainer <pid>": thread "data wait" (each batch request until the
//     batch arrived) and thread "compute" (from the batch to the next request);
//   - the same process's GPU activity: one thread per device and stream, an event per
//     kernel, memcpy and memset.
// Times are microseconds from the earliest event. Pure; thread-compatible.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/step_log.h"
#include "profiler/gpu_log.h"
#include "worker/engine.h"

namespace gm {

struct TraceInput {
  std::vector<std::string> stage_names;  // by stage position (StageSpan::stage)
  std::vector<StageSpan> spans;          // MonotonicSeconds() times
  std::vector<StepLog> steps;            // CLOCK_MONOTONIC ns
  std::vector<GpuLog> gpu;               // CLOCK_MONOTONIC ns
};

nlohmann::json ChromeTrace(const TraceInput& input);

}  // namespace gm
