#include "core/run_store.h"

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <utility>

#include "core/json.h"

namespace gm {
namespace {

constexpr int kBusyTimeoutMs = 5000;

// ---- The schema ----------------------------------------------------------------
// The one place where runs.db's tables are defined (man/goldminer-runs.db.5 documents
// them for people). Times are ISO 8601 UTC text; t_s columns are seconds since the
// run started; per-sample figures are per sample that went through the stage.
//
// Migration policy: a schema version is never edited once released. A change is a
// new entry in kMigrations (ALTER TABLE ADD COLUMN, CREATE TABLE, ...) that takes
// version N-1 to N; Open applies the missing ones in order, in one transaction, and
// sets PRAGMA user_version. A goldminer refuses a file newer than it knows.
constexpr const char* kSchemaV1 = R"sql(
-- A training run (`goldminer run`).
CREATE TABLE runs (
  id            TEXT PRIMARY KEY,      -- chosen by `run`, unique
  started_utc   TEXT NOT NULL,
  ended_utc     TEXT,                  -- NULL while it runs (or if it was killed)
  backend       TEXT NOT NULL,         -- 'local' or 'slurm'
  pipeline_path TEXT NOT NULL,
  plan_path     TEXT NOT NULL,         -- '' when run without a plan
  command       TEXT NOT NULL,         -- the trainer's argv, a JSON array of strings
  world_size    INTEGER NOT NULL,      -- trainer processes
  status        TEXT NOT NULL,         -- 'running', 'succeeded', 'failed', 'cancelled'
  exit_code     INTEGER                -- NULL while it runs
);

-- One `goldminer profile`: the figures a listing shows, and the whole profile.json.
CREATE TABLE profiles (
  id                      INTEGER PRIMARY KEY AUTOINCREMENT,
  created_utc             TEXT NOT NULL,
  host                    TEXT NOT NULL,
  pipeline_path           TEXT,        -- NULL: no pipeline was profiled
  pipeline_sha256         TEXT,
  verdict                 TEXT NOT NULL,  -- 'input-bound', 'compute-bound', 'unknown'
  input_bound_fraction    REAL NOT NULL,  -- share of step time lost to data wait, 0..1
  samples_per_s_1_thread  REAL,        -- pipeline alone, 1 thread
  samples_per_s_all_cores REAL,        -- pipeline alone, the most threads measured
  samples_per_s_per_core  REAL,        -- samples per CPU-second with all cores
  demand_samples_per_s    REAL,        -- what the trainer would consume; NULL: no trainer
  stall_fraction          REAL,        -- data wait / wall over measured steps
  gpu_available           INTEGER,     -- 0 or 1; NULL: no trainer
  gpu_busy_fraction       REAL,        -- NULL: no GPU measured
  json                    TEXT NOT NULL  -- the profile.json document
);

-- Cost of one pipeline stage, measured by a profile or during a run.
CREATE TABLE stage_costs (
  id                   INTEGER PRIMARY KEY,
  profile_id           INTEGER REFERENCES profiles(id) ON DELETE CASCADE,
  run_id               TEXT REFERENCES runs(id) ON DELETE CASCADE,
  stage_index          INTEGER NOT NULL,  -- position in pipeline.json's "stages"
  name                 TEXT NOT NULL,     -- op name, e.g. 'decode_jpeg'
  stateless            INTEGER NOT NULL,  -- 0 or 1
  cpu_s_per_sample     REAL NOT NULL,     -- CPU seconds
  wall_s_per_sample    REAL NOT NULL,     -- seconds
  bytes_in_per_sample  REAL NOT NULL,
  bytes_out_per_sample REAL NOT NULL,
  CHECK (profile_id IS NOT NULL OR run_id IS NOT NULL)
);
CREATE INDEX stage_costs_profile_id ON stage_costs(profile_id);
CREATE INDEX stage_costs_run_id ON stage_costs(run_id);

-- A plan computed from a profile (`goldminer plan`).
CREATE TABLE plans (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  created_utc TEXT NOT NULL,
  profile_id  INTEGER REFERENCES profiles(id) ON DELETE SET NULL,
  json        TEXT NOT NULL               -- the plan.json document
);
CREATE INDEX plans_profile_id ON plans(profile_id);

-- A data worker of a run.
CREATE TABLE workers (
  run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  worker_id   INTEGER NOT NULL,           -- 0, 1, ... within the run
  host        TEXT NOT NULL,
  pid         INTEGER,
  started_utc TEXT NOT NULL,
  ended_utc   TEXT,                       -- NULL while it runs
  exit        TEXT,                       -- 'exited 0', 'drained', 'killed by signal 9', ...
  PRIMARY KEY (run_id, worker_id)
);

-- A run's time series: one row per sample of one measure.
CREATE TABLE metrics (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  t_s    REAL NOT NULL,                   -- seconds since the run started
  name   TEXT NOT NULL,                   -- e.g. 'samples_per_s', 'workers'
  value  REAL NOT NULL
);
CREATE INDEX metrics_run_id_name_t_s ON metrics(run_id, name, t_s);

-- Something that happened, for the report's timeline.
CREATE TABLE events (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id     TEXT REFERENCES runs(id) ON DELETE CASCADE,
  profile_id INTEGER REFERENCES profiles(id) ON DELETE CASCADE,
  t_utc      TEXT NOT NULL,
  kind       TEXT NOT NULL,               -- 'profile', 'run', 'worker', 'scale', ...
  message    TEXT NOT NULL
);
CREATE INDEX events_run_id ON events(run_id);
CREATE INDEX events_profile_id ON events(profile_id);
)sql";

struct Migration {
  int to_version;
  const char* sql;
};
// Version 2: what `goldminer run` records of itself and of Slurm.
constexpr const char* kSchemaV2 = R"sql(
ALTER TABLE runs ADD COLUMN job_id TEXT;         -- SLURM_JOB_ID; NULL outside Slurm
ALTER TABLE runs ADD COLUMN host TEXT;           -- where `goldminer run` ran
ALTER TABLE runs ADD COLUMN pid INTEGER;         -- its process id
ALTER TABLE runs ADD COLUMN heartbeat_utc TEXT;  -- its last sign of life (every few seconds)
ALTER TABLE workers ADD COLUMN step_id TEXT;     -- Slurm JOB.STEP; NULL on the local backend
)sql";

