// Tests of the data worker service (worker/worker_service.h, dataplane/data_server.h)
// over real loopback sockets: a fake coordinator speaks connection 1 of
// dataplane/messages_control.h and fake trainer clients speak connection 3.
#include "worker/worker_service.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_annotations.h"
#include "dataplane/auth.h"
#include "dataplane/messages_control.h"
#include "dataplane/protocol.h"
#include "dataplane/socket.h"
#include "test_util.h"
#include "worker/engine.h"

namespace gm {
namespace {

constexpr double kWait = 30;  // seconds; generous, only bounds a broken test

const std::string& Secret() {
  static const std::string secret = *NewSecret();
  return secret;
}

// A coordinator that registers one worker, answers GET_SPLIT from a script (then
// "wait") and records what the worker reports. A script entry with
// "close_after": true closes the connection right after it is sent.
class FakeCoordinator {
 public:
  // With `exit_on_busy_heartbeat`, the first HEARTBEAT that says making_split is
  // answered "exit", unasked, as a coordinator does after the run's end.
  // `connections`: how many connections it serves, one after the other (a
  // coordinator started again), the script going on across them.
  FakeCoordinator(nlohmann::json registered, std::vector<nlohmann::json> script,
                  bool exit_on_busy_heartbeat = false, int connections = 1)
      : registered_(std::move(registered)),
        exit_on_busy_heartbeat_(exit_on_busy_heartbeat),
        connections_(connections),
        script_(script.begin(), script.end()) {
    auto listener = Listener::ListenTcp("127.0.0.1", 0);
    EXPECT_TRUE(listener.ok()) << listener.status().message();
    listener_ = std::move(*listener);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeCoordinator() { thread_.join(); }

  std::string address() const { return "127.0.0.1:" + std::to_string(listener_.port()); }

  // Waits (up to kWait) until the connection has ended; false if it has not.
  bool WaitEnded() {
    MutexLock lock(mu_);
    return lock.WaitFor(cv_, kWait, [&]() REQUIRES(mu_) { return ended_; });
  }
  std::vector<nlohmann::json> split_dones() {
    MutexLock lock(mu_);
    return split_dones_;
  }
  bool bye() {
    MutexLock lock(mu_);
    return bye_;
  }
  nlohmann::json register_meta() {
    MutexLock lock(mu_);
    return register_;
  }
  std::vector<nlohmann::json> registers() {  // every REGISTER, in order
    MutexLock lock(mu_);
    return registers_;
  }
  std::vector<nlohmann::json> get_splits() {
    MutexLock lock(mu_);
    return get_splits_;
  }
  bool pushed_exit() {
    MutexLock lock(mu_);
    return pushed_exit_;
  }
  // Waits (up to kWait) for `n` HEARTBEATs that said making_split; false if fewer came.
  bool WaitBusyHeartbeats(int n) {
    MutexLock lock(mu_);
    return lock.WaitFor(cv_, kWait, [&]() REQUIRES(mu_) { return busy_heartbeats_ >= n; });
  }
  // HEARTBEATs received so far, busy or not.
  int heartbeats() {
    MutexLock lock(mu_);
    return heartbeats_;
  }
  // Waits (up to kWait) for `n` HEARTBEATs in all; false if fewer came.
  bool WaitHeartbeats(int n) {
    MutexLock lock(mu_);
    return lock.WaitFor(cv_, kWait, [&]() REQUIRES(mu_) { return heartbeats_ >= n; });
  }

 private:
  void Serve() {
    for (int i = 0; i < connections_; ++i) Converse();
    MutexLock lock(mu_);
    ended_ = true;
    cv_.notify_all();
  }

  void Converse() {
    auto socket = listener_.Accept(kWait);
    ASSERT_TRUE(socket.ok()) << socket.status().message();
    std::string role;
    ASSERT_TRUE(
        ServerHandshake(*socket, Secret(), "coordinator", Deadline::After(kWait), &role).ok());
    EXPECT_EQ(role, "worker");
    auto reg = RecvFrame(*socket, FrameLimits{}, Deadline::After(kWait));
    ASSERT_TRUE(reg.ok() && reg->type == MsgType::kRegister);
    {
      MutexLock lock(mu_);
      register_ = reg->meta;
      registers_.push_back(reg->meta);
    }
    ASSERT_TRUE(SendFrame(*socket, MsgType::kRegistered, registered_, Deadline::After(kWait)).ok());
    for (;;) {
      auto frame = RecvFrame(*socket, FrameLimits{}, Deadline::After(kWait));
      if (!frame.ok()) return;
      MutexLock lock(mu_);
      if (frame->type == MsgType::kSplitDone) split_dones_.push_back(frame->meta);
      if (frame->type == MsgType::kBye) {
        bye_ = true;
        return;
      }
      if (frame->type == MsgType::kHeartbeat) {
        ++heartbeats_;
        cv_.notify_all();
      }
      const bool busy =
          frame->type == MsgType::kHeartbeat && frame->meta.value("making_split", false);
      if (busy) {
        ++busy_heartbeats_;
        cv_.notify_all();
      }
      if (busy && exit_on_busy_heartbeat_ && !pushed_exit_) {
        pushed_exit_ = true;
        EXPECT_TRUE(
            SendFrame(*socket, MsgType::kAssign, {{"kind", "exit"}}, Deadline::After(kWait)).ok());
      }
      if (frame->type != MsgType::kGetSplit) continue;  // HEARTBEAT
      get_splits_.push_back(frame->meta);
      nlohmann::json answer = {{"kind", "wait"}, {"retry_s", 0.01}};
      if (!script_.empty()) {
        answer = script_.front();
        script_.pop_front();
      }
      const bool close = answer.value("close_after", false);
      answer.erase("close_after");
      EXPECT_TRUE(SendFrame(*socket, MsgType::kAssign, answer, Deadline::After(kWait)).ok());
      if (close) return;
    }
  }

  const nlohmann::json registered_;
  const bool exit_on_busy_heartbeat_;
  const int connections_;
  Listener listener_;
  std::thread thread_;
  Mutex mu_;
  std::condition_variable cv_;
  std::deque<nlohmann::json> script_ GUARDED_BY(mu_);
  std::vector<nlohmann::json> split_dones_ GUARDED_BY(mu_);
  std::vector<nlohmann::json> get_splits_ GUARDED_BY(mu_);
  nlohmann::json register_ GUARDED_BY(mu_);
  std::vector<nlohmann::json> registers_ GUARDED_BY(mu_);
  bool bye_ GUARDED_BY(mu_) = false;
  bool ended_ GUARDED_BY(mu_) = false;
  bool pushed_exit_ GUARDED_BY(mu_) = false;
  int busy_heartbeats_ GUARDED_BY(mu_) = 0;
  int heartbeats_ GUARDED_BY(mu_) = 0;
};

nlohmann::json Assign(uint64_t split, uint64_t start = 0, int64_t end = -1) {
  return {{"kind", "assign"}, {"epoch", 0},           {"split", split},
          {"rank", 0},        {"start_batch", start}, {"end_batch", end}};
}

const nlohmann::json kExit = {{"kind", "exit"}};

// A connection to a data port, authenticated with `key` as `role`.
Result<Socket> DialDataPort(int port, const std::string& key, const std::string& role) {
  GM_ASSIGN_OR_RETURN(Socket s, Socket::ConnectTcp("127.0.0.1", port, kWait));
  GM_RETURN_IF_ERROR(ClientHandshake(s, key, role, Deadline::After(kWait), nullptr));
  return s;
}

// A trainer client's data connection to a worker, with the ticket the
// coordinator would give rank `rank` in session `session` (`worker_key`: the key
// the ticket is made with; Secret() is the worker's).
Result<Socket> ConnectClient(int port, const std::string& worker_key, int64_t rank, int64_t credit,
                             uint64_t session = 1) {
  GM_ASSIGN_OR_RETURN(Socket s, DialDataPort(port, TicketKey(worker_key, rank, session),
                                             TicketRole(rank, session)));
  GM_RETURN_IF_ERROR(SendFrame(s, MsgType::kSubscribe, {{"rank", rank}}, Deadline::After(kWait)));
  if (credit > 0) {
    GM_RETURN_IF_ERROR(SendFrame(s, MsgType::kCredit, {{"n", credit}}, Deadline::After(kWait)));
  }
  return s;
}

Status Credit(Socket& s, int64_t n) {
  return SendFrame(s, MsgType::kCredit, {{"n", n}}, Deadline::After(kWait));
}

// The next BATCH; `*split_batches` (when given) is its split_batches field, or -1.
Result<Batch> NextBatch(Socket& s, double timeout_s = kWait, int64_t* split_batches = nullptr) {
  GM_ASSIGN_OR_RETURN(Frame frame, RecvFrame(s, FrameLimits{}, Deadline::After(timeout_s)));
  EXPECT_EQ(frame.meta.value("rank", int64_t{-1}), 0);
  if (split_batches) *split_batches = frame.meta.value("split_batches", int64_t{-1});
  return DecodeBatch(std::move(frame));
}

class CollectSink : public BatchSink {
 public:
  Status Consume(const Batch& batch) override {
    batches.push_back(batch);
    return Status::Ok();
  }
  std::vector<Batch> batches;
};

void ExpectSameBatch(const Batch& got, const Batch& want) {
  EXPECT_EQ(got.epoch, want.epoch);
  EXPECT_EQ(got.split, want.split);
  EXPECT_EQ(got.split_batch, want.split_batch);
  EXPECT_EQ(got.keys, want.keys);
  EXPECT_EQ(got.sample_indices, want.sample_indices);
  EXPECT_EQ(got.data.shape, want.data.shape);
  EXPECT_TRUE(got.data.bytes == want.data.bytes)
      << "data bytes differ, split_batch " << got.split_batch;
  EXPECT_TRUE(got.labels.bytes == want.labels.bytes);
}

// Given 12 photos in two class directories and a pipeline of 4-sample batches in
// splits of 8 samples: split 0 makes 2 batches, split 1 makes 1.
class WorkerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int c = 0; c < 2; ++c) {
      for (int i = 0; i < 6; ++i) {
        const std::string name = "corpus/" + std::string(i % 2 ? "cats/" : "dogs/") +
                                 std::to_string(c) + "_" + std::to_string(i) + ".jpg";
        dir_.Write(name, testing::ReadAll(testing::SourcePath("tests/data/engine/photo" +
                                                              std::to_string(i) + ".jpg")));
      }
    }
  }

