#include "core/store/sqlite_run_store.h"

#include <filesystem>
#include <utility>

#include "core/digest.h"
#include "core/json.h"
#include "core/store/run_schema.h"
#include "core/thread_annotations.h"

namespace gm {

Result<std::unique_ptr<SqliteRunStore>> SqliteRunStore::Open(const std::string& path,
                                                             UtcClock clock) {
  GM_RETURN_IF_ERROR(CheckRunsDbDirectory(path));
  GM_ASSIGN_OR_RETURN(sqlite::Database db, sqlite::Database::Open(path));
  GM_RETURN_IF_ERROR(PrepareRunsDb(db));
  return std::unique_ptr<SqliteRunStore>(new SqliteRunStore(std::move(db), std::move(clock)));
}

Result<std::unique_ptr<SqliteRunStore>> SqliteRunStore::OpenExisting(const std::string& path,
                                                                     UtcClock clock) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::NotFound(path +
                            " does not exist (or is not a file): give --db with the "
                            "runs.db that `goldminer run` or `goldminer profile` wrote");
  }
  {
    GM_ASSIGN_OR_RETURN(sqlite::Database db, sqlite::Database::Open(path));
    GM_RETURN_IF_ERROR(db.SetBusyTimeout(kRunStoreBusyTimeoutMs));
    Result<int64_t> version = db.QueryInt("PRAGMA user_version");
    if (!version.ok()) {
      return Status::Corrupt(path + " is not a goldminer runs.db (" + version.status().message() +
                             ")");
    }
    GM_RETURN_IF_ERROR(CheckNotNewer(db, *version));
    if (*version == 0) {
      return Status::InvalidArgument(path +
                                     " is not a goldminer runs.db (no goldminer schema in it)");
    }
  }
  return Open(path, std::move(clock));
}

// ---- Profiles --------------------------------------------------------------------

Result<int64_t> SqliteRunStore::AddProfile(const Profile& profile) {
  MutexLock lock(mu_);
  const ProfileSummary s = SummarizeProfile(profile);
  GM_ASSIGN_OR_RETURN(std::string json, StoredProfileJson(profile));
  GM_ASSIGN_OR_RETURN(sqlite::Transaction tx, sqlite::Transaction::Begin(db_));
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(R"sql(
      INSERT INTO profiles (created_utc, host, pipeline_path, pipeline_sha256, verdict,
        input_bound_fraction, samples_per_s_1_thread, samples_per_s_all_cores,
        samples_per_s_per_core, demand_samples_per_s, stall_fraction, gpu_available,
        gpu_busy_fraction, json, sha256)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?))sql"));
  GM_RETURN_IF_ERROR(st.BindAll(s.created_utc, s.host, s.pipeline_path, s.pipeline_sha256,
                                s.verdict, s.input_bound_fraction, s.samples_per_s_1_thread,
                                s.samples_per_s_all_cores, s.samples_per_s_per_core,
                                s.demand_samples_per_s, s.stall_fraction, s.gpu_available,
                                s.gpu_busy_fraction, json, Sha256Hex(json)));
  GM_RETURN_IF_ERROR(st.Run());
  const int64_t id = db_.LastInsertRowId();
  if (profile.pipeline) GM_RETURN_IF_ERROR(InsertStageCosts(id, *profile.pipeline));
  EventRecord event;
  event.profile_id = id;
  event.kind = "profile";
  event.message = "profile recorded: " + profile.verdict;
  GM_RETURN_IF_ERROR(InsertEvent(event));
  GM_RETURN_IF_ERROR(tx.Commit());
  return id;
}

Status SqliteRunStore::InsertStageCosts(int64_t profile_id, const PipelineProfile& pipeline) {
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(R"sql(
      INSERT INTO stage_costs (profile_id, stage_index, name, stateless, cpu_s_per_sample,
        wall_s_per_sample, bytes_in_per_sample, bytes_out_per_sample)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?))sql"));
  for (const StageProfile& stage : pipeline.stages) {
    GM_RETURN_IF_ERROR(st.BindAll(profile_id, stage.index, stage.name, stage.stateless,
                                  stage.cpu_s_per_sample, stage.wall_s_per_sample,
                                  stage.bytes_in_per_sample, stage.bytes_out_per_sample));
    GM_RETURN_IF_ERROR(st.Run());
  }
  return Status::Ok();
}

