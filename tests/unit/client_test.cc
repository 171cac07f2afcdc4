// Client tests against a fake coordinator and fake data workers written here: real
// sockets, real handshakes, real batches made by RunSplit from JPEG photos.
#include "client/client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "core/clock.h"
#include "core/step_log.h"
#include "core/thread_annotations.h"
#include "dataplane/auth.h"
#include "dataplane/protocol.h"
#include "include/goldminer/client.h"
#include "tests/unit/test_util.h"
#include "worker/engine.h"
#include "worker/pipeline.h"

namespace gm {
namespace {

constexpr double kTestTimeoutS = 20;  // every wait in these tests ends by then

// Accepts connections until stopped, handing each to `serve` on its own thread.
class FakeServer {
 public:
  FakeServer(std::string secret, std::string role, std::function<void(Socket&, size_t)> serve)
      : secret_(std::move(secret)), role_(std::move(role)), serve_(std::move(serve)) {
    auto listener = Listener::ListenTcp("127.0.0.1", 0);
    EXPECT_TRUE(listener.ok()) << listener.status().message();
    listener_ = std::move(*listener);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~FakeServer() {
    stop_ = true;
    accept_thread_.join();
    for (auto& t : threads_) t.join();
  }
  std::string address() const { return listener_.address(); }

 private:
  void AcceptLoop() {
    const double end = MonotonicSeconds() + kTestTimeoutS;
    for (size_t n = 0; !stop_ && MonotonicSeconds() < end;) {
      auto socket = listener_.Accept(0.05);
      if (!socket.ok()) continue;
      threads_.emplace_back([this, n, s = std::make_shared<Socket>(std::move(*socket))] {
        if (ServerHandshake(*s, secret_, role_, Deadline::After(kTestTimeoutS), nullptr).ok())
          serve_(*s, n);
      });
      ++n;
    }
  }
  std::string secret_;
  std::string role_;
  std::function<void(Socket&, size_t)> serve_;
  Listener listener_;
  std::atomic<bool> stop_{false};
  std::thread accept_thread_;
  std::vector<std::thread> threads_;
};

// Answers the client's control requests from a plan the test sets.
class FakeCoordinator {
 public:
  // `secret`: the one key the fake accepts for every role; it also hands it out as
  // the clients' ticket, which the FakeWorker below accepts likewise.
  explicit FakeCoordinator(std::string secret)
      : ticket_(secret),
        server_(std::move(secret), "coordinator", [this](Socket& s, size_t) { Serve(s); }) {}
  std::string address() const { return server_.address(); }

  void SetPlan(std::vector<std::pair<uint64_t, int64_t>> splits, std::vector<std::string> workers) {
    MutexLock lock(mu_);
    splits_ = std::move(splits);
    workers_ = std::move(workers);
  }
  // Waits until `n` acks arrived; returns them (split, split_batch) in arrival order.
  std::vector<std::pair<uint64_t, uint64_t>> WaitAcks(size_t n) {
    MutexLock lock(mu_);
    lock.WaitFor(cv_, kTestTimeoutS, [&]() REQUIRES(mu_) { return acks_.size() >= n; });
    return acks_;
  }
  // Waits until the client asked for the worker list (it only does so while blocked).
  bool WaitGetWorkers(int n = 1) {
    MutexLock lock(mu_);
    return lock.WaitFor(cv_, kTestTimeoutS, [&]() REQUIRES(mu_) { return get_workers_ >= n; });
  }
  int GetWorkersCount() {
    MutexLock lock(mu_);
    return get_workers_;
  }
  nlohmann::json resume() {
    MutexLock lock(mu_);
    return resume_;
  }
  // WORKERS then says who holds which split of epoch 0 ((split, index into the
  // workers)); after the first FAULT, `after_fault` and `workers_after_fault`
  // apply (the coordinator dropped the reported worker and gave its splits away).
  void SetHolders(std::vector<std::pair<uint64_t, uint64_t>> holders,
                  std::vector<std::pair<uint64_t, uint64_t>> after_fault,
                  std::vector<std::string> workers_after_fault) {
    MutexLock lock(mu_);
    holders_ = std::move(holders);
    after_fault_ = std::move(after_fault);
    workers_after_fault_ = std::move(workers_after_fault);
    holders_known_ = true;
  }
  // WORKERS then lists `workers` (not the plan's) and says that `holders`
  // ((split, index into `workers`)) hold the splits of epoch 0. Without this or
  // SetHolders, WORKERS lists the plan's workers and says the first holds every
  // split of the plan.
  void SetView(std::vector<std::pair<uint64_t, uint64_t>> holders,
               std::vector<std::string> workers) {
    MutexLock lock(mu_);
    holders_ = std::move(holders);
    after_fault_ = holders_;
    view_workers_ = workers;
    workers_after_fault_ = std::move(workers);
    holders_known_ = true;
  }
  size_t FaultCount() {
    MutexLock lock(mu_);
    return faults_.size();
  }
  // Waits until `n` FAULT frames arrived; returns their metas.
  std::vector<nlohmann::json> WaitFaults(size_t n) {
    MutexLock lock(mu_);
    lock.WaitFor(cv_, kTestTimeoutS, [&]() REQUIRES(mu_) { return faults_.size() >= n; });
    return faults_;
  }
  int HeartbeatCount() {
    MutexLock lock(mu_);
    return heartbeats_;
  }
  // Waits until `n` HEARTBEAT frames arrived; false if they did not within the limit.
  bool WaitHeartbeats(int n) {
    MutexLock lock(mu_);
    return lock.WaitFor(cv_, kTestTimeoutS, [&]() REQUIRES(mu_) { return heartbeats_ >= n; });
  }
  bool close_after_plan = false;
  std::string refuse_resume;  // non-empty: RESUME is answered ERROR with this message
  int wait_answers = 0;       // GET_PLAN answered "wait" this many times first