  static nlohmann::json PipelineDoc() {
    return nlohmann::json::parse(R"({
      "version": 1,
      "source": {"type": "files", "root": "corpus", "pattern": "**/*.jpg", "label": "parent_dir"},
      "stages": [{"op": "decode_jpeg"},
                 {"op": "random_resized_crop", "size": [16, 16]},
                 {"op": "flip", "p": 0.5},
                 {"op": "to_tensor", "layout": "CHW", "dtype": "float32"}],
      "batch": {"size": 4}, "shuffle": {"buffer": 8}, "seed": 7})");
  }

  nlohmann::json Registered() const {
    return {
        {"worker_id", 1},          {"pipeline", PipelineDoc()}, {"pipeline_origin", "test.json"},
        {"base_dir", dir_.path()}, {"samples_per_split", 8},    {"heartbeat_s", 0.05},
        {"liveness_timeout_s", 5}};
  }

  std::unique_ptr<WorkerService> StartWorker(const FakeCoordinator& coordinator,
                                             double drain_grace_s = 10,
                                             const Clock* clock = nullptr) {
    WorkerServiceOptions options;
    options.drain_grace_s = drain_grace_s;
    options.clock = clock;
    options.coordinator = coordinator.address();
    options.threads = 2;
    options.secret = Secret();
    auto service = WorkerService::Start(options);
    EXPECT_TRUE(service.ok()) << service.status().message();
    return service.ok() ? std::move(*service) : nullptr;
  }

  // The batches RunSplit makes for `split` from `start`, made here directly.
  std::vector<Batch> Reference(size_t split, uint64_t start = 0) {
    PipelineOptions po;
    po.samples_per_split = 8;
    auto pipeline = Pipeline::FromJson(PipelineDoc(), "test.json", dir_.path(), po);
    EXPECT_TRUE(pipeline.ok()) << pipeline.status().message();
    CollectSink sink;
    auto stats = RunSplit(*pipeline, EngineOptions{}, SplitTask{0, split, start, UINT64_MAX}, sink);
    EXPECT_TRUE(stats.ok()) << stats.status().message();
    return sink.batches;
  }

  // Stops `service` when the test ends, also when an assertion returns early: on a
  // FakeClock that no longer moves, Run() would not end by itself, and the
  // future that waits for it would wait for ever.
  struct StopAtEnd {
    WorkerService& service;
    ~StopAtEnd() { service.Stop(); }
  };

  // Waits (up to kWait) for Run() to return; stops the service if it does not.
  static Status Finish(std::future<Status>& run, WorkerService& service) {
    if (run.wait_for(std::chrono::duration<double>(kWait)) != std::future_status::ready) {
      ADD_FAILURE() << "Run() did not return";
      service.Stop();
    }
    return run.get();
  }

  testing::TempDir dir_;
};