Status SqliteRunStore::SetRunStageCosts(const std::string& run_id,
                                        const std::vector<StageProfile>& stages) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Transaction tx, sqlite::Transaction::Begin(db_));
  {
    GM_ASSIGN_OR_RETURN(sqlite::Statement st,
                        db_.Prepare("SELECT count(*) FROM runs WHERE id = ?"));
    GM_RETURN_IF_ERROR(st.Bind(1, run_id));
    GM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row || st.Int(0) == 0) {
      return Status::NotFound(path() + ": no run with id \"" + run_id + "\"");
    }
  }
  GM_ASSIGN_OR_RETURN(sqlite::Statement del,
                      db_.Prepare("DELETE FROM stage_costs WHERE run_id = ?"));
  GM_RETURN_IF_ERROR(del.Bind(1, run_id));
  GM_RETURN_IF_ERROR(del.Run());
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(R"sql(
      INSERT INTO stage_costs (run_id, stage_index, name, stateless, cpu_s_per_sample,
        wall_s_per_sample, bytes_in_per_sample, bytes_out_per_sample)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?))sql"));
  for (const StageProfile& stage : stages) {
    GM_RETURN_IF_ERROR(st.BindAll(run_id, stage.index, stage.name, stage.stateless,
                                  stage.cpu_s_per_sample, stage.wall_s_per_sample,
                                  stage.bytes_in_per_sample, stage.bytes_out_per_sample));
    GM_RETURN_IF_ERROR(st.Run());
  }
  return tx.Commit();
}

Result<std::vector<StageProfile>> SqliteRunStore::ListRunStageCosts(const std::string& run_id) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(R"sql(
      SELECT stage_index, name, stateless, cpu_s_per_sample, wall_s_per_sample,
        bytes_in_per_sample, bytes_out_per_sample
      FROM stage_costs WHERE run_id = ? ORDER BY stage_index)sql"));
  GM_RETURN_IF_ERROR(st.Bind(1, run_id));
  std::vector<StageProfile> out;
  for (;;) {
    GM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    StageProfile s;
    s.index = static_cast<int>(st.Int(0));
    s.name = st.Text(1);
    s.stateless = st.Int(2) != 0;
    s.cpu_s_per_sample = st.Real(3);
    s.wall_s_per_sample = st.Real(4);
    s.bytes_in_per_sample = st.Real(5);
    s.bytes_out_per_sample = st.Real(6);
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<ProfileSummary>> SqliteRunStore::ListProfiles() {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(R"sql(
      SELECT id, created_utc, host, pipeline_path, pipeline_sha256, verdict,
        input_bound_fraction, samples_per_s_1_thread, samples_per_s_all_cores,
        samples_per_s_per_core, demand_samples_per_s, stall_fraction, gpu_available,
        gpu_busy_fraction, sha256
      FROM profiles ORDER BY id)sql"));
  std::vector<ProfileSummary> out;
  for (;;) {
    GM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    ProfileSummary s;
    s.id = st.Int(0);
    s.created_utc = st.Text(1);
    s.host = st.Text(2);
    s.pipeline_path = st.OptionalText(3);
    s.pipeline_sha256 = st.OptionalText(4);
    s.verdict = st.Text(5);
    s.input_bound_fraction = st.Real(6);
    s.samples_per_s_1_thread = st.OptionalReal(7);
    s.samples_per_s_all_cores = st.OptionalReal(8);
    s.samples_per_s_per_core = st.OptionalReal(9);
    s.demand_samples_per_s = st.OptionalReal(10);
    s.stall_fraction = st.OptionalReal(11);
    if (!st.IsNull(12)) s.gpu_available = st.Int(12) != 0;
    s.gpu_busy_fraction = st.OptionalReal(13);
    s.sha256 = st.OptionalText(14).value_or("");
    out.push_back(std::move(s));
  }
  return out;
}

Result<Profile> SqliteRunStore::GetProfile(int64_t id) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare("SELECT json FROM profiles WHERE id = ?"));
  GM_RETURN_IF_ERROR(st.Bind(1, id));
  GM_ASSIGN_OR_RETURN(bool row, st.Step());
  const std::string origin = path() + ": profile " + std::to_string(id);
  if (!row) return Status::NotFound(path() + ": no profile with id " + std::to_string(id));
  GM_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(st.Text(0), origin));
  return ProfileFromJson(doc, origin);
}

