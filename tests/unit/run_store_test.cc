// The run store: SqliteRunStore on real SQLite files in a per-test directory, and
// the same contract run on both SqliteRunStore and the MemoryRunStore fake.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/store/run_schema.h"
#include "core/store/run_store_fake.h"
#include "core/store/sqlite_db.h"
#include "core/store/sqlite_run_store.h"
#include "tests/unit/profile_fixture.h"
#include "tests/unit/test_util.h"

namespace gm {
namespace {

using testing::FullProfile;
using testing::TempDir;

constexpr const char* kNow = "2026-11-29T12:00:00Z";
std::string FixedClock() { return kNow; }

// A raw sqlite3 connection, independent of the code under test.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK) << path;
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  // The first column of the first row of `sql`, as text ("" when no row).
  std::string Query(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr), SQLITE_OK)
        << sql << ": " << sqlite3_errmsg(db_);
    std::string out;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    return out;
  }
  void Exec(const std::string& sql) {
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
        << sql << ": " << sqlite3_errmsg(db_);
  }

 private:
  sqlite3* db_ = nullptr;
};

std::unique_ptr<SqliteRunStore> OpenOrDie(const std::string& path) {
  Result<std::unique_ptr<SqliteRunStore>> store = SqliteRunStore::Open(path, FixedClock);
  EXPECT_TRUE(store.ok()) << store.status().message();
  return store.ok() ? std::move(store).value() : nullptr;
}

Profile SecondProfile() {
  Profile p = FullProfile();
  p.host = "cpu-node-3";
  p.verdict = "compute-bound";
  p.trainer->gpu = GpuProfile{};
  p.trainer->gpu.reason = "no CUDA device";
  p.pipeline->stages.pop_back();
  return p;
}

Plan APlan() {
  Plan p;
  p.run.pipeline = "pipeline.json";
  p.run.workers = 2;
  p.prediction.samples_per_s = 812.5;
  p.sources.profile_sha256 = ProfileDigest(FullProfile());
  return p;
}

// ---- SqliteRunStore on real files ------------------------------------------------

