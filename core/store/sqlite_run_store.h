// SqliteRunStore: the RunStore (core/store/run_store.h) in runs.db, a SQLite file in WAL
// mode whose schema and migrations are core/store/run_schema.h's.
//
// Threads: thread-safe (one mutex). Several SqliteRunStores, in one process or many,
// may share one file: writes wait for each other (up to a 5 s busy timeout) instead
// of failing.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "core/store/run_store.h"
#include "core/store/sqlite_db.h"
#include "core/thread_annotations.h"

namespace gm {

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

  const std::string& path() const { return path_; }

  Result<int64_t> AddProfile(const Profile& profile) override;
  Result<std::vector<ProfileSummary>> ListProfiles() override;
  Result<std::optional<int64_t>> FindProfile(const std::string& sha256) override;
  Result<Profile> GetProfile(int64_t id) override;
  Result<int64_t> AddPlan(const Plan& plan, std::optional<int64_t> profile_id) override;
  Result<std::vector<PlanRecord>> ListPlans() override;
  Result<PlanRecord> GetPlan(int64_t id) override;
  Result<int64_t> AddSimulation(const SimulationRecord& simulation) override;
  Result<std::vector<SimulationRecord>> ListSimulations() override;
  Result<SimulationRecord> GetSimulation(int64_t id) override;
  Result<std::optional<int64_t>> FindPlan(const std::string& sha256) override;
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
  Status AddPoolGrant(const std::string& run_id, const PoolGrantRecord& grant) override;
  Result<std::vector<PoolGrantRecord>> ListPoolGrants(const std::string& run_id) override;
  Status SetRunStageCosts(const std::string& run_id,
                          const std::vector<StageProfile>& stages) override;
  Result<std::vector<StageProfile>> ListRunStageCosts(const std::string& run_id) override;
  Status AddMetric(const std::string& run_id, const MetricPoint& point) override;
  Result<std::vector<MetricPoint>> ListMetrics(const std::string& run_id) override;

 private:
  SqliteRunStore(sqlite::Database db, UtcClock clock)
      : path_(db.path()), db_(std::move(db)), clock_(std::move(clock)) {}
  Status InsertEvent(const EventRecord& event) REQUIRES(mu_);
  Result<std::optional<int64_t>> FindByDigest(const char* table, const std::string& sha256)
      EXCLUDES(mu_);
  Status InsertStageCosts(int64_t profile_id, const PipelineProfile& pipeline) REQUIRES(mu_);

  const std::string path_;  // db_'s, readable without the lock
  Mutex mu_;
  sqlite::Database db_ GUARDED_BY(mu_);
  const UtcClock clock_;
};

}  // namespace gm
