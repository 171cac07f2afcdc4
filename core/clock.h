// Time sources. Monotonic wall seconds and per-thread CPU seconds, both as doubles,
// and the Clock that logic with periods and grace times is handed (the run loop,
// the supervisor, the coordinator's worker liveness, the client's heartbeat,
// progress deadline and waits), so a unit test drives it with a FakeClock instead
// of waiting. Socket deadlines (dataplane/socket.h) stay on MonotonicSeconds: they
// bound what a peer can make us hold, in real time.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <optional>
#include <string>

#include "core/thread_annotations.h"

namespace gm {

// Seconds on a monotonic clock (arbitrary origin).
double MonotonicSeconds();
// CPU seconds (user + system) consumed by the calling thread.
double ThreadCpuSeconds();
// CPU seconds (user + system) consumed by the whole process.
double ProcessCpuSeconds();

// A monotonic clock in seconds (arbitrary origin). Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  // Seconds now; never less than an earlier call returned.
  virtual double Now() const = 0;
  // Real seconds a wait for this clock to reach `until` may block before it
  // looks at the clock again: all the time left on a real clock. A fake clock's
  // time moves only when a test moves it, so its waiters look again often.
  virtual double WaitSlice(double until) const = 0;
};

// Waits on `cv` (its mutex held through `lock`, let go meanwhile) until pred()
// (called with the mutex held) is true or `clock` reaches `until`; pred()'s last
// value. Never blocks past `until` on `clock`, whichever clock it is.
template <typename Pred>
bool WaitUntil(const Clock& clock, MutexLock& lock, std::condition_variable& cv, double until,
               Pred pred) {
  // pred() is called only through WaitFor, which holds the mutex (and says so).
  for (;;) {
    if (clock.Now() >= until) return lock.WaitFor(cv, 0, pred);
    if (lock.WaitFor(cv, clock.WaitSlice(until), pred)) return true;
  }
}

// Sleeps until `clock` reaches `until` (returns at once when it has).
void SleepUntil(const Clock& clock, double until);

// The process's monotonic clock (MonotonicSeconds); lives as long as the process.
Clock& SystemClock();

// A clock that moves only when told (Advance). Starts at `start`.
class FakeClock : public Clock {
 public:
  explicit FakeClock(double start = 1000) : now_(start) {}
  double Now() const override;
  // A millisecond of real time, or none when `until` has come.
  double WaitSlice(double until) const override;
  // Moves the clock forward by `seconds` (>= 0).
  void Advance(double seconds);

 private:
  mutable Mutex mu_;
  double now_ GUARDED_BY(mu_);
};

// Wall-clock time for records, as ISO 8601 UTC text ("2026-11-29T20:31:07Z").
// Returns the current time as ISO 8601 UTC text; a store stamps events with it
// (a test gives a fixed one).
using UtcClock = std::function<std::string()>;
// The system clock, "YYYY-MM-DDTHH:MM:SSZ".
std::string SystemUtcNow();
// Seconds since the Unix epoch of such a time; nullopt for anything else.
std::optional<double> UtcSeconds(const std::string& utc);

}  // namespace gm
