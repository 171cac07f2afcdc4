// The coordinator's journal (launcher/coordinator_journal.h): random runs of
// workers and ranks through a JournaledCoordinator, replayed at random points
// into the same state and carried on from there to the end, exactly once; a
// journal cut short, corrupted, or of another run is refused naming its line.
#include "launcher/coordinator_journal.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/os/file_util.h"

namespace gm {
namespace {

using Kind = Assignment::Kind;

EpochPlan Plan(uint64_t epoch, int splits, std::mt19937_64& rng) {
  EpochPlan plan;
  plan.epoch = epoch;
  for (int s = 0; s < splits; ++s) {
    plan.splits.push_back({epoch * 100 + static_cast<uint64_t>(s), 1 + rng() % 4});
  }
  return plan;
}

// What a state says of itself, to compare a replayed state with the live one
// (duplicate acknowledgements, counted but not journaled, left out).
std::string Describe(const CoordinatorState& s) {
  const CoordinatorStats st = s.Stats();
  std::string out = "epoch " + std::to_string(st.epoch) + (st.epoch_done ? " done" : "") +
                    " pending " + std::to_string(st.pending_splits) + " incomplete " +
                    std::to_string(st.incomplete_splits) + " acks " + std::to_string(st.acks) +
                    " reassigned " + std::to_string(st.reassignments) + " ahead " +
                    std::to_string(s.ahead_epoch().value_or(0)) + "; ranks";
  for (uint64_t p : st.rank_positions) out += " " + std::to_string(p);
  out += "; workers";
  for (const WorkerStats& w : st.workers) {
    out += " " + std::to_string(w.id) + ":" + std::to_string(static_cast<int>(w.status)) + "/" +
           std::to_string(w.splits_assigned) + "/" + std::to_string(w.splits_done) + "/" +
           std::to_string(w.batches);
  }
  return out;
}

// A run driven by random events: workers register, ask for splits, make them,
// drain, exit or fall silent; ranks acknowledge the batches made for them once
// their epoch is current (twice, now and then: duplicates), and one may restart
// from its position. Every call goes through the journal.
class RandomRun {
 public:
  RandomRun(uint64_t seed, int world_size, int epochs)
      : rng_(seed), world_size_(world_size), epochs_(epochs) {}

  // Runs until every epoch is done, replaying the journal into a new coordinator
  // (which then carries on) with probability `replay_p` at each step.
  void Run(double replay_p) {
    auto c = JournaledCoordinator::Create(Options(), Sink());
    ASSERT_TRUE(c.ok());
    coordinator_.emplace(std::move(c).value());
    ASSERT_TRUE(coordinator_->StartEpoch(Plan(1, 6, rng_)).ok());
    for (int step = 0; step < 20000 && !Finished(); ++step) {
      Step();
      if (::testing::Test::HasFatalFailure()) return;
      if (std::uniform_real_distribution<>(0, 1)(rng_) < replay_p) ReplayHere();
    }
    ASSERT_TRUE(Finished()) << Describe(coordinator_->state());
    EXPECT_GT(replays_, 0) << "the run was replayed at least once";
  }

  std::string journal;  // every line written, in order
  int replays_ = 0;

 private:
  CoordinatorOptions Options() const { return {world_size_, 2, 10.0}; }
  JournalSink Sink() {
    return [this](std::string_view line) {
      journal += line;
      return Status::Ok();
    };
  }
  bool Finished() const {
    const CoordinatorState& s = coordinator_->state();
    return s.epoch() == static_cast<uint64_t>(epochs_) && s.EpochDone();
  }

  // A new coordinator from the journal so far: the same state; the live one is
  // dropped (as after a crash) and the new one carries on, numbering on.
  void ReplayHere() {
    const std::string before = Describe(coordinator_->state());
    auto replayed = JournaledCoordinator::Replay(Options(), journal, "journal", now_, Sink());
    ASSERT_TRUE(replayed.ok()) << replayed.status().message();
    EXPECT_EQ(Describe(replayed->state()), before);
    EXPECT_EQ(replayed->lines(), coordinator_->lines());
    coordinator_.emplace(std::move(replayed).value());
    ++replays_;
  }