TEST(SqliteDbTest, GivenALinkAnotherUserPlantedInAWorldWritableFolder_ThenItIsNotFollowed) {
  TempDir dir;
  const std::string shared = dir.path() + "/shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);  // like /tmp
  const std::string target = dir.path() + "/target.db";
  const std::string planted = shared + "/runs.db";
  ASSERT_EQ(::symlink(target.c_str(), planted.c_str()), 0);
  const uid_t other = ::geteuid() == 65534 ? 65533 : 65534;
  // The suite runs as root (README); giving a link away needs it.
  ASSERT_EQ(::lchown(planted.c_str(), other, other), 0) << "lchown needs root";
  auto refused = sqlite::Database::Open(planted);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(
      refused.status().message().find("is a symbolic link owned by uid " + std::to_string(other)),
      std::string::npos)
      << refused.status().message();
  struct stat st {};
  EXPECT_NE(::stat(target.c_str(), &st), 0);  // nothing was created where it points
  // So is a planted PATH-wal beside a real file name.
  const std::string wal_link = shared + "/other.db-wal";
  ASSERT_EQ(::symlink(target.c_str(), wal_link.c_str()), 0);
  ASSERT_EQ(::lchown(wal_link.c_str(), other, other), 0);
  EXPECT_FALSE(sqlite::Database::Open(shared + "/other.db").ok());
  // Our own link, and any link outside such a folder, are followed.
  const std::string mine = shared + "/mine.db";
  ASSERT_EQ(::symlink(target.c_str(), mine.c_str()), 0);
  EXPECT_TRUE(sqlite::Database::Open(mine).ok());
  const std::string elsewhere = dir.path() + "/elsewhere.db";
  ASSERT_EQ(::symlink(target.c_str(), elsewhere.c_str()), 0);
  ASSERT_EQ(::lchown(elsewhere.c_str(), other, other), 0);
  EXPECT_TRUE(sqlite::Database::Open(elsewhere).ok());
  // A file another user put there first, in place of the one we would make.
  const std::string theirs = shared + "/theirs.db";
  dir.Write("shared/theirs.db", "");
  ASSERT_EQ(::chown(theirs.c_str(), other, other), 0);
  auto foreign = sqlite::Database::Open(theirs);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("belongs to uid " + std::to_string(other)),
            std::string::npos)
      << foreign.status().message();
  // A new database there is made ours before SQLite opens it.
  EXPECT_TRUE(sqlite::Database::Open(shared + "/new.db").ok());
  ASSERT_EQ(::stat((shared + "/new.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid());
  // A folder anyone may write to without the sticky bit: anything there can be
  // replaced by another user later, so it is refused.
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  auto open_folder = sqlite::Database::Open(shared + "/new.db");
  ASSERT_FALSE(open_folder.ok());
  EXPECT_NE(open_folder.status().message().find("has no sticky bit"), std::string::npos)
      << open_folder.status().message();
}

TEST(SqliteRunStoreTest, ProfilesSurviveAReopen) {
  TempDir dir;
  const std::string path = dir.path() + "/runs.db";
  // Given a new runs.db with two profiles
  {
    auto store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(*store->AddProfile(FullProfile()), 1);
    EXPECT_EQ(*store->AddProfile(SecondProfile()), 2);
  }
  // When it is opened again
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  // Then both come back as recorded
  Result<std::vector<ProfileSummary>> list = store->ListProfiles();
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->size(), 2u);
  ProfileSummary first = SummarizeProfile(FullProfile());
  first.id = 1;
  first.sha256 = ProfileDigest(FullProfile());
  ProfileSummary second = SummarizeProfile(SecondProfile());
  second.id = 2;
  second.sha256 = ProfileDigest(SecondProfile());
  EXPECT_EQ((*list)[0], first);
  EXPECT_EQ((*list)[1], second);
  EXPECT_EQ(*store->GetProfile(1), FullProfile());
  EXPECT_EQ(*store->GetProfile(2), SecondProfile());
}

TEST(SqliteRunStoreTest, TheSummaryRowHoldsTheFiguresOfTheProfile) {
  ProfileSummary s = SummarizeProfile(FullProfile());
  EXPECT_EQ(s.samples_per_s_1_thread, 630.1);
  EXPECT_EQ(s.samples_per_s_all_cores, 630.1 * 16);
  EXPECT_EQ(s.samples_per_s_per_core, 139.3);
  EXPECT_EQ(s.demand_samples_per_s, 1230.8);
  EXPECT_EQ(s.gpu_available, true);
  EXPECT_EQ(s.gpu_busy_fraction, 0.54);
  Profile bare = FullProfile();
  bare.pipeline.reset();
  bare.trainer.reset();
  s = SummarizeProfile(bare);
  EXPECT_FALSE(s.pipeline_path || s.samples_per_s_1_thread || s.demand_samples_per_s ||
               s.gpu_available || s.gpu_busy_fraction);
}

TEST(SqliteRunStoreTest, WritesOneStageCostRowPerStageAndTheSummaryColumns) {
  TempDir dir;
  const std::string path = dir.path() + "/runs.db";
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->AddProfile(FullProfile()).ok());    // 3 stages
  ASSERT_TRUE(store->AddProfile(SecondProfile()).ok());  // 2 stages
  Profile no_pipeline = FullProfile();
  no_pipeline.pipeline.reset();
  ASSERT_TRUE(store->AddProfile(no_pipeline).ok());

  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT count(*) FROM stage_costs"), "5");
  EXPECT_EQ(raw.Query("SELECT count(*) FROM stage_costs WHERE profile_id = 2"), "2");
  EXPECT_EQ(raw.Query("SELECT name || ',' || stateless || ',' || stage_index FROM stage_costs "
                      "WHERE profile_id = 1 AND stage_index = 1"),
            "shuffle_state,0,1");
  EXPECT_EQ(raw.Query("SELECT verdict FROM profiles WHERE id = 2"), "compute-bound");
  EXPECT_EQ(raw.Query("SELECT gpu_busy_fraction IS NULL FROM profiles WHERE id = 2"), "1");
  EXPECT_EQ(raw.Query("SELECT pipeline_path IS NULL FROM profiles WHERE id = 3"), "1");
  EXPECT_EQ(raw.Query("SELECT json_extract(json, '$.trainer.gpu.devices') FROM profiles "
                      "WHERE id = 1"),
            "2");
  EXPECT_EQ(raw.Query("SELECT kind || ': ' || message || ' @' || t_utc FROM events "
                      "WHERE profile_id = 2"),
            std::string("profile: profile recorded: compute-bound @") + kNow);
}