 private:
  void Serve(Socket& s) {
    while (true) {
      auto frame = RecvFrame(s, FrameLimits{}, Deadline::After(kTestTimeoutS));
      if (!frame.ok()) return;
      MutexLock lock(mu_);
      nlohmann::json workers = workers_;
      // With close_after_plan it does not come back: a client dialling again is
      // closed on.
      if (frame->type == MsgType::kSubscribe && close_after_plan && frame->meta.contains("session"))
        return s.Close();
      if (frame->type == MsgType::kSubscribe) {
        (void)SendFrame(s, MsgType::kSubscribed,
                        {{"run_id", "test"},
                         {"batch_size", 2},
                         {"world_size", frame->meta["world_size"]},
                         {"epochs", 1},
                         {"session", 1},
                         {"ticket", ticket_},
                         {"order", std::string(64, '0')},
                         {"seed", 7}},
                        Deadline::After(5));
      } else if (frame->type == MsgType::kGetPlan && frame->meta["epoch"] != 0) {
        (void)SendFrame(s, MsgType::kPlan,
                        {{"epoch", frame->meta["epoch"]}, {"end", true}, {"epochs", 1}},
                        Deadline::After(5));
      } else if (frame->type == MsgType::kGetPlan && wait_answers > 0) {
        --wait_answers;
        (void)SendFrame(s, MsgType::kPlan,
                        {{"epoch", frame->meta["epoch"]}, {"wait", true}, {"retry_s", 0.01}},
                        Deadline::After(5));
      } else if (frame->type == MsgType::kResume && !refuse_resume.empty()) {
        resume_ = frame->meta;
        (void)SendFrame(s, MsgType::kError, {{"message", refuse_resume}}, Deadline::After(5));
        return s.Close();
      } else if (frame->type == MsgType::kGetPlan || frame->type == MsgType::kResume) {
        // RESUME is answered like GET_PLAN of its epoch.
        if (frame->type == MsgType::kResume) resume_ = frame->meta;
        nlohmann::json splits = nlohmann::json::array();
        for (auto [split, count] : splits_) splits.push_back({split, count});
        (void)SendFrame(s, MsgType::kPlan,
                        {{"epoch", frame->meta["epoch"]}, {"splits", splits}, {"workers", workers}},
                        Deadline::After(5));
        if (close_after_plan) return s.Close();
      } else if (frame->type == MsgType::kGetWorkers) {
        ++get_workers_;
        nlohmann::json answer = {
            {"workers", view_workers_ ? nlohmann::json(*view_workers_) : workers}};
        nlohmann::json holders = nlohmann::json::array();
        if (holders_known_) {
          for (auto [split, index] : holders_) holders.push_back({split, index});
        } else if (!workers_.empty()) {
          for (auto [split, count] : splits_) holders.push_back({split, 0});
        }
        answer.update({{"epoch", 0}, {"holders", holders}});
        (void)SendFrame(s, MsgType::kWorkers, answer, Deadline::After(5));
      } else if (frame->type == MsgType::kFault) {
        if (faults_.empty() && holders_known_) {
          holders_ = after_fault_;
          workers_ = workers_after_fault_;
          view_workers_.reset();
        }
        faults_.push_back(frame->meta);
      } else if (frame->type == MsgType::kAck) {
        for (const auto& b : frame->meta["batches"]) acks_.emplace_back(b[0], b[1]);
      } else if (frame->type == MsgType::kHeartbeat) {
        ++heartbeats_;
      }
      cv_.notify_all();
    }
  }
  const std::string ticket_;
  Mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<uint64_t, int64_t>> splits_;
  std::vector<std::string> workers_;
  std::vector<std::pair<uint64_t, uint64_t>> acks_;
  nlohmann::json resume_;
  bool holders_known_ = false;
  std::vector<std::pair<uint64_t, uint64_t>> holders_, after_fault_;
  std::vector<std::string> workers_after_fault_;
  std::optional<std::vector<std::string>> view_workers_;
  std::vector<nlohmann::json> faults_;
  int get_workers_ = 0;
  int heartbeats_ = 0;
  FakeServer server_;  // last: its threads use the members above
};

// One batch a fake worker sends; `split_batches` marks a split's last batch.
struct Item {
  const Batch* batch = nullptr;  // null: a HEARTBEAT frame instead, which no data port sends
  std::optional<uint64_t> split_batches;
  int64_t rank = 0;  // BATCH's rank (the client is rank 0)
};

// What a fake worker does on its n-th connection: send `items` one per credit, then
// close when `close_at_end` (saying BYE first when `bye_at_end`), else hold the
// connection until the client leaves.
struct Script {
  explicit Script(std::vector<Item> send = {}, bool close = false)
      : items(std::move(send)), close_at_end(close) {}
  std::vector<Item> items;
  bool close_at_end = false;
  bool bye_at_end = false;
  std::function<void()> before_first;  // e.g. wait for the test's signal
};

class FakeWorker {
 public:
  FakeWorker(std::string secret, std::vector<Script> scripts)
      : scripts_(std::move(scripts)),
        server_(std::move(secret), "worker", [this](Socket& s, size_t n) { Serve(s, n); }) {}
  std::string address() const { return server_.address(); }
  size_t sent() const { return sent_; }                // BATCH frames, over all connections
  size_t connections() const { return connections_; }  // authenticated, over its life