  void Step() {
    JournaledCoordinator& c = *coordinator_;
    now_ += 0.5;
    const int action = static_cast<int>(rng_() % 100);
    std::vector<WorkerId> live;
    for (const WorkerStats& w : c.state().Stats().workers) {
      if (w.status != WorkerStatus::kGone) live.push_back(w.id);
    }
    for (WorkerId w : live) ASSERT_TRUE(c.Heartbeat(w, now_).ok());
    if (live.size() < 3 || action < 3) {
      ASSERT_TRUE(c.RegisterWorker(now_).ok());
      return;
    }
    const WorkerId w = live[rng_() % live.size()];
    if (action < 6) {  // a worker's process ends, or it is drained
      ASSERT_TRUE((action < 5 ? c.WorkerExited(w) : c.Drain(w)).ok());
      return;
    }
    if (action < 8 && world_size_ == 1 && c.state().epoch_started()) {  // the trainer restarts
      const int rank = 0;
      ASSERT_TRUE(c.Resume(rank, c.state().epoch(), c.state().RankPosition(rank)).ok());
      std::erase_if(made_, [&](const Made& m) { return std::get<0>(m) == rank; });
      return;
    }
    if (action < 40 && !making_.empty()) {  // a worker finishes a split it holds
      const size_t i = rng_() % making_.size();
      const auto [worker, a] = making_[i];
      making_.erase(making_.begin() + static_cast<long>(i));
      if (!c.state().MakesSplit(worker, a.split) && a.epoch == c.state().epoch()) return;
      Status done = c.SplitDone(worker, a.epoch, a.split, a.batch_count);
      ASSERT_TRUE(done.ok()) << done.message();
      for (uint64_t b = a.start_batch; b < std::min(a.end_batch, a.batch_count); ++b) {
        made_.push_back({a.rank, a.epoch, a.split, b});
      }
      return;
    }
    if (action < 75 && !made_.empty()) {  // ranks take what was made for their epoch
      for (size_t k = 0; k < made_.size(); ++k) {
        const auto [rank, epoch, split, batch] = made_[k];
        if (epoch != c.state().epoch()) continue;
        Result<AckOutcome> ack = c.Ack(rank, epoch, split, batch, 1);
        ASSERT_TRUE(ack.ok()) << ack.status().message();
        if (rng_() % 10 != 0) made_.erase(made_.begin() + static_cast<long>(k));  // else again
        break;
      }
    }
    if (c.state().EpochDone() && c.state().epoch() < static_cast<uint64_t>(epochs_)) {
      const uint64_t next = c.state().epoch() + 1;
      Status started = c.StartEpoch(c.state().ahead_epoch() ? ahead_plan_ : Plan(next, 6, rng_));
      ASSERT_TRUE(started.ok()) << started.message();
      return;
    }
    if (c.state().WantsAhead() && c.state().epoch() < static_cast<uint64_t>(epochs_)) {
      ahead_plan_ = Plan(c.state().epoch() + 1, 6, rng_);
      ASSERT_TRUE(c.PlanAhead(ahead_plan_).ok());
      return;
    }
    Result<Assignment> a = c.RequestSplit(w);
    ASSERT_TRUE(a.ok()) << a.status().message();
    if (a->kind == Kind::kAssign) making_.push_back({w, *a});
    if (a->kind == Kind::kExit) {
      ASSERT_TRUE(c.WorkerExited(w).ok());
    }
  }

