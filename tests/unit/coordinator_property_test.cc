// Randomized exactly-once test of the coordinator's state machine: simulated
// workers join, crash, go silent, drain and restart; batches and acknowledgements
// travel through a network that re-orders, delays and duplicates them; clients
// dedup with RankSequence. Fixed seeds, so every run is the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/batch_order.h"
#include "launcher/coordinator_state.h"

namespace gm {
namespace {

using Kind = Assignment::Kind;
using BatchId = std::pair<uint64_t, uint64_t>;  // (split, split_batch)

struct Delivery {
  uint64_t epoch;
  int rank;
  BatchId batch;
  WorkerId from;
};

struct AckMessage {
  int rank;
  uint64_t epoch;
  BatchId batch;
};

struct Stream {
  Assignment assignment;
  uint64_t next = 0;
  uint64_t end = 0;    // exclusive
  uint64_t count = 0;  // the split's true batch count
};

struct SimWorker {
  WorkerId id = 0;
  bool alive = true;
  bool silent = false;  // alive but its heartbeats are lost
  bool draining = false;
  std::vector<Stream> streams;
};

struct SimClient {
  int rank = 0;
  RankSequence seq;
  std::map<SequenceKey, BatchId> buffer;  // the re-order buffer
  std::vector<BatchId> consumed;
  uint64_t beyond_share = 0;
};

// Events seen over all scenarios, so the test proves it exercised each path.
struct Coverage {
  uint64_t scenarios_by_world_size[4] = {};
  uint64_t unknown_count_scenarios = 0;
  uint64_t lost_workers = 0;
  uint64_t drained_exits = 0;
  uint64_t reassignments = 0;
  uint64_t duplicate_acks = 0;
  uint64_t stale_split_done = 0;
  uint64_t dropped_duplicates = 0;  // by clients
  uint64_t buffered = 0;            // kFuture arrivals
  uint64_t surplus_batches = 0;     // cut by equal shares
  uint64_t rank_restarts = 0;       // Resume from a checkpoint at or before the acks
};

class Simulation {
 public:
  Simulation(uint32_t seed, Coverage& coverage) : rng_(seed), seed_(seed), coverage_(coverage) {}
  void Run();

 private:
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool Chance(int percent) { return Below(100) < static_cast<uint64_t>(percent); }
  EpochPlan MakePlan(uint64_t epoch);
  void StartClients(const EpochPlan& plan);
  void Step();
  void Register();
  void WorkerRequests(SimWorker& w);
  void WorkerSends(SimWorker& w);
  void Kill(SimWorker& w, bool tell_coordinator);
  void DeliverBatch();
  void DeliverAck();
  void Consume(SimClient& c, BatchId batch);
  void DrainBuffer(SimClient& c);
  void LearnCounts(SimClient& c);
  void RestartRank();
  void CheckEpoch(const EpochPlan& plan);
  SimWorker* RandomLiveWorker();

