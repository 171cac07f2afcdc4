// What one run of the pipeline engine measured (worker/engine.h): samples,
// batches, time and CPU, and each stage's costs. The engine fills it; `goldminer
// worker` and the profiler show it (reports/run_stats.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gm {

struct StageStats {
  std::string name;
  uint64_t count = 0;      // samples that went through the stage (including failures)
  double cpu_s = 0;        // thread CPU seconds (plus child processes' CPU for exec)
  double extra_cpu_s = 0;  // the child processes' part of cpu_s
  double wall_s = 0;       // wall seconds
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t peak_bytes_out = 0;  // largest output of one sample
};

struct RunStats {
  uint64_t samples = 0;  // delivered in batches
  uint64_t skipped = 0;  // unreadable or failed samples (on_error: skip)
  uint64_t batches = 0;
  uint64_t split_batches = 0;  // batches formed, delivered or not (RunSplit: the split's count)
  // Delivered batches their samples' last stage wrote in place (no collation copy).
  uint64_t batches_in_place = 0;
  double seconds = 0;              // wall time of the whole run
  double cpu_s = 0;                // process CPU seconds during the run
  double reader_cpu_s = 0;         // CPU of the source-reading thread
  double batcher_cpu_s = 0;        // CPU of the calling thread (re-ordering, collation, sink)
  double stage_threads_cpu_s = 0;  // CPU of the stage threads (stage work + queueing)
  int threads = 0;
  int epochs = 0;
  std::vector<StageStats> stages;
};

}  // namespace gm
