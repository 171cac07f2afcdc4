// The pipeline side of `goldminer profile`: runs a pipeline here, in this process,
// after a warm-up, with one stage thread and with all cores, and turns the engine's
// per-stage accounting into a PipelineProfile (core/profile.h): CPU and wall seconds
// per sample per stage, bytes in and out, where the pipeline may be cut, samples
// per second per core, and the stage timing's own overhead (timed runs against
// untimed ones, alternating).
//
// Threads: ProfilePipeline blocks the calling thread; the engine starts its own.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/profile.h"
#include "core/status.h"
#include "worker/engine.h"

namespace gm {

struct PipelineProfileOptions {
  std::string path;               // pipeline.json
  uint64_t samples = 512;         // samples per measured run (the first N of epoch 0)
  uint64_t warmup = 64;           // samples run first and not measured
  int cores = 0;                  // threads of the all-cores run; 0: the CPUs we may use
  int rounds = 3;                 // timed/untimed run pairs with 1 thread (medians)
  SpanRecorder* spans = nullptr;  // keeps stage spans of the first timed run
  std::function<void(const std::string&)> progress;  // one line per run; may be empty
};

// Measures the pipeline. Errors: the pipeline cannot be loaded, or a run fails
// (on_error "fail" and a bad sample, naming it).
Result<PipelineProfile> ProfilePipeline(const PipelineProfileOptions& options);

// The cut points of a measured pipeline: after every stage (and before the first),
// allowed while every stage up to the cut is stateless. after_stage is a position in
// pipeline.json: a fused op ("decode_jpeg+random_resized_crop") cannot be split,
// so the cut after it is after its last part. Pure.
std::vector<CutPoint> CutPoints(const std::vector<StageProfile>& stages,
                                double source_bytes_per_sample);

// The CPUs this process may run on (sched_getaffinity), at least 1.
int UsableCores();

}  // namespace gm
