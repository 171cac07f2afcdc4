// The run store: the record `profile`, `run` and `report` keep of what was measured
// and what happened. RunStore is the narrow interface callers see; SqliteRunStore
// keeps it in runs.db (SQLite, WAL; schema in core/run_store.cc and
// man/goldminer-runs.db.5) and MemoryRunStore (core/run_store_fake.h) in memory,
// for unit tests of callers.
//
// Ids: profiles and events get increasing integer ids from 1 (never reused); runs are
// named by the caller. Times are ISO 8601 UTC text ("2026-11-29T20:31:07Z") from the
// store's clock, or seconds (t_s) from the run's start where the name says so.
//
// Threads: every RunStore is thread-safe (calls are serialized inside). Several
// SqliteRunStores, in one process or many, may share one file: writes wait for each
// other (up to a 5 s busy timeout) instead of failing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/plan.h"
#include "core/profile.h"
#include "core/sqlite_db.h"
#include "core/status.h"

namespace gm {

// The runs.db schema version this goldminer writes and reads (PRAGMA user_version).
inline constexpr int kRunStoreSchemaVersion = 2;

// Returns the current time as ISO 8601 UTC text; a store stamps events with it.
using UtcClock = std::function<std::string()>;
// The system clock, "YYYY-MM-DDTHH:MM:SSZ".
std::string SystemUtcNow();
// Seconds since the Unix epoch of such a time; nullopt for anything else.
std::optional<double> UtcSeconds(const std::string& utc);

// A row of the profiles table: the figures a listing shows. Optional figures are
// absent when the profile had no such part (no pipeline, no trainer, no GPU).
struct ProfileSummary {
  int64_t id = 0;
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
  std::string created_utc;
  std::optional<int64_t> profile_id;  // the profile it was computed from, when recorded
  std::string json;                   // the plan.json document (compact)

  bool operator==(const PlanRecord&) const = default;
};

// A training run (`goldminer run`).
struct RunRecord {
  std::string id;  // caller-chosen, unique (e.g. Slurm job id + time)
  std::string started_utc;
  std::optional<std::string> ended_utc;  // absent while it runs
  std::string backend;                   // "local" or "slurm"
  std::string pipeline_path;
  std::string plan_path;             // empty when run without a plan
  std::vector<std::string> command;  // the trainer's argv
  int world_size = 1;                // trainer processes
  std::string status = "running";    // "running", then what EndRun says
  std::optional<int> exit_code;      // absent while it runs
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
  std::optional<std::string> step_id;   // Slurm "JOB.STEP"; absent on the local backend
  std::string started_utc;              // empty: AddWorker stamps it
  std::optional<std::string> ended_utc;  // absent while it runs
  std::optional<std::string> exit;       // "exited with status 0", "drained", ...

  bool operator==(const WorkerRecord&) const = default;
};

// One sample of a run's time series.
struct MetricPoint {
  double t_s = 0;    // seconds since the run started
  std::string name;  // e.g. "samples_per_s", "workers", "data_wait_fraction"
  double value = 0;

  bool operator==(const MetricPoint&) const = default;
};

class RunStore {
 public:
  virtual ~RunStore() = default;

  // Records `profile` (its summary row, its whole profile.json, one stage-cost row
  // per pipeline stage and an event "profile recorded: <verdict>", all or nothing)
  // and returns its id. InvalidArgument when the profile would not read back.
  virtual Result<int64_t> AddProfile(const Profile& profile) = 0;
  // Every profile, oldest (lowest id) first.
  virtual Result<std::vector<ProfileSummary>> ListProfiles() = 0;
  // The profile as recorded (read back from its profile.json); NotFound for an
  // unknown id.
  virtual Result<Profile> GetProfile(int64_t id) = 0;

  // Records `plan` (its plan.json and an event "plan recorded: ...", all or nothing),
  // computed from profile `profile_id` when given (NotFound for an unknown one), and
  // returns its id.
  virtual Result<int64_t> AddPlan(const Plan& plan, std::optional<int64_t> profile_id) = 0;
  // Every plan, oldest first.
  virtual Result<std::vector<PlanRecord>> ListPlans() = 0;

  // Records an event; NotFound when it names a run or profile that does not exist.
  virtual Status AddEvent(const EventRecord& event) = 0;
  // Every event, in the order recorded.
  virtual Result<std::vector<EventRecord>> ListEvents() = 0;

  // Records the start of a run (its ended_utc and exit_code are ignored);
  // InvalidArgument when a run with that id exists.
  virtual Status BeginRun(const RunRecord& run) = 0;
  // Records the end of a run: its status ("succeeded", "failed", "cancelled", ...)
  // and exit code, stamped with the store's clock; NotFound for an unknown run.
  virtual Status EndRun(const std::string& run_id, const std::string& status, int exit_code) = 0;
  virtual Result<RunRecord> GetRun(const std::string& run_id) = 0;
  // Every run, oldest first.
  virtual Result<std::vector<RunRecord>> ListRuns() = 0;
  // Stamps the run's heartbeat_utc with the store's clock; NotFound for an unknown run.
  virtual Status Heartbeat(const std::string& run_id) = 0;

