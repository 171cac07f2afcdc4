// MemoryRunStore: a RunStore kept in memory, for unit tests of code that records
// profiles, runs and events. It answers every call as SqliteRunStore does on a new
// runs.db (same ids, same errors for unknown runs and profiles, profiles read back
// through profile.json); tests/unit/run_store_test.cc runs the same cases on both.
//
// Threads: thread-safe (one mutex). Not persistent: everything goes with the object.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/store/run_store.h"
#include "core/thread_annotations.h"

namespace gm {

class MemoryRunStore final : public RunStore {
 public:
  explicit MemoryRunStore(UtcClock clock = SystemUtcNow) : clock_(std::move(clock)) {}

  // Makes every later write (Add*, BeginRun, EndRun) fail with `status` (e.g. an
  // IoError, to test how a caller reports a full disk); OK makes them work again.
  void FailWrites(Status status);
  // Stage-cost rows recorded so far (SqliteRunStore's stage_costs table).
  size_t stage_cost_rows() const;

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
  struct StoredProfile {
    ProfileSummary summary;
    std::string json;
  };
  Status InsertEvent(const EventRecord& event) REQUIRES(mu_);
  Result<WorkerRecord*> FindWorker(const std::string& run_id, int64_t worker_id) REQUIRES(mu_);

  mutable Mutex mu_;
  const UtcClock clock_;
  Status write_error_ GUARDED_BY(mu_);
  std::vector<StoredProfile> profiles_ GUARDED_BY(mu_);  // id = index + 1
  size_t stage_cost_rows_ GUARDED_BY(mu_) = 0;
  std::vector<EventRecord> events_ GUARDED_BY(mu_);            // id = index + 1
  std::vector<PlanRecord> plans_ GUARDED_BY(mu_);              // id = index + 1
  std::vector<SimulationRecord> simulations_ GUARDED_BY(mu_);  // id = index + 1
  std::map<std::string, RunRecord> runs_ GUARDED_BY(mu_);
  std::vector<std::string> run_order_ GUARDED_BY(mu_);  // ids in the order begun
  std::map<std::string, std::map<int64_t, WorkerRecord>> workers_ GUARDED_BY(mu_);
  std::map<std::string, std::vector<PoolGrantRecord>> pool_grants_ GUARDED_BY(mu_);
  int64_t last_pool_grant_id_ GUARDED_BY(mu_) = 0;
  std::map<std::string, std::vector<StageProfile>> run_stages_ GUARDED_BY(mu_);
  std::map<std::string, std::vector<MetricPoint>> metrics_ GUARDED_BY(mu_);
};

}  // namespace gm