TEST(SqliteRunStoreTest, UsesTheCurrentSchemaVersionAndWal) {
  TempDir dir;
  const std::string path = dir.path() + "/runs.db";
  ASSERT_NE(OpenOrDie(path), nullptr);
  RawDb raw(path);
  EXPECT_EQ(raw.Query("PRAGMA user_version"), "5");
  EXPECT_EQ(raw.Query("PRAGMA journal_mode"), "wal");
  for (const char* table : {"runs", "profiles", "stage_costs", "plans", "workers", "metrics",
                            "events", "simulations", "pool_grants"}) {
    EXPECT_EQ(raw.Query(std::string("SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                                    "AND name = '") +
                        table + "'"),
              "1")
        << table;
  }
  // An index on every foreign key (workers' primary key starts with run_id).
  EXPECT_EQ(raw.Query("SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_master "
                      "WHERE type = 'index' AND name NOT LIKE 'sqlite_%' ORDER BY name)"),
            "events_profile_id events_run_id metrics_run_id_name_t_s plans_profile_id "
            "plans_sha256 pool_grants_run_id profiles_sha256 stage_costs_profile_id "
            "stage_costs_run_id");
  EXPECT_EQ(raw.Query("PRAGMA foreign_keys"), "0") << "a per-connection setting, off by default";
}

TEST(SqliteRunStoreTest, AVersion1FileIsMigratedForwardKeepingItsRuns) {
  TempDir dir;
  const std::string path = dir.path() + "/runs.db";
  {  // What version 1 wrote.
    RawDb raw(path);
    raw.Exec(SchemaSqlUpTo(1) +
             "INSERT INTO runs (id, started_utc, ended_utc, backend, pipeline_path, plan_path, "
             "command, world_size, status, exit_code) VALUES ('old', '2026-11-01T00:00:00Z', "
             "'2026-11-01T00:01:00Z', 'local', 'p.json', '', '[\"true\"]', 1, 'succeeded', 0);"
             "PRAGMA user_version = 1");
  }
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(RawDb(path).Query("PRAGMA user_version"), "5");
  RunRecord old = *store->GetRun("old");
  EXPECT_EQ(old.status, "succeeded");
  EXPECT_EQ(old.host, "");
  EXPECT_FALSE(old.heartbeat_utc.has_value());
  EXPECT_FALSE(old.plan_id.has_value());
  WorkerRecord w;
  w.worker_id = 0;
  w.host = "h";
  w.step_id = "1.0";
  ASSERT_TRUE(store->AddWorker("old", w).ok());
  EXPECT_EQ(store->ListWorkers("old")->at(0).step_id, "1.0");
}

TEST(SqliteRunStoreTest, AVersion2FileGetsTheDigestsOfItsProfilesAndPlans) {
  TempDir dir;
  const std::string path = dir.path() + "/runs.db";
  const std::string profile = *StoredProfileJson(FullProfile());
  const std::string plan = StoredPlanJson(APlan());
  {  // What version 2 wrote: a profile and a plan from it, without digests.
    RawDb raw(path);
    raw.Exec(SchemaSqlUpTo(2) + "PRAGMA user_version = 2");
    raw.Exec(
        "INSERT INTO profiles (created_utc, host, verdict, input_bound_fraction, json) "
        "VALUES ('2026-11-01T00:00:00Z', 'h', 'input-bound', 0.5, '" +
        profile + "')");
    raw.Exec(
        "INSERT INTO plans (created_utc, profile_id, json) VALUES "
        "('2026-11-01T00:00:01Z', 1, '" +
        plan + "')");
  }
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->ListProfiles()->at(0).sha256, ProfileDigest(FullProfile()));
  EXPECT_EQ(store->ListPlans()->at(0).sha256, PlanDigest(APlan()));
  EXPECT_EQ(*store->FindProfile(ProfileDigest(FullProfile())), std::optional<int64_t>(1));
  EXPECT_EQ(*store->FindPlan(PlanDigest(APlan())), std::optional<int64_t>(1));
}

TEST(SqliteRunStoreTest, AFileThatIsNotADatabaseIsCorrupt) {
  TempDir dir;
  const std::string path =
      dir.Write("runs.db", std::string(4096, 'x') + "\nthis is not a SQLite database\n");
  Result<std::unique_ptr<SqliteRunStore>> store = SqliteRunStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kCorrupt);
  EXPECT_EQ(store.status().message(),
            path + " is not a goldminer runs.db (file is not a database)");
}

TEST(SqliteRunStoreTest, AFileFromANewerGoldminerIsRefused) {
  TempDir dir;
  const std::string path = dir.path() + "/runs.db";
  {
    RawDb raw(path);
    raw.Exec("CREATE TABLE runs (id TEXT); PRAGMA user_version = 7");
  }
  Result<std::unique_ptr<SqliteRunStore>> store = SqliteRunStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store.status().message(),
            path +
                " was written by a newer goldminer (schema 7; this one reads up to 5): "
                "use that goldminer, or another runs.db");
  EXPECT_EQ(RawDb(path).Query("PRAGMA user_version"), "7") << "left as it was";
}