// ---- Events ----------------------------------------------------------------------

Status SqliteRunStore::InsertEvent(const EventRecord& event) {
  GM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_.Prepare(
          "INSERT INTO events (run_id, profile_id, t_utc, kind, message) VALUES (?, ?, ?, ?, ?)"));
  GM_RETURN_IF_ERROR(st.BindAll(event.run_id, event.profile_id,
                                event.t_utc.empty() ? clock_() : event.t_utc, event.kind,
                                event.message));
  Status status = st.Run();
  if (status.code() == Code::kNotFound) {  // a foreign key: run or profile unknown
    return Status::NotFound(path() + ": cannot record event \"" + event.message + "\": run \"" +
                            event.run_id.value_or("") + "\" or profile " +
                            std::to_string(event.profile_id.value_or(0)) + " is not recorded");
  }
  return status;
}

Result<int64_t> SqliteRunStore::AddPlan(const Plan& plan, std::optional<int64_t> profile_id) {
  MutexLock lock(mu_);
  const std::string json = StoredPlanJson(plan);
  GM_ASSIGN_OR_RETURN(sqlite::Transaction tx, sqlite::Transaction::Begin(db_));
  GM_ASSIGN_OR_RETURN(sqlite::Statement st,
                      db_.Prepare("INSERT INTO plans (created_utc, profile_id, json, sha256) "
                                  "VALUES (?, ?, ?, ?)"));
  GM_RETURN_IF_ERROR(st.BindAll(clock_(), profile_id, json, Sha256Hex(json)));
  Status status = st.Run();
  if (status.code() == Code::kNotFound) {
    return Status::NotFound(path() + ": cannot record the plan: profile " +
                            std::to_string(profile_id.value_or(0)) + " is not recorded");
  }
  GM_RETURN_IF_ERROR(status);
  const int64_t id = db_.LastInsertRowId();
  EventRecord event;
  event.profile_id = profile_id;
  event.kind = "plan";
  event.message = PlanEventMessage(plan);
  GM_RETURN_IF_ERROR(InsertEvent(event));
  GM_RETURN_IF_ERROR(tx.Commit());
  return id;
}

namespace {

constexpr const char* kPlanColumns = "id, created_utc, profile_id, json, sha256";

PlanRecord PlanFromRow(const sqlite::Statement& st) {
  PlanRecord r;
  r.id = st.Int(0);
  r.created_utc = st.Text(1);
  if (!st.IsNull(2)) r.profile_id = st.Int(2);
  r.json = st.Text(3);
  r.sha256 = st.OptionalText(4).value_or("");
  return r;
}

}  // namespace

Result<std::vector<PlanRecord>> SqliteRunStore::ListPlans() {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(std::string("SELECT ") + kPlanColumns +
                                                        " FROM plans ORDER BY id"));
  std::vector<PlanRecord> out;
  for (;;) {
    GM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(PlanFromRow(st));
  }
  return out;
}

Result<int64_t> SqliteRunStore::AddSimulation(const SimulationRecord& r) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_.Prepare("INSERT INTO simulations (created_utc, trace, nodes, gpus, load, seed, "
                  "policies, jct_static_over_cluster, gpu_util_effective_cluster_over_static, "
                  "json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  GM_RETURN_IF_ERROR(st.BindAll(clock_(), r.trace, r.nodes, r.gpus, r.load, r.seed, r.policies,
                                r.jct_static_over_cluster, r.gpu_util_effective_cluster_over_static,
                                r.json));
  GM_RETURN_IF_ERROR(st.Run());
  return db_.LastInsertRowId();
}

namespace {

constexpr const char* kSimulationColumns =
    "id, created_utc, trace, nodes, gpus, load, seed, policies, jct_static_over_cluster, "
    "gpu_util_effective_cluster_over_static, json";

SimulationRecord SimulationFromRow(const sqlite::Statement& st) {
  SimulationRecord r;
  r.id = st.Int(0);
  r.created_utc = st.Text(1);
  r.trace = st.Text(2);
  r.nodes = st.Text(3);
  r.gpus = st.Int(4);
  r.load = st.Real(5);
  r.seed = st.Int(6);
  r.policies = st.Text(7);
  if (!st.IsNull(8)) r.jct_static_over_cluster = st.Real(8);
  if (!st.IsNull(9)) r.gpu_util_effective_cluster_over_static = st.Real(9);
  r.json = st.Text(10);
  return r;
}

}  // namespace