constexpr Migration kMigrations[] = {{1, kSchemaV1}, {2, kSchemaV2}};
static_assert(std::size(kMigrations) == kRunStoreSchemaVersion, "one migration per version");

// ---- Opening ---------------------------------------------------------------------

// SQLite says only "unable to open database file"; say which directory is missing.
Status CheckDirectory(const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) return Status::Ok();
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) return Status::Ok();
  const bool exists = std::filesystem::exists(dir, ec);
  return Status::IoError(path + ": cannot open runs.db: " + dir.string() +
                         (exists ? " is not a directory" : " does not exist") +
                         " (create the directory first, or choose another path)");
}

Status CheckNotNewer(const sqlite::Database& db, int64_t version) {
  if (version <= kRunStoreSchemaVersion) return Status::Ok();
  return Status::InvalidArgument(db.path() + " was written by a newer goldminer (schema " +
                                 std::to_string(version) + "; this one reads up to " +
                                 std::to_string(kRunStoreSchemaVersion) +
                                 "): use that goldminer, or another runs.db");
}

// Per-connection settings. journal_mode is the first statement that reads the file,
// so a file that is not a database fails here.
Status Configure(sqlite::Database& db) {
  GM_RETURN_IF_ERROR(db.SetBusyTimeout(kBusyTimeoutMs));
  Result<std::string> mode = db.QueryText("PRAGMA journal_mode=WAL");
  if (!mode.ok() && mode.status().code() == Code::kCorrupt) {
    return Status::Corrupt(db.path() + " is not a goldminer runs.db (" + db.ErrorMessage() + ")");
  }
  if (!mode.ok()) return mode.status();
  if (*mode != "wal") {
    return Status::IoError(db.path() + ": cannot use write-ahead logging (journal_mode is " +
                           *mode + "); put runs.db in a directory on a local file system");
  }
  // NORMAL is safe with WAL (a power loss may lose the last commits, never the file).
  GM_RETURN_IF_ERROR(db.Exec("PRAGMA synchronous=NORMAL"));
  return db.Exec("PRAGMA foreign_keys=ON");
}