TEST(SqliteRunStoreTest, AMissingDirectoryIsAnIoErrorNamingThePath) {
  TempDir dir;
  const std::string path = dir.path() + "/no/such/dir/runs.db";
  Result<std::unique_ptr<SqliteRunStore>> store = SqliteRunStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kIoError);
  EXPECT_EQ(store.status().message(),
            path + ": cannot open runs.db: " + dir.path() +
                "/no/such/dir does not exist (create the directory first, or choose another "
                "path)");
}

TEST(SqliteRunStoreTest, AnotherProgramsDatabaseAtVersion0GetsTheSchemaBesideItsTables) {
  TempDir dir;
  const std::string path = dir.path() + "/notes.db";
  RawDb(path).Exec("CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('keep me')");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->AddProfile(FullProfile()), 1);
  RawDb raw(path);
  EXPECT_EQ(raw.Query("PRAGMA user_version"), "5");
  EXPECT_EQ(raw.Query("SELECT text FROM notes"), "keep me");
}

TEST(SqliteRunStoreTest, AVersion0DatabaseWithATableOfOurNamesIsRefusedAndLeftAlone) {
  TempDir dir;
  const std::string path = dir.path() + "/other.db";
  RawDb(path).Exec("CREATE TABLE events (at TEXT)");
  Result<std::unique_ptr<SqliteRunStore>> store = SqliteRunStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store.status().message(),
            path + ": creating schema 1: table events already exists (" + path +
                " is a SQLite database but not a goldminer runs.db; choose another path)");
  // The migration ran in one transaction: nothing of ours was left behind.
  RawDb raw(path);
  EXPECT_EQ(raw.Query("PRAGMA user_version"), "0");
  EXPECT_EQ(raw.Query("SELECT count(*) FROM sqlite_master WHERE name = 'profiles'"), "0");
}

TEST(SqliteRunStoreTest, TwoConnectionsWriteConcurrentlyWithoutBusyErrors) {
  TempDir dir;
  const std::string path = dir.path() + "/runs.db";
  auto a = OpenOrDie(path);
  auto b = OpenOrDie(path);
  ASSERT_TRUE(a && b);
  constexpr int kEach = 200;
  // When two threads write through their own connection at the same time
  auto writer = [](RunStore* store, const std::string& run_id, std::vector<Status>* errors) {
    RunRecord run;
    run.id = run_id;
    run.backend = "local";
    if (Status st = store->BeginRun(run); !st.ok()) errors->push_back(st);
    for (int i = 0; i < kEach; ++i) {
      if (Result<int64_t> id = store->AddProfile(FullProfile()); !id.ok()) {
        errors->push_back(id.status());
      }
      if (Status st = store->AddMetric(run_id, MetricPoint{i * 0.5, "workers", i * 1.0});
          !st.ok()) {
        errors->push_back(st);
      }
    }
  };
  std::vector<Status> errors_a, errors_b;
  std::thread ta(writer, a.get(), "run-a", &errors_a);
  std::thread tb(writer, b.get(), "run-b", &errors_b);
  ta.join();
  tb.join();
  // Then nothing failed and every row is there
  for (const Status& st : errors_a) ADD_FAILURE() << "a: " << st.message();
  for (const Status& st : errors_b) ADD_FAILURE() << "b: " << st.message();
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT count(*) FROM profiles"), std::to_string(2 * kEach));
  EXPECT_EQ(raw.Query("SELECT count(*) FROM stage_costs"), std::to_string(2 * kEach * 3));
  EXPECT_EQ(raw.Query("SELECT count(*) FROM events"), std::to_string(2 * kEach));
  EXPECT_EQ(raw.Query("SELECT count(*) FROM metrics"), std::to_string(2 * kEach));
  EXPECT_EQ(raw.Query("SELECT count(DISTINCT id) FROM profiles"), std::to_string(2 * kEach));
}

