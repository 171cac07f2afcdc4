// CoordinatorServer over real sockets, with a scripted worker and client.
#include "launcher/coordinator_server.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "core/os/file_util.h"
#include "dataplane/auth.h"
#include "dataplane/messages.h"
#include "dataplane/messages_control.h"
#include "dataplane/messages_offload.h"
#include "dataplane/protocol.h"
#include "tests/unit/coordinator_fixture.h"

namespace gm {
namespace {

constexpr double kWait = 10;

class CoordinatorServerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(kClientIdleS); }

  // A range source of 10 samples in splits of 4 (rounded to batches of 2): 3
  // splits, with `on_error` when given.
  // `offload_only`: a run without a pipeline (CoordinatorConfig::offload_only).
  void Start(double client_idle_s, int world_size = 1, int epochs = 1,
             const std::string& on_error = "", const Clock* clock = nullptr,
             bool offload_only = false) {
    server_.reset();
    if (!restart_) secret_ = *NewSecret();
    CoordinatorConfig c = Config();
    if (!on_error.empty()) c.pipeline_doc["on_error"] = on_error;
    if (offload_only) c.pipeline_doc = nlohmann::json::parse(kOffloadOnlyPipeline);
    c.offload_only = offload_only;
    c.epochs = epochs;
    c.world_size = world_size;
    c.client_idle_s = client_idle_s;
    c.clock = clock;
    if (restart_) c.port = port_;
    auto server = CoordinatorServer::Start(c);
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(*server);
    port_ = std::stoi(server_->address().substr(server_->address().rfind(':') + 1));
  }

  // The run's config: the test's secret, a range source of 10 samples in splits
  // of 4, batches of 2, the journal of the next Start.
  CoordinatorConfig Config() const { return testing::RangeRunConfig(secret_, journal_path_); }

  // Connects as `role` with that role's key derived from `secret` (or with `key`).
  Result<Socket> Connect(const std::string& role, const std::string& secret,
                         const std::string& key = "") {
    GM_ASSIGN_OR_RETURN(Socket s, Socket::ConnectTcp("127.0.0.1", port_, kWait));
    GM_RETURN_IF_ERROR(ClientHandshake(s, key.empty() ? RoleKey(secret, role) : key, role,
                                       Deadline::After(kWait), nullptr));
    return s;
  }

  Frame Ask(Socket& s, MsgType type, const nlohmann::json& meta) {
    EXPECT_TRUE(SendFrame(s, type, meta, Deadline::After(kWait)).ok());
    auto f = RecvFrame(s, FrameLimits{}, Deadline::After(kWait));
    EXPECT_TRUE(f.ok()) << f.status().message();
    return f.ok() ? std::move(*f) : Frame{};
  }

  // `n` clients, subscribed as ranks 0..n-1 of a run of world size n.
  void SubscribeRanks(int n, std::vector<Socket>& out) {
    for (int r = 0; r < n; ++r) {
      auto c = Connect("client", secret_);
      ASSERT_TRUE(c.ok()) << c.status().message();
      ASSERT_EQ(Ask(*c, MsgType::kSubscribe, {{"rank", r}, {"world_size", n}}).type,
                MsgType::kSubscribed);
      out.push_back(std::move(*c));
    }
  }

  // A registered worker, and a client subscribed as rank 0 that read epoch 0's plan.
  void WorkerAndClient(Socket& worker, Socket& client, Frame& plan) {
    auto w = Connect("worker", secret_);
    ASSERT_TRUE(w.ok()) << w.status().message();
    ASSERT_EQ(Ask(*w, MsgType::kRegister, {{"data_addr", "127.0.0.1:9"}}).type,
              MsgType::kRegistered);
    std::vector<Socket> ranks;
    SubscribeRanks(1, ranks);
    plan = Ask(ranks[0], MsgType::kGetPlan, {{"epoch", 0}});
    ASSERT_EQ(plan.type, MsgType::kPlan);
    worker = std::move(*w);
    client = std::move(ranks[0]);
  }

  // A registered worker, and `n` subscribed ranks that each read epoch 0's plan.
  void WorkerAndRanksAtEpoch0(int n, std::optional<Socket>& worker, std::vector<Socket>& ranks) {
    worker = RegisteredWorker("127.0.0.1:9");
    ASSERT_TRUE(worker->valid());
    ASSERT_NO_FATAL_FAILURE(SubscribeRanks(n, ranks));
    for (Socket& rank : ranks) {
      ASSERT_EQ(Ask(rank, MsgType::kGetPlan, {{"epoch", 0}}).type, MsgType::kPlan);
    }
  }

  // Sends `beat` from `worker`; returns once the coordinator handled it (it
  // answers the GET_SPLIT that follows only then).
  void Beat(Socket& worker, const HeartbeatMsg& beat) {
    ASSERT_TRUE(SendFrame(worker, MsgType::kHeartbeat, beat.Encode(), Deadline::After(kWait)).ok());
    ASSERT_EQ(Ask(worker, MsgType::kGetSplit, nlohmann::json::object()).type, MsgType::kAssign);
  }
  // A worker registered with `data_addr`.
  Socket RegisteredWorker(const std::string& data_addr) {
    auto w = Connect("worker", secret_);
    EXPECT_TRUE(w.ok()) << w.status().message();
    if (!w.ok()) return Socket();
    EXPECT_EQ(Ask(*w, MsgType::kRegister, {{"data_addr", data_addr}}).type, MsgType::kRegistered);
    return std::move(*w);
  }
  // The split `worker` is assigned (it asks until one is; UINT64_MAX after kWait).
  uint64_t TakeSplit(Socket& worker) {
    Deadline deadline = Deadline::After(kWait);
    while (!deadline.expired()) {
      Frame a = Ask(worker, MsgType::kGetSplit, nlohmann::json::object());
      if (a.meta["kind"] == "assign") return a.meta["split"];
    }
    return UINT64_MAX;
  }

  // The worker takes a split of 4 samples (2 batches) and says it has `batches`
  // with `skipped` samples skipped.
  void TakeAndReport(Socket& worker, uint64_t batches, uint64_t skipped) {
    uint64_t split = 2;  // the 2-sample split, if assigned: ask again
    while (split == 2) {
      Frame a = Ask(worker, MsgType::kGetSplit, nlohmann::json::object());
      ASSERT_EQ(a.meta["kind"], "assign") << a.meta.dump();
      split = a.meta["split"];
    }
    ASSERT_TRUE(
        SendFrame(worker, MsgType::kSplitDone,
                  {{"epoch", 0}, {"split", split}, {"batch_count", batches}, {"skipped", skipped}},
                  Deadline::After(kWait))
            .ok());
  }

  // `rank` acknowledges batches 0..batches-1 of epoch 0's `split`, 2 samples each
  // (every batch whole); returns once the coordinator has read the ack (it answers
  // the GET_PLAN that follows only then).
  void AckWhole(Socket& rank, uint64_t split, uint64_t batches) {
    nlohmann::json acked = nlohmann::json::array(), samples = nlohmann::json::array();
    for (uint64_t b = 0; b < batches; ++b) {
      acked.push_back({split, b});
      samples.push_back(2);
    }
    ASSERT_TRUE(SendFrame(rank, MsgType::kAck,
                          {{"epoch", 0}, {"batches", acked}, {"samples", samples}},
                          Deadline::After(kWait))
                    .ok());
    EXPECT_EQ(Ask(rank, MsgType::kGetPlan, {{"epoch", 0}}).type, MsgType::kPlan);
  }