// A worker's heartbeats on a clock of the test's: every period when it sends
// nothing else, and every kReportEveryBeats periods when it is busy sending
// (GET_SPLIT, SPLIT_DONE), so that its CPU still reaches the coordinator.
TEST(HeartbeatDueTest, GivenAnIdleOrABusyWorker_ThenItBeatsEveryPeriodOrEveryFifth) {
  const double period = 2;
  for (const bool busy : {false, true}) {
    double last_send = 0;
    double last_beat = 0;
    std::vector<double> beats;
    for (int tick = 1; tick <= 200; ++tick) {  // 20 periods in tenths
      const double now = tick * period / 10;
      if (busy) last_send = now;  // a control frame every tenth of a period
      if (HeartbeatDue(now, last_send, last_beat, period)) {
        beats.push_back(now);
        last_beat = last_send = now;
      }
    }
    const std::vector<double> want =
        busy ? std::vector<double>{10, 20, 30, 40}
             : std::vector<double>{2,  4,  6,  8,  10, 12, 14, 16, 18, 20,
                                   22, 24, 26, 28, 30, 32, 34, 36, 38, 40};
    ASSERT_EQ(beats.size(), want.size()) << (busy ? "busy" : "idle");
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(beats[i], want[i], 1e-9) << i;
  }
}

