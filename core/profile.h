// The profile model: what `goldminer profile` measured, what profile.json holds
// and what `goldminer plan` reads. Plain values, no behaviour beyond (de)serializing.
//
// profile.json is versioned: {"schema": "goldminer.profile", "version": 1, ...}.
// Field names are stable; a reader accepts unknown fields (newer minor additions)
// and rejects a different major version with a message naming the file. Units are
// in the field names (_s seconds, _bytes bytes, _per_s per second). The schema is
// documented field by field in man/goldminer-profile.1.
//
// Thread-compatible plain values.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace gm {

inline constexpr int kProfileVersion = 1;
inline constexpr const char* kProfileSchema = "goldminer.profile";

// One pipeline stage, measured with one stage thread (per-sample figures are
// totals divided by the samples that went through the stage).
struct StageProfile {
  int index = 0;                // position in pipeline.json's "stages"
  std::string name;             // op name, e.g. "decode_jpeg"
  bool stateless = true;        // output depends only on (sample, index, seed)
  double cpu_s_per_sample = 0;  // thread CPU (plus exec children's CPU)
  double wall_s_per_sample = 0;
  double bytes_in_per_sample = 0;
  double bytes_out_per_sample = 0;
  uint64_t peak_bytes_out = 0;  // largest output of one sample
  double cpu_share = 0;         // of the sum over stages, 0..1

  bool operator==(const StageProfile&) const = default;  // field by field (tests, round trips)
};

// A place where the pipeline may be cut: stages [0, after_stage] on remote data
// workers, the rest in the trainer's client. after_stage == -1: nothing remote
// but reading (raw records are shipped).
struct CutPoint {
  int after_stage = -1;
  bool allowed = true;                 // every stage up to the cut is stateless
  double bytes_per_sample = 0;         // what crosses the network at this cut
  double remote_cpu_s_per_sample = 0;  // stage CPU on the worker side
  double local_cpu_s_per_sample = 0;   // stage CPU left for the trainer's node
  std::string reason;                  // why not allowed, when !allowed
  // The cut pipeline.json makes: the stages after it are "on": "device" (the
  // trainer applies them). At most one cut of a profile has it.
  bool pipeline_cut = false;
  // Every stage after the cut could run "on": "device" (to_tensor, normalize):
  // with a GPU, the trainer's device loader applies them there, and the plan
  // counts no CPU of the trainer's node for them.
  bool device_tail = false;

  bool operator==(const CutPoint&) const = default;  // field by field (tests, round trips)
};

// One pipeline run (a thread count) of the profile.
struct PipelineRun {
  int threads = 0;
  uint64_t samples = 0;
  double seconds = 0;  // wall
  double cpu_s = 0;    // process CPU during the run
  double samples_per_s = 0;
  double samples_per_cpu_s = 0;  // samples / cpu_s
  int cpus = 0;  // the CPUs the run was confined to (1: as a 1-CPU worker); 0: not recorded

  bool operator==(const PipelineRun&) const = default;  // field by field (tests, round trips)
};

// What a worker's CPU spends to hand a batch to a trainer, measured by the profile
// on this host (profiler/delivery.h): every batch is one sealed frame; over TCP
// its bytes are also copied into the socket (on the trainer's node they are
// written in place into shared memory, and only the frame is sent). Zero: not
// measured (a profile of an older goldminer, or a hand-written one).
struct DeliveryCost {
  double frame_cpu_s = 0;         // per batch: seal and send one frame
  double tcp_cpu_s_per_byte = 0;  // per payload byte sent over TCP (loopback)

  bool operator==(const DeliveryCost&) const = default;
};