TEST(SqliteRunStoreTest, AProfileIsRecordedAllOrNothing) {
  TempDir dir;
  const std::string path = dir.path() + "/runs.db";
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  // Given a database that refuses the profile's last row (its event)
  RawDb(path).Exec(
      "CREATE TRIGGER no_events BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'no events "
      "today'); END");
  // When a profile is added, Then the error says why, and nothing of it was kept
  Result<int64_t> id = store->AddProfile(FullProfile());
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().message(), path + ": INSERT INTO events: no events today");
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT count(*) FROM profiles"), "0");
  EXPECT_EQ(raw.Query("SELECT count(*) FROM stage_costs"), "0");
  // And the store still works once the obstacle is gone
  raw.Exec("DROP TRIGGER no_events");
  EXPECT_TRUE(store->AddProfile(FullProfile()).ok());
  EXPECT_EQ(raw.Query("SELECT count(*) FROM stage_costs"), "3");
}

TEST(SqliteRunStoreTest, AHandEditedProfileThatNoLongerReadsNamesTheRow) {
  TempDir dir;
  const std::string path = dir.path() + "/runs.db";
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->AddProfile(FullProfile()).ok());
  RawDb(path).Exec("UPDATE profiles SET json = json_set(json, '$.cores', 'many')");
  Result<Profile> p = store->GetProfile(1);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), path + ": profile 1: $.cores: expected an integer, got \"many\"");
}

// ---- The contract, on both stores ------------------------------------------------

struct SqliteStoreMaker {
  TempDir dir;
  std::unique_ptr<RunStore> Make() { return OpenOrDie(dir.path() + "/runs.db"); }
};

struct MemoryStoreMaker {
  std::unique_ptr<RunStore> Make() { return std::make_unique<MemoryRunStore>(FixedClock); }
};

template <typename Maker>
class RunStoreContractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = maker_.Make();
    ASSERT_NE(store_, nullptr);
  }
  // The message of a store's error without the store's name (a path or "memory
  // run store"), which is all that differs between the two.
  static std::string Tail(const Status& status) {
    const std::string& m = status.message();
    const size_t at = m.find(": ");
    return at == std::string::npos ? m : m.substr(at + 2);
  }
  RunRecord Run(const std::string& id) {
    RunRecord run;
    run.id = id;
    run.started_utc = "2026-11-29T11:00:00Z";
    run.backend = "slurm";
    run.pipeline_path = "pipeline.json";
    run.plan_path = "plan.json";
    run.command = {"python3", "train.py", "--lr", "0.1"};
    run.world_size = 8;
    return run;
  }
  Maker maker_;
  std::unique_ptr<RunStore> store_;
};

using StoreMakers = ::testing::Types<SqliteStoreMaker, MemoryStoreMaker>;
TYPED_TEST_SUITE(RunStoreContractTest, StoreMakers);

TYPED_TEST(RunStoreContractTest, ProfilesGetIdsFrom1AndReadBackEqual) {
  RunStore& store = *this->store_;
  EXPECT_EQ(*store.AddProfile(FullProfile()), 1);
  EXPECT_EQ(*store.AddProfile(SecondProfile()), 2);
  const std::vector<ProfileSummary> list = *store.ListProfiles();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, 1);
  EXPECT_EQ(list[1].host, "cpu-node-3");
  EXPECT_EQ(*store.GetProfile(2), SecondProfile());
  Result<Profile> missing = store.GetProfile(3);
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(this->Tail(missing.status()), "no profile with id 3");
}

TYPED_TEST(RunStoreContractTest, SimulationsGetIdsFrom1AndReadBackEqual) {
  RunStore& store = *this->store_;
  SimulationRecord a;
  a.trace = "pods.csv";
  a.nodes = "nodes.csv";
  a.gpus = 64;
  a.load = 4;
  a.seed = 7;
  a.policies = "static,job,cluster";
  a.jct_static_over_cluster = 1.33;
  a.gpu_util_effective_cluster_over_static = 1.01;
  a.json = R"({"schema":"goldminer.sim","version":1})";
  SimulationRecord b = a;
  b.policies = "static";
  b.jct_static_over_cluster.reset();
  b.gpu_util_effective_cluster_over_static.reset();
  EXPECT_EQ(*store.AddSimulation(a), 1);
  EXPECT_EQ(*store.AddSimulation(b), 2);
  const std::vector<SimulationRecord> all = *store.ListSimulations();
  ASSERT_EQ(all.size(), 2u);
  SimulationRecord want = a;
  want.id = 1;
  want.created_utc = all[0].created_utc;
  EXPECT_FALSE(all[0].created_utc.empty());
  EXPECT_EQ(all[0], want);
  EXPECT_EQ(*store.GetSimulation(2), all[1]);
  EXPECT_FALSE(all[1].jct_static_over_cluster.has_value()) << "NULL unless both policies ran";
  Result<SimulationRecord> missing = store.GetSimulation(3);
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(this->Tail(missing.status()), "no simulation with id 3");
}

