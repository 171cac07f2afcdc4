// Scenario tests of the supervisor (launcher/supervisor.h) over a fake launcher:
// starts, replacement with a growing delay and its bound, drain, stop with a grace
// period then SIGKILL, and the end of a run. Time is a number the test moves.
#include "launcher/supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/fake_launcher.h"

namespace gm {
namespace {

class SupervisorTest : public testing::Test {
 protected:
  SupervisorOptions Options() {
    SupervisorOptions o;
    o.max_restarts = 2;
    o.backoff_s = 1;
    o.max_backoff_s = 3;
    o.stop_grace_s = 5;
    o.end_grace_s = 10;
    o.clock = &clock_;
    return o;
  }
  static LaunchRequest Worker(int slot) {
    LaunchRequest r;
    r.role = ProcessRole::kWorker;
    r.argv = {"goldminer", "worker"};
    r.slot = slot;
    r.threads = slot + 1;
    return r;
  }
  FakeClock clock_{0};
  FakeLauncher launcher_{&clock_};
};

TEST_F(SupervisorTest,
       GivenACrashedWorkerThenItIsReplacedInItsSlotAtOnceThenAfterAGrowingDelayUpToTheBound) {
  Supervisor s(launcher_, Options());
  pid_t w = *s.Start(Worker(1));
  std::vector<double> delays;
  for (int crash = 0; crash < 3; ++crash) {
    launcher_.End(w, 1);
    std::vector<ProcessReplaced> replaced;
    std::optional<ProcessEnded> e = s.Poll(0.1, &replaced);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->slot, 1);
    if (crash == 2) {  // the third crash: max_restarts (2) reached
      EXPECT_FALSE(e->will_replace);
      EXPECT_TRUE(e->restarts_exhausted);
      break;
    }
    ASSERT_TRUE(e->will_replace);
    delays.push_back(e->delay_s);
    const double crashed_at = clock_.Now();
    while (replaced.empty()) s.Poll(0.1, &replaced);
    EXPECT_GE(clock_.Now() - crashed_at, e->delay_s - 1e-9);  // not before its delay
    ASSERT_EQ(replaced.size(), 1u);
    EXPECT_EQ(replaced[0].slot, 1);
    w = replaced[0].pid;
    EXPECT_EQ(launcher_.started.back().second.threads, 2);  // the slot's size
  }
  EXPECT_EQ(delays, (std::vector<double>{0, 1}));
  EXPECT_EQ(s.restarts(), 2);
  EXPECT_EQ(s.running(ProcessRole::kWorker), 0u);
}

TEST_F(SupervisorTest, GivenTheDelayCeilingThenTheDelayStopsGrowing) {
  SupervisorOptions o = Options();
  o.max_restarts = 10;
  Supervisor s(launcher_, o);
  pid_t w = *s.Start(Worker(0));
  std::vector<double> delays;
  for (int crash = 0; crash < 5; ++crash) {
    launcher_.End(w, 3);
    std::vector<ProcessReplaced> replaced;
    std::optional<ProcessEnded> e = s.Poll(0.1, &replaced);
    ASSERT_TRUE(e && e->will_replace);
    delays.push_back(e->delay_s);
    while (replaced.empty()) s.Poll(0.5, &replaced);
    w = replaced[0].pid;
  }
  EXPECT_EQ(delays, (std::vector<double>{0, 1, 2, 3, 3}));
}

TEST_F(SupervisorTest, GivenADrainedOrCleanlyExitedWorkerThenItIsNotReplaced) {
  Supervisor s(launcher_, Options());
  pid_t a = *s.Start(Worker(0));
  pid_t b = *s.Start(Worker(1));
  launcher_.obey_term = false;
  s.Drain(a);
  EXPECT_EQ(launcher_.signals, (std::vector<std::pair<pid_t, int>>{{a, SIGTERM}}));
  launcher_.End(a, 0, SIGKILL);  // a drained Slurm step may end by a signal: still drained
  std::optional<ProcessEnded> e = s.Poll(0.1, nullptr);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->drained);
  EXPECT_FALSE(e->will_replace);
  launcher_.End(b, 0);
  e = s.Poll(0.1, nullptr);
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(e->will_replace);
  for (int i = 0; i < 50; ++i) s.Poll(0.1, nullptr);
  EXPECT_EQ(launcher_.started.size(), 2u);
}