  // A worker takes a 4-sample split (2 batches of 2) and says it made it whole
  // (before the acks, or after them with `done_last`); the trainer acknowledges
  // both batches with `samples` each. Waits until the worker has made `made`
  // splits; returns the answer to the next GET_PLAN.
  Frame DeliverSplit(Socket& worker, Socket& client, std::vector<int> samples, bool done_last,
                     uint64_t made) {
    uint64_t split = 2;  // the 2-sample split, if assigned: ask again
    while (split == 2) {
      Frame a = Ask(worker, MsgType::kGetSplit, nlohmann::json::object());
      EXPECT_EQ(a.meta["kind"], "assign") << a.meta.dump();
      if (a.meta["kind"] != "assign") return a;
      split = a.meta["split"];
    }
    const auto done = [&] {
      EXPECT_TRUE(SendFrame(worker, MsgType::kSplitDone,
                            {{"epoch", 0}, {"split", split}, {"batch_count", 2}, {"skipped", 0}},
                            Deadline::After(kWait))
                      .ok());
    };
    if (!done_last) done();
    EXPECT_TRUE(
        SendFrame(client, MsgType::kAck,
                  {{"epoch", 0}, {"batches", {{split, 0}, {split, 1}}}, {"samples", samples}},
                  Deadline::After(kWait))
            .ok());
    if (done_last) done();
    const double until = MonotonicSeconds() + kWait;
    while (MonotonicSeconds() < until) {
      const CoordinatorStats stats = server_->Summary().state;
      if (!stats.workers.empty() && stats.workers[0].splits_done >= made) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return Ask(client, MsgType::kGetPlan, {{"epoch", 0}});
  }

  // A client of rank 0 that said OFFLOAD (invalid, with a failure, if it could not).
  Socket OffloadingClient() {
    auto client = Connect("client", secret_);
    EXPECT_TRUE(client.ok()) << client.status().message();
    if (!client.ok()) return Socket();
    EXPECT_EQ(Ask(*client, MsgType::kOffload, {{"rank", 0}}).type, MsgType::kOffloading);
    return std::move(*client);
  }
  // The data worker the coordinator names for `client`'s next virtual worker.
  std::string Place(Socket& client) {
    Frame f = Ask(client, MsgType::kGetWorkers, {{"place", true}});
    EXPECT_EQ(f.type, MsgType::kWorkers);
    EXPECT_EQ(f.meta["workers"].size(), 1u) << f.meta.dump();
    return f.meta["workers"].empty() ? std::string() : f.meta["workers"][0].get<std::string>();
  }

  // A coordinator of a run without a pipeline on `clock`, and `worker`
  // registered with it, its GET_SPLIT sent.
  void AskWithoutAPipeline(FakeClock& clock, Socket& worker) {
    ASSERT_NO_FATAL_FAILURE(Start(kClientIdleS, 1, 1, "", &clock, true));
    worker = RegisteredWorker("127.0.0.1:9");
    ASSERT_TRUE(
        SendFrame(worker, MsgType::kGetSplit, nlohmann::json::object(), Deadline::After(kWait))
            .ok());
  }

  // Waits (up to kWait) until the first worker registered is gone from the state.
  // A coordinator journaling into a directory of the test's, with a registered
  // worker and a client subscribed as rank 0 that read epoch 0's plan.
  void StartJournaled(Socket& worker, Socket& client) {
    Result<TempDir> dir = TempDir::Make("gm-coordinator-restart-");
    ASSERT_TRUE(dir.ok());
    journal_dir_.emplace(std::move(*dir));
    journal_path_ = journal_dir_->path() + "/coordinator.journal";
    Start(kClientIdleS);
    Frame plan;
    ASSERT_NO_FATAL_FAILURE(WorkerAndClient(worker, client, plan));
  }

  void WaitFirstWorkerGone() {
    const Deadline deadline = Deadline::After(kWait);
    while (server_->Summary().state.workers[0].status != WorkerStatus::kGone && !deadline.expired())
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  std::string secret_;
  std::string journal_path_;            // CoordinatorConfig::journal_path of the next Start
  std::optional<TempDir> journal_dir_;  // StartJournaled's
  // The next Start is the same run's coordinator started again: its secret, its port.
  bool restart_ = false;
  std::unique_ptr<CoordinatorServer> server_;
  int port_ = 0;
};

TEST_F(CoordinatorServerTest, GivenAWorkerAndAClientThenTheEpochIsHandedOutAckedAndFinished) {
  auto worker = Connect("worker", secret_);
  ASSERT_TRUE(worker.ok()) << worker.status().message();
  Frame reg = Ask(*worker, MsgType::kRegister, {{"data_addr", "127.0.0.1:9"}});
  ASSERT_EQ(reg.type, MsgType::kRegistered);
  EXPECT_EQ(reg.meta["pipeline"]["source"]["count"], 10);
  EXPECT_EQ(reg.meta["samples_per_split"], 4);

  auto client = Connect("client", secret_);
  ASSERT_TRUE(client.ok()) << client.status().message();
  Frame sub = Ask(*client, MsgType::kSubscribe, {{"rank", 0}, {"world_size", 1}});
  ASSERT_EQ(sub.type, MsgType::kSubscribed);
  EXPECT_EQ(sub.meta["batch_size"], 2);
  Frame plan = Ask(*client, MsgType::kGetPlan, {{"epoch", 0}});
  ASSERT_EQ(plan.type, MsgType::kPlan);
  ASSERT_EQ(plan.meta["splits"].size(), 3u);
  EXPECT_EQ(plan.meta["workers"], nlohmann::json::array({"127.0.0.1:9"}));

  // The worker makes each split; the client acknowledges every batch.
  for (int i = 0; i < 3; ++i) {
    Frame a = Ask(*worker, MsgType::kGetSplit, nlohmann::json::object());
    ASSERT_EQ(a.type, MsgType::kAssign);
    ASSERT_EQ(a.meta["kind"], "assign") << a.meta.dump();
    const uint64_t split = a.meta["split"];
    const uint64_t count = split == 2 ? 1 : 2;  // 10 samples: 4, 4, 2 -> 2, 2, 1 batches
    ASSERT_TRUE(SendFrame(*worker, MsgType::kSplitDone,
                          {{"epoch", 0}, {"split", split}, {"batch_count", count}},
                          Deadline::After(kWait))
                    .ok());
    nlohmann::json batches = nlohmann::json::array();
    for (uint64_t b = 0; b < count; ++b) batches.push_back({split, b});
    ASSERT_TRUE(SendFrame(*client, MsgType::kAck, {{"epoch", 0}, {"batches", batches}},
                          Deadline::After(kWait))
                    .ok());
  }
  EXPECT_TRUE(server_->WaitFinished(kWait));
  Frame end = Ask(*client, MsgType::kGetPlan, {{"epoch", 1}});
  EXPECT_EQ(end.meta.value("end", false), true);
  CoordinatorSummary s = server_->Summary();
  EXPECT_EQ(s.epochs_done, 1u);
  EXPECT_EQ(s.state.acks, 5u);
}

TEST_F(CoordinatorServerTest, GivenAWrongSecretThenTheConnectionIsRefusedAndOthersAreServed) {
  auto bad = Connect("worker", std::string(64, 'a'));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("authentication failed"), std::string::npos)
      << bad.status().message();
  auto good = Connect("client", secret_);
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(Ask(*good, MsgType::kSubscribe, {{"rank", 0}, {"world_size", 1}}).type,
            MsgType::kSubscribed);
}

TEST_F(CoordinatorServerTest, GivenTheClientKey_WhenItClaimsTheWorkerRole_ThenAuthenticationFails) {
  auto impostor = Connect("worker", secret_, RoleKey(secret_, kClientRole));
  ASSERT_FALSE(impostor.ok());
  EXPECT_NE(impostor.status().message().find("authentication failed"), std::string::npos)
      << impostor.status().message();
  // Nor may the run's secret itself be used as a key: only role keys are.
  auto secret_holder = Connect("client", secret_, secret_);
  EXPECT_FALSE(secret_holder.ok());
}

TEST_F(CoordinatorServerTest,
       GivenSuccessiveClientsOfARank_ThenEachGetsAHigherSessionAndItsTicket) {
  uint64_t previous = 0;
  for (int i = 0; i < 2; ++i) {
    auto client = Connect("client", secret_);
    ASSERT_TRUE(client.ok()) << client.status().message();
    Frame sub = Ask(*client, MsgType::kSubscribe, {{"rank", 0}, {"world_size", 1}});
    ASSERT_EQ(sub.type, MsgType::kSubscribed);
    auto msg = SubscribedMsg::Decode(sub.meta);
    ASSERT_TRUE(msg.ok()) << msg.status().message();
    EXPECT_GT(msg->session, previous);
    // The ticket is what a worker derives from its key for this rank and session.
    EXPECT_EQ(msg->ticket, TicketKey(RoleKey(secret_, kWorkerRole), 0, msg->session));
    previous = msg->session;
    ASSERT_TRUE(SendFrame(*client, MsgType::kBye, {}, Deadline::After(kWait)).ok());
    // The session ends when the coordinator has seen BYE; wait for its close.
    auto closed = RecvFrame(*client, FrameLimits{}, Deadline::After(kWait));
    EXPECT_FALSE(closed.ok());
  }
}

TEST_F(CoordinatorServerTest,
       GivenOffloadClients_ThenEachGetsAChannelAndItsTicketBesideTheRanksSession) {
  Socket worker = RegisteredWorker("127.0.0.1:9");
  std::vector<Socket> ranks;
  SubscribeRanks(1, ranks);  // the rank's session stays: an offload takes none
  uint64_t previous = 0;
  for (int i = 0; i < 2; ++i) {
    auto client = Connect("client", secret_);
    ASSERT_TRUE(client.ok()) << client.status().message();
    Frame ing = Ask(*client, MsgType::kOffload, {{"rank", 0}});
    ASSERT_EQ(ing.type, MsgType::kOffloading) << ing.meta.dump();
    auto msg = OffloadingMsg::Decode(ing.meta);
    ASSERT_TRUE(msg.ok()) << msg.status().message();
    EXPECT_GT(msg->channel, previous);
    EXPECT_EQ(msg->ticket, OffloadTicketKey(RoleKey(secret_, kWorkerRole), 0, msg->channel));
    EXPECT_EQ(msg->workers, std::vector<std::string>{"127.0.0.1:9"});
    Frame workers = Ask(*client, MsgType::kGetWorkers, {});
    ASSERT_EQ(workers.type, MsgType::kWorkers);
    EXPECT_EQ(workers.meta["workers"], nlohmann::json::array({"127.0.0.1:9"}));
    previous = msg->channel;
  }
  EXPECT_EQ(Ask(ranks[0], MsgType::kGetWorkers, {}).type, MsgType::kWorkers);
  // A rank the run does not have, and anything but GET_WORKERS, HEARTBEAT and BYE, are refused.
  auto stranger = Connect("client", secret_);
  ASSERT_TRUE(stranger.ok());
  Frame refused = Ask(*stranger, MsgType::kOffload, {{"rank", 3}});
  EXPECT_EQ(refused.type, MsgType::kError);
  EXPECT_NE(ErrorMsg::Decode(refused.meta).message.find("1 trainer rank(s)"), std::string::npos);
  auto client = Connect("client", secret_);
  ASSERT_TRUE(client.ok());
  ASSERT_EQ(Ask(*client, MsgType::kOffload, {{"rank", 0}}).type, MsgType::kOffloading);
  Frame odd = Ask(*client, MsgType::kGetPlan, {{"epoch", 0}});
  EXPECT_EQ(odd.type, MsgType::kError);
  EXPECT_NE(ErrorMsg::Decode(odd.meta).message.find("unexpected GET_PLAN from an offload client"),
            std::string::npos);
  // A worker key does not get an offload channel: OFFLOAD is a client's (the
  // worker's connection is closed).
  ASSERT_TRUE(SendFrame(worker, MsgType::kOffload, {{"rank", 0}}, Deadline::After(kWait)).ok());
  auto from_worker = RecvFrame(worker, FrameLimits{}, Deadline::After(kWait));
  EXPECT_TRUE(!from_worker.ok() || from_worker->type == MsgType::kError);
}

TEST_F(CoordinatorServerTest,
       GivenOffloadNotes_ThenTheSummaryHasALineEachAndABadNoteEndsTheSession) {
  auto client = Connect("client", secret_);
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_EQ(Ask(*client, MsgType::kOffload, {{"rank", 0}}).type, MsgType::kOffloading);
  ASSERT_TRUE(SendFrame(*client, MsgType::kOffloadNote,
                        OffloadNoteMsg{true, "Folder", 3, 4096, ""}.Encode(),
                        Deadline::After(kWait))
                  .ok());
  ASSERT_TRUE(SendFrame(*client, MsgType::kOffloadNote,
                        OffloadNoteMsg{false, "Lines", 0, 0, "an open file\x1b[2J"}.Encode(),
                        Deadline::After(kWait))
                  .ok());
  OffloadNoteMsg zero{false, "Digits", 0, 0, "num_workers=0"};
  zero.in_process = true;
  ASSERT_TRUE(
      SendFrame(*client, MsgType::kOffloadNote, zero.Encode(), Deadline::After(kWait)).ok());
  // A request after the notes (which get no answer): they were read by then.
  ASSERT_EQ(Ask(*client, MsgType::kGetWorkers, {}).type, MsgType::kWorkers);
  CoordinatorSummary summary = server_->Summary();
  ASSERT_EQ(summary.offload_notes.size(), 3u);
  EXPECT_EQ(summary.offload_notes[0],
            "rank 0: a DataLoader of Folder runs its 3 worker(s) as virtual workers on the data "
            "workers, exact mode (4 KiB of dataset, collate_fn and worker_init_fn shipped)");
  EXPECT_EQ(summary.offload_notes[1].find("rank 0: a DataLoader of Lines runs on stock local "
                                          "workers: an open file"),
            0u)
      << summary.offload_notes[1];
  EXPECT_EQ(summary.offload_notes[1].find('\x1b'), std::string::npos);  // escaped, not kept
  EXPECT_EQ(summary.offload_notes[2],
            "rank 0: a DataLoader of Digits runs in the trainer's process: num_workers=0");
  EXPECT_EQ(summary.dataloaders_served, 1u);
  EXPECT_EQ(summary.dataloaders_stock, 1u);
  EXPECT_EQ(summary.dataloaders_in_process, 1u);
  // A note out of bounds ends the session.
  ASSERT_TRUE(
      SendFrame(*client, MsgType::kOffloadNote,
                {{"served", true}, {"dataset", "Folder"}, {"workers", 0}, {"blob_bytes", 1}},
                Deadline::After(kWait))
          .ok());
  auto after = RecvFrame(*client, FrameLimits{}, Deadline::After(kWait));
  EXPECT_TRUE(!after.ok() || after->type == MsgType::kError);
  EXPECT_EQ(server_->Summary().offload_notes.size(), 3u);
}

TEST_F(CoordinatorServerTest,
       GivenAClientThatFallsSilent_ThenItsConnectionIsClosedAfterTheIdleLimit) {
  Start(/*client_idle_s=*/5);
  auto client = Connect("client", secret_);
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_EQ(Ask(*client, MsgType::kSubscribe, {{"rank", 0}, {"world_size", 1}}).type,
            MsgType::kSubscribed);
  // HEARTBEAT keeps it open past the limit (5 s here; one every second leaves a
  // wide margin for a loaded machine)...
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    ASSERT_TRUE(SendFrame(*client, MsgType::kHeartbeat, {}, Deadline::After(kWait)).ok());
  }
  EXPECT_EQ(Ask(*client, MsgType::kGetWorkers, {}).type, MsgType::kWorkers);
  // ...silence does not: the coordinator closes it (well within kWait).
  auto closed = RecvFrame(*client, FrameLimits{}, Deadline::After(kWait));
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.status().code(), Code::kUnavailable) << closed.status().message();
}