TYPED_TEST(RunStoreContractTest, AProfileThatWouldNotReadBackIsRefused) {
  Profile p = FullProfile();
  p.verdict = "";
  Result<int64_t> id = this->store_->AddProfile(p);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(id.status().message(),
            "cannot record the profile: profile: $.verdict: expected \"input-bound\", "
            "\"compute-bound\" or \"unknown\", got \"\"");
  EXPECT_TRUE(this->store_->ListProfiles()->empty());
  EXPECT_TRUE(this->store_->ListEvents()->empty());
}

TYPED_TEST(RunStoreContractTest, EventsAreStampedNumberedAndMustNameKnownThings) {
  RunStore& store = *this->store_;
  ASSERT_TRUE(store.AddProfile(FullProfile()).ok());
  ASSERT_TRUE(store.BeginRun(this->Run("r1")).ok());
  EventRecord scale;
  scale.run_id = "r1";
  scale.kind = "scale";
  scale.message = "workers 2 -> 4";
  ASSERT_TRUE(store.AddEvent(scale).ok());
  EventRecord dated;
  dated.t_utc = "2026-01-02T03:04:05Z";
  dated.kind = "note";
  dated.message = "by hand";
  ASSERT_TRUE(store.AddEvent(dated).ok());

  EventRecord unknown_run = scale;
  unknown_run.run_id = "r2";
  Status st = store.AddEvent(unknown_run);
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_EQ(this->Tail(st),
            "cannot record event \"workers 2 -> 4\": run \"r2\" or profile 0 is not recorded");
  EventRecord unknown_profile;
  unknown_profile.profile_id = 9;
  unknown_profile.kind = "profile";
  EXPECT_EQ(store.AddEvent(unknown_profile).code(), Code::kNotFound);

  const std::vector<EventRecord> events = *store.ListEvents();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0],
            (EventRecord{1, std::nullopt, 1, kNow, "profile", "profile recorded: input-bound"}));
  EXPECT_EQ(events[1], (EventRecord{2, "r1", std::nullopt, kNow, "scale", "workers 2 -> 4"}));
  EXPECT_EQ(events[2], (EventRecord{3, std::nullopt, std::nullopt, "2026-01-02T03:04:05Z", "note",
                                    "by hand"}));
}

TYPED_TEST(RunStoreContractTest, ARunBeginsEndsAndKeepsItsMetrics) {
  RunStore& store = *this->store_;
  RunRecord run = this->Run("job-17");
  run.ended_utc = "ignored";
  run.exit_code = 5;
  ASSERT_TRUE(store.BeginRun(run).ok());
  RunRecord started = this->Run("job-17");
  started.heartbeat_utc = started.started_utc;  // BeginRun is the first sign of life
  EXPECT_EQ(*store.GetRun("job-17"), started);

  Status again = store.BeginRun(run);
  EXPECT_EQ(again.code(), Code::kInvalidArgument);
  EXPECT_EQ(this->Tail(again), "a run with id \"job-17\" is already recorded");

  ASSERT_TRUE(store.AddMetric("job-17", MetricPoint{0.5, "workers", 2}).ok());
  ASSERT_TRUE(store.AddMetric("job-17", MetricPoint{1.5, "samples_per_s", 812.25}).ok());
  ASSERT_TRUE(store.AddMetric("job-17", MetricPoint{1.0, "workers", 4}).ok());
  EXPECT_EQ(*store.ListMetrics("job-17"),
            (std::vector<MetricPoint>{
                {0.5, "workers", 2}, {1.5, "samples_per_s", 812.25}, {1.0, "workers", 4}}));
  EXPECT_TRUE(store.ListMetrics("other")->empty());
  Status no_run = store.AddMetric("other", MetricPoint{0, "workers", 1});
  EXPECT_EQ(no_run.code(), Code::kNotFound);
  EXPECT_EQ(this->Tail(no_run), "no run with id \"other\"");

  ASSERT_TRUE(store.EndRun("job-17", "succeeded", 0).ok());
  RunRecord ended = started;
  ended.ended_utc = kNow;
  ended.status = "succeeded";
  ended.exit_code = 0;
  EXPECT_EQ(*store.GetRun("job-17"), ended);
  EXPECT_EQ(store.EndRun("nope", "failed", 1).code(), Code::kNotFound);
  EXPECT_EQ(this->Tail(store.GetRun("nope").status()), "no run with id \"nope\"");
}