Result<std::vector<SimulationRecord>> SqliteRunStore::ListSimulations() {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_.Prepare(std::string("SELECT ") + kSimulationColumns + " FROM simulations ORDER BY id"));
  std::vector<SimulationRecord> out;
  for (;;) {
    GM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(SimulationFromRow(st));
  }
  return out;
}

Result<SimulationRecord> SqliteRunStore::GetSimulation(int64_t id) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_.Prepare(std::string("SELECT ") + kSimulationColumns + " FROM simulations WHERE id = ?"));
  GM_RETURN_IF_ERROR(st.Bind(1, id));
  GM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return Status::NotFound(path() + ": no simulation with id " + std::to_string(id));
  return SimulationFromRow(st);
}

Result<PlanRecord> SqliteRunStore::GetPlan(int64_t id) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(std::string("SELECT ") + kPlanColumns +
                                                        " FROM plans WHERE id = ?"));
  GM_RETURN_IF_ERROR(st.Bind(1, id));
  GM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return Status::NotFound(path() + ": no plan with id " + std::to_string(id));
  return PlanFromRow(st);
}

Result<std::optional<int64_t>> SqliteRunStore::FindPlan(const std::string& sha256) {
  return FindByDigest("plans", sha256);
}

Result<std::optional<int64_t>> SqliteRunStore::FindProfile(const std::string& sha256) {
  return FindByDigest("profiles", sha256);
}

Result<std::optional<int64_t>> SqliteRunStore::FindByDigest(const char* table,
                                                            const std::string& sha256) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(std::string("SELECT max(id) FROM ") +
                                                        table + " WHERE sha256 = ?"));
  GM_RETURN_IF_ERROR(st.Bind(1, sha256));
  GM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<int64_t>();
  return st.OptionalInt(0);
}

Status SqliteRunStore::AddEvent(const EventRecord& event) {
  MutexLock lock(mu_);
  return InsertEvent(event);
}

Result<std::vector<EventRecord>> SqliteRunStore::ListEvents() {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_.Prepare("SELECT id, run_id, profile_id, t_utc, kind, message FROM events ORDER BY id"));
  std::vector<EventRecord> out;
  for (;;) {
    GM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    EventRecord e;
    e.id = st.Int(0);
    e.run_id = st.OptionalText(1);
    e.profile_id = st.OptionalInt(2);
    e.t_utc = st.Text(3);
    e.kind = st.Text(4);
    e.message = st.Text(5);
    out.push_back(std::move(e));
  }
  return out;
}

// ---- Runs and metrics --------------------------------------------------------------

Status SqliteRunStore::BeginRun(const RunRecord& run) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(R"sql(
      INSERT INTO runs (id, started_utc, backend, pipeline_path, plan_path, command,
        world_size, status, job_id, host, pid, heartbeat_utc, plan_id)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?))sql"));
  const std::string command =
      nlohmann::json(run.command).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::string started = run.started_utc.empty() ? clock_() : run.started_utc;
  GM_RETURN_IF_ERROR(st.BindAll(run.id, started, run.backend, run.pipeline_path, run.plan_path,
                                command, run.world_size, run.status, run.job_id, run.host, run.pid,
                                started, run.plan_id));
  Status status = st.Run();
  if (status.code() == Code::kInvalidArgument) {  // the primary key (or a user's trigger)
    return Status::InvalidArgument(path() + ": a run with id \"" + run.id +
                                   "\" is already recorded");
  }
  if (status.code() == Code::kNotFound) {  // the foreign key
    return Status::NotFound(path() + ": cannot record run \"" + run.id + "\": plan " +
                            std::to_string(run.plan_id.value_or(0)) + " is not recorded");
  }
  return status;
}