TEST_F(WorkerServiceTest,
       GivenTwoAssignedSplits_WhenClientGrantsCredit_ThenItReceivesRunSplitsBatchesInOrder) {
  FakeCoordinator coordinator(Registered(), {Assign(0), Assign(1), kExit});
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  EXPECT_EQ(coordinator.register_meta()["data_addr"], service->data_addr());
  EXPECT_EQ(service->data_addr(), "127.0.0.1:" + std::to_string(service->data_port()));
  EXPECT_EQ(coordinator.register_meta()["threads"], 2);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });

  auto client = ConnectClient(service->data_port(), Secret(), 0, 100);
  ASSERT_TRUE(client.ok()) << client.status().message();
  std::vector<Batch> want = Reference(0);
  ASSERT_EQ(want.size(), 2u);
  for (Batch& b : Reference(1)) want.push_back(std::move(b));
  ASSERT_EQ(want.size(), 3u);
  const std::vector<int64_t> want_split_batches = {-1, 2, 1};  // only on a split's last batch
  for (size_t i = 0; i < want.size(); ++i) {
    int64_t split_batches = 0;
    auto got = NextBatch(*client, kWait, &split_batches);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ExpectSameBatch(*got, want[i]);
    EXPECT_EQ(split_batches, want_split_batches[i]) << "batch " << i;
  }

  Status st = Finish(run, *service);
  EXPECT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(coordinator.WaitEnded());
  EXPECT_TRUE(coordinator.bye());
  const auto done = coordinator.split_dones();
  ASSERT_EQ(done.size(), 2u);
  auto without_stages = [](nlohmann::json j) {
    j.erase("stages");
    return j;
  };
  EXPECT_EQ(without_stages(done[0]),
            (nlohmann::json{{"epoch", 0}, {"split", 0}, {"batch_count", 2}}));
  EXPECT_EQ(without_stages(done[1]),
            (nlohmann::json{{"epoch", 0}, {"split", 1}, {"batch_count", 1}}));
  // Stage costs travel with SPLIT_DONE and add up over the splits made: 8 samples
  // in split 0, 8 + 4 after split 1.
  ASSERT_EQ(done[1]["stages"].size(), 3u);
  EXPECT_EQ(done[0]["stages"][0]["name"], "decode_jpeg+random_resized_crop");
  EXPECT_EQ(done[0]["stages"][0]["count"], 8);
  EXPECT_EQ(done[1]["stages"][0]["count"], 12);
  EXPECT_GT(done[1]["stages"][0]["cpu_s"].get<double>(), 0.0);
  EXPECT_EQ(service->splits_done(), 2u);
}

TEST_F(WorkerServiceTest,
       GivenStartBatch_WhenSplitIsMade_ThenEarlierBatchesAreSkippedAndCountIsWhole) {
  FakeCoordinator coordinator(Registered(), {Assign(0, 1), kExit});
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  auto client = ConnectClient(service->data_port(), Secret(), 0, 100);
  ASSERT_TRUE(client.ok()) << client.status().message();

  auto got = NextBatch(*client);
  ASSERT_TRUE(got.ok()) << got.status().message();
  const std::vector<Batch> want = Reference(0, 1);
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(got->split_batch, 1u);
  ExpectSameBatch(*got, want[0]);

  EXPECT_TRUE(Finish(run, *service).ok());
  ASSERT_TRUE(coordinator.WaitEnded());
  ASSERT_EQ(coordinator.split_dones().size(), 1u);
  EXPECT_EQ(coordinator.split_dones()[0]["batch_count"], 2);
}

TEST_F(WorkerServiceTest,
       GivenEndBatch_WhenSplitIsMade_ThenLaterBatchesAreNotSentAndNoneClaimsToBeLast) {
  FakeCoordinator coordinator(Registered(), {Assign(0, 0, 1), kExit});
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  auto client = ConnectClient(service->data_port(), Secret(), 0, 100);
  ASSERT_TRUE(client.ok()) << client.status().message();

  int64_t split_batches = 0;
  auto got = NextBatch(*client, kWait, &split_batches);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ExpectSameBatch(*got, Reference(0)[0]);
  EXPECT_EQ(split_batches, -1);  // batch 0 of 2 is not the split's last

  EXPECT_TRUE(Finish(run, *service).ok());
  ASSERT_TRUE(coordinator.WaitEnded());
  ASSERT_EQ(coordinator.split_dones().size(), 1u);
  EXPECT_EQ(coordinator.split_dones()[0]["batch_count"], 2);
  // The worker says it leaves (BYE: no split in hand), then closes: nothing more came.
  auto bye = RecvFrame(*client, FrameLimits{}, Deadline::After(kWait));
  ASSERT_TRUE(bye.ok()) << bye.status().message();
  EXPECT_EQ(bye->type, MsgType::kBye);
  EXPECT_FALSE(RecvFrame(*client, FrameLimits{}, Deadline::After(kWait)).ok());
}