TEST_F(CoordinatorServerTest, GivenGarbageBytesThenThatConnectionIsDroppedOnly) {
  auto raw = Socket::ConnectTcp("127.0.0.1", port_, kWait);
  ASSERT_TRUE(raw.ok());
  std::string junk = "GET / HTTP/1.1\r\n\r\n";
  iovec v{junk.data(), junk.size()};
  (void)raw->SendAll(std::span<const iovec>(&v, 1), Deadline::After(kWait), "junk");
  auto good = Connect("client", secret_);
  ASSERT_TRUE(good.ok()) << good.status().message();
}

TEST_F(CoordinatorServerTest,
       GivenOneRankResumingALaterEpoch_WhenAnotherReadsTheFirst_ThenTheResumeIsRefused) {
  Start(kClientIdleS, 2, 3);
  std::vector<Socket> ranks;
  SubscribeRanks(2, ranks);
  // Rank 0 reads epoch 0 as a fresh trainer does; then rank 1 resumes epoch 1.
  Frame plan = Ask(ranks[0], MsgType::kGetPlan, {{"epoch", 0}});
  ASSERT_EQ(plan.type, MsgType::kPlan);
  ASSERT_FALSE(plan.meta.value("wait", false) || plan.meta.value("done", false)) << plan.meta;
  Frame resumed = Ask(ranks[1], MsgType::kResume,
                      {{"epoch", 1}, {"position", 0}, {"split_index", 0}, {"split_batch", 0}});
  ASSERT_EQ(resumed.type, MsgType::kError) << resumed.meta.dump();
  const std::string message = resumed.meta.value("message", "");
  EXPECT_NE(message.find("rank 1 resumes epoch 1, but rank 0 reads epoch 0"), std::string::npos)
      << message;
  EXPECT_NE(message.find("every rank must resume from the same checkpoint"), std::string::npos);
  EXPECT_EQ(server_->Summary().state.epoch, 0u);
  // Rank 0 still gets epoch 0.
  EXPECT_EQ(Ask(ranks[0], MsgType::kGetPlan, {{"epoch", 0}}).meta.value("done", false), false);
}

TEST_F(CoordinatorServerTest, GivenEveryRankResumingALaterEpoch_ThenTheRunMovesThere) {
  Start(kClientIdleS, 2, 3);
  std::vector<Socket> ranks;
  SubscribeRanks(2, ranks);
  const nlohmann::json resume = {
      {"epoch", 2}, {"position", 0}, {"split_index", 0}, {"split_batch", 0}};
  Frame first;
  std::thread rank1([&] { first = Ask(ranks[1], MsgType::kResume, resume); });
  Frame second = Ask(ranks[0], MsgType::kResume, resume);
  rank1.join();
  for (const Frame* f : {&first, &second}) {
    ASSERT_EQ(f->type, MsgType::kPlan) << f->meta.dump();
    EXPECT_EQ(f->meta["epoch"], 2);
  }
  EXPECT_EQ(server_->Summary().state.epoch, 2u);
}

TEST_F(CoordinatorServerTest, GivenAClientOfAnotherWorldSizeThenItIsToldWhy) {
  auto client = Connect("client", secret_);
  ASSERT_TRUE(client.ok());
  Frame f = Ask(*client, MsgType::kSubscribe, {{"rank", 1}, {"world_size", 2}});
  EXPECT_EQ(f.type, MsgType::kError);
  EXPECT_NE(f.meta.value("message", "").find("1 trainer rank"), std::string::npos) << f.meta;
}