 private:
  void Serve(Socket& s, size_t n) {
    ++connections_;
    if (n >= scripts_.size()) return;
    const Script& script = scripts_[n];
    uint64_t credit = 0;
    auto next = RecvFrame(s, FrameLimits{}, Deadline::After(kTestTimeoutS));
    if (!next.ok() || next->type != MsgType::kSubscribe) return;
    if (script.before_first) script.before_first();
    for (const Item& item : script.items) {
      while (credit == 0) {
        auto frame = RecvFrame(s, FrameLimits{}, Deadline::After(kTestTimeoutS));
        if (!frame.ok()) return;
        if (frame->type == MsgType::kCredit) credit += frame->meta["n"].get<uint64_t>();
      }
      if (item.batch == nullptr) {
        if (!SendFrame(s, MsgType::kHeartbeat, nlohmann::json::object(), Deadline::After(5)).ok())
          return;
        continue;
      }
      nlohmann::json meta = EncodeBatchMeta(*item.batch);
      meta["rank"] = item.rank;
      if (item.split_batches) meta["split_batches"] = *item.split_batches;
      if (!SendFrame(s, MsgType::kBatch, meta, BatchPayload(*item.batch), Deadline::After(5)).ok())
        return;
      --credit;
      ++sent_;
    }
    if (script.bye_at_end) (void)SendFrame(s, MsgType::kBye, {}, Deadline::After(5));
    if (script.close_at_end) return s.Close();
    while (RecvFrame(s, FrameLimits{}, Deadline::After(kTestTimeoutS)).ok()) {
    }
  }
  std::vector<Script> scripts_;
  std::atomic<size_t> sent_{0};
  std::atomic<size_t> connections_{0};
  FakeServer server_;
};

class BatchCollector : public BatchSink {
 public:
  Status Consume(const Batch& batch) override {
    batches.push_back(batch);
    return Status::Ok();
  }
  std::vector<Batch> batches;
};

// How ClientTest::DrainBesideAFaultyWorker sets up the faulty worker.
struct FaultSetup {
  bool holds_second = false;                      // it holds the second split too
  uint64_t lookahead = kDefaultLookAheadBatches;  // ClientOptions::max_lookahead_batches
};

// Given 12 photos, 2 per batch and 4 per split: 3 splits of 2 batches, made by RunSplit.
class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int c = 0; c < 2; ++c) {
      for (int i = 0; i < 6; ++i) {
        dir_.Write("corpus/" + std::to_string(c) + "_" + std::to_string(i) + ".jpg",
                   testing::ReadAll(testing::SourcePath("tests/data/engine/photo" +
                                                        std::to_string(i) + ".jpg")));
      }
    }
    auto spec = nlohmann::json::parse(R"({"version": 1,
      "source": {"type": "files", "root": "corpus", "pattern": "*.jpg"},
      "stages": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [8, 8]}],
      "batch": {"size": 2}, "seed": 3})");
    PipelineOptions po;
    po.samples_per_split = 4;
    auto pipeline = Pipeline::FromJson(spec, "test.json", dir_.path(), po);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status().message();
    for (size_t split : EpochSplitOrder(*pipeline, 0)) {
      BatchCollector sink;
      ASSERT_TRUE(RunSplit(*pipeline, EngineOptions{}, SplitTask{0, split}, sink).ok());
      order_.push_back(split);
      splits_[split] = std::move(sink.batches);
    }
    ASSERT_EQ(order_.size(), 3u);
    for (size_t split : order_) {
      ASSERT_EQ(splits_[split].size(), 2u);
      for (const Batch& b : splits_[split]) sequence_.push_back(&b);
    }
  }

  // Items for whole splits, each last batch marked with the split's count.
  std::vector<Item> Items(std::vector<size_t> plan_positions) {
    std::vector<Item> items;
    for (size_t p : plan_positions) {
      const auto& batches = splits_[order_[p]];
      for (size_t b = 0; b < batches.size(); ++b) {
        items.push_back({&batches[b], b + 1 == batches.size()
                                          ? std::optional<uint64_t>(batches.size())
                                          : std::nullopt});
      }
    }
    return items;
  }
  std::vector<std::pair<uint64_t, int64_t>> Plan(bool known) {
    std::vector<std::pair<uint64_t, int64_t>> plan;
    for (size_t split : order_) plan.emplace_back(split, known ? 2 : -1);
    return plan;
  }
  ClientOptions Options(const std::string& coordinator) {
    ClientOptions o;
    o.coordinator = coordinator;
    o.secret = secret_;
    o.rank = 0;
    o.world_size = 1;
    o.timeout_s = kTestTimeoutS;
    return o;
  }
  // Every batch until the end of the epoch, as keys of their first sample.
  static std::vector<std::string> Drain(Client& client) {
    std::vector<std::string> keys;
    while (true) {
      auto next = client.Next();
      EXPECT_TRUE(next.ok()) << next.status().message();
      if (!next.ok() || !next->has_value()) return keys;
      keys.push_back((*next)->keys.at(0));
    }
  }
  // A worker playing `faulty` holds the first split, another the rest; once the
  // client reports the first (FAULT), the other holds every split, and only then
  // sends them all. The epoch drained with a stall timeout of 5 s on a FakeClock
  // that a ticker moves (MoveUntilFault), so no machine's speed decides it.
  struct FaultRun {
    std::vector<std::string> keys;
    std::vector<nlohmann::json> faults;
    std::string faulty;  // its address
    uint64_t connections_lost = 0;
    size_t sent_by_faulty = 0;
  };
  FaultRun DrainBesideAFaultyWorker(Script faulty, FaultSetup setup = FaultSetup{}) {
    FaultRun run;
    FakeCoordinator coordinator(secret_);
    FakeWorker bad(secret_, {std::move(faulty)});
    Script after_fault{Items({0, 1, 2})};
    after_fault.before_first = [&] { (void)coordinator.WaitFaults(1); };
    FakeWorker other(secret_, {after_fault});
    coordinator.SetPlan(Plan(false), {bad.address(), other.address()});
    coordinator.SetHolders(
        {{order_[0], 0}, {order_[1], setup.holds_second ? 0 : 1}, {order_[2], 1}},
        {{order_[0], 0}, {order_[1], 0}, {order_[2], 0}}, {other.address()});
    FakeClock clock;
    ClientOptions options = Options(coordinator.address());
    options.stall_s = 5;
    options.timeout_s = 1000;  // on the fake clock: only the stall deadline can pass
    options.clock = &clock;
    options.max_lookahead_batches = setup.lookahead;
    std::atomic<bool> drained{false};
    std::thread ticker([&] { MoveUntilFault(clock, coordinator, drained); });
    auto client = Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status().message();
    if (client.ok()) run.keys = Drain(**client);
    drained = true;
    ticker.join();
    if (!client.ok()) return run;
    run.faults = coordinator.WaitFaults(1);
    run.faulty = bad.address();
    run.connections_lost = (*client)->stats().connections_lost;
    run.sent_by_faulty = bad.sent();
    return run;
  }
  // Moves `clock` on while the client drains: 10 ms a millisecond until the
  // coordinator has a FAULT (so the 5 s stall deadline passes for the silent
  // worker only: the other is held until then), then one refresh period at a time,
  // 8 at most (4 s, less than a stall deadline), so the client asks for the new
  // holders but no deadline of the other worker can pass. A client that never
  // finishes is ended by its own timeout after 20 s of real time.
  static void MoveUntilFault(FakeClock& clock, FakeCoordinator& coordinator,
                             const std::atomic<bool>& drained) {
    const double limit = MonotonicSeconds() + kTestTimeoutS;
    while (!drained && coordinator.FaultCount() == 0 && MonotonicSeconds() < limit) {
      clock.Advance(0.01);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (int i = 0; i < 8 && !drained; ++i) {
      clock.Advance(kClientRefreshS);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    while (!drained && MonotonicSeconds() < limit) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!drained) clock.Advance(2000);  // past timeout_s: the client gives up
  }
  static ResumeState At(uint64_t epoch, uint64_t position) {
    ResumeState state;
    state.epoch = epoch;
    state.position = position;
    return state;
  }
  std::vector<std::string> Expected(size_t from = 0) const {
    std::vector<std::string> keys;
    for (size_t i = from; i < sequence_.size(); ++i) keys.push_back(sequence_[i]->keys.at(0));
    return keys;
  }

  testing::TempDir dir_;
  std::string secret_ = std::string(64, 'a');
  std::vector<size_t> order_;
  std::map<size_t, std::vector<Batch>> splits_;
  std::vector<const Batch*> sequence_;
};