TEST_F(WorkerServiceTest, GivenCreditOfOne_WhenBatchIsSent_ThenNextWaitsForTheNextCredit) {
  FakeCoordinator coordinator(Registered(), {Assign(0), Assign(1), kExit});
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  auto client = ConnectClient(service->data_port(), Secret(), 0, 1);
  ASSERT_TRUE(client.ok()) << client.status().message();

  auto first = NextBatch(*client);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->split_batch, 0u);
  // Without credit nothing more comes.
  auto none = NextBatch(*client, 0.3);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kUnavailable);

  ASSERT_TRUE(Credit(*client, 1).ok());
  auto second = NextBatch(*client);
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(second->split, 0u);
  EXPECT_EQ(second->split_batch, 1u);
  ASSERT_TRUE(Credit(*client, 5).ok());
  auto third = NextBatch(*client);
  ASSERT_TRUE(third.ok()) << third.status().message();
  EXPECT_EQ(third->split, 1u);
  EXPECT_TRUE(Finish(run, *service).ok());
}

TEST_F(WorkerServiceTest,
       GivenClientThatDisconnects_WhenItReconnects_ThenTheRestOfTheSplitFollows) {
  FakeCoordinator coordinator(Registered(), {Assign(0), kExit});
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  {
    auto client = ConnectClient(service->data_port(), Secret(), 0, 1);
    ASSERT_TRUE(client.ok()) << client.status().message();
    auto first = NextBatch(*client);
    ASSERT_TRUE(first.ok()) << first.status().message();
    EXPECT_EQ(first->split_batch, 0u);
  }
  auto again = ConnectClient(service->data_port(), Secret(), 0, 10);
  ASSERT_TRUE(again.ok()) << again.status().message();
  auto second = NextBatch(*again);
  ASSERT_TRUE(second.ok()) << second.status().message();
  ExpectSameBatch(*second, Reference(0)[1]);
  EXPECT_TRUE(Finish(run, *service).ok());
  ASSERT_TRUE(coordinator.WaitEnded());
  EXPECT_EQ(coordinator.split_dones().size(), 1u);
}

TEST_F(WorkerServiceTest,
       GivenANewerSessionOfTheRank_WhenItConnects_ThenItReplacesTheOlderAndTheOlderCannotReturn) {
  // Split 0 made again from batch 1 (as the coordinator hands it out once the new
  // session reads the epoch) keeps the worker (and its data port) busy until the
  // test stops it.
  FakeCoordinator coordinator(Registered(), {Assign(0), Assign(1), Assign(0, 1), kExit});
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  auto old_session = ConnectClient(service->data_port(), Secret(), 0, 1, /*session=*/3);
  ASSERT_TRUE(old_session.ok()) << old_session.status().message();
  auto first = NextBatch(*old_session);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->split_batch, 0u);

  // The trainer restarted: the coordinator gave its new client session 4. The old
  // connection is still open, yet the newer session takes the rank over at once.
  // The rest of split 0 is not sent to it (the coordinator has split 0 made again
  // from what session 3 acknowledged): the worker goes on to split 1.
  auto resumed = ConnectClient(service->data_port(), Secret(), 0, 1, /*session=*/4);
  ASSERT_TRUE(resumed.ok()) << resumed.status().message();
  auto second = NextBatch(*resumed);
  ASSERT_TRUE(second.ok()) << second.status().message();
  ExpectSameBatch(*second, Reference(1)[0]);
  // The old session's connection was closed and gets nothing more...
  (void)Credit(*old_session, 5);  // may fail already: the worker closed it
  EXPECT_FALSE(NextBatch(*old_session, 5).ok());
  // ...and the old session cannot come back.
  auto stale = ConnectClient(service->data_port(), Secret(), 0, 10, /*session=*/3);
  ASSERT_TRUE(stale.ok()) << stale.status().message();  // its ticket is valid...
  auto refused = RecvFrame(*stale, FrameLimits{}, Deadline::After(kWait));
  ASSERT_TRUE(refused.ok()) << refused.status().message();
  EXPECT_EQ(refused->type, MsgType::kError);  // ...but it was replaced
  EXPECT_NE(refused->meta.value("message", "").find("replaced by session 4"), std::string::npos)
      << refused->meta.dump();
  service->Stop();
  EXPECT_TRUE(Finish(run, *service).ok());
}

TEST_F(WorkerServiceTest, GivenATicketForAnotherRank_WhenItSubscribes_ThenTheConnectionIsDropped) {
  FakeCoordinator coordinator(Registered(), {});  // "wait" until the test stops the worker
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  auto s = DialDataPort(service->data_port(), TicketKey(Secret(), 1, 1), TicketRole(1, 1));
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_TRUE(
      SendFrame(*s, MsgType::kSubscribe, SubscribeMsg{0}.Encode(), Deadline::After(kWait)).ok());
  auto answer = RecvFrame(*s, FrameLimits{}, Deadline::After(kWait));
  EXPECT_FALSE(answer.ok());  // closed: rank 0 is not the ticket's rank 1
  service->Stop();
  EXPECT_TRUE(Finish(run, *service).ok());
}

