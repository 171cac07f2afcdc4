// A coordinator that dies costs the run no progress: the real coordinator, data
// worker and trainer client over real sockets; the coordinator is stopped
// mid-epoch (it writes nothing more, as a crash) and started again on its port
// from its journal; the worker and the trainer come back in their id and session,
// and every batch of the epoch reaches the trainer exactly once.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "client/client.h"
#include "core/os/file_util.h"
#include "dataplane/auth.h"
#include "dataplane/messages.h"
#include "dataplane/messages_control.h"
#include "dataplane/protocol.h"
#include "dataplane/socket.h"
#include "launcher/coordinator_server.h"
#include "tests/unit/coordinator_fixture.h"
#include "worker/worker_service.h"

namespace gm {
namespace {

constexpr double kWait = 30;

// 40 samples in splits of 4, batches of 2: 10 splits of 2 batches.
CoordinatorConfig Config(const std::string& secret, const std::string& journal, int port) {
  CoordinatorConfig c = testing::RangeRunConfig(secret, journal, 40);
  c.epochs = 1;
  c.port = port;
  c.heartbeat_s = 0.1;
  return c;
}

TEST(CoordinatorRestartTest,
     GivenTheCoordinatorStoppedMidEpochAndStartedAgain_ThenEveryBatchArrivesOnceAndTheRunEnds) {
  Result<TempDir> dir = TempDir::Make("gm-restart-");
  ASSERT_TRUE(dir.ok());
  const std::string journal = dir->path() + "/coordinator.journal";
  const std::string secret = *NewSecret();
  auto first = CoordinatorServer::Start(Config(secret, journal, 0));
  ASSERT_TRUE(first.ok()) << first.status().message();
  std::unique_ptr<CoordinatorServer> server = std::move(*first);
  const std::string address = server->address();
  const int port = std::stoi(address.substr(address.rfind(':') + 1));

  WorkerServiceOptions wo;
  wo.coordinator = address;
  wo.secret = RoleKey(secret, kWorkerRole);
  wo.max_virtual_workers = 0;
  auto worker = WorkerService::Start(wo);
  ASSERT_TRUE(worker.ok()) << worker.status().message();
  auto worker_run = std::async(std::launch::async, [&] { return (*worker)->Run(); });

  ClientOptions co;
  co.coordinator = address;
  co.secret = RoleKey(secret, kClientRole);
  co.rank = 0;
  co.world_size = 1;
  co.timeout_s = kWait;
  co.reconnect_s = kWait;
  auto client = Client::Connect(co);
  ASSERT_TRUE(client.ok()) << client.status().message();

  std::multiset<std::pair<uint64_t, uint64_t>> got;
  const auto take = [&](int n) {
    for (int i = 0; i < n; ++i) {
      Result<std::optional<Batch>> next = (*client)->Next();
      ASSERT_TRUE(next.ok()) << next.status().message();
      if (!next->has_value()) return;
      got.emplace((*next)->split, (*next)->split_batch);
    }
  };
  ASSERT_NO_FATAL_FAILURE(take(7));
  ASSERT_EQ(got.size(), 7u);

  // The coordinator goes away mid-epoch; one is started again on its port.
  server.reset();
  auto again = CoordinatorServer::Start(Config(secret, journal, port));
  ASSERT_TRUE(again.ok()) << again.status().message();
  server = std::move(*again);

  ASSERT_NO_FATAL_FAILURE(take(100));
  std::multiset<std::pair<uint64_t, uint64_t>> want;
  for (uint64_t split = 0; split < 10; ++split) {
    want.emplace(split, 0);
    want.emplace(split, 1);
  }
  EXPECT_EQ(got, want) << "every batch of the epoch once";
  ASSERT_TRUE(server->WaitFinished(kWait)) << "the run ends at the coordinator started again";
  const CoordinatorSummary summary = server->Summary();
  EXPECT_EQ(summary.failure, "");
  EXPECT_EQ(summary.state.acks, 20u);
  EXPECT_EQ(summary.workers_live, 1u) << "the worker came back";
  ASSERT_EQ(summary.state.workers.size(), 1u) << "under its id";
  client->reset();
  server->EndWorkers();
  ASSERT_EQ(worker_run.wait_for(std::chrono::duration<double>(kWait)), std::future_status::ready);
  EXPECT_TRUE(worker_run.get().ok());
}

// A worker the coordinator drops on purpose (a trainer's FAULT) does not dial back
// as one whose coordinator died would, for reconnect_s: a coordinator that
// answers its return with ERROR (coordinator_server_test: one dropped on a
// trainer's report is refused) ends it at once, for its launcher to replace it.
// Here the coordinator is a test's, speaking the protocol over a real socket.
TEST(CoordinatorRestartTest, GivenTheCoordinatorRefusesAReturningWorker_ThenItExitsAtOnce) {
  const std::string secret = *NewSecret();
  auto listener = Listener::ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status().message();
  WorkerServiceOptions wo;
  wo.coordinator = "127.0.0.1:" + std::to_string(listener->port());
  wo.secret = RoleKey(secret, kWorkerRole);
  wo.max_virtual_workers = 0;
  // The coordinator's side: a worker's connection, its handshake and REGISTER.
  const auto accept_register = [&]() -> Result<Socket> {
    GM_ASSIGN_OR_RETURN(Socket s, listener->Accept(kWait));
    std::string role;
    GM_RETURN_IF_ERROR(ServerHandshake(s, RoleKey(secret, kWorkerRole), "coordinator",
                                       Deadline::After(kWait), &role));
    GM_ASSIGN_OR_RETURN(Frame reg, RecvFrame(s, FrameLimits{}, Deadline::After(kWait)));
    if (reg.type != MsgType::kRegister) return Status::Corrupt("not REGISTER");
    return s;
  };
  auto coordinator = std::async(std::launch::async, [&]() -> Status {
    GM_ASSIGN_OR_RETURN(Socket first, accept_register());
    RegisteredMsg registered;
    registered.worker_id = 7;
    registered.pipeline = Config(secret, "", 0).pipeline_doc;
    registered.pipeline_origin = "test.json";
    registered.base_dir = "/";
    registered.reconnect_s = 600;  // far beyond the test's wait
    GM_RETURN_IF_ERROR(
        SendFrame(first, MsgType::kRegistered, registered.Encode(), Deadline::After(kWait)));
    // Its first GET_SPLIT is answered by closing the connection (the drop).
    GM_ASSIGN_OR_RETURN(Frame get, RecvFrame(first, FrameLimits{}, Deadline::After(kWait)));
    if (get.type != MsgType::kGetSplit) return Status::Corrupt("not GET_SPLIT");
    first = Socket();
    GM_ASSIGN_OR_RETURN(Socket back, accept_register());
    SendError(back, "worker 7 was dropped on a trainer's report and is not taken back",
              Deadline::After(kWait));
    return Status::Ok();
  });
  auto worker = WorkerService::Start(wo);
  ASSERT_TRUE(worker.ok()) << worker.status().message();
  auto worker_run = std::async(std::launch::async, [&] { return (*worker)->Run(); });
  ASSERT_EQ(worker_run.wait_for(std::chrono::duration<double>(kWait)), std::future_status::ready)
      << "the refused worker dials on";
  const Status st = worker_run.get();
  EXPECT_EQ(st.code(), Code::kUnavailable) << "it exits as one whose coordinator is gone";
  EXPECT_NE(st.message().find("refused this worker: worker 7 was dropped"), std::string::npos)
      << st.message();
  EXPECT_TRUE(coordinator.get().ok());
}

}  // namespace
}  // namespace gm