TEST_F(CoordinatorServerTest, GivenAFaultFromATrainer_ThenTheWorkerIsDroppedAndItsSplitGoesOn) {
  Socket worker, client;
  Frame plan;
  WorkerAndClient(worker, client, plan);
  Frame a = Ask(worker, MsgType::kGetSplit, nlohmann::json::object());
  ASSERT_EQ(a.meta["kind"], "assign");
  const uint64_t held = a.meta["split"];
  // A FAULT naming no live worker changes nothing (and gets no reply).
  ASSERT_TRUE(SendFrame(client, MsgType::kFault,
                        FaultMsg{"127.0.0.1:4", 0, "not a worker of this run"}.Encode(),
                        Deadline::After(kWait))
                  .ok());
  ASSERT_TRUE(SendFrame(client, MsgType::kFault,
                        FaultMsg{"127.0.0.1:9", 0, "it held the batch"}.Encode(),
                        Deadline::After(kWait))
                  .ok());
  // The coordinator closes the worker's connection...
  auto closed = RecvFrame(worker, FrameLimits{}, Deadline::After(kWait));
  EXPECT_FALSE(closed.ok());
  EXPECT_NE(closed.status().message().find("peer closed"), std::string::npos)
      << closed.status().message();
  // ...and the split it held goes to the next worker (once the coordinator has
  // seen the close: until then the split is still the dropped worker's).
  Deadline deadline = Deadline::After(kWait);
  while (server_->Summary().state.reassignments == 0 && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Socket next = RegisteredWorker("127.0.0.1:2");
  EXPECT_EQ(TakeSplit(next), held);
  EXPECT_EQ(server_->Summary().workers_faulted, 1u);
  // The dropped worker dialling back under its id, as one whose coordinator died
  // would, is refused and told why: it was dropped on purpose.
  auto back = Connect("worker", secret_);
  ASSERT_TRUE(back.ok()) << back.status().message();
  RegisterMsg again{"127.0.0.1:9", "", "", ""};
  again.worker_id = 1;
  Frame refused = Ask(*back, MsgType::kRegister, again.Encode());
  ASSERT_EQ(refused.type, MsgType::kError) << refused.meta.dump();
  EXPECT_NE(refused.meta.value("message", "").find("dropped on a trainer's report"),
            std::string::npos)
      << refused.meta.dump();
  // The client's connection is still served.
  EXPECT_EQ(Ask(client, MsgType::kGetWorkers, nlohmann::json::object()).type, MsgType::kWorkers);
}

TEST_F(CoordinatorServerTest, GivenAWorkerSilentOnTheCoordinatorsClock_ThenItIsLostWithoutWaiting) {
  FakeClock clock;
  Start(kClientIdleS, 1, 1, "", &clock);
  Socket w1 = RegisteredWorker("127.0.0.1:1");
  const uint64_t held = TakeSplit(w1);
  // Its connection stays open, but it says nothing for longer than the liveness
  // timeout (10 s) on the coordinator's clock: a few ticks later it is lost.
  clock.Advance(11);
  Deadline deadline = Deadline::After(kWait);
  while (server_->Summary().state.reassignments == 0 && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(server_->Summary().state.reassignments, 1u);
  EXPECT_EQ(server_->Summary().workers_live, 0u);
  Socket w2 = RegisteredWorker("127.0.0.1:2");
  EXPECT_EQ(TakeSplit(w2), held);
}

// A coordinator given a journal writes every change of its state there: a worker
// that vanished holding a split, another that made the epoch, the trainer's
// acknowledgements. The journal replays into the state the server ended with.
TEST_F(CoordinatorServerTest, GivenAJournal_ThenItReplaysIntoTheStateTheServerEndedWith) {
  Result<TempDir> dir = TempDir::Make("gm-coordinator-journal-");
  ASSERT_TRUE(dir.ok());
  journal_path_ = dir->path() + "/coordinator.journal";
  Start(kClientIdleS);
  {
    auto gone = Connect("worker", secret_);
    ASSERT_TRUE(gone.ok());
    ASSERT_EQ(Ask(*gone, MsgType::kRegister, {{"data_addr", "127.0.0.1:1"}}).type,
              MsgType::kRegistered);
    ASSERT_EQ(Ask(*gone, MsgType::kGetSplit, nlohmann::json::object()).meta["kind"], "assign");
  }  // its connection closes: its split goes back
  Deadline deadline = Deadline::After(kWait);
  while (server_->Summary().state.reassignments == 0 && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Socket worker, client;
  Frame plan;
  ASSERT_NO_FATAL_FAILURE(WorkerAndClient(worker, client, plan));
  for (int made = 0; made < 3 && !deadline.expired();) {
    Frame a = Ask(worker, MsgType::kGetSplit, nlohmann::json::object());
    if (a.meta["kind"] != "assign") continue;
    const uint64_t split = a.meta["split"];
    const uint64_t count = split == 2 ? 1 : 2;
    ASSERT_TRUE(SendFrame(worker, MsgType::kSplitDone,
                          {{"epoch", 0}, {"split", split}, {"batch_count", count}},
                          Deadline::After(kWait))
                    .ok());
    nlohmann::json batches = nlohmann::json::array();
    for (uint64_t b = 0; b < count; ++b) batches.push_back({split, b});
    ASSERT_TRUE(SendFrame(client, MsgType::kAck, {{"epoch", 0}, {"batches", batches}},
                          Deadline::After(kWait))
                    .ok());
    ++made;
  }
  ASSERT_TRUE(server_->WaitFinished(kWait));
  const CoordinatorStats ended = server_->Summary().state;
  Result<std::string> journal = ReadFile(journal_path_);
  ASSERT_TRUE(journal.ok());
  // The server's own options: one rank, one split in flight a worker.
  auto replayed = JournaledCoordinator::Replay({1, 1, 10.0}, *journal, journal_path_, 0, nullptr);
  ASSERT_TRUE(replayed.ok()) << replayed.status().message();
  const CoordinatorStats r = replayed->state().Stats();
  EXPECT_EQ(r.epoch, ended.epoch);
  EXPECT_EQ(r.epoch_done, ended.epoch_done);
  EXPECT_TRUE(r.epoch_done);
  EXPECT_EQ(r.acks, 5u);
  EXPECT_EQ(r.acks, ended.acks);
  EXPECT_EQ(r.reassignments, 1u);
  EXPECT_EQ(r.rank_positions, ended.rank_positions);
  ASSERT_EQ(r.workers.size(), 2u);
  ASSERT_EQ(ended.workers.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(r.workers[i].status, ended.workers[i].status) << i;
    EXPECT_EQ(r.workers[i].splits_assigned, ended.workers[i].splits_assigned) << i;
    EXPECT_EQ(r.workers[i].batches, ended.workers[i].batches) << i;
  }
  EXPECT_EQ(r.workers[0].status, WorkerStatus::kGone);
}

// Splits of epoch 0 by id: 0 and 1 make 2 batches, 2 makes 1.
uint64_t Batches(uint64_t split) { return split == 2 ? 1 : 2; }

TEST_F(CoordinatorServerTest,
       GivenACoordinatorStartedAgainFromItsJournal_ThenItsWorkerAndTrainerGoOnExactlyOnce) {
  Socket worker, client;
  ASSERT_NO_FATAL_FAILURE(StartJournaled(worker, client));
  const uint64_t first = TakeSplit(worker);
  ASSERT_NE(first, UINT64_MAX);
  // Made whole; the trainer acknowledged its first batch only.
  ASSERT_TRUE(SendFrame(worker, MsgType::kSplitDone,
                        {{"epoch", 0}, {"split", first}, {"batch_count", Batches(first)}},
                        Deadline::After(kWait))
                  .ok());
  ASSERT_TRUE(SendFrame(client, MsgType::kAck,
                        {{"epoch", 0}, {"batches", {{first, 0}}}, {"samples", {2}}},
                        Deadline::After(kWait))
                  .ok());
  EXPECT_EQ(Ask(client, MsgType::kGetPlan, {{"epoch", 0}}).type, MsgType::kPlan);  // read
  const uint64_t session = 1;

  // The coordinator goes away; one is started again on its port from its journal.
  restart_ = true;
  Start(kClientIdleS);
  EXPECT_FALSE(server_->WaitFinished(0));
  auto back = Connect("worker", secret_);
  ASSERT_TRUE(back.ok()) << back.status().message();
  RegisterMsg again{"127.0.0.1:9", "", "", ""};
  again.worker_id = 1;
  again.made.push_back(SplitDoneMsg{0, first, Batches(first), 0, std::nullopt});
  Frame reg = Ask(*back, MsgType::kRegister, again.Encode());
  ASSERT_EQ(reg.type, MsgType::kRegistered) << reg.meta.dump();
  EXPECT_EQ(reg.meta["worker_id"], 1) << "the worker goes on under its id";
  auto trainer = Connect("client", secret_);
  ASSERT_TRUE(trainer.ok());
  Frame sub =
      Ask(*trainer, MsgType::kSubscribe, {{"rank", 0}, {"world_size", 1}, {"session", session}});
  ASSERT_EQ(sub.type, MsgType::kSubscribed) << sub.meta.dump();
  EXPECT_EQ(sub.meta["session"], session) << "the trainer goes on in its session";

  // The rest: the first split's second batch, then every other split once.
  nlohmann::json acks = {{first, 0}, {first, 1}};  // the first again: a repeat, harmless
  ASSERT_TRUE(SendFrame(*trainer, MsgType::kAck,
                        {{"epoch", 0}, {"batches", acks}, {"samples", {2, 2}}},
                        Deadline::After(kWait))
                  .ok());
  std::set<uint64_t> made = {first};
  for (int i = 0; i < 2; ++i) {
    const uint64_t split = TakeSplit(*back);
    ASSERT_NE(split, UINT64_MAX);
    EXPECT_TRUE(made.insert(split).second) << "split " << split << " handed out twice";
    ASSERT_TRUE(SendFrame(*back, MsgType::kSplitDone,
                          {{"epoch", 0}, {"split", split}, {"batch_count", Batches(split)}},
                          Deadline::After(kWait))
                    .ok());
    nlohmann::json batches = nlohmann::json::array(), samples = nlohmann::json::array();
    for (uint64_t b = 0; b < Batches(split); ++b) {
      batches.push_back({split, b});
      samples.push_back(2);
    }
    ASSERT_TRUE(SendFrame(*trainer, MsgType::kAck,
                          {{"epoch", 0}, {"batches", batches}, {"samples", samples}},
                          Deadline::After(kWait))
                    .ok());
  }
  ASSERT_TRUE(server_->WaitFinished(kWait));
  const CoordinatorSummary summary = server_->Summary();
  EXPECT_EQ(summary.state.acks, 5u);
  EXPECT_EQ(summary.state.reassignments, 0u) << "nothing was made twice";
  EXPECT_EQ(summary.failure, "");
  ASSERT_EQ(summary.state.workers.size(), 1u);
  EXPECT_EQ(summary.state.workers[0].splits_done, 3u);

  // A third start replays the whole run, the repeated acknowledgement not written.
  Result<std::string> journal = ReadFile(journal_path_);
  ASSERT_TRUE(journal.ok());
  auto replayed = JournaledCoordinator::Replay({1, 1, 10.0}, *journal, journal_path_, 0, nullptr);
  ASSERT_TRUE(replayed.ok()) << replayed.status().message();
  EXPECT_TRUE(replayed->state().Stats().epoch_done);
  EXPECT_EQ(replayed->state().Stats().duplicate_acks, 0u);
  EXPECT_EQ(server_->Summary().state.duplicate_acks, 1u);
}

TEST_F(
    CoordinatorServerTest,
    GivenAnAssignmentThatNeverReachedItsWorker_ThenTheWorkerComesBackAsANewOneAndTheSplitGoesOn) {
  Socket worker, client;
  ASSERT_NO_FATAL_FAILURE(StartJournaled(worker, client));
  const uint64_t lost = TakeSplit(worker);  // journaled; say it never arrived
  ASSERT_NE(lost, UINT64_MAX);
  restart_ = true;
  Start(kClientIdleS);
  auto back = Connect("worker", secret_);
  ASSERT_TRUE(back.ok());
  RegisterMsg again{"127.0.0.1:9", "", "", ""};
  again.worker_id = 1;
  Frame reg = Ask(*back, MsgType::kRegister, again.Encode());
  ASSERT_EQ(reg.type, MsgType::kRegistered);
  EXPECT_EQ(reg.meta["worker_id"], 2) << "a worker that lost its split is a new one";
  Frame a = Ask(*back, MsgType::kGetSplit, nlohmann::json::object());
  EXPECT_EQ(a.meta["kind"], "assign");
  EXPECT_EQ(a.meta["split"], lost) << "the split it never got is handed out again";
  EXPECT_EQ(a.meta["start_batch"], 0);
  // A trainer of another session, or none, gets a session above every earlier one.
  auto other = Connect("client", secret_);
  ASSERT_TRUE(other.ok());
  Frame sub = Ask(*other, MsgType::kSubscribe, {{"rank", 0}, {"world_size", 1}, {"session", 7}});
  ASSERT_EQ(sub.type, MsgType::kSubscribed);
  EXPECT_EQ(sub.meta["session"], 2);
}

// A peer with the worker or client key claims what another holds: a live worker's
// id, a subscribed rank's session, a channel never issued. None is given.
TEST_F(CoordinatorServerTest, GivenClaimsOfALiveWorkersIdOrAChannelNeverIssued_ThenNoneIsGiven) {
  Socket worker, client;
  ASSERT_NO_FATAL_FAILURE(StartJournaled(worker, client));
  auto claimer = Connect("worker", secret_);
  ASSERT_TRUE(claimer.ok());
  RegisterMsg claim{"127.0.0.1:8", "", "", ""};
  claim.worker_id = 1;  // live: its connection is served
  claim.made.push_back(SplitDoneMsg{0, 0, 2, 0, std::nullopt});
  Frame reg = Ask(*claimer, MsgType::kRegister, claim.Encode());
  ASSERT_EQ(reg.type, MsgType::kRegistered);
  EXPECT_EQ(reg.meta["worker_id"], 2) << "a new id, not the live worker's";
  claim.worker_id = 99;  // never registered
  auto other = Connect("worker", secret_);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(Ask(*other, MsgType::kRegister, claim.Encode()).meta["worker_id"], 3);
  EXPECT_EQ(server_->Summary().state.workers.at(0).splits_done, 0u)
      << "no SPLIT_DONE taken for the live worker";
  // The rank's live session: refused while its connection is served.
  auto second = Connect("client", secret_);
  ASSERT_TRUE(second.ok());
  Frame sub = Ask(*second, MsgType::kSubscribe, {{"rank", 0}, {"world_size", 1}, {"session", 1}});
  EXPECT_EQ(sub.type, MsgType::kError) << sub.meta.dump();
  // A channel never issued: a new one.
  auto offload = Connect("client", secret_);
  ASSERT_TRUE(offload.ok());
  Frame off = Ask(*offload, MsgType::kOffload, {{"rank", 0}, {"channel", 99}});
  ASSERT_EQ(off.type, MsgType::kOffloading);
  EXPECT_EQ(off.meta["channel"], 1);
}

TEST_F(CoordinatorServerTest, GivenAJournalCorrupted_ThenTheCoordinatorDoesNotStartAndSaysWhere) {
  Socket worker, client;
  ASSERT_NO_FATAL_FAILURE(StartJournaled(worker, client));
  ASSERT_NE(TakeSplit(worker), UINT64_MAX);
  server_.reset();
  Result<std::string> text = ReadFile(journal_path_);
  ASSERT_TRUE(text.ok());
  std::string bad = *text;
  bad[bad.find("\"request\"") + 2] = 'X';
  ASSERT_TRUE(WriteFileAtomic(journal_path_, bad).ok());
  auto again = CoordinatorServer::Start(Config());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find(journal_path_ + ":"), std::string::npos)
      << again.status().message();
  EXPECT_NE(again.status().message().find("corrupted"), std::string::npos)
      << again.status().message();
}

TEST_F(CoordinatorServerTest, GivenAWorkerThatVanishesThenItsSplitGoesToTheNext) {
  uint64_t first_split;
  {
    auto w1 = Connect("worker", secret_);
    ASSERT_TRUE(w1.ok());
    ASSERT_EQ(Ask(*w1, MsgType::kRegister, {{"data_addr", "127.0.0.1:1"}}).type,
              MsgType::kRegistered);
    Frame a = Ask(*w1, MsgType::kGetSplit, nlohmann::json::object());
    ASSERT_EQ(a.meta["kind"], "assign");
    first_split = a.meta["split"];
  }  // w1's connection closes: it is gone
  auto w2 = Connect("worker", secret_);
  ASSERT_TRUE(w2.ok());
  ASSERT_EQ(Ask(*w2, MsgType::kRegister, {{"data_addr", "127.0.0.1:2"}}).type,
            MsgType::kRegistered);
  // The first worker's exit is noticed when its connection thread sees the close:
  // wait for that (with a deadline), so that w2's first assignment is the split w1
  // gave back and not the next pending one.
  Deadline deadline = Deadline::After(kWait);
  while (server_->Summary().state.reassignments == 0 && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  uint64_t split = UINT64_MAX;
  while (!deadline.expired()) {
    Frame a = Ask(*w2, MsgType::kGetSplit, nlohmann::json::object());
    if (a.meta["kind"] == "assign") {
      split = a.meta["split"];
      break;
    }
  }
  EXPECT_EQ(split, first_split);
  EXPECT_EQ(server_->Summary().state.reassignments, 1u);
}

TEST_F(CoordinatorServerTest,
       GivenADrainingWorker_ThenItTakesNothingNewAndLeavesOnceWhatItMadeIsAcknowledged) {
  Socket worker, client;
  Frame plan;
  WorkerAndClient(worker, client, plan);
  Frame a = Ask(worker, MsgType::kGetSplit, nlohmann::json::object());
  ASSERT_EQ(a.meta["kind"], "assign");
  EXPECT_EQ(server_->Summary().workers_live, 1u);
  EXPECT_EQ(server_->Summary().workers_producing, 0u) << "registered, no split made yet";
  const uint64_t split = a.meta["split"];
  const uint64_t batches = split == 2 ? 1 : 2;
  ASSERT_TRUE(SendFrame(worker, MsgType::kSplitDone,
                        {{"epoch", 0}, {"split", split}, {"batch_count", batches}},
                        Deadline::After(kWait))
                  .ok());
  // Made, not acknowledged: the draining worker is told to hold on, and gets
  // nothing new however often it asks.
  for (int i = 0; i < 3; ++i) {
    Frame d = Ask(worker, MsgType::kGetSplit, {{"draining", true}});
    EXPECT_EQ(d.meta["kind"], "drain") << d.meta.dump();
  }
  EXPECT_EQ(server_->Summary().state.workers[0].status, WorkerStatus::kDraining);
  EXPECT_EQ(server_->Summary().workers_producing, 1u) << "its first split made";
  nlohmann::json acks = nlohmann::json::array();
  for (uint64_t b = 0; b < batches; ++b) acks.push_back({split, b});
  ASSERT_TRUE(
      SendFrame(client, MsgType::kAck, {{"epoch", 0}, {"batches", acks}}, Deadline::After(kWait))
          .ok());
  Deadline deadline = Deadline::After(kWait);
  std::string kind;
  while (!deadline.expired() && kind != "exit") {
    kind = Ask(worker, MsgType::kGetSplit, {{"draining", true}}).meta["kind"];
  }
  EXPECT_EQ(kind, "exit") << "acknowledged: it may leave";
  const CoordinatorStats stats = server_->Summary().state;
  EXPECT_EQ(stats.reassignments, 0u) << "nothing it made is made again";
  EXPECT_EQ(stats.workers[0].splits_assigned, 1u);
}

TEST_F(CoordinatorServerTest, GivenADrainFlagThatIsNotABoolean_ThenTheWorkerIsRefused) {
  Socket worker = RegisteredWorker("127.0.0.1:9");
  ASSERT_TRUE(
      SendFrame(worker, MsgType::kGetSplit, {{"draining", "yes"}}, Deadline::After(kWait)).ok());
  auto f = RecvFrame(worker, FrameLimits{}, Deadline::After(kWait));
  EXPECT_TRUE(!f.ok() || f->type == MsgType::kError) << "no ASSIGN for a malformed GET_SPLIT";
}

TEST_F(CoordinatorServerTest, GivenTheRunIsOverForItsWorkers_ThenEveryGetSplitIsAnsweredExit) {
  Socket worker, client;
  Frame plan;
  WorkerAndClient(worker, client, plan);
  server_->EndWorkers();
  EXPECT_EQ(Ask(worker, MsgType::kGetSplit, nlohmann::json::object()).meta["kind"], "exit");
  EXPECT_EQ(Ask(worker, MsgType::kGetSplit, {{"draining", true}}).meta["kind"], "exit");
  EXPECT_EQ(server_->Summary().state.workers[0].splits_assigned, 0u) << "nothing handed out";
}

TEST_F(CoordinatorServerTest,
       GivenARunWithoutAPipeline_WhenItEndsWhileAGetSplitIsHeld_ThenTheAnswerIsExitAtOnce) {
  FakeClock clock;
  Socket worker;
  ASSERT_NO_FATAL_FAILURE(AskWithoutAPipeline(clock, worker));
  // No split ever comes: the answer is held, and the clock does not move.
  EXPECT_FALSE(RecvFrame(worker, FrameLimits{}, Deadline::After(0.2)).ok()) << "held";
  server_->EndWorkers();
  auto answer = RecvFrame(worker, FrameLimits{}, Deadline::After(kWait));
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  ASSERT_EQ(answer->type, MsgType::kAssign);
  EXPECT_EQ(answer->meta["kind"], "exit");
}

TEST_F(CoordinatorServerTest,
       GivenARunWithoutAPipeline_WhenAGetSplitIsHeldForItsWhole_ThenWaitSaysAskAgainAtOnce) {
  FakeClock clock;
  Socket worker;
  ASSERT_NO_FATAL_FAILURE(AskWithoutAPipeline(clock, worker));
  // The clock moves a hold's length at a time until the answer comes (the first
  // moves may come before the coordinator read the GET_SPLIT).
  const auto readable = [&worker] {
    pollfd p{worker.fd(), POLLIN, 0};
    return ::poll(&p, 1, 50) == 1;
  };
  for (const Deadline deadline = Deadline::After(kWait); !readable() && !deadline.expired();)
    clock.Advance(kOffloadOnlyRetryS);
  auto answer = RecvFrame(worker, FrameLimits{}, Deadline::After(kWait));
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  ASSERT_EQ(answer->type, MsgType::kAssign);
  EXPECT_EQ(answer->meta["kind"], "wait");
  EXPECT_EQ(answer->meta["retry_s"], 0.0);
}

TEST_F(CoordinatorServerTest,
       GivenTheRunIsOver_WhenAWorkerInASplitSendsAHeartbeat_ThenItIsToldToLeaveOnce) {
  Socket worker, client;
  Frame plan;
  WorkerAndClient(worker, client, plan);
  ASSERT_EQ(Ask(worker, MsgType::kGetSplit, nlohmann::json::object()).meta["kind"], "assign");
  const auto beat = [&worker](bool making) {
    HeartbeatMsg m;
    m.making_split = making;
    return SendFrame(worker, MsgType::kHeartbeat, m.Encode(), Deadline::After(kWait));
  };
  // While the run goes on, a heartbeat gets no answer, inside a split or not.
  ASSERT_TRUE(beat(true).ok());
  EXPECT_FALSE(RecvFrame(worker, FrameLimits{}, Deadline::After(0.2)).ok()) << "no answer";
  server_->EndWorkers();
  // Once it is over, a heartbeat from outside a split gets none either (the next
  // GET_SPLIT says exit); from inside one, "exit", unasked, once.
  ASSERT_TRUE(beat(false).ok());
  EXPECT_FALSE(RecvFrame(worker, FrameLimits{}, Deadline::After(0.2)).ok()) << "no answer";
  ASSERT_TRUE(beat(true).ok());
  auto leave = RecvFrame(worker, FrameLimits{}, Deadline::After(kWait));
  ASSERT_TRUE(leave.ok()) << leave.status().message();
  ASSERT_EQ(leave->type, MsgType::kAssign);
  EXPECT_EQ(leave->meta["kind"], "exit");
  ASSERT_TRUE(beat(true).ok());
  EXPECT_FALSE(RecvFrame(worker, FrameLimits{}, Deadline::After(0.2)).ok()) << "said once";
  // It says BYE and leaves with the split unfinished: no reassignment, no warning.
  ASSERT_TRUE(
      SendFrame(worker, MsgType::kBye, nlohmann::json::object(), Deadline::After(kWait)).ok());
  WaitFirstWorkerGone();
  EXPECT_EQ(server_->Summary().state.workers[0].status, WorkerStatus::kGone);
  EXPECT_EQ(server_->Summary().state.reassignments, 0u);
}

TEST_F(CoordinatorServerTest, GivenAHeartbeatWhoseCpuSecondsAreNegative_ThenTheWorkerIsDropped) {
  Socket worker = RegisteredWorker("127.0.0.1:9");
  ASSERT_TRUE(SendFrame(worker, MsgType::kHeartbeat, {{"cpu_s", -1}}, Deadline::After(kWait)).ok());
  auto f = RecvFrame(worker, FrameLimits{}, Deadline::After(kWait));
  EXPECT_TRUE(!f.ok() || f->type == MsgType::kError) << "what no honest worker sends ends it";
}

TEST_F(CoordinatorServerTest,
       GivenTheRunIsOver_WhenAWorkerLeavesHoldingASplit_ThenItIsNoReassignment) {
  Socket worker, client;
  Frame plan;
  WorkerAndClient(worker, client, plan);
  ASSERT_EQ(Ask(worker, MsgType::kGetSplit, nlohmann::json::object()).meta["kind"], "assign");
  server_->EndWorkers();
  worker.Close();  // it leaves with the split unfinished: nobody makes it again
  WaitFirstWorkerGone();
  ASSERT_EQ(server_->Summary().state.workers[0].status, WorkerStatus::kGone);
  EXPECT_EQ(server_->Summary().state.reassignments, 0u);
}

}  // namespace
}  // namespace gm

namespace gm {
namespace {

TEST_F(CoordinatorServerTest,
       GivenOnErrorFail_WhenAWorkerCutsASplit_ThenThePlanHadItsCountAndTheWorkerIsDropped) {
  Start(kClientIdleS, 1, 1, "fail");
  Socket worker, client;
  Frame plan;
  ASSERT_NO_FATAL_FAILURE(WorkerAndClient(worker, client, plan));
  // One rank, but nothing may be skipped: the counts are planned (the client
  // refuses a worker that sends fewer).
  EXPECT_EQ(plan.meta["splits"], nlohmann::json::parse("[[0, 2], [1, 2], [2, 1]]"));
  ASSERT_NO_FATAL_FAILURE(TakeAndReport(worker, 1, 0));
  auto closed = RecvFrame(worker, FrameLimits{}, Deadline::After(kWait));
  EXPECT_FALSE(closed.ok());  // dropped; its split goes back to the queue
  EXPECT_EQ(Ask(client, MsgType::kGetPlan, {{"epoch", 0}}).type, MsgType::kPlan);
  // Nor may a worker say it skipped samples under "fail"; a worker that tells the
  // truth is kept.
  for (const auto& [skipped, kept] : {std::pair{2, false}, std::pair{0, true}}) {
    auto next = Connect("worker", secret_);
    ASSERT_TRUE(next.ok()) << next.status().message();
    ASSERT_EQ(Ask(*next, MsgType::kRegister, {{"data_addr", "127.0.0.1:8"}}).type,
              MsgType::kRegistered);
    ASSERT_NO_FATAL_FAILURE(TakeAndReport(*next, skipped == 0 ? 2 : 1, skipped));
    ASSERT_TRUE(SendFrame(*next, MsgType::kGetSplit, {}, Deadline::After(kWait)).ok());
    EXPECT_EQ(RecvFrame(*next, FrameLimits{}, Deadline::After(kWait)).ok(), kept);
  }
}

TEST_F(CoordinatorServerTest,
       GivenOnErrorSkip_WhenAWorkerCutsASplitWithoutSayingSo_ThenTheRunFailsAndSaysWhy) {
  Start(kClientIdleS, 1, 1, "skip");
  Socket worker, client;
  Frame plan;
  ASSERT_NO_FATAL_FAILURE(WorkerAndClient(worker, client, plan));
  EXPECT_EQ(plan.meta["splits"][0][1], -1);  // open: a skip may change it
  ASSERT_NO_FATAL_FAILURE(TakeAndReport(worker, 1, 0));
  // The worker is dropped once its SPLIT_DONE was handled (on its own connection).
  EXPECT_FALSE(RecvFrame(worker, FrameLimits{}, Deadline::After(kWait)).ok());
  Frame refused = Ask(client, MsgType::kGetPlan, {{"epoch", 0}});
  ASSERT_EQ(refused.type, MsgType::kError) << refused.meta.dump();
  const std::string message = refused.meta.value("message", "");
  EXPECT_NE(message.find("the run failed: worker 1 says epoch 0 split"), std::string::npos)
      << message;
  EXPECT_NE(message.find("(4 samples) has 1 batches with 0 samples skipped, but the rest make 2 "
                         "batches of 2"),
            std::string::npos)
      << message;
}

TEST_F(CoordinatorServerTest,
       GivenASplitThatReachesTheTrainerShort_ThenTheRunFailsSayingWhatWasLost) {
  for (const std::string on_error : {"skip", "fail"}) {
    for (bool done_last : {false, true}) {
      SCOPED_TRACE(on_error + (done_last ? ", SPLIT_DONE after the acks" : ", SPLIT_DONE first"));
      Start(kClientIdleS, 1, 1, on_error);
      Socket worker, client;
      Frame plan;
      ASSERT_NO_FATAL_FAILURE(WorkerAndClient(worker, client, plan));
      Frame honest = DeliverSplit(worker, client, {2, 2}, done_last, 1);
      EXPECT_EQ(honest.type, MsgType::kPlan) << honest.meta.dump();
      // The next split's last batch holds 1 sample of 2, its count still right.
      Frame refused = DeliverSplit(worker, client, {2, 1}, done_last, 2);
      ASSERT_EQ(refused.type, MsgType::kError) << refused.meta.dump();
      const std::string message = refused.meta.value("message", "");
      EXPECT_NE(message.find("(4 samples) reached the trainer with 3 samples and 0 said skipped, "
                             "where 4 were due"),
                std::string::npos)
          << message;
      EXPECT_NE(server_->Summary().failure.find("reached the trainer with 3 samples"),
                std::string::npos);
    }
  }
}

// Under on_error "skip" a split's size is checked once its maker says what it
// skipped; a maker that leaves after the trainer acknowledged the whole split
// but before its SPLIT_DONE never says, and the run says that split went
// unchecked. (With two ranks the counts are planned, so the split completes on
// its acks alone.)
TEST_F(CoordinatorServerTest,
       GivenOnErrorSkip_WhenTheMakerLeavesBeforeSplitDone_ThenTheSplitIsSaidUnchecked) {
  Start(kClientIdleS, 2, 1, "skip");
  std::optional<Socket> worker;
  std::vector<Socket> ranks;
  ASSERT_NO_FATAL_FAILURE(WorkerAndRanksAtEpoch0(2, worker, ranks));
  Frame a = Ask(*worker, MsgType::kGetSplit, nlohmann::json::object());
  ASSERT_EQ(a.meta["kind"], "assign") << a.meta.dump();
  const uint64_t split = a.meta["split"], end = a.meta["end_batch"];
  const size_t rank = a.meta["rank"];
  ASSERT_NO_FATAL_FAILURE(AckWhole(ranks[rank], split, end));
  worker->Close();
  const CoordinatorSummary summary = server_->Summary();
  EXPECT_EQ(summary.splits_unchecked, 1u);
  EXPECT_TRUE(summary.failure.empty()) << summary.failure;
}

// The same window at world size 1, where no share between ranks fixes a split's
// count: the plan leaves it open (-1) until its maker's SPLIT_DONE. The maker
// sent the whole split and the trainer acknowledged it, then the maker died
// before its SPLIT_DONE. The trainer waits on that count, so the split needs a
// holder again: the next worker is given it from its end (nothing is made
// twice), its SPLIT_DONE closes the count, and the epoch ends.
TEST_F(CoordinatorServerTest,
       GivenOnErrorSkipAndOneRank_WhenTheMakerDiesBeforeSplitDone_ThenTheNextWorkerClosesTheCount) {
  Start(kClientIdleS, 1, 1, "skip");
  std::optional<Socket> first;
  std::vector<Socket> ranks;
  ASSERT_NO_FATAL_FAILURE(WorkerAndRanksAtEpoch0(1, first, ranks));
  Socket& rank = ranks[0];
  // 10 samples in splits of 4, batches of 2: 2, 2 and 1 batches.
  auto batches_of = [](uint64_t split) { return (std::min<uint64_t>(4, 10 - 4 * split) + 1) / 2; };
  Frame a = Ask(*first, MsgType::kGetSplit, nlohmann::json::object());
  ASSERT_EQ(a.meta["kind"], "assign") << a.meta.dump();
  const uint64_t lost = a.meta["split"];
  EXPECT_EQ(a.meta["end_batch"], -1) << "at world size 1 under skip, the count is the maker's";
  ASSERT_NO_FATAL_FAILURE(AckWhole(rank, lost, batches_of(lost)));
  first->Close();
  Frame plan = Ask(rank, MsgType::kGetPlan, {{"epoch", 0}});
  ASSERT_EQ(plan.type, MsgType::kPlan);
  for (const auto& s : plan.meta["splits"]) {
    if (s[0] == lost) {
      EXPECT_EQ(s[1], -1) << "its count waits on a SPLIT_DONE: " << plan.meta;
    }
  }

  Socket second = RegisteredWorker("127.0.0.1:9");
  ASSERT_TRUE(second.valid());
  bool retaken = false;
  for (int i = 0; i < 10 && server_->Summary().epochs_done == 0; ++i) {
    a = Ask(second, MsgType::kGetSplit, nlohmann::json::object());
    ASSERT_EQ(a.meta["kind"], "assign") << "a split is still to finish: " << a.meta.dump();
    const uint64_t split = a.meta["split"];
    if (split == lost) {  // already with the trainer: nothing is left to make
      retaken = true;
      EXPECT_EQ(a.meta["start_batch"], batches_of(split)) << a.meta.dump();
    } else {
      EXPECT_EQ(a.meta["start_batch"], 0) << a.meta.dump();
      ASSERT_NO_FATAL_FAILURE(AckWhole(rank, split, batches_of(split)));
    }
    ASSERT_TRUE(
        SendFrame(
            second, MsgType::kSplitDone,
            {{"epoch", 0}, {"split", split}, {"batch_count", batches_of(split)}, {"skipped", 0}},
            Deadline::After(kWait))
            .ok());
    // A request after the SPLIT_DONE: the coordinator has read it.
    EXPECT_EQ(Ask(rank, MsgType::kGetPlan, {{"epoch", 0}}).type, MsgType::kPlan);
  }
  EXPECT_TRUE(retaken) << "split " << lost << " was never given a holder again";
  const CoordinatorSummary summary = server_->Summary();
  EXPECT_EQ(summary.epochs_done, 1u) << "the epoch ended";
  EXPECT_TRUE(summary.failure.empty()) << summary.failure;
}

// The trainer may acknowledge an epoch's last split before its maker's SPLIT_DONE
// arrives: the next epoch has begun, and the maker's word still checks the split.
TEST_F(CoordinatorServerTest,
       GivenOnErrorSkip_WhenSplitDoneComesAfterTheEpochEnded_ThenTheSplitIsChecked) {
  Start(kClientIdleS, 2, 2, "skip");
  std::optional<Socket> worker;
  std::vector<Socket> ranks;
  ASSERT_NO_FATAL_FAILURE(WorkerAndRanksAtEpoch0(2, worker, ranks));
  std::vector<uint64_t> made;
  for (int i = 0; i < 10 && server_->Summary().epochs_done == 0; ++i) {
    Frame a = Ask(*worker, MsgType::kGetSplit, nlohmann::json::object());
    if (a.meta["kind"] != "assign") continue;
    const uint64_t split = a.meta["split"], end = a.meta["end_batch"];
    const size_t rank = a.meta["rank"];
    made.push_back(split);
    ASSERT_NO_FATAL_FAILURE(AckWhole(ranks[rank], split, end));
  }
  ASSERT_EQ(server_->Summary().epochs_done, 1u) << "the acks ended epoch 0";
  EXPECT_EQ(server_->Summary().splits_unchecked, made.size());
  for (uint64_t split : made) {  // 10 samples in splits of 4: 2, 2 and 1 batches of 2
    const uint64_t size = std::min<uint64_t>(4, 10 - 4 * split);
    ASSERT_TRUE(
        SendFrame(*worker, MsgType::kSplitDone,
                  {{"epoch", 0}, {"split", split}, {"batch_count", (size + 1) / 2}, {"skipped", 0}},
                  Deadline::After(kWait))
            .ok());
  }
  EXPECT_NE(Ask(*worker, MsgType::kGetSplit, nlohmann::json::object()).type, MsgType::kError);
  const CoordinatorSummary summary = server_->Summary();
  EXPECT_EQ(summary.splits_unchecked, 0u) << "each maker's late SPLIT_DONE checked its split";
  EXPECT_TRUE(summary.failure.empty()) << summary.failure;
}

TEST_F(CoordinatorServerTest, GivenOnErrorSkip_WhenAWorkerSaysItSkipped_ThenTheSummaryCountsIt) {
  Start(kClientIdleS, 1, 1, "skip");
  Socket worker, client;
  Frame plan;
  ASSERT_NO_FATAL_FAILURE(WorkerAndClient(worker, client, plan));
  ASSERT_NO_FATAL_FAILURE(TakeAndReport(worker, 1, 2));  // 2 of 4 left: 1 batch
  EXPECT_EQ(Ask(worker, MsgType::kGetSplit, nlohmann::json::object()).type, MsgType::kAssign);
  EXPECT_EQ(server_->Summary().state.samples_skipped, 2u);
  EXPECT_EQ(Ask(client, MsgType::kGetPlan, {{"epoch", 0}}).type, MsgType::kPlan);
}

TEST_F(CoordinatorServerTest,
       GivenARanksSessionThatEndsPartway_WhenANewOneReadsTheEpoch_ThenItGoesOnFromTheAcks) {
  Socket worker, client;
  Frame plan;
  ASSERT_NO_FATAL_FAILURE(WorkerAndClient(worker, client, plan));
  EXPECT_FALSE(plan.meta.contains("position"));
  // The worker makes split 0 (2 batches) for session 1; the trainer reads and
  // acknowledges batch 0, then dies before acknowledging batch 1.
  Frame a = Ask(worker, MsgType::kGetSplit, nlohmann::json::object());
  ASSERT_EQ(a.meta["split"], 0);
  EXPECT_EQ(a.meta["session"], 1);
  ASSERT_TRUE(SendFrame(worker, MsgType::kSplitDone,
                        {{"epoch", 0}, {"split", 0}, {"batch_count", 2}}, Deadline::After(kWait))
                  .ok());
  ASSERT_TRUE(SendFrame(client, MsgType::kAck, {{"epoch", 0}, {"batches", {{0, 0}}}},
                        Deadline::After(kWait))
                  .ok());
  client.Close();
  // A new trainer process of rank 0, without a saved state: session 2.
  std::vector<Socket> again;
  SubscribeRanks(1, again);
  Frame resumed = Ask(again[0], MsgType::kGetPlan, {{"epoch", 0}});
  ASSERT_EQ(resumed.type, MsgType::kPlan);
  EXPECT_EQ(resumed.meta.value("position", -1), 1) << resumed.meta.dump();
  EXPECT_EQ(resumed.meta.value("split_index", -1), 0);
  EXPECT_EQ(resumed.meta.value("split_batch", -1), 1);
  // Batch 1 of split 0, sent to session 1 and never acknowledged, is made again,
  // for session 2 (older tickets are refused at the data port).
  EXPECT_EQ(server_->Summary().state.reassignments, 1u);
  Frame b = Ask(worker, MsgType::kGetSplit, nlohmann::json::object());
  ASSERT_EQ(b.meta["kind"], "assign") << b.meta.dump();
  EXPECT_EQ(b.meta["split"], 0);
  EXPECT_EQ(b.meta["start_batch"], 1);
  EXPECT_EQ(b.meta["session"], 2);
  // The same session asking again is not moved.
  EXPECT_FALSE(Ask(again[0], MsgType::kGetPlan, {{"epoch", 0}}).meta.contains("position"));
}

TEST_F(CoordinatorServerTest, GivenAHeartbeatWithStageCostsThenTheSummaryKeepsThem) {
  auto worker = Connect("worker", secret_);
  ASSERT_TRUE(worker.ok());
  ASSERT_EQ(Ask(*worker, MsgType::kRegister, {{"data_addr", "127.0.0.1:9"}}).type,
            MsgType::kRegistered);
  nlohmann::json stages = nlohmann::json::array({{{"name", "decode_jpeg"},
                                                  {"count", 3},
                                                  {"cpu_s", 0.5},
                                                  {"wall_s", 0.75},
                                                  {"bytes_in", 30},
                                                  {"bytes_out", 90}}});
  ASSERT_TRUE(
      SendFrame(*worker, MsgType::kHeartbeat, {{"stages", stages}}, Deadline::After(kWait)).ok());
  // A request after the heartbeat is answered only once the heartbeat was handled.
  ASSERT_EQ(Ask(*worker, MsgType::kGetSplit, nlohmann::json::object()).type, MsgType::kAssign);
  auto summary = server_->Summary();
  ASSERT_EQ(summary.worker_stages.size(), 1u);
  const std::vector<StageStats>& got = summary.worker_stages.begin()->second;
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].name, "decode_jpeg");
  EXPECT_EQ(got[0].count, 3u);
  EXPECT_EQ(got[0].cpu_s, 0.5);
  EXPECT_EQ(got[0].wall_s, 0.75);
  EXPECT_EQ(got[0].bytes_in, 30u);
  EXPECT_EQ(got[0].bytes_out, 90u);
  // A report with a field out of range is refused: what no honest worker sends
  // ends its connection (its splits go to others), and the report is not kept.
  nlohmann::json bad = stages;
  bad[0]["count"] = -3;
  ASSERT_TRUE(
      SendFrame(*worker, MsgType::kHeartbeat, {{"stages", bad}}, Deadline::After(kWait)).ok());
  auto after = RecvFrame(*worker, FrameLimits{}, Deadline::After(kWait));
  ASSERT_FALSE(after.ok());
  EXPECT_NE(after.status().message().find("peer closed the connection"), std::string::npos)
      << after.status().message();  // closed, not merely silent until the deadline
  EXPECT_EQ(server_->Summary().worker_stages.begin()->second[0].count, 3u)
      << "the last good report stays";
}

}  // namespace
TEST_F(CoordinatorServerTest, GivenWorkersReportingTheirCpu_ThenTheSummaryAddsWhatEachUsed) {
  Socket a = RegisteredWorker("127.0.0.1:9");
  Socket b = RegisteredWorker("127.0.0.1:10");
  // Each figure is a total since the worker started: only what it adds counts,
  // and a smaller one (a worker's clock is its own) takes nothing back.
  ASSERT_NO_FATAL_FAILURE(Beat(a, {.cpu_s = 1.5}));
  ASSERT_NO_FATAL_FAILURE(Beat(a, {.cpu_s = 2.5}));
  ASSERT_NO_FATAL_FAILURE(Beat(a, {.cpu_s = 2.0}));
  ASSERT_NO_FATAL_FAILURE(Beat(b, {.cpu_s = 4.0}));
  EXPECT_DOUBLE_EQ(server_->Summary().worker_cpu_s, 6.5);
  // A worker that left keeps what it used.
  a.Close();
  ASSERT_NO_FATAL_FAILURE(Beat(b, {.cpu_s = 5.0}));
  EXPECT_DOUBLE_EQ(server_->Summary().worker_cpu_s, 7.5);
}