  // Records a worker's start (ended_utc and exit ignored); NotFound for an unknown
  // run, InvalidArgument when the run already has that worker id.
  virtual Status AddWorker(const std::string& run_id, const WorkerRecord& worker) = 0;
  // Records how a worker ended, stamped with the store's clock; NotFound for an
  // unknown run or worker.
  virtual Status EndWorker(const std::string& run_id, int64_t worker_id,
                           const std::string& exit) = 0;
  // Records where a worker runs, once it says so (its node, and its Slurm step
  // "JOB.STEP" or empty); NotFound for an unknown run or worker.
  virtual Status PlaceWorker(const std::string& run_id, int64_t worker_id,
                             const std::string& host, const std::string& step_id) = 0;
  // A run's workers in id order; empty for an unknown run.
  virtual Result<std::vector<WorkerRecord>> ListWorkers(const std::string& run_id) = 0;

  // Replaces the run's per-stage costs (stage_costs rows with its run_id) with
  // `stages` (index, name, stateless and the per-sample figures are kept), all or
  // nothing; NotFound for an unknown run.
  virtual Status SetRunStageCosts(const std::string& run_id,
                                  const std::vector<StageProfile>& stages) = 0;
  // The run's stage costs in stage order; empty for an unknown run.
  virtual Result<std::vector<StageProfile>> ListRunStageCosts(const std::string& run_id) = 0;
  // Adds a point to a run's time series; NotFound for an unknown run.
  virtual Status AddMetric(const std::string& run_id, const MetricPoint& point) = 0;
  // A run's points, in the order added; empty for an unknown run.
  virtual Result<std::vector<MetricPoint>> ListMetrics(const std::string& run_id) = 0;
};

class SqliteRunStore final : public RunStore {
 public:
  // Opens runs.db at `path`: creates the file and the schema, or migrates an older
  // schema forward in one transaction. Errors: the directory does not exist
  // (IoError naming the path), the file is not a SQLite database (Corrupt), it was
  // written by a newer goldminer (InvalidArgument naming both schema versions), it
  // is a SQLite database with tables of its own of the same names (InvalidArgument).
  static Result<std::unique_ptr<SqliteRunStore>> Open(const std::string& path,
                                                      UtcClock clock = SystemUtcNow);
  // Opens a runs.db that exists, for reading (`goldminer report`): NotFound when
  // there is no such file, InvalidArgument when it is a SQLite database but not a
  // runs.db (nothing is created in it) or one of a newer schema; an older runs.db is
  // migrated forward as Open does.
  static Result<std::unique_ptr<SqliteRunStore>> OpenExisting(const std::string& path,
                                                              UtcClock clock = SystemUtcNow);

  const std::string& path() const { return db_.path(); }

  Result<int64_t> AddProfile(const Profile& profile) override;
  Result<std::vector<ProfileSummary>> ListProfiles() override;
  Result<Profile> GetProfile(int64_t id) override;
  Result<int64_t> AddPlan(const Plan& plan, std::optional<int64_t> profile_id) override;
  Result<std::vector<PlanRecord>> ListPlans() override;
  Status AddEvent(const EventRecord& event) override;
  Result<std::vector<EventRecord>> ListEvents() override;
  Status BeginRun(const RunRecord& run) override;
  Status EndRun(const std::string& run_id, const std::string& status, int exit_code) override;
  Result<RunRecord> GetRun(const std::string& run_id) override;
  Result<std::vector<RunRecord>> ListRuns() override;
  Status Heartbeat(const std::string& run_id) override;
  Status AddWorker(const std::string& run_id, const WorkerRecord& worker) override;
  Status EndWorker(const std::string& run_id, int64_t worker_id, const std::string& exit) override;
  Status PlaceWorker(const std::string& run_id, int64_t worker_id, const std::string& host,
                     const std::string& step_id) override;
  Result<std::vector<WorkerRecord>> ListWorkers(const std::string& run_id) override;
  Status SetRunStageCosts(const std::string& run_id,
                          const std::vector<StageProfile>& stages) override;
  Result<std::vector<StageProfile>> ListRunStageCosts(const std::string& run_id) override;
  Status AddMetric(const std::string& run_id, const MetricPoint& point) override;
  Result<std::vector<MetricPoint>> ListMetrics(const std::string& run_id) override;

 private:
  SqliteRunStore(sqlite::Database db, UtcClock clock)
      : db_(std::move(db)), clock_(std::move(clock)) {}
  Status InsertEvent(const EventRecord& event);                                  // mu_ held
  Status InsertStageCosts(int64_t profile_id, const PipelineProfile& pipeline);  // mu_ held

  std::mutex mu_;
  sqlite::Database db_;  // guarded by mu_
  const UtcClock clock_;
};

}  // namespace gm
