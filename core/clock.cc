#include "core/clock.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <thread>

#include "core/thread_annotations.h"

namespace gm {
namespace {
double Read(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

class MonotonicClock : public Clock {
 public:
  double Now() const override { return MonotonicSeconds(); }
  double WaitSlice(double until) const override { return std::max(0.0, until - Now()); }
};
}  // namespace

double MonotonicSeconds() { return Read(CLOCK_MONOTONIC); }
double ThreadCpuSeconds() { return Read(CLOCK_THREAD_CPUTIME_ID); }
double ProcessCpuSeconds() { return Read(CLOCK_PROCESS_CPUTIME_ID); }

Clock& SystemClock() {
  static MonotonicClock* clock = new MonotonicClock();  // never destroyed: used at exit
  return *clock;
}

double FakeClock::Now() const {
  MutexLock lock(mu_);
  return now_;
}

double FakeClock::WaitSlice(double until) const { return Now() >= until ? 0.0 : 0.001; }

void SleepUntil(const Clock& clock, double until) {
  for (double now = clock.Now(); now < until; now = clock.Now()) {
    std::this_thread::sleep_for(std::chrono::duration<double>(clock.WaitSlice(until)));
  }
}

void FakeClock::Advance(double seconds) {
  MutexLock lock(mu_);
  now_ += std::max(0.0, seconds);
}

std::optional<double> UtcSeconds(const std::string& utc) {
  std::tm tm{};
  const char* end = strptime(utc.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return static_cast<double>(timegm(&tm));
}

std::string SystemUtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace gm