TEST_F(ClientTest,
       GivenOneWorkerAndUnknownCountsWhenDrainedThenEveryBatchArrivesInOrderAndIsAcked) {
  FakeWorker worker(secret_, {Script{Items({0, 1, 2})}});
  FakeCoordinator coordinator(secret_);
  coordinator.SetPlan(Plan(false), {worker.address()});
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_EQ(Drain(**client), Expected());
  EXPECT_EQ(coordinator.WaitAcks(6).size(), 6u);
  ClientStats stats = (*client)->stats();
  EXPECT_EQ(stats.batches, 6u);
  EXPECT_EQ(stats.samples, 12u);
  EXPECT_EQ(stats.duplicates_dropped, 0u);
  EXPECT_EQ((*client)->state().position, 6u);
}

TEST_F(ClientTest, GivenPlanAnswersSayingWaitThenTheClientAsksAgainAndGetsEveryBatch) {
  FakeWorker worker(secret_, {Script{Items({0, 1, 2})}});
  FakeCoordinator coordinator(secret_);
  coordinator.wait_answers = 3;
  coordinator.SetPlan(Plan(true), {worker.address()});
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_EQ(Drain(**client), Expected());
}

TEST_F(ClientTest, GivenAnEpochPastTheRunsLastThenTheErrorSaysHowManyEpochsTheRunServes) {
  FakeWorker worker(secret_, {Script{Items({0, 1, 2})}});
  FakeCoordinator coordinator(secret_);
  coordinator.SetPlan(Plan(true), {worker.address()});
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  Status st = (*client)->StartEpoch(1);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("serves only 1 epoch(s)"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--epochs 2 or more"), std::string::npos) << st.message();
}

TEST_F(ClientTest, GivenTwoWorkersServingSplitsOutOfOrderThenNextReturnsTheSequenceOrder) {
  FakeWorker late(secret_, {Script{Items({2, 1})}});
  FakeWorker early(secret_, {Script{Items({0})}});
  FakeCoordinator coordinator(secret_);
  coordinator.SetPlan(Plan(true), {late.address(), early.address()});
  coordinator.SetView({{order_[0], 1}, {order_[1], 0}, {order_[2], 0}},
                      {late.address(), early.address()});
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_EQ(Drain(**client), Expected());
}

TEST_F(ClientTest, GivenABatchSentTwiceThenTheCopyIsDroppedAndCounted) {
  std::vector<Item> items = Items({0, 1, 2});
  items.insert(items.begin() + 1, items[0]);
  FakeWorker worker(secret_, {Script{items}});
  FakeCoordinator coordinator(secret_);
  coordinator.SetPlan(Plan(false), {worker.address()});
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_EQ(Drain(**client), Expected());
  EXPECT_EQ((*client)->stats().duplicates_dropped, 1u);
}

TEST_F(ClientTest, GivenAWorkerThatBreaksMidSplitWhenAnotherRemakesItThenEveryBatchArrivesOnce) {
  std::vector<Item> first_batch = Items({0});
  first_batch.resize(1);
  FakeWorker broken(secret_, {Script{first_batch, /*close_at_end=*/true}});
  FakeWorker other(secret_, {Script{Items({0, 1, 2})}});
  FakeCoordinator coordinator(secret_);
  coordinator.SetPlan(Plan(false), {broken.address(), other.address()});
  // The coordinator has given the broken worker's split to the other.
  coordinator.SetView({{order_[0], 0}, {order_[1], 0}, {order_[2], 0}}, {other.address()});
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  std::vector<std::string> keys = Drain(**client);
  EXPECT_EQ(keys, Expected());
  std::set<std::string> unique(keys.begin(), keys.end());
  EXPECT_EQ(unique.size(), keys.size());
}

TEST_F(ClientTest, GivenAWorkerThatSaysByeBeforeItClosesThenItIsNotCountedAsALostConnection) {
  for (const bool bye : {true, false}) {
    std::vector<Item> first_batch = Items({0});
    first_batch.resize(1);
    Script leaving{first_batch, /*close_at_end=*/true};
    leaving.bye_at_end = bye;
    FakeWorker worker(secret_, {leaving});
    FakeWorker other(secret_, {Script{Items({0, 1, 2})}});
    FakeCoordinator coordinator(secret_);
    coordinator.SetPlan(Plan(false), {worker.address(), other.address()});
    coordinator.SetView({{order_[0], 0}, {order_[1], 0}, {order_[2], 0}}, {other.address()});
    auto client = Client::Connect(Options(coordinator.address()));
    ASSERT_TRUE(client.ok()) << client.status().message();
    EXPECT_EQ(Drain(**client), Expected()) << "bye " << bye;
    if (bye) {
      EXPECT_EQ((*client)->stats().connections_lost, 0u) << "a worker that said BYE left";
    } else {
      // The other worker's batches may all be in before the leaving one's close is
      // read: that it is counted is what matters, not when.
      const Deadline deadline = Deadline::After(kTestTimeoutS);
      while ((*client)->stats().connections_lost == 0 && !deadline.expired())
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      EXPECT_GE((*client)->stats().connections_lost, 1u) << "a worker that closed broke";
    }
  }
}

// A worker that drained says BYE and leaves; the coordinator lists it until it hears
// the connection close. Dialling it meanwhile found nobody there: "cannot connect to
// worker ...: Connection refused", a warning in a healthy run.
TEST_F(ClientTest, GivenAWorkerThatSaidBye_WhenTheCoordinatorStillListsIt_ThenItIsNotDialled) {
  std::vector<Item> first_batch = Items({0});
  first_batch.resize(1);
  Script leaving_script{first_batch, /*close_at_end=*/true};
  leaving_script.bye_at_end = true;
  FakeWorker leaving(secret_, {leaving_script, Script{}});
  FakeCoordinator coordinator(secret_);
  Script honest{Items({0, 1, 2})};
  // The other worker sends nothing until the leaving one said BYE and the client,
  // blocked, asked for the workers five more times (each answer lists the leaver).
  honest.before_first = [&coordinator, &leaving] {
    const Deadline deadline = Deadline::After(kTestTimeoutS);
    while (leaving.sent() == 0 && !deadline.expired())
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    coordinator.WaitGetWorkers(coordinator.GetWorkersCount() + 5);
  };
  FakeWorker other(secret_, {honest});
  coordinator.SetPlan(Plan(false), {leaving.address(), other.address()});
  coordinator.SetView({{order_[0], 1}, {order_[1], 1}, {order_[2], 1}},
                      {leaving.address(), other.address()});
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_EQ(Drain(**client), Expected());
  EXPECT_EQ(leaving.connections(), 1u) << "the worker that said BYE was dialled again";
  EXPECT_EQ((*client)->stats().connections_lost, 0u);
}

TEST_F(ClientTest, GivenABatchForAnotherRank_ThenThatWorkerIsDroppedAndAnotherMakesItsSplits) {
  std::vector<Item> other_rank = Items({0});
  for (Item& item : other_rank) item.rank = 1;
  FakeWorker liar(secret_, {Script{other_rank}});
  FakeWorker other(secret_, {Script{Items({0, 1, 2})}});
  FakeCoordinator coordinator(secret_);
  coordinator.SetPlan(Plan(false), {liar.address(), other.address()});
  coordinator.SetView({{order_[0], 1}, {order_[1], 1}, {order_[2], 1}},
                      {liar.address(), other.address()});
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_EQ(Drain(**client), Expected());  // every batch once, from the honest worker
  // The coordinator is told, so that it drops the liar and gives its splits away,
  // even when the lie arrives after the epoch was drained (the honest worker made
  // every split): the client says FAULT as soon as it knows.
  std::vector<nlohmann::json> faults = coordinator.WaitFaults(1);
  EXPECT_GE((*client)->stats().connections_lost, 1u);
  ASSERT_EQ(faults.size(), 1u);
  EXPECT_EQ(faults[0]["worker"], liar.address());
  EXPECT_NE(faults[0]["why"].get<std::string>().find("rank"), std::string::npos) << faults[0];
}

// Attack (goldminer-run(1)): a worker reported is not used again by this trainer,
// though the coordinator still lists it for a while: the client does not dial it
// again each time it asks for the workers.
TEST_F(ClientTest, GivenAWorkerReportedAsFaulty_WhenTheCoordinatorStillListsIt_ThenItIsNotDialled) {
  std::vector<Item> other_rank = Items({0});
  for (Item& item : other_rank) item.rank = 1;
  FakeWorker liar(secret_, {Script{other_rank}, Script{other_rank}, Script{other_rank}});
  FakeCoordinator coordinator(secret_);
  Script honest{Items({0, 1, 2})};
  // The honest worker sends nothing until the liar was reported and the client,
  // blocked, asked for the workers three more times (each answer lists the liar).
  honest.before_first = [&coordinator] {
    coordinator.WaitFaults(1);
    coordinator.WaitGetWorkers(coordinator.GetWorkersCount() + 3);
  };
  FakeWorker other(secret_, {honest});
  coordinator.SetPlan(Plan(false), {liar.address(), other.address()});
  coordinator.SetView({{order_[0], 1}, {order_[1], 1}, {order_[2], 1}},
                      {liar.address(), other.address()});
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_EQ(Drain(**client), Expected());
  ASSERT_EQ(coordinator.WaitFaults(1).size(), 1u);
  EXPECT_EQ(liar.connections(), 1u) << "the reported worker was dialled again";
}

TEST_F(ClientTest, GivenAWorkerThatHoldsTheAwaitedSplitAndSendsNothing_ThenItIsReportedAsStalled) {
  FaultRun run = DrainBesideAFaultyWorker(Script{});  // subscribes, takes credit, never sends
  EXPECT_EQ(run.keys, Expected());                    // every batch once, from the other worker
  ASSERT_EQ(run.faults.size(), 1u);
  EXPECT_EQ(run.faults[0]["worker"], run.faulty);
  EXPECT_NE(run.faults[0]["why"].get<std::string>().find("without sending it"), std::string::npos)
      << run.faults[0];
  EXPECT_GE(run.connections_lost, 1u);
}

// A worker that holds the awaited split and a later one, and sends batches of the
// later one without end (its count unknown) instead of the one awaited: they are
// its split's, so checked, but the whole look-ahead bound stops them, and the
// stall deadline runs meanwhile.
TEST_F(ClientTest, GivenTheAwaitedSplitsHolderSendingAnotherSplitWithoutEnd_ThenTheBoundStopsIt) {
  const std::vector<Batch>& second = splits_[order_[1]];
  std::vector<Batch> flood;
  for (uint64_t k = 2; k < 200; ++k) {
    Batch b = second[0];
    b.split_batch = k;
    for (size_t i = 0; i < b.keys.size(); ++i) {
      b.keys[i] = "flood-" + std::to_string(k) + "-" + std::to_string(i);
      b.sample_indices[i] = 1000 * k + i;
    }
    flood.push_back(std::move(b));
  }
  Script faulty{{Item{&second[0], std::nullopt}, Item{&second[1], std::nullopt}}};
  for (const Batch& b : flood) faulty.items.push_back(Item{&b, std::nullopt});
  FaultRun run = DrainBesideAFaultyWorker(std::move(faulty), FaultSetup{true, 4});
  EXPECT_EQ(run.keys, Expected());
  ASSERT_EQ(run.faults.size(), 1u);
  EXPECT_EQ(run.faults[0]["worker"], run.faulty);
  EXPECT_NE(run.faults[0]["why"].get<std::string>().find("without sending it"), std::string::npos)
      << run.faults[0];
  // 4 batches per live connection (2) in the whole bound, plus the credit granted
  // before it was reached: the initial prefetch and one more.
  EXPECT_LE(run.sent_by_faulty, 8u + kDefaultPrefetchBatches + 1) << run.sent_by_faulty;
}

TEST_F(ClientTest,
       GivenAWorkerThatSendsAFrameOtherThanBatch_ThenItIsReportedAndOthersMakeItsSplits) {
  FaultRun run = DrainBesideAFaultyWorker(Script{{Item{nullptr, std::nullopt}}});
  EXPECT_EQ(run.keys, Expected());
  ASSERT_EQ(run.faults.size(), 1u);
  EXPECT_EQ(run.faults[0]["worker"], run.faulty);
  EXPECT_NE(run.faults[0]["why"].get<std::string>().find(
                "sent HEARTBEAT on a data connection, where only BATCH, ERROR and BYE come"),
            std::string::npos)
      << run.faults[0];
  EXPECT_GE(run.connections_lost, 1u);
}

TEST_F(ClientTest, GivenATrainerThatTakesNothingForAWhile_ThenTheClientSaysHeartbeatOncePerPeriod) {
  FakeCoordinator coordinator(secret_);
  FakeClock clock;
  ClientOptions options = Options(coordinator.address());
  options.clock = &clock;
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status().message();
  // The trainer "computes": no call into the client, yet the coordinator hears
  // from it once per heartbeat period, and not before the period has passed.
  for (int n = 1; n <= 3; ++n) {
    clock.Advance(options.heartbeat_s / 2);
    EXPECT_EQ(coordinator.HeartbeatCount(), n - 1);
    clock.Advance(options.heartbeat_s / 2);
    EXPECT_TRUE(coordinator.WaitHeartbeats(n));
    EXPECT_EQ(coordinator.HeartbeatCount(), n);
  }
}

TEST_F(ClientTest, GivenAHeartbeatIntervalOutOfRange_ThenConnectSaysWhy) {
  FakeCoordinator coordinator(secret_);
  ClientOptions options = Options(coordinator.address());
  options.heartbeat_s = kClientIdleS;
  auto client = Client::Connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("heartbeat interval"), std::string::npos)
      << client.status().message();
}