  using Made = std::tuple<int, uint64_t, uint64_t, uint64_t>;  // rank, epoch, split, batch
  std::mt19937_64 rng_;
  int world_size_;
  int epochs_;
  double now_ = 0;
  std::optional<JournaledCoordinator> coordinator_;
  std::vector<std::pair<WorkerId, Assignment>> making_;
  std::vector<Made> made_;
  EpochPlan ahead_plan_;
};

TEST(CoordinatorJournalTest, GivenRandomRunsThenEveryReplayIsTheSameStateAndTheRunEnds) {
  std::set<std::string> ops;  // every op the runs journaled
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    RandomRun run(seed, seed % 3 == 0 ? 2 : 1, 3);
    run.Run(0.1);
    ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "seed " << seed;
    for (size_t at = run.journal.find("\"op\":\""); at != std::string::npos;
         at = run.journal.find("\"op\":\"", at + 1)) {
      const size_t from = at + 6;
      ops.insert(run.journal.substr(from, run.journal.find('"', from) - from));
    }
  }
  for (const char* op : {"start_epoch", "plan_ahead", "register", "request", "split_done", "ack",
                         "drain", "exited", "resume"}) {
    EXPECT_TRUE(ops.count(op)) << "no run journaled " << op;
  }
}

// A short journal, every op written once.
std::string SmallJournal() {
  std::string text;
  auto c = JournaledCoordinator::Create({1, 2, 10.0}, [&text](std::string_view line) {
    text += line;
    return Status::Ok();
  });
  EXPECT_TRUE(c.ok());
  EpochPlan plan{1, {{10, 2}, {11, 1}}};
  EXPECT_TRUE(c->StartEpoch(plan).ok());
  const WorkerId w = *c->RegisterWorker(0);
  const Assignment a = *c->RequestSplit(w);
  EXPECT_EQ(a.kind, Kind::kAssign);
  EXPECT_TRUE(c->SplitDone(w, 1, a.split, 2).ok());
  EXPECT_TRUE(c->Ack(0, 1, a.split, 0, 64).ok());
  EXPECT_TRUE(c->Drain(w).ok());
  return text;
}

TEST(CoordinatorJournalTest, GivenAJournalThenEachLineIsItsJsonATabAndItsHash) {
  const std::string text = SmallJournal();
  ASSERT_EQ(std::count(text.begin(), text.end(), '\n'), 6);
  const std::string first = text.substr(0, text.find('\n'));
  const size_t tab = first.find('\t');
  ASSERT_NE(tab, std::string::npos);
  EXPECT_EQ(first.substr(tab + 1), JournalHash(first.substr(0, tab)));
  EXPECT_NE(first.find("\"op\":\"start_epoch\""), std::string::npos) << first;
  EXPECT_NE(first.find("\"seq\":1"), std::string::npos) << first;
  auto replayed = JournaledCoordinator::Replay({1, 2, 10.0}, text, "j", 5, nullptr);
  ASSERT_TRUE(replayed.ok()) << replayed.status().message();
  EXPECT_EQ(replayed->lines(), 6u);
  EXPECT_TRUE(replayed->state().Draining(1));
  EXPECT_EQ(replayed->state().RankPosition(0), 1u);
}

TEST(CoordinatorJournalTest, GivenAJournalCutShortOrCorruptedThenTheReplayFailsNamingTheLine) {
  const std::string text = SmallJournal();
  struct Case {
    std::string journal, says;
  };
  const size_t third = [&] {
    size_t at = 0;
    for (int i = 0; i < 2; ++i) at = text.find('\n', at) + 1;
    return at;
  }();
  std::string flipped = text;
  flipped[third + 10] = flipped[third + 10] == '1' ? '2' : '1';  // a bit of line 3's JSON
  std::string no_line_2 =
      text.substr(0, text.find('\n') + 1) + text.substr(text.find('\n', text.find('\n') + 1) + 1);
  const std::vector<Case> cases = {
      {text.substr(0, text.size() - 5), "j:6: cut short"},
      {text.substr(0, third + 7), "j:3: cut short"},
      {flipped, "j:3: corrupted: its hash does not match"},
      {no_line_2, "j:2: line 3 follows line 1"},
      {"garbage\n", "j:1: not a journal line"},
  };
  for (const Case& c : cases) {
    auto r = JournaledCoordinator::Replay({1, 2, 10.0}, c.journal, "j", 0, nullptr);
    ASSERT_FALSE(r.ok()) << c.says;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
  }
  // A well-formed line whose op does not replay on this state (another run's).
  const std::string json = R"({"op":"ack","seq":1,"rank":0,"epoch":1,"split":10,"batch":0})";
  auto other = JournaledCoordinator::Replay({1, 2, 10.0}, json + "\t" + JournalHash(json) + "\n",
                                            "j", 0, nullptr);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("j:1: does not replay"), std::string::npos)
      << other.status().message();
  // A request answered otherwise than journaled: the state machine is not this run's.
  std::string lines = text.substr(0, third);  // start_epoch, register
  const std::string wrong = R"({"answer":{"kind":"wait"},"op":"request","seq":3,"worker":1})";
  lines += wrong + "\t" + JournalHash(wrong) + "\n";
  auto answered = JournaledCoordinator::Replay({1, 2, 10.0}, lines, "j", 0, nullptr);
  ASSERT_FALSE(answered.ok());
  EXPECT_NE(answered.status().message().find("not as journaled"), std::string::npos)
      << answered.status().message();
}

TEST(CoordinatorJournalTest, GivenAJournalFileThenItsLinesReplayAndATornEndIsCutShort) {
  Result<TempDir> dir = TempDir::Make("gm-journal-test-");
  ASSERT_TRUE(dir.ok());
  const std::string path = dir->path() + "/coordinator.journal";
  {
    auto file = JournalFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status().message();
    ASSERT_TRUE(file->Append(SmallJournal()).ok());
    ASSERT_TRUE(file->Sync().ok());
  }
  Result<std::string> text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  EXPECT_TRUE(JournaledCoordinator::Replay({1, 2, 10.0}, *text, path, 0, nullptr).ok());
  {  // the coordinator died mid-line
    auto file = JournalFile::Open(path);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE(file->Append("{\"op\":\"ack\",\"seq\":7").ok());
  }
  text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  auto torn = JournaledCoordinator::Replay({1, 2, 10.0}, *text, path, 0, nullptr);
  ASSERT_FALSE(torn.ok());
  EXPECT_NE(torn.status().message().find(path + ":7: cut short"), std::string::npos)
      << torn.status().message();
  EXPECT_FALSE(JournalFile::Open(dir->path() + "/no/such/dir/j").ok());
}