TYPED_TEST(RunStoreContractTest, ARunKeepsWhereItRanAndItsHeartbeat) {
  RunStore& store = *this->store_;
  RunRecord run = this->Run("a");
  run.job_id = "4711";
  run.host = "gpu-node-1";
  run.pid = 31337;
  ASSERT_TRUE(store.BeginRun(run).ok());
  ASSERT_TRUE(store.BeginRun(this->Run("b")).ok());
  EXPECT_EQ(store.GetRun("a")->heartbeat_utc, "2026-11-29T11:00:00Z");
  ASSERT_TRUE(store.Heartbeat("a").ok());
  RunRecord beat = run;
  beat.heartbeat_utc = kNow;
  EXPECT_EQ(*store.GetRun("a"), beat);
  EXPECT_EQ(store.Heartbeat("nope").code(), Code::kNotFound);
  const std::vector<RunRecord> runs = *store.ListRuns();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0], beat);
  EXPECT_EQ(runs[1].id, "b");
  EXPECT_FALSE(runs[1].job_id.has_value());
}

TYPED_TEST(RunStoreContractTest, WorkersStartAndEndWithinTheirRun) {
  RunStore& store = *this->store_;
  ASSERT_TRUE(store.BeginRun(this->Run("r")).ok());
  WorkerRecord w0;
  w0.worker_id = 0;
  w0.host = "cpu-1";
  w0.pid = 100;
  w0.ended_utc = "ignored";
  w0.exit = "ignored";
  WorkerRecord w1;
  w1.worker_id = 1;
  w1.host = "cpu-2";
  w1.step_id = "4712.0";
  w1.elastic = true;  // a job of its own: 4712
  w1.started_utc = "2026-11-29T11:00:01Z";
  ASSERT_TRUE(store.AddWorker("r", w1).ok());
  ASSERT_TRUE(store.AddWorker("r", w0).ok());
  Status again = store.AddWorker("r", w0);
  EXPECT_EQ(again.code(), Code::kInvalidArgument);
  EXPECT_EQ(this->Tail(again), "run \"r\" already has worker 0");
  EXPECT_EQ(store.AddWorker("nope", w0).code(), Code::kNotFound);
  ASSERT_TRUE(store.EndWorker("r", 0, "was killed by signal 9 (Killed)").ok());
  EXPECT_EQ(store.EndWorker("r", 7, "x").code(), Code::kNotFound);
  EXPECT_EQ(this->Tail(store.EndWorker("r", 7, "x")), "run \"r\" has no worker 7");

  const std::vector<WorkerRecord> workers = *store.ListWorkers("r");
  ASSERT_EQ(workers.size(), 2u);
  WorkerRecord ended0 = w0;
  ended0.started_utc = kNow;
  ended0.ended_utc = kNow;
  ended0.exit = "was killed by signal 9 (Killed)";
  EXPECT_EQ(workers[0], ended0);
  EXPECT_EQ(workers[1], w1);
  EXPECT_TRUE(store.ListWorkers("other")->empty());
}

TYPED_TEST(RunStoreContractTest, PoolGrantsAreNumberedStampedAndKeptPerRun) {
  RunStore& store = *this->store_;
  ASSERT_TRUE(store.BeginRun(this->Run("r")).ok());
  ASSERT_TRUE(store.BeginRun(this->Run("s")).ok());
  PoolGrantRecord g{
      0, "", 2, 4, 1, "divided anew: 8 CPUs over 2 runs", R"({"run_id":"r","rates":[[1,100]]})"};
  ASSERT_TRUE(store.AddPoolGrant("r", g).ok());
  PoolGrantRecord h{99, "2026-12-03T10:00:00Z", 0, 0, 2, "", "{}"};
  ASSERT_TRUE(store.AddPoolGrant("s", h).ok());
  ASSERT_TRUE(store.AddPoolGrant("r", h).ok());
  EXPECT_EQ(store.AddPoolGrant("nope", g).code(), Code::kNotFound);
  EXPECT_EQ(this->Tail(store.AddPoolGrant("nope", g)), "no run with id \"nope\"");
  const std::vector<PoolGrantRecord> r = *store.ListPoolGrants("r");
  ASSERT_EQ(r.size(), 2u);
  g.id = 1;
  g.t_utc = kNow;
  EXPECT_EQ(r[0], g);
  h.id = 3;
  EXPECT_EQ(r[1], h) << "a given time is kept; the id is the store's";
  ASSERT_EQ(store.ListPoolGrants("s")->size(), 1u);
  EXPECT_EQ(store.ListPoolGrants("s")->at(0).id, 2);
  EXPECT_TRUE(store.ListPoolGrants("other")->empty());
}