TEST_F(ClientTest, GivenAWrongSecretWhenConnectingThenAuthenticationFailedIsReported) {
  FakeCoordinator coordinator(std::string(64, 'b'));
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kInvalidArgument);
  EXPECT_NE(client.status().message().find("authentication failed"), std::string::npos);
  EXPECT_NE(client.status().message().find(coordinator.address()), std::string::npos);
}

// A server that knows the secret but plays another role (a worker's data port
// given as the coordinator's address) is not talked to as the coordinator.
TEST_F(ClientTest, GivenAServerOfAnotherRoleAsTheCoordinatorThenConnectSaysSo) {
  FakeWorker worker(secret_, {Script()});
  auto client = Client::Connect(Options(worker.address()));
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("answered as \"worker\", not as a coordinator"),
            std::string::npos)
      << client.status().message();
}

TEST_F(ClientTest, GivenTheCoordinatorClosesWhileWaitingThenNextIsUnavailableNamingIt) {
  FakeWorker idle(secret_, {Script()});
  FakeCoordinator coordinator(secret_);
  coordinator.close_after_plan = true;
  coordinator.SetPlan(Plan(false), {idle.address()});
  ClientOptions options = Options(coordinator.address());
  options.reconnect_s = 0.3;  // dialled again that long, in vain
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status().message();
  auto next = (*client)->Next();
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), Code::kUnavailable);
  EXPECT_NE(next.status().message().find("coordinator " + coordinator.address()), std::string::npos)
      << next.status().message();
}