// Tick's outcome is journaled, not its input: a worker it declared lost is an
// "exited" line; after a replay every live worker counts as heard at its time.
TEST(CoordinatorJournalTest, GivenAWorkerDeclaredLostThenTheJournalSaysItExited) {
  std::string text;
  auto c = JournaledCoordinator::Create({1, 2, 10.0}, [&text](std::string_view line) {
    text += line;
    return Status::Ok();
  });
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->StartEpoch(EpochPlan{1, {{10, 2}, {11, 1}}}).ok());
  const WorkerId silent = *c->RegisterWorker(0), heard = *c->RegisterWorker(0);
  ASSERT_EQ(c->RequestSplit(silent)->kind, Kind::kAssign);
  ASSERT_TRUE(c->Heartbeat(heard, 20).ok());
  const Result<std::vector<WorkerId>> lost = c->Tick(20);
  ASSERT_TRUE(lost.ok());
  EXPECT_EQ(*lost, std::vector<WorkerId>{silent});
  EXPECT_NE(text.find(R"("op":"exited","seq":5,"worker":1})"), std::string::npos) << text;
  EXPECT_EQ(text.find("heartbeat"), std::string::npos) << "heartbeats are not journaled";
  auto replayed = JournaledCoordinator::Replay({1, 2, 10.0}, text, "j", 100, nullptr);
  ASSERT_TRUE(replayed.ok()) << replayed.status().message();
  EXPECT_EQ(Describe(replayed->state()), Describe(c->state()));
  EXPECT_TRUE(replayed->state().ShouldExit(silent));
  EXPECT_EQ(replayed->state().Stats().pending_splits, 2u) << "the lost worker's split went back";
  // What changes nothing is not written: the exit of a worker already lost, and
  // a request answered "wait" (the in-flight limit of 2 reached).
  const size_t before = text.size();
  ASSERT_TRUE(c->WorkerExited(silent).ok());
  EXPECT_EQ(text.size(), before);
  ASSERT_EQ(c->RequestSplit(heard)->kind, Kind::kAssign);
  ASSERT_EQ(c->RequestSplit(heard)->kind, Kind::kAssign);
  const size_t assigned = text.size();
  ASSERT_EQ(c->RequestSplit(heard)->kind, Kind::kWait);
  EXPECT_EQ(text.size(), assigned);
  // The worker still live counts as heard at the replay (100): lost 10 s after.
  auto again = JournaledCoordinator::Replay({1, 2, 10.0}, text, "j", 100,
                                            [](std::string_view) { return Status::Ok(); });
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->Tick(109)->empty());
  EXPECT_EQ(*again->Tick(111), std::vector<WorkerId>{heard});
}

// The fuzz target's seed (its first byte the world size) replays whole: the
// fuzzer starts from a journal that reaches every kind of line.
TEST(CoordinatorJournalTest, GivenTheFuzzSeedThenItReplaysWhole) {
  Result<std::string> seed =
      ReadFile(std::string(GOLDMINER_SOURCE_DIR) + "/tests/fuzz/corpus/journal/small");
  ASSERT_TRUE(seed.ok()) << seed.status().message();
  ASSERT_FALSE(seed->empty());
  auto r = JournaledCoordinator::Replay({1, 2, 10.0}, std::string_view(*seed).substr(1), "small", 0,
                                        nullptr);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->lines(), 9u);
}

// A sink that fails stops the call that wrote it, saying why.
TEST(CoordinatorJournalTest, GivenASinkThatFailsThenTheCallFails) {
  auto c = JournaledCoordinator::Create(
      {1, 2, 10.0}, [](std::string_view) { return Status::IoError("journal: disk full"); });
  ASSERT_TRUE(c.ok());
  Status started = c->StartEpoch(EpochPlan{1, {{10, 1}}});
  EXPECT_EQ(started.code(), Code::kIoError);
  EXPECT_EQ(c->lines(), 0u);
  EXPECT_FALSE(c->RegisterWorker(0).ok());
}

}  // namespace
}  // namespace gm