Status Migrate(sqlite::Database& db) {
  GM_ASSIGN_OR_RETURN(int64_t version, db.QueryInt("PRAGMA user_version"));
  GM_RETURN_IF_ERROR(CheckNotNewer(db, version));
  if (version == kRunStoreSchemaVersion) return Status::Ok();
  GM_ASSIGN_OR_RETURN(sqlite::Transaction tx, sqlite::Transaction::Begin(db));
  // Another connection may have migrated between the read above and the lock.
  GM_ASSIGN_OR_RETURN(version, db.QueryInt("PRAGMA user_version"));
  GM_RETURN_IF_ERROR(CheckNotNewer(db, version));
  for (const Migration& m : kMigrations) {
    if (m.to_version <= version) continue;
    Status st = db.Exec(m.sql, "creating schema " + std::to_string(m.to_version));
    if (!st.ok() && version == 0) {
      // E.g. "table runs already exists": some other program's database.
      return Status::InvalidArgument(st.message() + " (" + db.path() +
                                     " is a SQLite database but not a goldminer runs.db; "
                                     "choose another path)");
    }
    GM_RETURN_IF_ERROR(st);
  }
  GM_RETURN_IF_ERROR(db.Exec("PRAGMA user_version = " + std::to_string(kRunStoreSchemaVersion)));
  return tx.Commit();
}

}  // namespace

Result<std::string> StoredProfileJson(const Profile& profile) {
  // Invalid UTF-8 (e.g. in a path) is replaced: dump() would throw on it.
  std::string text =
      ProfileToJson(profile).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Refuse now what GetProfile could not read back later.
  Result<nlohmann::json> doc = ParseJson(text, "profile");
  Result<Profile> back = doc.ok() ? ProfileFromJson(*doc, "profile") : doc.status();
  if (!back.ok()) {
    return Status::InvalidArgument("cannot record the profile: " + back.status().message());
  }
  return text;
}

std::optional<double> UtcSeconds(const std::string& utc) {
  std::tm tm{};
  const char* end = strptime(utc.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return static_cast<double>(timegm(&tm));
}

std::string SystemUtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

ProfileSummary SummarizeProfile(const Profile& p) {
  ProfileSummary s;
  s.created_utc = p.created_utc;
  s.host = p.host;
  s.verdict = p.verdict;
  s.input_bound_fraction = p.input_bound_fraction;
  if (p.pipeline) {
    s.pipeline_path = p.pipeline->path;
    s.pipeline_sha256 = p.pipeline->sha256;
    s.samples_per_s_per_core = p.pipeline->samples_per_s_per_core;
    const PipelineRun* most = nullptr;
    for (const PipelineRun& run : p.pipeline->runs) {
      if (run.threads == 1 && !s.samples_per_s_1_thread)
        s.samples_per_s_1_thread = run.samples_per_s;
      if (most == nullptr || run.threads > most->threads) most = &run;
    }
    if (most != nullptr) s.samples_per_s_all_cores = most->samples_per_s;
  }
  if (p.trainer) {
    s.demand_samples_per_s = p.trainer->demand_samples_per_s;
    s.stall_fraction = p.trainer->stall_fraction;
    s.gpu_available = p.trainer->gpu.available;
    if (p.trainer->gpu.available) s.gpu_busy_fraction = p.trainer->gpu.busy_fraction;
  }
  return s;
}

Result<std::unique_ptr<SqliteRunStore>> SqliteRunStore::Open(const std::string& path,
                                                             UtcClock clock) {
  GM_RETURN_IF_ERROR(CheckDirectory(path));
  GM_ASSIGN_OR_RETURN(sqlite::Database db, sqlite::Database::Open(path));
  GM_RETURN_IF_ERROR(Configure(db));
  GM_RETURN_IF_ERROR(Migrate(db));
  return std::unique_ptr<SqliteRunStore>(new SqliteRunStore(std::move(db), std::move(clock)));
}

Result<std::unique_ptr<SqliteRunStore>> SqliteRunStore::OpenExisting(const std::string& path,
                                                                     UtcClock clock) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::NotFound(path + " does not exist (or is not a file): give --db with the "
                            "runs.db that `goldminer run` or `goldminer profile` wrote");
  }
  {
    GM_ASSIGN_OR_RETURN(sqlite::Database db, sqlite::Database::Open(path));
    GM_RETURN_IF_ERROR(db.SetBusyTimeout(kBusyTimeoutMs));
    Result<int64_t> version = db.QueryInt("PRAGMA user_version");
    if (!version.ok()) {
      return Status::Corrupt(path + " is not a goldminer runs.db (" + version.status().message() + ")");
    }
    GM_RETURN_IF_ERROR(CheckNotNewer(db, *version));
    if (*version == 0) {
      return Status::InvalidArgument(path + " is not a goldminer runs.db (no goldminer schema in it)");
    }
  }
  return Open(path, std::move(clock));
}