TEST_F(WorkerServiceTest, GivenAClientKeyInsteadOfATicket_WhenItConnects_ThenAuthenticationFails) {
  FakeCoordinator coordinator(Registered(), {});
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  // The trainer's role key, as role "client": without a ticket there is no way in.
  auto s =
      DialDataPort(service->data_port(), RoleKey(Secret(), kClientRole), std::string(kClientRole));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kInvalidArgument) << s.status().message();
  EXPECT_NE(s.status().message().find("authentication failed"), std::string::npos)
      << s.status().message();
  service->Stop();
  EXPECT_TRUE(Finish(run, *service).ok());
}

TEST_F(WorkerServiceTest,
       GivenWrongSecretGarbageAndSilentPeers_WhenTheyConnect_ThenGoodClientIsStillServed) {
  FakeCoordinator coordinator(Registered(), {Assign(1), kExit});
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });

  auto silent = Socket::ConnectTcp("127.0.0.1", service->data_port(), kWait);
  ASSERT_TRUE(silent.ok());
  auto garbage = Socket::ConnectTcp("127.0.0.1", service->data_port(), kWait);
  ASSERT_TRUE(garbage.ok());
  std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(100, '\x7f');
  iovec v{junk.data(), junk.size()};
  ASSERT_TRUE(garbage->SendAll({&v, 1}, Deadline::After(kWait), "junk").ok());
  auto impostor = ConnectClient(service->data_port(), std::string(64, 'b'), 0, 10);
  ASSERT_FALSE(impostor.ok());
  EXPECT_EQ(impostor.status().code(), Code::kInvalidArgument);

  auto client = ConnectClient(service->data_port(), Secret(), 0, 10);
  ASSERT_TRUE(client.ok()) << client.status().message();
  auto got = NextBatch(*client);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ExpectSameBatch(*got, Reference(1)[0]);
  EXPECT_TRUE(Finish(run, *service).ok());
}

TEST_F(WorkerServiceTest,
       GivenCoordinatorClosesWhileWorkerWaitsForClient_ThenRunReturnsUnavailable) {
  nlohmann::json assign = Assign(0);
  assign["close_after"] = true;
  nlohmann::json registered = Registered();
  registered["reconnect_s"] = 0.5;  // no coordinator comes back: it gives up then
  FakeCoordinator coordinator(registered, {assign});
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  Status st = Finish(run, *service);
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.message();
  EXPECT_NE(st.message().find("coordinator " + coordinator.address()), std::string::npos)
      << st.message();
  EXPECT_TRUE(coordinator.split_dones().empty());
}

TEST_F(WorkerServiceTest,
       GivenTheCoordinatorGoneMidSplit_WhenItAnswersAgain_ThenTheSplitEndsAndItRegistersWithItsId) {
  nlohmann::json assign = Assign(0);
  assign["close_after"] = true;  // the coordinator dies after handing the split out
  FakeCoordinator coordinator(Registered(), {assign, kExit}, false, /*connections=*/2);
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  // The trainer takes the split whole meanwhile.
  auto client = ConnectClient(service->data_port(), Secret(), 0, 8);
  ASSERT_TRUE(client.ok()) << client.status().message();
  const std::vector<Batch> want = Reference(0);
  ASSERT_EQ(want.size(), 2u);
  for (const Batch& w : want) {
    auto got = NextBatch(*client);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ExpectSameBatch(*got, w);
  }
  EXPECT_TRUE(Finish(run, *service).ok());
  ASSERT_TRUE(coordinator.WaitEnded());
  const std::vector<nlohmann::json> registers = coordinator.registers();
  ASSERT_EQ(registers.size(), 2u);
  EXPECT_FALSE(registers[0].contains("worker_id"));
  auto again = RegisterMsg::Decode(registers[1]);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->worker_id, 1u) << "it comes back under its id";
  ASSERT_EQ(again->made.size(), 1u) << registers[1].dump();
  EXPECT_EQ(again->made[0].split, 0u);
  EXPECT_EQ(again->made[0].batch_count, 2u) << "its SPLIT_DONE, said again";
  EXPECT_TRUE(coordinator.bye());
  EXPECT_EQ(service->splits_done(), 1u);
}

TEST_F(WorkerServiceTest, GivenExit_WhenAsked_ThenWorkerSaysByeAndReturnsOk) {
  FakeCoordinator coordinator(Registered(), {{{"kind", "wait"}, {"retry_s", 0.01}}, kExit});
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  EXPECT_TRUE(Finish(run, *service).ok());
  ASSERT_TRUE(coordinator.WaitEnded());
  EXPECT_TRUE(coordinator.bye());
  EXPECT_EQ(service->splits_done(), 0u);
}

