#include "core/store/run_schema.h"

#include <filesystem>
#include <iterator>

#include "core/digest.h"

namespace gm {
namespace {

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
  Status (*backfill)(sqlite::Database& db) = nullptr;  // after the SQL, in its transaction
};
// Version 2: what `goldminer run` records of itself and of Slurm.
constexpr const char* kSchemaV2 = R"sql(
ALTER TABLE runs ADD COLUMN job_id TEXT;         -- SLURM_JOB_ID; NULL outside Slurm
ALTER TABLE runs ADD COLUMN host TEXT;           -- where `goldminer run` ran
ALTER TABLE runs ADD COLUMN pid INTEGER;         -- its process id
ALTER TABLE runs ADD COLUMN heartbeat_utc TEXT;  -- its last sign of life (every few seconds)
ALTER TABLE workers ADD COLUMN step_id TEXT;     -- Slurm JOB.STEP; NULL on the local backend
)sql";

// Version 3: records that point at each other by content digest, not by guesswork: a
// plan names its profile by the profile's digest, a run its plan's row.
constexpr const char* kSchemaV3 = R"sql(
ALTER TABLE profiles ADD COLUMN sha256 TEXT;  -- SHA-256 of json (ProfileDigest)
ALTER TABLE plans ADD COLUMN sha256 TEXT;     -- SHA-256 of json (PlanDigest)
ALTER TABLE runs ADD COLUMN plan_id INTEGER REFERENCES plans(id) ON DELETE SET NULL;
CREATE INDEX profiles_sha256 ON profiles(sha256);
CREATE INDEX plans_sha256 ON plans(sha256);
)sql";

// Version 4: what `goldminer simulate --db` records (goldminer-simulate(1)).
constexpr const char* kSchemaV4 = R"sql(
-- One `goldminer simulate`: its inputs, the paper's two ratios, and the whole sim.json.
CREATE TABLE simulations (
  id                  INTEGER PRIMARY KEY AUTOINCREMENT,
  created_utc         TEXT NOT NULL,
  trace               TEXT NOT NULL,  -- the --trace file as given
  nodes               TEXT NOT NULL,  -- the --nodes file as given
  gpus                INTEGER NOT NULL,  -- GPUs of the cluster replayed
  load                REAL NOT NULL,     -- --load
  seed                INTEGER NOT NULL,
  policies            TEXT NOT NULL,     -- comma-separated, as run
  jct_static_over_cluster REAL,          -- NULL unless both ran
  gpu_util_effective_cluster_over_static REAL,
  json                TEXT NOT NULL      -- the sim.json document (compact)
);
)sql";

// Version 5: elastic worker jobs and the pool's grants (goldminer-run(1), ELASTIC
// WORKERS).
constexpr const char* kSchemaV5 = R"sql(
ALTER TABLE workers ADD COLUMN elastic INTEGER NOT NULL DEFAULT 0;  -- 1: a job of its own (step_id's JOB)
-- What a pool answered a run, when its grant changed (and the first answer).
CREATE TABLE pool_grants (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id        TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  t_utc         TEXT NOT NULL,
  extra_workers INTEGER NOT NULL,  -- elastic workers the pool grants the run
  cpus          INTEGER NOT NULL,  -- their CPUs
  held_workers  INTEGER NOT NULL,  -- elastic workers the run held when it reported
  reason        TEXT NOT NULL,     -- the pool's words ('' when it gave none)
  report        TEXT NOT NULL      -- the POOL_REPORT answered (JSON): the decision's inputs
);
CREATE INDEX pool_grants_run_id ON pool_grants(run_id);
)sql";

// The digests of the rows recorded before version 3 (runs keep no plan_id: which
// plan they ran was not recorded).
Status BackfillDigests(sqlite::Database& db) {
  for (const char* table : {"profiles", "plans"}) {
    GM_ASSIGN_OR_RETURN(sqlite::Statement read,
                        db.Prepare(std::string("SELECT id, json FROM ") + table));
    GM_ASSIGN_OR_RETURN(sqlite::Statement write, db.Prepare(std::string("UPDATE ") + table +
                                                            " SET sha256 = ? WHERE id = ?"));
    for (;;) {
      GM_ASSIGN_OR_RETURN(bool row, read.Step());
      if (!row) break;
      GM_RETURN_IF_ERROR(write.BindAll(Sha256Hex(read.Text(1)), read.Int(0)));
      GM_RETURN_IF_ERROR(write.Run());
      GM_RETURN_IF_ERROR(write.Reset());
    }
  }
  return Status::Ok();
}

constexpr Migration kMigrations[] = {{1, kSchemaV1},
                                     {2, kSchemaV2},
                                     {3, kSchemaV3, BackfillDigests},
                                     {4, kSchemaV4},
                                     {5, kSchemaV5}};
static_assert(std::size(kMigrations) == kRunStoreSchemaVersion, "one migration per version");

}  // namespace

Status CheckRunsDbDirectory(const std::string& path) {
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

namespace {

// Per-connection settings. journal_mode is the first statement that reads the file,
// so a file that is not a database fails here.
Status Configure(sqlite::Database& db) {
  GM_RETURN_IF_ERROR(db.SetBusyTimeout(kRunStoreBusyTimeoutMs));
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
    if (m.backfill != nullptr) GM_RETURN_IF_ERROR(m.backfill(db));
  }
  GM_RETURN_IF_ERROR(db.Exec("PRAGMA user_version = " + std::to_string(kRunStoreSchemaVersion)));
  return tx.Commit();
}

}  // namespace

std::string SchemaSqlUpTo(int version) {
  std::string sql;
  for (const Migration& m : kMigrations) {
    if (m.to_version <= version) sql += m.sql;
  }
  return sql;
}

Status PrepareRunsDb(sqlite::Database& db) {
  GM_RETURN_IF_ERROR(Configure(db));
  return Migrate(db);
}

}  // namespace gm