// ---- Profiles --------------------------------------------------------------------

Result<int64_t> SqliteRunStore::AddProfile(const Profile& profile) {
  std::lock_guard lock(mu_);
  const ProfileSummary s = SummarizeProfile(profile);
  GM_ASSIGN_OR_RETURN(std::string json, StoredProfileJson(profile));
  GM_ASSIGN_OR_RETURN(sqlite::Transaction tx, sqlite::Transaction::Begin(db_));
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(R"sql(
      INSERT INTO profiles (created_utc, host, pipeline_path, pipeline_sha256, verdict,
        input_bound_fraction, samples_per_s_1_thread, samples_per_s_all_cores,
        samples_per_s_per_core, demand_samples_per_s, stall_fraction, gpu_available,
        gpu_busy_fraction, json)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?))sql"));
  GM_RETURN_IF_ERROR(st.BindAll(
      s.created_utc, s.host, s.pipeline_path, s.pipeline_sha256, s.verdict, s.input_bound_fraction,
      s.samples_per_s_1_thread, s.samples_per_s_all_cores, s.samples_per_s_per_core,
      s.demand_samples_per_s, s.stall_fraction, s.gpu_available, s.gpu_busy_fraction, json));
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
  std::lock_guard lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Transaction tx, sqlite::Transaction::Begin(db_));
  {
    GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare("SELECT count(*) FROM runs WHERE id = ?"));
    GM_RETURN_IF_ERROR(st.Bind(1, run_id));
    GM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row || st.Int(0) == 0) {
      return Status::NotFound(path() + ": no run with id \"" + run_id + "\"");
    }
  }
  GM_ASSIGN_OR_RETURN(sqlite::Statement del, db_.Prepare("DELETE FROM stage_costs WHERE run_id = ?"));
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
  std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(R"sql(
      SELECT id, created_utc, host, pipeline_path, pipeline_sha256, verdict,
        input_bound_fraction, samples_per_s_1_thread, samples_per_s_all_cores,
        samples_per_s_per_core, demand_samples_per_s, stall_fraction, gpu_available,
        gpu_busy_fraction
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
    out.push_back(std::move(s));
  }
  return out;
}