TEST_F(ClientTest, GivenResumeAtPositionThreeThenTheFirstBatchIsTheFourth) {
  FakeWorker worker(secret_, {Script{Items({0, 1, 2})}});
  FakeCoordinator coordinator(secret_);
  coordinator.SetPlan(Plan(true), {worker.address()});
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE((*client)->Resume(At(0, 3)).ok());
  EXPECT_EQ(Drain(**client), Expected(3));
  EXPECT_EQ(coordinator.resume(), (nlohmann::json{{"epoch", 0}, {"position", 3}}));
  EXPECT_EQ((*client)->stats().duplicates_dropped, 3u);
}

TEST_F(ClientTest, GivenUnknownCountsWhenResumingMidSplitThenTheFirstBatchIsTheNextOfThatSplit) {
  FakeWorker worker(secret_, {Script{Items({0, 1, 2})}});
  FakeCoordinator coordinator(secret_);
  auto plan = Plan(false);
  plan[0].second = 2;  // the coordinator knows the count of the finished first split only
  coordinator.SetPlan(plan, {worker.address()});
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE((*client)->Resume(At(0, 3)).ok());  // batch 1 of the second split is next
  EXPECT_EQ(Drain(**client), Expected(3));
  EXPECT_EQ((*client)->state().position, 6u);
}

