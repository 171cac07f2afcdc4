// A Profile with every field set to a value other than its default, for round-trip
// tests of profile.json and runs.db. Values are distinct and not exactly
// representable in binary where they are doubles, so a lost or rounded field shows.
#pragma once

#include <cstdint>
#include <string>

#include "core/profile.h"

namespace gm::testing {

inline StageProfile FullStage(int index, const std::string& name, bool stateless) {
  StageProfile s;
  s.index = index;
  s.name = name;
  s.stateless = stateless;
  s.cpu_s_per_sample = 0.0013 * (index + 1);
  s.wall_s_per_sample = 0.0017 * (index + 1);
  s.bytes_in_per_sample = 110000.5 + index;
  s.bytes_out_per_sample = 150528.25 + index;
  s.peak_bytes_out = 602112 + static_cast<uint64_t>(index);
  s.cpu_share = 0.1 * (index + 1);
  return s;
}

inline CutPoint FullCut(int after_stage, bool allowed) {
  CutPoint c;
  c.after_stage = after_stage;
  c.allowed = allowed;
  c.bytes_per_sample = 4096.5 + after_stage;
  c.remote_cpu_s_per_sample = 0.0021 + after_stage;
  c.local_cpu_s_per_sample = 0.0003 + after_stage;
  c.reason = allowed ? "ok" : "stage 1 (shuffle_state) is stateful";
  c.pipeline_cut = after_stage == 0;  // the file's own cut (stages after it "on": "device")
  c.device_tail = after_stage == 0;   // and those stages could run there
  return c;
}

inline PipelineRun FullRun(int threads) {
  PipelineRun r;
  r.threads = threads;
  r.samples = 2048 + static_cast<uint64_t>(threads);
  r.seconds = 3.25 / threads;
  r.cpu_s = 2.9 + threads;
  r.samples_per_s = 630.1 * threads;
  r.samples_per_cpu_s = 410.7 + threads;
  r.cpus = threads;
  return r;
}

inline StepProfile FullStep(uint64_t step) {
  StepProfile s;
  s.step = step;
  s.pid = 4242;
  s.wait_s = 0.031 + static_cast<double>(step);
  s.compute_s = 0.052;
  s.samples = 64;
  s.gpu_busy_s = 0.047;
  s.gpu_idle_s = 0.036;
  s.gpu_stall_s = 0.029;
  return s;
}

inline PipelineProfile FullPipeline() {
  PipelineProfile p;
  p.path = "/data/imagenet/pipeline.json";
  p.sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  p.batch_size = 64;
  p.warmup_samples = 256;
  p.samples = 2048;
  p.runs = {FullRun(1), FullRun(16)};
  p.delivery.frame_cpu_s = 0.0000237;
  p.delivery.tcp_cpu_s_per_byte = 0.000000000213;
  p.cpu_s_per_sample = 0.0071;
  p.stage_cpu_s_per_sample = 0.0065;
  p.reader_cpu_s_per_sample = 0.0004;
  p.batcher_cpu_s_per_sample = 0.0002;
  p.queue_cpu_s_per_sample = 0.00003;
  p.samples_per_s_per_core = 139.3;
  p.peak_rss_bytes = uint64_t{3} << 32;
  p.instrumentation_overhead = 0.013;
  p.stages = {FullStage(0, "decode_jpeg", true), FullStage(1, "shuffle_state", false),
              FullStage(2, "normalize+to_tensor", true)};
  p.cuts = {FullCut(-1, true), FullCut(0, true), FullCut(1, false)};
  return p;
}

inline TrainerProfile FullTrainer() {
  TrainerProfile t;
  t.command = {"/usr/bin/python3", "train.py", "--epochs", "1"};
  t.source = "goldminer";
  t.workers = 3;
  t.exit_code = 143;
  t.exit = "stopped by profile after 120 steps";
  t.stopped_by_profile = true;
  t.steps_recorded = 120;
  t.warmup_steps = 20;
  t.steps = 100;
  t.seconds = 8.7;
  t.samples_per_s = 735.6;
  t.batch_size = 64;
  t.step_s_median = 0.083;
  t.wait_s_median = 0.031;
  t.wait_s_mean = 0.034;
  t.compute_s_median = 0.052;
  t.demand_samples_per_s = 1230.8;
  t.stall_fraction = 0.37;
  t.instrumentation_s_per_step = 0.000012;
  t.instrumentation_overhead = 0.00014;
  t.gpu.available = true;
  t.gpu.reason = "NVIDIA H100 via CUPTI";
  t.gpu.records = 91234;
  t.gpu.dropped_records = 7;
  t.gpu.devices = 2;
  t.gpu.busy_s = 4.7;
  t.gpu.idle_s = 4.0;
  t.gpu.stall_s = 2.9;
  t.gpu.busy_fraction = 0.54;
  t.gpu.instrumentation_overhead = 0.021;
  t.gpu.stall_fraction = 0.33;
  t.dataloader = DataLoaderProfile{4, 2.25, 1500, 0.0015, 150528.5};
  t.native = NativeProfile{64, 0.00041, 602112, 0.00037, 150528};
  t.not_native = {"a DataLoader of Texts: the dataset is a Texts"};
  t.step_list = {FullStep(20), FullStep(21), FullStep(22)};
  return t;
}

inline Profile FullProfile() {
  Profile p;
  p.created_utc = "2026-11-29T20:31:07Z";
  p.host = "gpu-node-17";
  p.cores = 32;
  p.goldminer_version = "0.1.0";
  p.pipeline = FullPipeline();
  p.trainer = FullTrainer();
  p.verdict = "input-bound";
  p.input_bound_fraction = 0.37;
  return p;
}

}  // namespace gm::testing