Status SqliteRunStore::EndRun(const std::string& run_id, const std::string& status, int exit_code) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_.Prepare("UPDATE runs SET ended_utc = ?, status = ?, exit_code = ? WHERE id = ?"));
  GM_RETURN_IF_ERROR(st.BindAll(clock_(), status, exit_code, run_id));
  GM_RETURN_IF_ERROR(st.Run());
  if (st.Changes() == 0) return Status::NotFound(path() + ": no run with id \"" + run_id + "\"");
  return Status::Ok();
}

namespace {

constexpr const char* kRunColumns =
    "id, started_utc, ended_utc, backend, pipeline_path, plan_path, command, world_size, "
    "status, exit_code, job_id, host, pid, heartbeat_utc, plan_id";

Result<RunRecord> RunFromRow(const sqlite::Statement& st, const std::string& db_path) {
  RunRecord run;
  run.id = st.Text(0);
  run.started_utc = st.Text(1);
  run.ended_utc = st.OptionalText(2);
  run.backend = st.Text(3);
  run.pipeline_path = st.Text(4);
  run.plan_path = st.Text(5);
  const std::string origin = db_path + ": run \"" + run.id + "\" command";
  GM_ASSIGN_OR_RETURN(nlohmann::json command, ParseJson(st.Text(6), origin));
  GM_ASSIGN_OR_RETURN(run.command, JsonNode(command, origin).AsStrings());
  run.world_size = static_cast<int>(st.Int(7));
  run.status = st.Text(8);
  if (!st.IsNull(9)) run.exit_code = static_cast<int>(st.Int(9));
  run.job_id = st.OptionalText(10);
  run.host = st.OptionalText(11).value_or("");
  run.pid = st.OptionalInt(12);
  run.heartbeat_utc = st.OptionalText(13);
  run.plan_id = st.OptionalInt(14);
  return run;
}

}  // namespace

Result<RunRecord> SqliteRunStore::GetRun(const std::string& run_id) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(std::string("SELECT ") + kRunColumns +
                                                        " FROM runs WHERE id = ?"));
  GM_RETURN_IF_ERROR(st.Bind(1, run_id));
  GM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return Status::NotFound(path() + ": no run with id \"" + run_id + "\"");
  return RunFromRow(st, path());
}

Result<std::vector<RunRecord>> SqliteRunStore::ListRuns() {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(std::string("SELECT ") + kRunColumns +
                                                        " FROM runs ORDER BY rowid"));
  std::vector<RunRecord> out;
  for (;;) {
    GM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    GM_ASSIGN_OR_RETURN(RunRecord run, RunFromRow(st, path()));
    out.push_back(std::move(run));
  }
  return out;
}

Status SqliteRunStore::Heartbeat(const std::string& run_id) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st,
                      db_.Prepare("UPDATE runs SET heartbeat_utc = ? WHERE id = ?"));
  GM_RETURN_IF_ERROR(st.BindAll(clock_(), run_id));
  GM_RETURN_IF_ERROR(st.Run());
  if (st.Changes() == 0) return Status::NotFound(path() + ": no run with id \"" + run_id + "\"");
  return Status::Ok();
}

Status SqliteRunStore::AddWorker(const std::string& run_id, const WorkerRecord& w) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(R"sql(
      INSERT INTO workers (run_id, worker_id, host, pid, started_utc, step_id, elastic)
      VALUES (?, ?, ?, ?, ?, ?, ?))sql"));
  GM_RETURN_IF_ERROR(st.BindAll(run_id, w.worker_id, w.host, w.pid,
                                w.started_utc.empty() ? clock_() : w.started_utc, w.step_id,
                                int64_t{w.elastic ? 1 : 0}));
  Status status = st.Run();
  if (status.code() == Code::kNotFound) {  // the foreign key
    return Status::NotFound(path() + ": no run with id \"" + run_id + "\"");
  }
  if (status.code() == Code::kInvalidArgument) {  // the primary key
    return Status::InvalidArgument(path() + ": run \"" + run_id + "\" already has worker " +
                                   std::to_string(w.worker_id));
  }
  return status;
}

Status SqliteRunStore::EndWorker(const std::string& run_id, int64_t worker_id,
                                 const std::string& exit) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_.Prepare("UPDATE workers SET ended_utc = ?, exit = ? WHERE run_id = ? AND worker_id = ?"));
  GM_RETURN_IF_ERROR(st.BindAll(clock_(), exit, run_id, worker_id));
  GM_RETURN_IF_ERROR(st.Run());
  if (st.Changes() == 0) {
    return Status::NotFound(path() + ": run \"" + run_id + "\" has no worker " +
                            std::to_string(worker_id));
  }
  return Status::Ok();
}