TEST_F(ClientTest, GivenAStateOfAnEarlierRunThenItResumesWithoutTheCountsOfEarlierSplits) {
  // A new run's coordinator knows no count; the state says where position 3 lies.
  FakeWorker worker(secret_, {Script{Items({0, 1, 2})}});
  FakeCoordinator coordinator(secret_);
  coordinator.SetPlan(Plan(false), {worker.address()});
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  ResumeState state = At(0, 3);
  state.at = SequenceKey{1, 1};
  state.order = std::string(64, '0');
  state.seed = 7;
  state.world_size = 1;
  state.rank = 0;
  ASSERT_TRUE((*client)->Resume(state).ok());
  EXPECT_EQ(
      coordinator.resume(),
      (nlohmann::json{{"epoch", 0}, {"position", 3}, {"split_index", 1}, {"split_batch", 1}}));
  EXPECT_EQ(Drain(**client), Expected(3));
  const ResumeState end = (*client)->state();
  EXPECT_EQ(end.position, 6u);
  EXPECT_EQ(end.at, (SequenceKey{3, 0}));  // past the rank's three splits
  EXPECT_EQ(end.order, std::string(64, '0'));
  EXPECT_EQ(end.seed, 7);
  EXPECT_EQ(end.world_size, 1);
  EXPECT_EQ(end.rank, 0);
}

TEST_F(ClientTest, GivenAStateOfAnotherPipelineSeedWorldOrRankThenResumeRefusesItSayingWhich) {
  FakeCoordinator coordinator(secret_);
  coordinator.SetPlan(Plan(false), {});
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  const auto refused = [&](ResumeState state, const std::string& why) {
    state.at = SequenceKey{0, 1};
    Status st = (*client)->Resume(state);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << why;
    EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
  };
  ResumeState other = At(0, 1);
  other.order = std::string(64, 'f');
  other.seed = 8;
  refused(other, "another pipeline (order ffffffffffff, seed 8)");
  ResumeState world = At(0, 1);
  world.world_size = 2;
  refused(world, "saved with world size 2");
  ResumeState rank = At(0, 1);
  rank.rank = 1;
  refused(rank, "rank 1's");
  EXPECT_TRUE(coordinator.resume().is_null());  // none of them reached the coordinator
}

TEST_F(ClientTest, GivenTheCoordinatorRefusesAResumeThenTheTrainerGetsItsReason) {
  FakeCoordinator coordinator(secret_);
  coordinator.SetPlan(Plan(false), {});
  coordinator.refuse_resume = "the trainer resumes epoch 5, but this run serves epochs 0..1";
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  Status st = (*client)->Resume(At(5, 0));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("refused RESUME: the trainer resumes epoch 5"), std::string::npos)
      << st.message();
}

TEST_F(ClientTest, GivenASlowWorkerThenDataWaitIsPositive) {
  FakeCoordinator coordinator(secret_);
  Script slow{Items({0, 1, 2})};
  slow.before_first = [&coordinator] {
    coordinator.WaitGetWorkers();
  };  // the client is blocked by then
  FakeWorker worker(secret_, {slow});
  coordinator.SetPlan(Plan(false), {worker.address()});
  auto client = Client::Connect(Options(coordinator.address()));
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_EQ(Drain(**client), Expected());
  EXPECT_GT((*client)->stats().data_wait_s, 0.0);
}

TEST_F(ClientTest, GivenTheProfileDirVariableWhenDrainedThenEachBatchIsAStepInTheStepLog) {
  FakeWorker worker(secret_, {Script{Items({0, 1, 2})}});
  FakeCoordinator coordinator(secret_);
  coordinator.SetPlan(Plan(false), {worker.address()});
  testing::TempDir profile_dir;
  const char* old = std::getenv("GOLDMINER_PROFILE_DIR");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  ASSERT_EQ(setenv("GOLDMINER_PROFILE_DIR", profile_dir.path().c_str(), 1), 0);
  auto client = Client::Connect(Options(coordinator.address()));
  if (saved) {
    setenv("GOLDMINER_PROFILE_DIR", saved->c_str(), 1);
  } else {
    unsetenv("GOLDMINER_PROFILE_DIR");
  }
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_EQ(Drain(**client), Expected());
  const std::string path = profile_dir.path() + "/steps." + std::to_string(::getpid()) + ".log";
  auto open_log = ParseStepLog(testing::ReadAll(path), path);
  ASSERT_TRUE(open_log.ok()) << open_log.status().message();
  // No "O" line while the client is open: the "S" lines carry the cost of each
  // record but the last.
  EXPECT_EQ(open_log->overhead_records, open_log->steps.size() - 1);
  client->reset();

  auto logs = ReadStepLogs(profile_dir.path());
  ASSERT_TRUE(logs.ok()) << logs.status().message();
  ASSERT_EQ(logs->size(), 1u);
  const StepLog& log = logs->front();
  EXPECT_EQ(log.pid, ::getpid());
  EXPECT_EQ(log.source, "goldminer");
  ASSERT_EQ(log.steps.size(), sequence_.size());
  for (size_t i = 0; i < log.steps.size(); ++i) {
    EXPECT_EQ(log.steps[i].samples, sequence_[i]->size()) << "step " << i;
    EXPECT_GE(log.steps[i].wait_end_ns, log.steps[i].wait_begin_ns) << "step " << i;
    if (i > 0) {
      EXPECT_GE(log.steps[i].wait_begin_ns, log.steps[i - 1].wait_end_ns) << "step " << i;
    }
  }
  EXPECT_EQ(log.overhead_records, sequence_.size());
  EXPECT_TRUE(log.errors.empty());
}