TEST_F(WorkerServiceTest,
       GivenASplitNoTrainerTakes_WhenTheCoordinatorSaysExitUnasked_ThenItLeavesQuietlyWithBye) {
  // The split waits for credit from a trainer that never connects (the run is
  // over); its heartbeats say so, and the coordinator answers "exit".
  FakeCoordinator coordinator(Registered(), {Assign(0)}, /*exit_on_busy_heartbeat=*/true);
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  EXPECT_TRUE(Finish(run, *service).ok());
  ASSERT_TRUE(coordinator.WaitEnded());
  EXPECT_TRUE(coordinator.pushed_exit());
  EXPECT_TRUE(coordinator.bye());
  EXPECT_TRUE(coordinator.split_dones().empty()) << "the split was left unfinished";
}

TEST_F(WorkerServiceTest,
       GivenASplitBeingMade_WhenHeartbeatsGoUnanswered_ThenTheWorkerMakesItAsBefore) {
  // A coordinator that never pushes: the heartbeats inside the split (every
  // 0.05 s) change nothing, and the split is made whole for the trainer.
  FakeCoordinator coordinator(Registered(), {Assign(0), kExit});
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  auto client = ConnectClient(service->data_port(), Secret(), 0, /*credit=*/0);
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE(coordinator.WaitBusyHeartbeats(3)) << "heartbeats while it waits for credit";
  ASSERT_TRUE(Credit(*client, 100).ok());
  for (const Batch& want : Reference(0)) {
    auto got = NextBatch(*client);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ExpectSameBatch(*got, want);
  }
  EXPECT_TRUE(Finish(run, *service).ok());
  ASSERT_TRUE(coordinator.WaitEnded());
  EXPECT_EQ(coordinator.split_dones().size(), 1u);
}

TEST_F(WorkerServiceTest, GivenStop_WhileWaitingForClient_ThenWorkerSaysByeWithoutSplitDone) {
  FakeCoordinator coordinator(Registered(), {Assign(0)});
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  service->Stop();
  EXPECT_TRUE(Finish(run, *service).ok());
  ASSERT_TRUE(coordinator.WaitEnded());
  EXPECT_TRUE(coordinator.bye());
  EXPECT_TRUE(coordinator.split_dones().empty());
}

TEST_F(WorkerServiceTest,
       GivenDrain_WhileMakingASplit_ThenItFinishesTheSplitAndLeavesWhenTheCoordinatorSaysExit) {
  const nlohmann::json hold = {{"kind", "drain"}, {"retry_s", 0.01}};
  FakeCoordinator coordinator(Registered(), {Assign(0), hold, hold, kExit});
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  auto client = ConnectClient(service->data_port(), Secret(), 0, 1);
  ASSERT_TRUE(client.ok()) << client.status().message();
  auto first = NextBatch(*client);  // split 0 is being made, one batch per credit
  ASSERT_TRUE(first.ok()) << first.status().message();
  service->Drain();
  service->Drain();  // idempotent
  ASSERT_TRUE(Credit(*client, 1).ok());
  int64_t split_batches = -1;
  auto second = NextBatch(*client, kWait, &split_batches);
  ASSERT_TRUE(second.ok()) << "the split in hand is finished: " << second.status().message();
  EXPECT_EQ(split_batches, 2);
  const std::vector<Batch> want = Reference(0);
  ASSERT_EQ(want.size(), 2u);
  ExpectSameBatch(*first, want[0]);
  ExpectSameBatch(*second, want[1]);
  EXPECT_TRUE(Finish(run, *service).ok());
  ASSERT_TRUE(coordinator.WaitEnded());
  EXPECT_TRUE(coordinator.bye());
  ASSERT_EQ(coordinator.split_dones().size(), 1u);
  EXPECT_EQ(coordinator.split_dones()[0]["batch_count"], 2);
  // Every GET_SPLIT after the drain says so; the first (before it) does not.
  const std::vector<nlohmann::json> asks = coordinator.get_splits();
  ASSERT_EQ(asks.size(), 4u);
  EXPECT_EQ(asks[0], nlohmann::json::object());
  for (size_t i = 1; i < asks.size(); ++i) EXPECT_EQ(asks[i]["draining"], true) << i;
}