Result<Profile> SqliteRunStore::GetProfile(int64_t id) {
  std::lock_guard lock(mu_);
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

std::string PlanEventMessage(const Plan& plan) {
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.1f", plan.prediction.samples_per_s);
  return "plan recorded: " + std::to_string(plan.workers.size()) + " worker(s), " + rate +
         " samples/s predicted, limit: " + plan.prediction.limit;
}

Result<int64_t> SqliteRunStore::AddPlan(const Plan& plan, std::optional<int64_t> profile_id) {
  std::lock_guard lock(mu_);
  const std::string json =
      PlanToJson(plan).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  GM_ASSIGN_OR_RETURN(sqlite::Transaction tx, sqlite::Transaction::Begin(db_));
  GM_ASSIGN_OR_RETURN(sqlite::Statement st,
                      db_.Prepare("INSERT INTO plans (created_utc, profile_id, json) VALUES (?, ?, ?)"));
  GM_RETURN_IF_ERROR(st.BindAll(clock_(), profile_id, json));
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

Result<std::vector<PlanRecord>> SqliteRunStore::ListPlans() {
  std::lock_guard lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st,
                      db_.Prepare("SELECT id, created_utc, profile_id, json FROM plans ORDER BY id"));
  std::vector<PlanRecord> out;
  for (;;) {
    GM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    PlanRecord r;
    r.id = st.Int(0);
    r.created_utc = st.Text(1);
    if (!st.IsNull(2)) r.profile_id = st.Int(2);
    r.json = st.Text(3);
    out.push_back(std::move(r));
  }
  return out;
}

Status SqliteRunStore::AddEvent(const EventRecord& event) {
  std::lock_guard lock(mu_);
  return InsertEvent(event);
}

Result<std::vector<EventRecord>> SqliteRunStore::ListEvents() {
  std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(R"sql(
      INSERT INTO runs (id, started_utc, backend, pipeline_path, plan_path, command,
        world_size, status, job_id, host, pid, heartbeat_utc)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?))sql"));
  const std::string command =
      nlohmann::json(run.command).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::string started = run.started_utc.empty() ? clock_() : run.started_utc;
  GM_RETURN_IF_ERROR(st.BindAll(run.id, started, run.backend, run.pipeline_path, run.plan_path,
                                command, run.world_size, run.status, run.job_id, run.host,
                                run.pid, started));
  Status status = st.Run();
  if (status.code() == Code::kInvalidArgument) {  // the primary key (or a user's trigger)
    return Status::InvalidArgument(path() + ": a run with id \"" + run.id +
                                   "\" is already recorded");
  }
  return status;
}

Status SqliteRunStore::EndRun(const std::string& run_id, const std::string& status, int exit_code) {
  std::lock_guard lock(mu_);
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
    "status, exit_code, job_id, host, pid, heartbeat_utc";

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
  return run;
}

}  // namespace

Result<RunRecord> SqliteRunStore::GetRun(const std::string& run_id) {
  std::lock_guard lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st,
                      db_.Prepare(std::string("SELECT ") + kRunColumns + " FROM runs WHERE id = ?"));
  GM_RETURN_IF_ERROR(st.Bind(1, run_id));
  GM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return Status::NotFound(path() + ": no run with id \"" + run_id + "\"");
  return RunFromRow(st, path());
}

Result<std::vector<RunRecord>> SqliteRunStore::ListRuns() {
  std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st,
                      db_.Prepare("UPDATE runs SET heartbeat_utc = ? WHERE id = ?"));
  GM_RETURN_IF_ERROR(st.BindAll(clock_(), run_id));
  GM_RETURN_IF_ERROR(st.Run());
  if (st.Changes() == 0) return Status::NotFound(path() + ": no run with id \"" + run_id + "\"");
  return Status::Ok();
}

Status SqliteRunStore::AddWorker(const std::string& run_id, const WorkerRecord& w) {
  std::lock_guard lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(R"sql(
      INSERT INTO workers (run_id, worker_id, host, pid, started_utc, step_id)
      VALUES (?, ?, ?, ?, ?, ?))sql"));
  GM_RETURN_IF_ERROR(st.BindAll(run_id, w.worker_id, w.host, w.pid,
                                w.started_utc.empty() ? clock_() : w.started_utc, w.step_id));
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
  std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
  GM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
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
  std::lock_guard lock(mu_);
  GM_ASSIGN_OR_RETURN(sqlite::Statement st, db_.Prepare(R"sql(
      SELECT worker_id, host, pid, step_id, started_utc, ended_utc, exit
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
    out.push_back(std::move(w));
  }
  return out;
}

Status SqliteRunStore::AddMetric(const std::string& run_id, const MetricPoint& point) {
  std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
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