  std::mt19937 rng_;
  uint32_t seed_;
  Coverage& coverage_;
  int world_size_ = 1;
  bool unknown_counts_ = false;
  std::map<uint64_t, uint64_t> true_count_;  // split id -> batch count
  std::optional<CoordinatorState> state_;
  EpochPlan plan_;
  std::vector<SimWorker> workers_;
  std::vector<SimClient> clients_;
  std::vector<Delivery> network_;
  std::vector<AckMessage> acks_;
  double now_ = 0;
};

EpochPlan Simulation::MakePlan(uint64_t epoch) {
  EpochPlan plan;
  plan.epoch = epoch;
  for (auto [split, count] : true_count_) {
    plan.splits.push_back({split, unknown_counts_ ? kUnknownCount : count});
  }
  std::shuffle(plan.splits.begin(), plan.splits.end(), rng_);
  return plan;
}

void Simulation::StartClients(const EpochPlan& plan) {
  clients_.clear();
  for (int r = 0; r < world_size_; ++r) {
    auto seq = RankSequence::Create(plan, world_size_, r);
    ASSERT_TRUE(seq.ok()) << seq.status().message();
    clients_.push_back(SimClient{r, std::move(seq).value(), {}, {}, 0});
  }
}

void Simulation::Register() {
  workers_.push_back(SimWorker{state_->RegisterWorker(now_), true, false, false, {}});
}

SimWorker* Simulation::RandomLiveWorker() {
  std::vector<SimWorker*> live;
  for (SimWorker& w : workers_) {
    if (w.alive) live.push_back(&w);
  }
  return live.empty() ? nullptr : live[Below(live.size())];
}

void Simulation::Kill(SimWorker& w, bool tell_coordinator) {
  w.alive = false;
  w.streams.clear();
  // Batches still in the dead worker's socket are lost half of the time.
  std::erase_if(network_, [&](const Delivery& d) { return d.from == w.id && Chance(50); });
  if (tell_coordinator) {
    ASSERT_TRUE(state_->WorkerExited(w.id).ok());
  }
}

void Simulation::WorkerRequests(SimWorker& w) {
  auto answer = state_->RequestSplit(w.id);
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  if (answer->kind == Kind::kExit) {
    if (w.draining && !w.silent) ++coverage_.drained_exits;
    Kill(w, true);
  } else if (answer->kind == Kind::kAssign) {
    const uint64_t count = true_count_.at(answer->split);
    const uint64_t end = answer->end_batch == kUnknownCount ? count : answer->end_batch;
    ASSERT_LE(answer->start_batch, end);
    w.streams.push_back(Stream{*answer, answer->start_batch, end, count});
  }
}

void Simulation::WorkerSends(SimWorker& w) {
  if (w.streams.empty()) return;
  const size_t i = Below(w.streams.size());
  Stream& s = w.streams[i];
  if (s.next == s.end) {
    const Assignment& a = s.assignment;
    ASSERT_TRUE(state_->SplitDone(w.id, a.epoch, a.split, s.count).ok());
    w.streams.erase(w.streams.begin() + static_cast<std::ptrdiff_t>(i));
    return;
  }
  Delivery d{s.assignment.epoch, s.assignment.rank, {s.assignment.split, s.next++}, w.id};
  network_.push_back(d);
  if (Chance(5)) network_.push_back(d);  // delivered twice
}

void Simulation::Consume(SimClient& c, BatchId batch) {
  c.consumed.push_back(batch);
  c.seq.Advance();
  acks_.push_back({c.rank, state_->epoch(), batch});
  if (Chance(5)) acks_.push_back({c.rank, state_->epoch(), batch});  // re-sent ack
}

void Simulation::DrainBuffer(SimClient& c) {
  while (!c.buffer.empty() && c.buffer.begin()->first <= c.seq.next_key()) {
    auto [key, batch] = *c.buffer.begin();
    c.buffer.erase(c.buffer.begin());
    if (key == c.seq.next_key()) Consume(c, batch);
  }
}

void Simulation::LearnCounts(SimClient& c) {
  // With unknown counts the client learns a finished split's count from the
  // coordinator (in the real protocol, from the worker's end of split as well).
  while (unknown_counts_ && !c.seq.done()) {
    const uint64_t split = c.seq.next_split();
    const uint64_t count = state_->BatchCount(split);
    const uint64_t before = c.seq.position();
    const SequenceKey key = c.seq.next_key();
    if (count == kUnknownCount) return;
    ASSERT_TRUE(c.seq.SetBatchCount(split, count).ok());
    DrainBuffer(c);
    if (c.seq.position() == before && c.seq.next_key() == key) return;
  }
}

void Simulation::DeliverBatch() {
  if (network_.empty()) return;
  const size_t i = Below(network_.size());
  const Delivery d = network_[i];
  network_[i] = network_.back();
  network_.pop_back();
  if (d.epoch != state_->epoch()) return;  // a late copy from a finished epoch
  SimClient& c = clients_[static_cast<size_t>(d.rank)];
  auto arrival = c.seq.Classify(d.batch.first, d.batch.second);
  ASSERT_TRUE(arrival.ok()) << arrival.status().message();
  switch (*arrival) {
    case Arrival::kNext:
      Consume(c, d.batch);
      DrainBuffer(c);
      break;
    case Arrival::kFuture:
      ++coverage_.buffered;
      c.buffer.emplace(*c.seq.Key(d.batch.first, d.batch.second), d.batch);
      break;
    case Arrival::kDuplicate:
      ++coverage_.dropped_duplicates;
      break;
    case Arrival::kBeyondShare:
      ++c.beyond_share;
      break;
  }
}

void Simulation::DeliverAck() {
  if (acks_.empty()) return;
  const size_t i = Below(acks_.size());
  const AckMessage m = acks_[i];
  acks_[i] = acks_.back();
  acks_.pop_back();
  auto outcome = state_->Ack(m.rank, m.epoch, m.batch.first, m.batch.second);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
}

void Simulation::Step() {
  now_ += 0.25;
  const uint64_t roll = Below(100);
  SimWorker* w = RandomLiveWorker();
  if (roll < 25 && w != nullptr) {
    WorkerSends(*w);
  } else if (roll < 45) {
    DeliverBatch();
  } else if (roll < 60) {
    DeliverAck();
  } else if (roll < 75 && w != nullptr) {
    WorkerRequests(*w);
  } else if (roll < 77 && w != nullptr) {
    Kill(*w, false);  // crashed: only the liveness timeout notices
  } else if (roll == 77 && w != nullptr) {
    Kill(*w, true);  // exited and the launcher saw it
  } else if (roll == 78 && w != nullptr) {
    w->silent = true;  // partitioned: keeps working, heartbeats lost
  } else if (roll == 79 && w != nullptr) {
    w->draining = true;
    ASSERT_TRUE(state_->Drain(w->id).ok());
  } else if (roll < 82 && workers_.size() < 60) {
    Register();
  } else if (roll == 82 && !unknown_counts_ && Chance(30)) {
    RestartRank();
  }
  bool serving = false;
  for (SimWorker& worker : workers_) {
    if (!worker.alive || worker.silent) continue;
    if (!state_->Heartbeat(worker.id, now_).ok()) Kill(worker, false);
    serving = serving || (worker.alive && !worker.draining);
  }
  for (WorkerId lost : state_->Tick(now_)) {
    ++coverage_.lost_workers;
    for (SimWorker& worker : workers_) {
      if (worker.id == lost && worker.alive && !worker.silent) ADD_FAILURE() << "live worker lost";
    }
  }
  if (!serving) Register();  // the autoscaler replaces lost capacity
  for (SimClient& c : clients_) LearnCounts(c);
}

// A trainer rank dies and restarts from a checkpoint taken at or before the last
// batch it consumed: the old process's connections, and what was in them, are gone.
void Simulation::RestartRank() {
  SimClient& c = clients_[Below(clients_.size())];
  const uint64_t position = c.consumed.size() - Below(std::min<uint64_t>(c.consumed.size(), 4) + 1);
  ASSERT_TRUE(state_->Resume(c.rank, state_->epoch(), position).ok());
  ++coverage_.rank_restarts;
  std::erase_if(network_, [&](const Delivery& d) { return d.rank == c.rank; });
  std::erase_if(acks_, [&](const AckMessage& m) { return m.rank == c.rank; });
  c.consumed.resize(position);
  c.buffer.clear();
  auto seq = RankSequence::Create(plan_, world_size_, c.rank, position);
  ASSERT_TRUE(seq.ok()) << seq.status().message();
  c.seq = std::move(seq).value();
}

void Simulation::CheckEpoch(const EpochPlan& plan) {
  auto layout = LayOutPlan(plan, world_size_);
  ASSERT_TRUE(layout.ok());
  for (SimClient& c : clients_) {
    std::vector<BatchId> expected;
    for (size_t p : layout->rank_slots[static_cast<size_t>(c.rank)]) {
      const SplitSlot& slot = layout->slots[p];
      const uint64_t n = unknown_counts_ ? true_count_.at(slot.split) : slot.deliver;
      for (uint64_t b = 0; b < n; ++b) expected.emplace_back(slot.split, b);
      coverage_.surplus_batches += unknown_counts_ ? 0 : slot.batch_count - slot.deliver;
    }
    EXPECT_EQ(c.consumed, expected) << "seed " << seed_ << " rank " << c.rank;
    EXPECT_EQ(c.beyond_share, 0u) << "seed " << seed_;
    EXPECT_TRUE(c.seq.done()) << "seed " << seed_;
    if (!unknown_counts_) {
      EXPECT_EQ(c.consumed.size(), layout->share) << "seed " << seed_;
    }
    EXPECT_EQ(state_->RankPosition(c.rank), expected.size()) << "seed " << seed_;
  }
  for (SimWorker& w : workers_) {
    if (!w.alive || w.draining) continue;
    auto answer = state_->RequestSplit(w.id);
    ASSERT_TRUE(answer.ok());
    if (answer->kind == Kind::kExit) continue;  // declared lost while silent
    EXPECT_EQ(answer->kind, Kind::kEpochDone) << "seed " << seed_;
  }
}

void Simulation::Run() {
  world_size_ = 1 + static_cast<int>(Below(3));
  unknown_counts_ = world_size_ == 1 && Chance(50);
  const uint64_t splits = Below(10);
  for (uint64_t s = 0; s < splits; ++s) true_count_[100 + 7 * s] = Below(6);
  auto state = CoordinatorState::Create({world_size_, 1 + static_cast<int>(Below(3)), 5.0});
  ASSERT_TRUE(state.ok());
  state_.emplace(std::move(state).value());
  for (uint64_t i = 0, n = 1 + Below(3); i < n; ++i) Register();
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    const EpochPlan plan = MakePlan(epoch);
    plan_ = plan;
    ASSERT_TRUE(state_->StartEpoch(plan).ok());
    StartClients(plan);
    int steps = 0;
    while (!state_->EpochDone() && !::testing::Test::HasFatalFailure()) {
      ASSERT_LT(++steps, 200000) << "seed " << seed_ << ": epoch " << epoch << " stalled";
      Step();
    }
    ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "seed " << seed_;
    CheckEpoch(plan);
  }
  const CoordinatorStats stats = state_->Stats();
  coverage_.reassignments += stats.reassignments;
  coverage_.duplicate_acks += stats.duplicate_acks;
  coverage_.stale_split_done += stats.stale_split_done;
  ++coverage_.scenarios_by_world_size[world_size_];
  coverage_.unknown_count_scenarios += unknown_counts_ ? 1 : 0;
}

TEST(CoordinatorPropertyTest, GivenRandomFailuresAndDelaysThenEveryRankGetsItsShareExactlyOnce) {
  Coverage coverage;
  for (uint32_t seed = 1; seed <= 500; ++seed) {
    Simulation sim(seed * 2654435761u, coverage);
    sim.Run();
    if (::testing::Test::HasFailure()) break;  // one seed's report is enough
  }
  for (int w = 1; w <= 3; ++w) EXPECT_GT(coverage.scenarios_by_world_size[w], 100u) << w;
  EXPECT_GT(coverage.unknown_count_scenarios, 50u);
  EXPECT_GT(coverage.lost_workers, 100u);
  EXPECT_GT(coverage.drained_exits, 20u);
  EXPECT_GT(coverage.reassignments, 100u);
  EXPECT_GT(coverage.duplicate_acks, 100u);
  EXPECT_GT(coverage.stale_split_done, 10u);
  EXPECT_GT(coverage.dropped_duplicates, 100u);
  EXPECT_GT(coverage.buffered, 1000u);
  EXPECT_GT(coverage.surplus_batches, 100u);
  EXPECT_GT(coverage.rank_restarts, 20u);
  std::printf(
      "coverage: lost %llu, drained exits %llu, reassignments %llu, duplicate acks %llu, "
      "stale split done %llu, dropped duplicates %llu, buffered %llu, surplus %llu, rank restarts "
      "%llu\n",
      static_cast<unsigned long long>(coverage.lost_workers),
      static_cast<unsigned long long>(coverage.drained_exits),
      static_cast<unsigned long long>(coverage.reassignments),
      static_cast<unsigned long long>(coverage.duplicate_acks),
      static_cast<unsigned long long>(coverage.stale_split_done),
      static_cast<unsigned long long>(coverage.dropped_duplicates),
      static_cast<unsigned long long>(coverage.buffered),
      static_cast<unsigned long long>(coverage.surplus_batches),
      static_cast<unsigned long long>(coverage.rank_restarts));
}

}  // namespace
}  // namespace gm
