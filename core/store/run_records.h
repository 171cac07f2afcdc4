// The records of runs.db as values: a profile's summary row, a plan's row, a run,
// its workers, events and time-series points, and the helpers that make them (the
// summary of a profile, the text a store keeps of a profile or a plan, and its
// content digest, by which records point at each other: a plan at its profile, a
// run at its plan). No SQLite here: core/store/sqlite_run_store.h keeps them in a file,
// core/store/run_store_fake.h in memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/plan.h"
#include "core/profile.h"
#include "core/status.h"

namespace gm {

// A row of the profiles table: the figures a listing shows. Optional figures are
// absent when the profile had no such part (no pipeline, no trainer, no GPU).
struct ProfileSummary {
  int64_t id = 0;
  std::string sha256;  // ProfileDigest: how a plan names the profile it came from
  std::string created_utc;
  std::string host;
  std::optional<std::string> pipeline_path;
  std::optional<std::string> pipeline_sha256;
  std::string verdict;
  double input_bound_fraction = 0;
  std::optional<double> samples_per_s_1_thread;   // the pipeline run with 1 thread
  std::optional<double> samples_per_s_all_cores;  // the run with the most threads
  std::optional<double> samples_per_s_per_core;
  std::optional<double> demand_samples_per_s;  // the trainer's
  std::optional<double> stall_fraction;        // the trainer's
  std::optional<bool> gpu_available;           // absent without a trainer
  std::optional<double> gpu_busy_fraction;     // absent without a GPU

  bool operator==(const ProfileSummary&) const = default;
};

// The event message a store records with a plan: "plan recorded: 3 worker(s), 812
// samples/s predicted, limit: cpus".
std::string PlanEventMessage(const Plan& plan);

// The summary row of `profile` (id 0: the store assigns it).
ProfileSummary SummarizeProfile(const Profile& profile);

// profile.json text as a store keeps it (compact, invalid UTF-8 replaced);
// InvalidArgument when it would not read back (e.g. an empty verdict), so a store
// never holds a profile GetProfile cannot return.
Result<std::string> StoredProfileJson(const Profile& profile);
// plan.json text as a store keeps it (compact, invalid UTF-8 replaced).
std::string StoredPlanJson(const Plan& plan);
// The content digest of a profile or a plan: SHA-256 (lower-case hex) of the text a
// store keeps of it. The same document read back from its file has the same digest
// (the text is made from the parsed values, not the file's bytes). A profile that
// would not read back has none ("").
std::string ProfileDigest(const Profile& profile);
std::string PlanDigest(const Plan& plan);

// Something that happened, for the report's timeline.
struct EventRecord {
  int64_t id = 0;                     // assigned by the store; ignored by AddEvent
  std::optional<std::string> run_id;  // the run it belongs to, if any
  std::optional<int64_t> profile_id;  // the profile it belongs to, if any
  std::string t_utc;                  // empty: AddEvent stamps it with the store's clock
  std::string kind;                   // "profile", "run", "worker", "scale", ...
  std::string message;

  bool operator==(const EventRecord&) const = default;
};

// A row of the plans table: a plan.json as `goldminer plan` wrote it.
struct PlanRecord {
  int64_t id = 0;
  std::string sha256;  // PlanDigest: how a run finds the row of the plan it ran
  std::string created_utc;
  std::optional<int64_t> profile_id;  // the profile it was computed from, when recorded
  std::string json;                   // the plan.json document (compact)

  bool operator==(const PlanRecord&) const = default;
};

// A simulation (`goldminer simulate --db`): the figures a listing shows and its
// whole sim.json.
struct SimulationRecord {
  int64_t id = 0;           // set by the store
  std::string created_utc;  // set by the store
  std::string trace, nodes;
  int64_t gpus = 0;
  double load = 1;
  int64_t seed = 1;
  std::string policies;  // comma-separated
  std::optional<double> jct_static_over_cluster;
  std::optional<double> gpu_util_effective_cluster_over_static;
  std::string json;  // the sim.json document (compact)

  bool operator==(const SimulationRecord&) const = default;
};

// A training run (`goldminer run`).
struct RunRecord {
  std::string id;  // caller-chosen, unique (e.g. Slurm job id + time)
  std::string started_utc;
  std::optional<std::string> ended_utc;  // absent while it runs
  std::string backend;                   // "local" or "slurm"
  std::string pipeline_path;
  std::string plan_path;              // empty when run without a plan
  std::optional<int64_t> plan_id;     // the plan's row in the store (absent: none, or a
                                      // run recorded before runs.db schema 3)
  std::vector<std::string> command;   // the trainer's argv
  int world_size = 1;                 // trainer processes
  std::string status = "running";     // "running", then what EndRun says
  std::optional<int> exit_code;       // absent while it runs
  std::optional<std::string> job_id;  // SLURM_JOB_ID when run inside a Slurm job
  std::string host;                   // where `goldminer run` ran
  std::optional<int64_t> pid;         // its process id
  // Its last sign of life (BeginRun, then Heartbeat every few seconds): a run still
  // "running" whose heartbeat is old did not finish (it was killed).
  std::optional<std::string> heartbeat_utc;

  bool operator==(const RunRecord&) const = default;
};

// A data worker of a run.
struct WorkerRecord {
  int64_t worker_id = 0;  // 0, 1, ... within the run (a replacement gets a new one)
  std::string host;
  std::optional<int64_t> pid;
  std::optional<std::string> step_id;    // Slurm "JOB.STEP"; absent on the local backend
  std::string started_utc;               // empty: AddWorker stamps it
  std::optional<std::string> ended_utc;  // absent while it runs
  std::optional<std::string> exit;       // "exited with status 0", "drained", ...
  // A job of its own in the elastic partition (goldminer-run(1), ELASTIC WORKERS):
  // its Slurm job is step_id's JOB; false: a step of the run's own allocation, or local.
  bool elastic = false;

  bool operator==(const WorkerRecord&) const = default;
};

// What a pool answered a run's report, recorded when the grant changed (and the
// first one): the decision, its reason, and the inputs the run gave.
struct PoolGrantRecord {
  int64_t id = 0;             // assigned by the store; ignored by AddPoolGrant
  std::string t_utc;          // empty: AddPoolGrant stamps it with the store's clock
  int64_t extra_workers = 0;  // elastic workers the pool grants the run
  int64_t cpus = 0;           // their CPUs
  int64_t held_workers = 0;   // elastic workers the run held when it reported
  std::string reason;         // the pool's words ("" when the pool gave none)
  std::string report_json;    // the POOL_REPORT answered (JSON): the inputs

  bool operator==(const PoolGrantRecord&) const = default;
};

// One sample of a run's time series.
struct MetricPoint {
  double t_s = 0;    // seconds since the run started
  std::string name;  // e.g. "samples_per_s", "workers", "data_wait_fraction"
  double value = 0;

  bool operator==(const MetricPoint&) const = default;
};

}  // namespace gm
