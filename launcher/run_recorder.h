// The record a run keeps of itself in the run store (runs.db): the run, its
// workers, a time series and events. Recording never stops training: the first
// failure to write is logged as a warning (the record is then incomplete), later
// ones are counted. With no store, every call does nothing.
//
// Threads: one thread (the run's supervising loop) calls a RunRecorder.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/engine_stats.h"
#include "core/profile.h"
#include "core/run_rates.h"
#include "core/step_log.h"
#include "core/store/run_store.h"

namespace gm {

class RunRecorder {
 public:
  // `store` may be null; it must outlive the recorder.
  RunRecorder(RunStore* store, std::string run_id, int world_size)
      : store_(store), run_id_(std::move(run_id)), world_size_(world_size) {}

  const std::string& run_id() const { return run_id_; }
  bool enabled() const { return store_ != nullptr && begun_; }

  // Records the run's start; a failure here IS returned (e.g. the name is taken),
  // so the run does not start unrecorded by mistake.
  Status Begin(const RunRecord& run);
  // `elastic`: a job of its own in the elastic partition.
  void WorkerStarted(int64_t worker_id, pid_t pid, const std::string& host, bool elastic);
  void WorkerEnded(int64_t worker_id, const std::string& exit);
  // Where the worker runs, as it told the coordinator (node, Slurm step or "").
  void WorkerPlaced(int64_t worker_id, const std::string& host, const std::string& step_id);
  void Event(const std::string& kind, const std::string& message);
  void PoolGrant(const PoolGrantRecord& grant);
  // The figures for the interval since the previous sample (nullopt at the first
  // call, which sets the baseline); when recording, adds them to the time series
  // (samples_per_s, data_wait_fraction, workers, worker_cpus, epoch) and stamps the
  // run's heartbeat.
  std::optional<RunRates> Sample(const RunSample& now);
  // Replaces the run's per-stage costs with the sum of the workers' latest reports
  // (see StageCostsFromReports).
  void StageCosts(const std::vector<std::vector<StageStats>>& reports);
  void End(const std::string& status, int exit_code);
  uint64_t failures() const { return failures_; }

 private:
  void Check(const Status& st);

  RunStore* store_;
  const std::string run_id_;
  const int world_size_;
  bool begun_ = false;
  std::optional<RunSample> last_;
  uint64_t failures_ = 0;
};

// The per-stage costs of a run from its workers' latest stage reports (one entry per
// stage, as workers send them in HEARTBEAT and SPLIT_DONE and the coordinator
// decodes them, range-checked: dataplane/messages_control.h): totals summed by stage
// position, divided by the samples counted; a stage's name is the first report's
// that names it; each stage's index is its first op's position in pipeline.json (a
// fused "decode_jpeg+random_resized_crop" covers two). Stages no sample went
// through are left out.
std::vector<StageProfile> StageCostsFromReports(
    const std::vector<std::vector<StageStats>>& reports);

}  // namespace gm