struct PipelineProfile {
  std::string path;    // pipeline.json as given
  std::string sha256;  // of the file's bytes
  int batch_size = 0;
  uint64_t warmup_samples = 0;
  uint64_t samples = 0;                 // measured samples per run
  std::vector<PipelineRun> runs;        // 1 thread on 1 CPU first, then all cores
  double cpu_s_per_sample = 0;          // process CPU per sample with 1 stage thread
  double stage_cpu_s_per_sample = 0;    // sum over stages
  double reader_cpu_s_per_sample = 0;   // source reading thread
  double batcher_cpu_s_per_sample = 0;  // re-ordering and collation
  double queue_cpu_s_per_sample = 0;    // stage threads outside the stages: hand-off, freeing
  double samples_per_s_per_core = 0;    // samples per CPU-second with all cores
  uint64_t peak_rss_bytes = 0;          // the profiling process's peak resident set
  double instrumentation_overhead = 0;  // 1 - rate(timed) / rate(untimed), 1 thread
  DeliveryCost delivery;                // a worker's CPU to send what it made
  std::vector<StageProfile> stages;
  std::vector<CutPoint> cuts;

  bool operator==(const PipelineProfile&) const = default;  // field by field (tests, round trips)
};

// One training step as the trainer saw it: it asked for a batch (wait_begin),
// got it (wait_end), computed until it asked for the next one.
struct StepProfile {
  uint64_t step = 0;
  int pid = 0;
  double wait_s = 0;     // data wait: time blocked for this step's batch
  double compute_s = 0;  // from receiving the batch to asking for the next
  uint64_t samples = 0;
  // GPU figures over the step's window (wait + compute); absent without a GPU.
  std::optional<double> gpu_busy_s;
  std::optional<double> gpu_idle_s;
  std::optional<double> gpu_stall_s;  // GPU idle while the trainer waited on data

  bool operator==(const StepProfile&) const = default;  // field by field (tests, round trips)
};

struct GpuProfile {
  bool available = false;
  std::string reason;            // why not available ("no CUDA device", ...)
  uint64_t records = 0;          // kernel + memcpy + memset activity records
  uint64_t dropped_records = 0;  // CUPTI's count of records it could not keep
  int devices = 0;
  double busy_s = 0;  // over measured steps, union of activity per process
  double idle_s = 0;
  double stall_s = 0;         // idle overlapping data wait
  double busy_fraction = 0;   // busy / (busy + idle)
  double stall_fraction = 0;  // stall / (busy + idle)
  // 1 - (step rate with CUPTI) / (step rate without it), from a second trainer run
  // without the injection library; absent when not measured.
  std::optional<double> instrumentation_overhead;

  bool operator==(const GpuProfile&) const = default;  // field by field (tests, round trips)
};

// An unchanged program's DataLoader worker processes (stock workers,
// num_workers > 0), from the "D" lines of its measured steps (core/step_log.h):
// what `goldminer plan` sizes data workers by when the profile has no pipeline.
struct DataLoaderProfile {
  int workers = 0;              // the most worker processes one of its iterators had
  double cpu_s = 0;             // their CPU over the measured steps (all processes)
  uint64_t samples = 0;         // samples delivered over the same steps
  double cpu_s_per_sample = 0;  // cpu_s / samples
  double bytes_per_sample = 0;  // batch bytes / batch samples, over the measured steps
  bool operator==(const DataLoaderProfile&) const = default;  // field by field
};

// An unchanged program's DataLoader(s) priced on goldminer's native engine
// (`goldminer profile --offload native`, the "N" lines of core/step_log.h): the
// engine's CPU per sample, measured on the trainer's host on a few of each
// recognised DataLoader's samples, to the transform's end and to its uint8 cut.
// The engine's ops alone: a virtual worker's loop and the wire add to them.
struct NativeProfile {
  uint64_t samples = 0;             // samples made, over the DataLoaders priced
  double cpu_s_per_sample = 0;      // to the transform's end (float32 after ToTensor)
  double bytes_per_sample = 0;      // what that makes
  double cut_cpu_s_per_sample = 0;  // to the uint8 cut (--offload-cut)
  double cut_bytes_per_sample = 0;  // what that makes
  bool operator==(const NativeProfile&) const = default;
};