TEST_F(CoordinatorServerTest,
       GivenAReportOlderThanAPlacement_ThenThePlacementCountsUntilShownOrForgotten) {
  FakeClock clock;
  ASSERT_NO_FATAL_FAILURE(Start(kClientIdleS, 1, 1, "", &clock));
  Socket a = RegisteredWorker("127.0.0.1:9");
  Socket b = RegisteredWorker("127.0.0.1:10");
  Socket client = OffloadingClient();
  ASSERT_TRUE(client.valid());
  const auto place = [&] { return Place(client); };
  EXPECT_EQ(place(), "127.0.0.1:9");
  // a's report was written before that placement's channel opened: it still counts.
  ASSERT_NO_FATAL_FAILURE(Beat(a, {.virtual_workers = 0}));
  EXPECT_EQ(place(), "127.0.0.1:10");
  EXPECT_EQ(place(), "127.0.0.1:9");  // 1 each: the first registered
  EXPECT_EQ(place(), "127.0.0.1:10");
  // a shows both open: 2 each.
  ASSERT_NO_FATAL_FAILURE(Beat(a, {.virtual_workers = 2}));
  EXPECT_EQ(place(), "127.0.0.1:9");
  // b's never opened (their trainer did not come): forgotten after kPlacementShownS.
  clock.Advance(kPlacementShownS + 1);
  ASSERT_NO_FATAL_FAILURE(Beat(b, {.virtual_workers = 0}));
  EXPECT_EQ(place(), "127.0.0.1:10");
}

