// The run store: the record `profile`, `run` and `report` keep of what was measured
// and what happened (core/store/run_records.h has the records). RunStore is the narrow
// interface callers see; SqliteRunStore (core/store/sqlite_run_store.h) keeps it in runs.db
// and MemoryRunStore (core/store/run_store_fake.h) in memory, for unit tests of callers.
//
// Ids: profiles, plans and events get increasing integer ids from 1 (never reused);
// runs are named by the caller. Times are ISO 8601 UTC text ("2026-11-29T20:31:07Z")
// from the store's clock, or seconds (t_s) from the run's start where the name says so.
//
// Threads: every RunStore is thread-safe (calls are serialized inside).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/plan.h"
#include "core/profile.h"
#include "core/status.h"
#include "core/store/run_records.h"

namespace gm {

class RunStore {
 public:
  virtual ~RunStore() = default;

  // Records `profile` (its summary row, its whole profile.json, one stage-cost row
  // per pipeline stage and an event "profile recorded: <verdict>", all or nothing)
  // and returns its id. InvalidArgument when the profile would not read back.
  virtual Result<int64_t> AddProfile(const Profile& profile) = 0;
  // Every profile, oldest (lowest id) first.
  virtual Result<std::vector<ProfileSummary>> ListProfiles() = 0;
  // The newest profile whose ProfileDigest is `sha256`; nullopt when none is.
  virtual Result<std::optional<int64_t>> FindProfile(const std::string& sha256) = 0;
  // The profile as recorded (read back from its profile.json); NotFound for an
  // unknown id.
  virtual Result<Profile> GetProfile(int64_t id) = 0;

  // Records `plan` (its plan.json and an event "plan recorded: ...", all or nothing),
  // computed from profile `profile_id` when given (NotFound for an unknown one), and
  // returns its id.
  virtual Result<int64_t> AddPlan(const Plan& plan, std::optional<int64_t> profile_id) = 0;
  // Every plan, oldest first.
  virtual Result<std::vector<PlanRecord>> ListPlans() = 0;
  // One plan; NotFound for an unknown id.
  virtual Result<PlanRecord> GetPlan(int64_t id) = 0;
  // Records a simulation (its id and created_utc are set here); its id.
  virtual Result<int64_t> AddSimulation(const SimulationRecord& simulation) = 0;
  virtual Result<std::vector<SimulationRecord>> ListSimulations() = 0;
  // NotFound for an id not recorded.
  virtual Result<SimulationRecord> GetSimulation(int64_t id) = 0;
  // The newest plan whose PlanDigest is `sha256`; nullopt when none is.
  virtual Result<std::optional<int64_t>> FindPlan(const std::string& sha256) = 0;

  // Records an event; NotFound when it names a run or profile that does not exist.
  virtual Status AddEvent(const EventRecord& event) = 0;
  // Every event, in the order recorded.
  virtual Result<std::vector<EventRecord>> ListEvents() = 0;

  // Records the start of a run (its ended_utc and exit_code are ignored);
  // InvalidArgument when a run with that id exists, NotFound when its plan_id names
  // no plan.
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
  virtual Status PlaceWorker(const std::string& run_id, int64_t worker_id, const std::string& host,
                             const std::string& step_id) = 0;
  // A run's workers in id order; empty for an unknown run.
  virtual Result<std::vector<WorkerRecord>> ListWorkers(const std::string& run_id) = 0;

  // Records a pool's grant to a run (its id is assigned, its t_utc stamped when
  // empty); NotFound for an unknown run.
  virtual Status AddPoolGrant(const std::string& run_id, const PoolGrantRecord& grant) = 0;
  // A run's pool grants in the order recorded; empty for an unknown run.
  virtual Result<std::vector<PoolGrantRecord>> ListPoolGrants(const std::string& run_id) = 0;

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

// The recorded profile `plan` was computed from, by the digest the plan names
// (sources.profile_sha256): nullopt when the plan names none or it is not recorded.
Result<std::optional<int64_t>> FindPlanProfile(RunStore& store, const Plan& plan);

}  // namespace gm
