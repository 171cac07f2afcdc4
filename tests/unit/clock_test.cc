// core/clock.h: the fake clock moves only when told, and a wait on either clock
// ends at its deadline on that clock or when its condition holds.
#include "core/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <thread>

#include "core/thread_annotations.h"

namespace gm {
namespace {

TEST(FakeClockTest, GivenNoAdvanceThenTimeStandsStillAndAdvanceNeverGoesBack) {
  FakeClock clock(5);
  EXPECT_EQ(clock.Now(), 5);
  clock.Advance(-3);  // ignored: a monotonic clock never goes back
  EXPECT_EQ(clock.Now(), 5);
  clock.Advance(2.5);
  EXPECT_EQ(clock.Now(), 7.5);
  EXPECT_EQ(clock.WaitSlice(7.5), 0);
  EXPECT_GT(clock.WaitSlice(8), 0);
}

TEST(WaitUntilTest, GivenAFakeClockThenTheWaitEndsWhenTheClockReachesTheDeadlineNotBefore) {
  FakeClock clock(0);
  Mutex mu;
  std::condition_variable cv;
  std::atomic<bool> returned{false};
  bool result = true;
  std::thread waiter([&] {
    MutexLock lock(mu);
    result = WaitUntil(clock, lock, cv, 10, [] { return false; });
    returned = true;
  });
  clock.Advance(9.5);
  // The waiter looks at the clock every millisecond; at 9.5 it must still wait.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(returned);
  clock.Advance(0.5);
  waiter.join();
  EXPECT_TRUE(returned);
  EXPECT_FALSE(result);
}

TEST(WaitUntilTest, GivenTheConditionBecomesTrueThenTheWaitEndsWithTrueWhateverTheClock) {
  FakeClock clock(0);
  Mutex mu;
  std::condition_variable cv;
  bool ready = false;  // with mu
  bool result = false;
  std::thread waiter([&] {
    MutexLock lock(mu);
    result = WaitUntil(clock, lock, cv, 1e9, [&] { return ready; });
  });
  {
    MutexLock lock(mu);
    ready = true;
    cv.notify_all();
  }
  waiter.join();
  EXPECT_TRUE(result);
  EXPECT_EQ(clock.Now(), 0);
}

TEST(WaitUntilTest, GivenTheSystemClockAndAPastDeadlineThenThePredicateIsAskedWithoutWaiting) {
  Mutex mu;
  std::condition_variable cv;
  int asked = 0;
  MutexLock lock(mu);
  EXPECT_FALSE(WaitUntil(SystemClock(), lock, cv, SystemClock().Now() - 1, [&] {
    ++asked;
    return false;
  }));
  EXPECT_GE(asked, 1);
}

TEST(SleepUntilTest, GivenAFakeClockThenTheSleepEndsOnceAnotherThreadMovesItThere) {
  FakeClock clock(0);
  std::thread mover([&] {
    for (int i = 0; i < 10; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      clock.Advance(1);
    }
  });
  SleepUntil(clock, 10);
  EXPECT_GE(clock.Now(), 10);
  mover.join();
  SleepUntil(clock, 3);  // already past: returns at once
}

}  // namespace
}  // namespace gm