TYPED_TEST(RunStoreContractTest, AWorkersPlaceIsRecordedWhenItIsKnown) {
  RunStore& store = *this->store_;
  ASSERT_TRUE(store.BeginRun(this->Run("r")).ok());
  WorkerRecord w;
  w.worker_id = 3;
  w.host = "gpu1";  // where the run is: the worker's node is not known yet
  ASSERT_TRUE(store.AddWorker("r", w).ok());
  ASSERT_TRUE(store.PlaceWorker("r", 3, "cpu1", "4711.5").ok());
  WorkerRecord got = store.ListWorkers("r")->at(0);
  EXPECT_EQ(got.host, "cpu1");
  EXPECT_EQ(got.step_id, std::optional<std::string>("4711.5"));
  ASSERT_TRUE(store.PlaceWorker("r", 3, "vm", "").ok());  // a local worker: no step
  got = store.ListWorkers("r")->at(0);
  EXPECT_EQ(got.host, "vm");
  EXPECT_FALSE(got.step_id.has_value());
  EXPECT_EQ(store.PlaceWorker("r", 9, "x", "").code(), Code::kNotFound);
  EXPECT_EQ(store.PlaceWorker("nope", 3, "x", "").code(), Code::kNotFound);
}

TYPED_TEST(RunStoreContractTest, ARunsStageCostsAreReplacedWhole) {
  RunStore& store = *this->store_;
  ASSERT_TRUE(store.BeginRun(this->Run("r")).ok());
  StageProfile decode;
  decode.index = 0;
  decode.name = "decode_jpeg";
  decode.cpu_s_per_sample = 0.002;
  decode.wall_s_per_sample = 0.0021;
  decode.bytes_in_per_sample = 50000;
  decode.bytes_out_per_sample = 150528;
  StageProfile flip = decode;
  flip.index = 1;
  flip.name = "flip";
  flip.cpu_s_per_sample = 0.0001;
  ASSERT_TRUE(store.SetRunStageCosts("r", {decode, flip}).ok());
  EXPECT_EQ(*store.ListRunStageCosts("r"), (std::vector<StageProfile>{decode, flip}));
  decode.cpu_s_per_sample = 0.003;
  ASSERT_TRUE(store.SetRunStageCosts("r", {decode}).ok());
  EXPECT_EQ(*store.ListRunStageCosts("r"), (std::vector<StageProfile>{decode}));
  EXPECT_EQ(store.SetRunStageCosts("nope", {decode}).code(), Code::kNotFound);
  EXPECT_TRUE(store.ListRunStageCosts("nope")->empty());
}

TYPED_TEST(RunStoreContractTest, ARunWithoutAStartTimeIsStampedByTheClock) {
  RunRecord run = this->Run("r");
  run.started_utc.clear();
  ASSERT_TRUE(this->store_->BeginRun(run).ok());
  EXPECT_EQ(this->store_->GetRun("r")->started_utc, kNow);
}

TYPED_TEST(RunStoreContractTest, ThreadsSharingOneStoreLoseNothing) {
  RunStore& store = *this->store_;
  ASSERT_TRUE(store.BeginRun(this->Run("r")).ok());
  constexpr int kEach = 25;
  auto writer = [&store](int thread) {
    for (int i = 0; i < kEach; ++i) {
      EXPECT_TRUE(store.AddMetric("r", MetricPoint{i * 1.0, "t" + std::to_string(thread), 1}).ok());
      EXPECT_TRUE(store.AddProfile(SecondProfile()).ok());
    }
  };
  std::thread t1(writer, 1);
  std::thread t2(writer, 2);
  t1.join();
  t2.join();
  EXPECT_EQ(store.ListMetrics("r")->size(), 2u * kEach);
  EXPECT_EQ(store.ListProfiles()->size(), 2u * kEach);
  EXPECT_EQ(store.ListProfiles()->back().id, 2 * kEach);
}

TEST(MemoryRunStoreTest, FailWritesMakesWritesFailUntilCleared) {
  MemoryRunStore store(FixedClock);
  store.FailWrites(Status::IoError("disk full"));
  EXPECT_EQ(store.AddProfile(FullProfile()).status().message(), "disk full");
  EXPECT_EQ(store.AddEvent(EventRecord{}).message(), "disk full");
  store.FailWrites(Status::Ok());
  EXPECT_EQ(*store.AddProfile(FullProfile()), 1);
  EXPECT_EQ(store.stage_cost_rows(), 3u);
}

}  // namespace
}  // namespace gm
