#include "core/store/run_store_fake.h"

#include <utility>

#include "core/json.h"
#include "core/thread_annotations.h"

namespace gm {
namespace {

// The name messages use where SqliteRunStore uses the file's path.
constexpr const char* kName = "memory run store";

}  // namespace

void MemoryRunStore::FailWrites(Status status) {
  MutexLock lock(mu_);
  write_error_ = std::move(status);
}

size_t MemoryRunStore::stage_cost_rows() const {
  MutexLock lock(mu_);
  return stage_cost_rows_;
}

Result<int64_t> MemoryRunStore::AddProfile(const Profile& profile) {
  MutexLock lock(mu_);
  GM_RETURN_IF_ERROR(write_error_);
  GM_ASSIGN_OR_RETURN(std::string json, StoredProfileJson(profile));
  const int64_t id = static_cast<int64_t>(profiles_.size()) + 1;
  ProfileSummary summary = SummarizeProfile(profile);
  summary.id = id;
  summary.sha256 = ProfileDigest(profile);
  profiles_.push_back(StoredProfile{std::move(summary), std::move(json)});
  if (profile.pipeline) stage_cost_rows_ += profile.pipeline->stages.size();
  EventRecord event;
  event.profile_id = id;
  event.kind = "profile";
  event.message = "profile recorded: " + profile.verdict;
  GM_RETURN_IF_ERROR(InsertEvent(event));
  return id;
}

Result<std::vector<ProfileSummary>> MemoryRunStore::ListProfiles() {
  MutexLock lock(mu_);
  std::vector<ProfileSummary> out;
  for (const StoredProfile& p : profiles_) out.push_back(p.summary);
  return out;
}

Result<Profile> MemoryRunStore::GetProfile(int64_t id) {
  MutexLock lock(mu_);
  if (id < 1 || id > static_cast<int64_t>(profiles_.size())) {
    return Status::NotFound(std::string(kName) + ": no profile with id " + std::to_string(id));
  }
  const std::string origin = std::string(kName) + ": profile " + std::to_string(id);
  GM_ASSIGN_OR_RETURN(nlohmann::json doc,
                      ParseJson(profiles_[static_cast<size_t>(id - 1)].json, origin));
  return ProfileFromJson(doc, origin);
}

Result<int64_t> MemoryRunStore::AddPlan(const Plan& plan, std::optional<int64_t> profile_id) {
  MutexLock lock(mu_);
  GM_RETURN_IF_ERROR(write_error_);
  if (profile_id && (*profile_id < 1 || *profile_id > static_cast<int64_t>(profiles_.size()))) {
    return Status::NotFound(std::string(kName) + ": no profile with id " +
                            std::to_string(*profile_id));
  }
  PlanRecord r;
  r.id = static_cast<int64_t>(plans_.size()) + 1;
  r.created_utc = clock_();
  r.profile_id = profile_id;
  r.json = StoredPlanJson(plan);
  r.sha256 = PlanDigest(plan);
  plans_.push_back(r);
  EventRecord event;
  event.profile_id = profile_id;
  event.kind = "plan";
  event.message = PlanEventMessage(plan);
  GM_RETURN_IF_ERROR(InsertEvent(event));
  return r.id;
}

Result<std::vector<PlanRecord>> MemoryRunStore::ListPlans() {
  MutexLock lock(mu_);
  return plans_;
}

Result<int64_t> MemoryRunStore::AddSimulation(const SimulationRecord& simulation) {
  MutexLock lock(mu_);
  GM_RETURN_IF_ERROR(write_error_);
  SimulationRecord r = simulation;
  r.id = static_cast<int64_t>(simulations_.size()) + 1;
  r.created_utc = clock_();
  simulations_.push_back(r);
  return r.id;
}

Result<std::vector<SimulationRecord>> MemoryRunStore::ListSimulations() {
  MutexLock lock(mu_);
  return simulations_;
}

Result<SimulationRecord> MemoryRunStore::GetSimulation(int64_t id) {
  MutexLock lock(mu_);
  if (id < 1 || id > static_cast<int64_t>(simulations_.size())) {
    return Status::NotFound(std::string(kName) + ": no simulation with id " + std::to_string(id));
  }
  return simulations_[static_cast<size_t>(id - 1)];
}

Result<PlanRecord> MemoryRunStore::GetPlan(int64_t id) {
  MutexLock lock(mu_);
  if (id < 1 || id > static_cast<int64_t>(plans_.size())) {
    return Status::NotFound(std::string(kName) + ": no plan with id " + std::to_string(id));
  }
  return plans_[static_cast<size_t>(id - 1)];
}

Result<std::optional<int64_t>> MemoryRunStore::FindPlan(const std::string& sha256) {
  MutexLock lock(mu_);
  for (auto it = plans_.rbegin(); it != plans_.rend(); ++it) {
    if (it->sha256 == sha256) return std::optional<int64_t>(it->id);
  }
  return std::optional<int64_t>();
}

Result<std::optional<int64_t>> MemoryRunStore::FindProfile(const std::string& sha256) {
  MutexLock lock(mu_);
  for (auto it = profiles_.rbegin(); it != profiles_.rend(); ++it) {
    if (it->summary.sha256 == sha256) return std::optional<int64_t>(it->summary.id);
  }
  return std::optional<int64_t>();
}

Status MemoryRunStore::InsertEvent(const EventRecord& event) {
  const bool run_ok = !event.run_id || runs_.count(*event.run_id) > 0;
  const bool profile_ok =
      !event.profile_id ||
      (*event.profile_id >= 1 && *event.profile_id <= static_cast<int64_t>(profiles_.size()));
  if (!run_ok || !profile_ok) {
    return Status::NotFound(std::string(kName) + ": cannot record event \"" + event.message +
                            "\": run \"" + event.run_id.value_or("") + "\" or profile " +
                            std::to_string(event.profile_id.value_or(0)) + " is not recorded");
  }
  EventRecord e = event;
  e.id = static_cast<int64_t>(events_.size()) + 1;
  if (e.t_utc.empty()) e.t_utc = clock_();
  events_.push_back(std::move(e));
  return Status::Ok();
}

Status MemoryRunStore::AddEvent(const EventRecord& event) {
  MutexLock lock(mu_);
  GM_RETURN_IF_ERROR(write_error_);
  return InsertEvent(event);
}

Result<std::vector<EventRecord>> MemoryRunStore::ListEvents() {
  MutexLock lock(mu_);
  return events_;
}

Status MemoryRunStore::BeginRun(const RunRecord& run) {
  MutexLock lock(mu_);
  GM_RETURN_IF_ERROR(write_error_);
  if (runs_.count(run.id) > 0) {
    return Status::InvalidArgument(std::string(kName) + ": a run with id \"" + run.id +
                                   "\" is already recorded");
  }
  if (run.plan_id && (*run.plan_id < 1 || *run.plan_id > static_cast<int64_t>(plans_.size()))) {
    return Status::NotFound(std::string(kName) + ": cannot record run \"" + run.id + "\": plan " +
                            std::to_string(*run.plan_id) + " is not recorded");
  }
  RunRecord r = run;
  if (r.started_utc.empty()) r.started_utc = clock_();
  r.ended_utc.reset();
  r.exit_code.reset();
  r.heartbeat_utc = r.started_utc;
  run_order_.push_back(r.id);
  runs_.emplace(r.id, std::move(r));
  return Status::Ok();
}

Status MemoryRunStore::EndRun(const std::string& run_id, const std::string& status, int exit_code) {
  MutexLock lock(mu_);
  GM_RETURN_IF_ERROR(write_error_);
  auto it = runs_.find(run_id);
  if (it == runs_.end()) {
    return Status::NotFound(std::string(kName) + ": no run with id \"" + run_id + "\"");
  }
  it->second.ended_utc = clock_();
  it->second.status = status;
  it->second.exit_code = exit_code;
  return Status::Ok();
}

Result<RunRecord> MemoryRunStore::GetRun(const std::string& run_id) {
  MutexLock lock(mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end()) {
    return Status::NotFound(std::string(kName) + ": no run with id \"" + run_id + "\"");
  }
  return it->second;
}

Result<std::vector<RunRecord>> MemoryRunStore::ListRuns() {
  MutexLock lock(mu_);
  std::vector<RunRecord> out;
  for (const std::string& id : run_order_) out.push_back(runs_.at(id));
  return out;
}

Status MemoryRunStore::Heartbeat(const std::string& run_id) {
  MutexLock lock(mu_);
  GM_RETURN_IF_ERROR(write_error_);
  auto it = runs_.find(run_id);
  if (it == runs_.end()) {
    return Status::NotFound(std::string(kName) + ": no run with id \"" + run_id + "\"");
  }
  it->second.heartbeat_utc = clock_();
  return Status::Ok();
}

Status MemoryRunStore::AddWorker(const std::string& run_id, const WorkerRecord& worker) {
  MutexLock lock(mu_);
  GM_RETURN_IF_ERROR(write_error_);
  if (runs_.count(run_id) == 0) {
    return Status::NotFound(std::string(kName) + ": no run with id \"" + run_id + "\"");
  }
  auto& workers = workers_[run_id];
  if (workers.count(worker.worker_id) > 0) {
    return Status::InvalidArgument(std::string(kName) + ": run \"" + run_id +
                                   "\" already has worker " + std::to_string(worker.worker_id));
  }
  WorkerRecord w = worker;
  if (w.started_utc.empty()) w.started_utc = clock_();
  w.ended_utc.reset();
  w.exit.reset();
  workers.emplace(w.worker_id, std::move(w));
  return Status::Ok();
}

Result<WorkerRecord*> MemoryRunStore::FindWorker(const std::string& run_id, int64_t worker_id) {
  auto run = workers_.find(run_id);
  auto it = run == workers_.end() ? decltype(run->second.end()){} : run->second.find(worker_id);
  if (run == workers_.end() || it == run->second.end()) {
    return Status::NotFound(std::string(kName) + ": run \"" + run_id + "\" has no worker " +
                            std::to_string(worker_id));
  }
  return &it->second;
}

Status MemoryRunStore::EndWorker(const std::string& run_id, int64_t worker_id,
                                 const std::string& exit) {
  MutexLock lock(mu_);
  GM_RETURN_IF_ERROR(write_error_);
  GM_ASSIGN_OR_RETURN(WorkerRecord * w, FindWorker(run_id, worker_id));
  w->ended_utc = clock_();
  w->exit = exit;
  return Status::Ok();
}

Status MemoryRunStore::PlaceWorker(const std::string& run_id, int64_t worker_id,
                                   const std::string& host, const std::string& step_id) {
  MutexLock lock(mu_);
  GM_RETURN_IF_ERROR(write_error_);
  GM_ASSIGN_OR_RETURN(WorkerRecord * w, FindWorker(run_id, worker_id));
  w->host = host;
  w->step_id = step_id.empty() ? std::nullopt : std::optional<std::string>(step_id);
  return Status::Ok();
}

Result<std::vector<WorkerRecord>> MemoryRunStore::ListWorkers(const std::string& run_id) {
  MutexLock lock(mu_);
  std::vector<WorkerRecord> out;
  auto run = workers_.find(run_id);
  if (run == workers_.end()) return out;
  for (const auto& [id, w] : run->second) out.push_back(w);
  return out;
}

Status MemoryRunStore::AddPoolGrant(const std::string& run_id, const PoolGrantRecord& grant) {
  MutexLock lock(mu_);
  GM_RETURN_IF_ERROR(write_error_);
  if (runs_.count(run_id) == 0) {
    return Status::NotFound(std::string(kName) + ": no run with id \"" + run_id + "\"");
  }
  PoolGrantRecord g = grant;
  g.id = ++last_pool_grant_id_;
  if (g.t_utc.empty()) g.t_utc = clock_();
  pool_grants_[run_id].push_back(std::move(g));
  return Status::Ok();
}

Result<std::vector<PoolGrantRecord>> MemoryRunStore::ListPoolGrants(const std::string& run_id) {
  MutexLock lock(mu_);
  auto it = pool_grants_.find(run_id);
  if (it == pool_grants_.end()) return std::vector<PoolGrantRecord>{};
  return it->second;
}

Status MemoryRunStore::SetRunStageCosts(const std::string& run_id,
                                        const std::vector<StageProfile>& stages) {
  MutexLock lock(mu_);
  GM_RETURN_IF_ERROR(write_error_);
  if (runs_.count(run_id) == 0) {
    return Status::NotFound(std::string(kName) + ": no run with id \"" + run_id + "\"");
  }
  std::vector<StageProfile>& kept = run_stages_[run_id];
  kept.clear();
  for (const StageProfile& s : stages) {
    StageProfile k;  // what the stage_costs table keeps
    k.index = s.index;
    k.name = s.name;
    k.stateless = s.stateless;
    k.cpu_s_per_sample = s.cpu_s_per_sample;
    k.wall_s_per_sample = s.wall_s_per_sample;
    k.bytes_in_per_sample = s.bytes_in_per_sample;
    k.bytes_out_per_sample = s.bytes_out_per_sample;
    kept.push_back(k);
  }
  return Status::Ok();
}

Result<std::vector<StageProfile>> MemoryRunStore::ListRunStageCosts(const std::string& run_id) {
  MutexLock lock(mu_);
  auto it = run_stages_.find(run_id);
  return it == run_stages_.end() ? std::vector<StageProfile>{} : it->second;
}

Status MemoryRunStore::AddMetric(const std::string& run_id, const MetricPoint& point) {
  MutexLock lock(mu_);
  GM_RETURN_IF_ERROR(write_error_);
  if (runs_.count(run_id) == 0) {
    return Status::NotFound(std::string(kName) + ": no run with id \"" + run_id + "\"");
  }
  metrics_[run_id].push_back(point);
  return Status::Ok();
}

Result<std::vector<MetricPoint>> MemoryRunStore::ListMetrics(const std::string& run_id) {
  MutexLock lock(mu_);
  auto it = metrics_.find(run_id);
  if (it == metrics_.end()) return std::vector<MetricPoint>{};
  return it->second;
}

}  // namespace gm