TEST_F(CoordinatorServerTest, GivenVirtualWorkersToPlace_ThenEachGoesToTheLeastLoadedWorker) {
  Socket a = RegisteredWorker("127.0.0.1:9");
  Socket b = RegisteredWorker("127.0.0.1:10");
  Socket client = OffloadingClient();
  ASSERT_TRUE(client.valid());
  const auto place = [&] { return Place(client); };
  ASSERT_NO_FATAL_FAILURE(
      Beat(a, {.virtual_workers = 3}));  // a hosts 3 (another rank's, another DataLoader's)
  EXPECT_EQ(place(), "127.0.0.1:10");
  EXPECT_EQ(place(), "127.0.0.1:10");
  EXPECT_EQ(place(), "127.0.0.1:10");  // placed there since count, before b reports them
  EXPECT_EQ(place(), "127.0.0.1:9");   // 3 each: the first registered
  ASSERT_NO_FATAL_FAILURE(Beat(b, {.virtual_workers = 0}));  // b's ended
  EXPECT_EQ(place(), "127.0.0.1:10");
  // Without {place}, every live worker, as before.
  EXPECT_EQ(Ask(client, MsgType::kGetWorkers, {}).meta["workers"].size(), 2u);
  // A worker that left is placed on no more.
  b.Close();
  const Deadline deadline = Deadline::After(kWait);
  std::string where;
  while (!deadline.expired() && (where = place()) != "127.0.0.1:9") {
  }
  EXPECT_EQ(where, "127.0.0.1:9");
}

}  // namespace gm