struct TrainerProfile {
  std::vector<std::string> command;
  std::string source;  // "goldminer" (fed by workers) or "torch" (its own DataLoader)
  int workers = 0;     // data workers that fed it (source "goldminer")
  int exit_code = 0;   // the trainer's exit status (or 128+signal)
  std::string exit;    // "exited 0", "stopped by profile after 100 steps", ...
  bool stopped_by_profile = false;
  uint64_t steps_recorded = 0;
  uint64_t warmup_steps = 0;  // not counted in the figures below
  uint64_t steps = 0;         // measured steps
  double seconds = 0;         // wall over measured steps
  double samples_per_s = 0;   // delivered
  double batch_size = 0;      // median samples per step
  double step_s_median = 0;
  double wait_s_median = 0;
  double wait_s_mean = 0;
  double compute_s_median = 0;
  double demand_samples_per_s = 0;        // batch_size / compute_s_median: never late data
  double stall_fraction = 0;              // data wait / wall over measured steps
  double instrumentation_s_per_step = 0;  // the step log's own cost, per step
  double instrumentation_overhead = 0;    // that cost / step time
  GpuProfile gpu;
  // Its DataLoader's worker processes (source "torch"); absent when its batches
  // came from no stock worker process, or its CPU did not move over the steps.
  std::optional<DataLoaderProfile> dataloader;
  // Its DataLoaders on the native engine (profile --offload native): present when
  // one was recognised; `not_native` says why the others were not (at most 8).
  std::optional<NativeProfile> native;
  std::vector<std::string> not_native;
  std::vector<StepProfile> step_list;  // measured steps (at most 10000 kept)

  bool operator==(const TrainerProfile&) const = default;  // field by field (tests, round trips)
};

struct Profile {
  int version = kProfileVersion;
  std::string created_utc;  // ISO 8601
  std::string host;
  int cores = 0;  // CPUs available to the profile
  std::string goldminer_version;
  std::optional<PipelineProfile> pipeline;
  std::optional<TrainerProfile> trainer;
  // The verdict: "input-bound", "compute-bound", or "unknown" (no trainer).
  std::string verdict;
  double input_bound_fraction = 0;  // share of step time lost to data wait

  bool operator==(const Profile&) const = default;  // field by field (tests, round trips)
};

// profile.json text (pretty, 2-space indent, trailing newline).
// The document: every field under its struct name, plus "schema" and "version"
// (always kProfileVersion, whatever p.version holds); "pipeline", "trainer" and a
// step's gpu_* figures are left out when absent.
nlohmann::json ProfileToJson(const Profile& p);
// Reads a profile.json document; errors name `origin` and the JSON path, e.g.
//   profile.json: $.pipeline.stages[2].cpu_s_per_sample: expected a number, got "x"
// Unknown members are ignored. Required members (the figures a plan is computed
// from and what identifies the measurement; a missing one is an error):
//   schema, version, created_utc, host, cores, verdict, input_bound_fraction;
//   pipeline: path, batch_size, samples, cpu_s_per_sample, samples_per_s_per_core, stages;
//   stages[]: index, name, cpu_s_per_sample, bytes_in_per_sample, bytes_out_per_sample;
//   cuts[]: after_stage, bytes_per_sample, remote_cpu_s_per_sample, local_cpu_s_per_sample;
//   runs[]: threads, samples, seconds, samples_per_s;
//   trainer: command, steps, seconds, samples_per_s, batch_size, step_s_median,
//     wait_s_median, compute_s_median, demand_samples_per_s, stall_fraction;
//   trainer.gpu: available; trainer.step_list[]: step, wait_s, compute_s.
// Every other member is optional and keeps the struct's default when absent.
// "verdict" must be "input-bound", "compute-bound" or "unknown"; a "version" other
// than kProfileVersion is InvalidArgument naming the file and both versions.
Result<Profile> ProfileFromJson(const nlohmann::json& j, const std::string& origin);
// Reads the file at `path`.
Result<Profile> LoadProfile(const std::string& path);

}  // namespace gm