TEST_F(SupervisorTest, GivenADrainedWorkerStillRunningAfterItsGraceThenItIsKilled) {
  SupervisorOptions o = Options();
  o.drain_kill_s = 15;
  Supervisor s(launcher_, o);
  pid_t w = *s.Start(Worker(0));
  launcher_.obey_term = false;  // its drain waits on acknowledgements that do not come
  s.Drain(w);
  s.Drain(w);  // once: the grace does not start again
  const double drained_at = clock_.Now();
  std::optional<ProcessEnded> e;
  while (!(e = s.Poll(0.5, nullptr))) ASSERT_LT(clock_.Now(), 100) << "never killed";
  EXPECT_GE(clock_.Now(), drained_at + 15);
  EXPECT_TRUE(e->drained);
  EXPECT_FALSE(e->will_replace);
  EXPECT_EQ(launcher_.signals, (std::vector<std::pair<pid_t, int>>{{w, SIGTERM}, {w, SIGKILL}}));
}

TEST_F(SupervisorTest, GivenAStoppedProcessThatIgnoresSigtermThenItIsKilledAfterTheGrace) {
  Supervisor s(launcher_, Options());
  LaunchRequest trainer;
  trainer.role = ProcessRole::kTrainer;
  trainer.argv = {"python3", "train.py"};
  pid_t t = *s.Start(trainer);
  launcher_.obey_term = false;
  s.Stop(t);
  std::optional<ProcessEnded> e;
  while (!(e = s.Poll(0.5, nullptr))) ASSERT_LT(clock_.Now(), 100) << "never killed";
  EXPECT_TRUE(e->stopped);
  EXPECT_EQ(e->role, ProcessRole::kTrainer);
  EXPECT_EQ(e->exit.exit_code(), 128 + SIGKILL);
  EXPECT_GE(clock_.Now(), 5.0);  // not before the grace period
  EXPECT_EQ(launcher_.signals, (std::vector<std::pair<pid_t, int>>{{t, SIGTERM}, {t, SIGKILL}}));
}

TEST_F(SupervisorTest, GivenAReplacementThatCannotStartThenPollSaysWhy) {
  Supervisor s(launcher_, Options());
  pid_t w = *s.Start(Worker(0));
  launcher_.fail_starts = 1;
  launcher_.End(w, 1);
  std::vector<ProcessReplaced> replaced;
  ASSERT_TRUE(s.Poll(0.1, &replaced)->will_replace);
  while (replaced.empty()) s.Poll(0.5, &replaced);
  EXPECT_EQ(replaced[0].pid, 0);
  EXPECT_NE(replaced[0].error.find("cannot start"), std::string::npos);
}

TEST_F(SupervisorTest, GivenTheEndOfTheRunThenEveryProcessIsStoppedAndPendingReplacementsDropped) {
  Supervisor s(launcher_, Options());
  pid_t a = *s.Start(Worker(0));
  pid_t b = *s.Start(Worker(1));
  launcher_.End(a, 1);
  ASSERT_TRUE(s.Poll(0.1, nullptr)->will_replace);  // a replacement is pending
  launcher_.obey_term = false;                      // b ignores SIGTERM
  std::vector<ProcessEnded> ended = s.StopAll();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].exit.pid, b);
  EXPECT_EQ(ended[0].exit.exit_code(), 128 + SIGKILL);
  EXPECT_EQ(launcher_.alive(), 0u);
  for (int i = 0; i < 20; ++i) s.Poll(0.5, nullptr);
  EXPECT_EQ(launcher_.started.size(), 2u);  // the pending replacement never started
}

}  // namespace
}  // namespace gm