TEST_F(WorkerServiceTest, GivenDrain_WhileWaitingToAskAgain_ThenItAsksAtOnceAndLeaves) {
  // "Ask again in an hour": a drain that begins meanwhile is said at once,
  // whenever it comes.
  const nlohmann::json later = {{"kind", "wait"}, {"retry_s", 3600}};
  nlohmann::json registered = Registered();
  registered["liveness_timeout_s"] = 3600;  // (a retry is capped at it)
  FakeCoordinator coordinator(registered, {later, kExit});
  auto service = StartWorker(coordinator, 3600);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  while (coordinator.get_splits().empty())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  service->Drain();
  ASSERT_EQ(run.wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << "it slept out the retry";
  EXPECT_TRUE(run.get().ok());
  ASSERT_TRUE(coordinator.WaitEnded());
  EXPECT_TRUE(coordinator.bye());
  const std::vector<nlohmann::json> asks = coordinator.get_splits();
  ASSERT_EQ(asks.size(), 2u);
  EXPECT_EQ(asks[1]["draining"], true);
}

TEST_F(WorkerServiceTest, GivenDrain_WhenTheGraceEndsFirst_ThenItStopsWithoutSplitDone) {
  FakeCoordinator coordinator(Registered(), {Assign(0)});
  FakeClock clock;
  auto service = StartWorker(coordinator, 10, &clock);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  StopAtEnd stop_at_end{*service};
  auto client = ConnectClient(service->data_port(), Secret(), 0, 1);
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE(NextBatch(*client).ok());
  service->Drain();  // and no more credit: the split cannot end in the grace
  // The grace is on the worker's clock: while it stands still, the worker waits.
  clock.Advance(9.9);
  EXPECT_EQ(run.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "stopped before its grace ended";
  clock.Advance(0.2);
  EXPECT_TRUE(Finish(run, *service).ok());
  ASSERT_TRUE(coordinator.WaitEnded());
  EXPECT_TRUE(coordinator.bye());
  EXPECT_TRUE(coordinator.split_dones().empty()) << "the split is made elsewhere";
}

TEST_F(WorkerServiceTest, GivenAnIdleWorker_ThenItsHeartbeatsFollowItsClock) {
  // "Ask again in an hour": the worker is idle, and sends only heartbeats, every
  // 0.05 s of its clock (the fixture's heartbeat_s).
  const nlohmann::json later = {{"kind", "wait"}, {"retry_s", 3600}};
  nlohmann::json registered = Registered();
  registered["liveness_timeout_s"] = 3600;
  FakeCoordinator coordinator(registered, {later, kExit});
  FakeClock clock;
  auto service = StartWorker(coordinator, 10, &clock);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  StopAtEnd stop_at_end{*service};
  while (coordinator.get_splits().empty())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // While its clock stands still, none (on real time it would send one every 0.05 s).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(coordinator.heartbeats(), 0);
  // As it moves, they come, at most one a period: three take at least two periods.
  const double start = clock.Now();
  const Deadline deadline = Deadline::After(kWait);
  while (coordinator.heartbeats() < 3 && !deadline.expired()) {
    clock.Advance(0.005);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_GE(coordinator.heartbeats(), 3);
  EXPECT_GE(clock.Now() - start, 2 * 0.05);
  service->Stop();
  EXPECT_TRUE(Finish(run, *service).ok());
}

TEST(WorkerSignalsTest, GivenDrainsOn_ThenTheFirstTermAndItsTwinDrainAndALaterOneStops) {
  FakeClock clock;
  WorkerSignals on(true, clock);
  using A = WorkerSignals::Action;
  EXPECT_EQ(on.On(SIGUSR2), A::kDrain);
  EXPECT_EQ(on.On(SIGTERM), A::kDrain);
  clock.Advance(WorkerSignals::kSameSignalS / 2);
  EXPECT_EQ(on.On(SIGTERM), A::kDrain) << "the same SIGTERM, delivered twice";
  EXPECT_EQ(on.On(SIGUSR2), A::kDrain);
  clock.Advance(WorkerSignals::kSameSignalS);
  EXPECT_EQ(on.On(SIGTERM), A::kStop) << "a second SIGTERM stops";
  EXPECT_EQ(on.On(SIGINT), A::kStop);
  WorkerSignals off(false, clock);
  for (int sig : {SIGTERM, SIGUSR2, SIGINT}) EXPECT_EQ(off.On(sig), A::kStop) << sig;
}

TEST_F(WorkerServiceTest, GivenDrain_WhenTheCoordinatorIsGone_ThenTheDrainEndsWell) {
  const nlohmann::json hold = {{"kind", "drain"}, {"retry_s", 0.01}, {"close_after", true}};
  FakeCoordinator coordinator(Registered(), {{{"kind", "wait"}, {"retry_s", 0.2}}, hold});
  auto service = StartWorker(coordinator);
  ASSERT_TRUE(service);
  auto run = std::async(std::launch::async, [&] { return service->Run(); });
  service->Drain();
  Status st = Finish(run, *service);
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST_F(WorkerServiceTest, GivenBadPipeline_WhenRegistering_ThenStartFailsNamingIt) {
  nlohmann::json registered = Registered();
  registered["pipeline"]["stages"][0]["op"] = "no_such_op";
  FakeCoordinator coordinator(registered, {});
  WorkerServiceOptions options;
  options.coordinator = coordinator.address();
  options.secret = Secret();
  auto service = WorkerService::Start(options);
  ASSERT_FALSE(service.ok());
  EXPECT_NE(service.status().message().find("test.json"), std::string::npos)
      << service.status().message();
  EXPECT_TRUE(coordinator.WaitEnded());
}

}  // namespace
}  // namespace gm