TEST_F(ClientTest, GivenTheCAbiWhenDrainedThenBatchesViewTheDataAndOutliveTheClient) {
  FakeWorker worker(secret_, {Script{Items({0, 1, 2})}});
  FakeCoordinator coordinator(secret_);
  coordinator.SetPlan(Plan(false), {worker.address()});
  ASSERT_EQ(setenv("GOLDMINER_SECRET", secret_.c_str(), 1), 0);
  gm_client* client = nullptr;
  ASSERT_EQ(gm_client_open(coordinator.address().c_str(), 0, 1, &client), GM_OK) << gm_last_error();
  std::vector<gm_batch*> batches;
  for (gm_batch* b = nullptr; gm_client_next(client, &b) == GM_OK && b != nullptr;)
    batches.push_back(b);
  gm_client_stats stats{};
  ASSERT_EQ(gm_client_stats_get(client, &stats), GM_OK);
  gm_client_close(client);
  unsetenv("GOLDMINER_SECRET");
  ASSERT_EQ(batches.size(), 6u);
  EXPECT_EQ(stats.batches, 6u);
  for (size_t i = 0; i < batches.size(); ++i) {
    const Batch& want = *sequence_[i];
    EXPECT_EQ(std::string(gm_batch_key(batches[i], 0)), want.keys[0]);
    EXPECT_EQ(gm_batch_key(batches[i], 2), nullptr);
    EXPECT_EQ(gm_batch_dtype(batches[i]), GM_DTYPE_UINT8);
    ASSERT_EQ(gm_batch_ndim(batches[i]), 4);
    EXPECT_EQ(std::vector<int64_t>(gm_batch_shape(batches[i]), gm_batch_shape(batches[i]) + 4),
              want.data.shape);
    ASSERT_EQ(gm_batch_data_bytes(batches[i]), want.data.bytes.size());
    EXPECT_EQ(
        std::memcmp(gm_batch_data(batches[i]), want.data.bytes.data(), want.data.bytes.size()), 0);
    EXPECT_EQ(gm_batch_labels(batches[i])[1], want.labels.data<int64_t>()[1]);
    gm_batch_free(batches[i]);
  }
}

TEST_F(ClientTest,
       GivenAWorkerThatSaysASplitHasMoreBatchesThanItSends_ThenTheNextWorkersCountHolds) {
  // Batch 0 of the first split, said to be one of 3 (it has 2), and then nothing.
  FaultRun run = DrainBesideAFaultyWorker(Script{{Item{&splits_[order_[0]][0], 3}}});
  // The other worker's count (2) replaces the one the reported worker told (3).
  EXPECT_EQ(run.keys, Expected());
  ASSERT_EQ(run.faults.size(), 1u);
  EXPECT_EQ(run.faults[0]["worker"], run.faulty);
}

TEST(ClientOptionsTest, GivenTheStallTimeoutVariable_ThenItSetsTheProgressDeadlineOrSaysWhy) {
  ClientOptions given;
  given.coordinator = "127.0.0.1:9";
  given.secret = std::string(64, 'a');
  unsetenv("GOLDMINER_STALL_TIMEOUT_S");
  auto fallback = ResolveClientOptions(given);
  setenv("GOLDMINER_STALL_TIMEOUT_S", "7", 1);
  auto set = ResolveClientOptions(given);
  setenv("GOLDMINER_STALL_TIMEOUT_S", "0", 1);
  auto zero = ResolveClientOptions(given);
  unsetenv("GOLDMINER_STALL_TIMEOUT_S");
  ASSERT_TRUE(fallback.ok()) << fallback.status().message();
  EXPECT_EQ(fallback->stall_s, kDefaultStallS);
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->stall_s, 7);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("GOLDMINER_STALL_TIMEOUT_S=0"), std::string::npos)
      << zero.status().message();
}

TEST(ClientOptionsTest, GivenOnlySlurmVariablesThenRankAndWorldSizeComeFromThem) {
  for (const char* name : {"RANK", "WORLD_SIZE"}) unsetenv(name);
  setenv("SLURM_PROCID", "1", 1);
  setenv("SLURM_NTASKS", "2", 1);
  ClientOptions given;
  given.coordinator = "127.0.0.1:9";
  given.secret = std::string(64, 'a');
  auto options = ResolveClientOptions(given);
  setenv("RANK", "one", 1);
  auto bad = ResolveClientOptions(given);
  for (const char* name : {"RANK", "SLURM_PROCID", "SLURM_NTASKS"}) unsetenv(name);
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->rank, 1);
  EXPECT_EQ(options->world_size, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("RANK=\"one\""), std::string::npos)
      << bad.status().message();
}

TEST(ClientCAbiTest, GivenAnUnreachableCoordinatorWhenOpeningThenTheErrorNamesIt) {
  ASSERT_EQ(setenv("GOLDMINER_SECRET", std::string(64, 'a').c_str(), 1), 0);
  gm_client* client = reinterpret_cast<gm_client*>(1);
  int status = gm_client_open("127.0.0.1:1", 0, 1, &client);
  EXPECT_EQ(status, GM_UNAVAILABLE);
  EXPECT_EQ(client, nullptr);
  EXPECT_NE(std::string(gm_last_error()).find("127.0.0.1:1"), std::string::npos) << gm_last_error();
  EXPECT_EQ(gm_client_open("no-port", 0, 1, &client), GM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gm_last_error()).find("no-port"), std::string::npos) << gm_last_error();
  unsetenv("GOLDMINER_SECRET");
}

}  // namespace
}  // namespace gm
