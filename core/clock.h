// Time sources. Monotonic wall seconds and per-thread CPU seconds, both as doubles,
// and the Clock that logic with periods and grace times is handed (the run loop,
// the supervisor and the coordinator's worker liveness; socket deadlines and the
// client's waits still read MonotonicSeconds), so a unit test drives it with a
// FakeClock instead of waiting.
#pragma once

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
};

// The process's monotonic clock (MonotonicSeconds); lives as long as the process.
Clock& SystemClock();

// A clock that moves only when told (Advance). Starts at `start`.
class FakeClock : public Clock {
 public:
  explicit FakeClock(double start = 1000) : now_(start) {}
  double Now() const override;
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