Status SqliteRunStore::PlaceWorker(const std::string& run_id, int64_t worker_id,
                                   const std::string& host, const std::string& step_id) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st,
                      db_.Prepare("UPDATE workers SET host = ?, step_id = NULLIF(?, '') "
                                  "WHERE run_id = ? AND worker_id = ?"));
  GM_RETURN_IF_ERROR(st.BindAll(host, step_id, run_id, worker_id));
  GM_RETURN_IF_ERROR(st.Run());
  if (st.Changes() == 0) {
    return Status::NotFound(path() + ": run \"" + run_id + "\" has no worker " +
                            std::to_string(worker_id));
  }
  return Status::Ok();
}

Result<std::vector<WorkerRecord>> SqliteRunStore::ListWorkers(const std::string& run_id) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(R"sql(
      SELECT worker_id, host, pid, step_id, started_utc, ended_utc, exit, elastic
      FROM workers WHERE run_id = ? ORDER BY worker_id)sql"));
  GM_RETURN_IF_ERROR(st.Bind(1, run_id));
  std::vector<WorkerRecord> out;
  for (;;) {
    GM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    WorkerRecord w;
    w.worker_id = st.Int(0);
    w.host = st.Text(1);
    w.pid = st.OptionalInt(2);
    w.step_id = st.OptionalText(3);
    w.started_utc = st.Text(4);
    w.ended_utc = st.OptionalText(5);
    w.exit = st.OptionalText(6);
    w.elastic = st.Int(7) != 0;
    out.push_back(std::move(w));
  }
  return out;
}

Status SqliteRunStore::AddPoolGrant(const std::string& run_id, const PoolGrantRecord& g) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(R"sql(
      INSERT INTO pool_grants (run_id, t_utc, extra_workers, cpus, held_workers, reason, report)
      VALUES (?, ?, ?, ?, ?, ?, ?))sql"));
  GM_RETURN_IF_ERROR(st.BindAll(run_id, g.t_utc.empty() ? clock_() : g.t_utc, g.extra_workers,
                                g.cpus, g.held_workers, g.reason, g.report_json));
  Status status = st.Run();
  if (status.code() == Code::kNotFound) {  // the foreign key
    return Status::NotFound(path() + ": no run with id \"" + run_id + "\"");
  }
  return status;
}

Result<std::vector<PoolGrantRecord>> SqliteRunStore::ListPoolGrants(const std::string& run_id) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(R"sql(
      SELECT id, t_utc, extra_workers, cpus, held_workers, reason, report
      FROM pool_grants WHERE run_id = ? ORDER BY id)sql"));
  GM_RETURN_IF_ERROR(st.Bind(1, run_id));
  std::vector<PoolGrantRecord> out;
  for (;;) {
    GM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(PoolGrantRecord{st.Int(0), st.Text(1), st.Int(2), st.Int(3), st.Int(4),
                                  st.Text(5), st.Text(6)});
  }
  return out;
}

Status SqliteRunStore::AddMetric(const std::string& run_id, const MetricPoint& point) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_.Prepare("INSERT INTO metrics (run_id, t_s, name, value) VALUES (?, ?, ?, ?)"));
  GM_RETURN_IF_ERROR(st.BindAll(run_id, point.t_s, point.name, point.value));
  Status status = st.Run();
  if (status.code() == Code::kNotFound) {  // the foreign key
    return Status::NotFound(path() + ": no run with id \"" + run_id + "\"");
  }
  return status;
}

Result<std::vector<MetricPoint>> SqliteRunStore::ListMetrics(const std::string& run_id) {
  MutexLock lock(mu_);
  GM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_.Prepare("SELECT t_s, name, value FROM metrics WHERE run_id = ? ORDER BY rowid"));
  GM_RETURN_IF_ERROR(st.Bind(1, run_id));
  std::vector<MetricPoint> out;
  for (;;) {
    GM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(MetricPoint{st.Real(0), st.Text(1), st.Real(2)});
  }
  return out;
}

}  // namespace gm
