// The coordinator in a process of its own (launcher/coordinator_process.h): its
// summary and config as JSON, and the real `goldminer coordinator` started,
// killed with SIGKILL and started again from its journal on the same address.
#include "launcher/coordinator_process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <thread>

#include "core/os/file_util.h"
#include "dataplane/auth.h"
#include "dataplane/protocol.h"
#include "dataplane/socket.h"
#include "tests/unit/coordinator_fixture.h"

namespace gm {
namespace {

TEST(CoordinatorProcessTest, GivenASummaryThenItsJsonReadsBackTheSame) {
  CoordinatorSummary s;
  s.state.epoch = 3;
  s.state.epoch_done = true;
  s.state.acks = 17;
  s.state.rank_positions = {4, 5};
  WorkerStats w;
  w.id = 2;
  w.status = WorkerStatus::kDraining;
  w.splits_done = 6;
  s.state.workers.push_back(w);
  s.epochs_done = 3;
  s.worker_cpu_s = 1.5;
  s.failure = "lost";
  s.offload_notes = {"a note"};
  s.worker_stages[2] = {StageStats{"decode", 9, 0.5, 0, 0.7, 100, 200, 0}};
  s.places["7"] = {"gpu1", "12.3"};
  Result<CoordinatorSummary> back = SummaryFromJson(SummaryJson(s));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(SummaryJson(*back), SummaryJson(s));
  EXPECT_EQ(back->state.workers.at(0).status, WorkerStatus::kDraining);
  EXPECT_EQ(back->worker_stages.at(2).at(0).name, "decode");
  EXPECT_EQ(back->places.at("7").step, "12.3");
  EXPECT_FALSE(SummaryFromJson({{"state", 1}}).ok());
}

TEST(CoordinatorProcessTest, GivenAConfigThenItsJsonReadsBackWithoutTheSecret) {
  CoordinatorConfig c;
  c.secret = *NewSecret();
  c.port = 4321;
  c.world_size = 2;
  c.pipeline_doc = {{"version", 1}};
  c.journal_path = "/tmp/j";
  c.reconnect_s = 7;
  const nlohmann::json j = ConfigJson(c);
  EXPECT_FALSE(j.contains("secret")) << "the secret goes apart";
  Result<CoordinatorConfig> back = ConfigFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->port, 4321);
  EXPECT_EQ(back->world_size, 2);
  EXPECT_EQ(back->journal_path, "/tmp/j");
  EXPECT_EQ(back->reconnect_s, 7);
  EXPECT_EQ(ConfigJson(*back), j);
  EXPECT_FALSE(ConfigFromJson({{"port", "x"}}).ok());
}

// A run of a range source of 10 samples, journaling to `journal`.
CoordinatorConfig RangeConfig(const std::string& journal) {
  return testing::RangeRunConfig(*NewSecret(), journal);
}

// The pid of `goldminer coordinator` under this process.
pid_t CoordinatorChild() {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    Result<std::string> stat = ReadFile(entry.path().string() + "/stat");
    Result<std::string> cmd = ReadFile(entry.path().string() + "/cmdline");
    if (!stat.ok() || !cmd.ok()) continue;
    std::istringstream rest(stat->substr(stat->rfind(')') + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == ::getpid() && cmd->find(std::string("coordinator\0", 12)) != std::string::npos)
      return static_cast<pid_t>(std::stol(name));
  }
  return -1;
}

TEST(CoordinatorProcessTest, GivenTheChildKilled_ThenItIsStartedAgainOnItsAddressFromItsJournal) {
  Result<TempDir> dir = TempDir::Make("gm-coordinator-process-");
  ASSERT_TRUE(dir.ok());
  CoordinatorConfig c = RangeConfig(dir->path() + "/coordinator.journal");
  CoordinatorProcess::Options o;
  o.exe = GOLDMINER_BINARY;
  o.max_restarts = 1;
  auto p = CoordinatorProcess::Start(c, o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const std::string address = (*p)->address();
  // A worker registers: the journal holds it.
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  auto worker = Socket::ConnectTcp("127.0.0.1", port, 10);
  ASSERT_TRUE(worker.ok());
  ASSERT_TRUE(ClientHandshake(*worker, RoleKey(c.secret, kWorkerRole), "worker",
                              Deadline::After(10), nullptr)
                  .ok());
  ASSERT_TRUE(
      SendFrame(*worker, MsgType::kRegister, {{"data_addr", "127.0.0.1:9"}}, Deadline::After(10))
          .ok());
  ASSERT_TRUE(RecvFrame(*worker, FrameLimits{}, Deadline::After(10)).ok());
  EXPECT_EQ((*p)->Summary().workers_registered, 1u);

  const pid_t first = CoordinatorChild();
  ASSERT_GT(first, 0);
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  // Watch (run calls it every 0.2 s) finds it dead and starts it again.
  const Deadline deadline = Deadline::After(10);
  while ((*p)->restarts() == 0 && !deadline.expired()) {
    EXPECT_TRUE((*p)->Watch());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ((*p)->restarts(), 1);
  const CoordinatorSummary after = (*p)->Summary();
  EXPECT_EQ((*p)->address(), address) << "on the same address";
  EXPECT_EQ(after.workers_registered, 1u) << "the journal's worker";
  EXPECT_EQ(after.workers_live, 0u) << "not back yet";
  EXPECT_EQ((*p)->failure(), "");
  const pid_t second = CoordinatorChild();
  ASSERT_GT(second, 0);
  EXPECT_NE(second, first);

  // One death more than allowed fails it, saying so (found by Summary this time);
  // Summary keeps the last view.
  ASSERT_EQ(::kill(second, SIGKILL), 0);
  EXPECT_EQ((*p)->Summary().workers_registered, 1u);
  EXPECT_NE((*p)->failure().find("not started again"), std::string::npos) << (*p)->failure();
  (void)(*p)->Finish();
}

// A journal corrupted (a byte changed) or cut short (its last line torn) when the
// coordinator dies: not replayed; the failure names the file and line.
class JournalDamageTest : public ::testing::TestWithParam<bool> {};

TEST_P(JournalDamageTest, GivenAJournalDamagedWhenItDies_ThenTheFailureNamesTheLine) {
  const bool cut_short = GetParam();
  Result<TempDir> dir = TempDir::Make("gm-coordinator-process-");
  ASSERT_TRUE(dir.ok());
  CoordinatorConfig c = RangeConfig(dir->path() + "/coordinator.journal");
  CoordinatorProcess::Options o;
  o.exe = GOLDMINER_BINARY;
  auto p = CoordinatorProcess::Start(c, o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  Result<std::string> text = ReadFile(c.journal_path);
  ASSERT_TRUE(text.ok() && !text->empty());
  std::string bad = *text;
  if (cut_short) {
    bad.resize(bad.size() - 5);  // the last line without its end
  } else {
    bad[bad.find("\"op\"") + 2] = 'X';
  }
  ASSERT_TRUE(WriteFileAtomic(c.journal_path, bad).ok());
  ASSERT_EQ(::kill(CoordinatorChild(), SIGKILL), 0);
  (void)(*p)->Summary();
  const std::string want =
      cut_short ? "coordinator.journal:1: cut short" : "coordinator.journal:1: corrupted";
  EXPECT_NE((*p)->failure().find(want), std::string::npos) << (*p)->failure();
  EXPECT_NE((*p)->failure().find("could not be started again"), std::string::npos)
      << (*p)->failure();
  EXPECT_EQ((*p)->restarts(), 1);
}

INSTANTIATE_TEST_SUITE_P(CutShortOrCorrupted, JournalDamageTest, ::testing::Bool());

}  // namespace
}  // namespace gm
