#include "core/clock.h"

#include <ctime>

namespace gm {
namespace {
double Read(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

double MonotonicSeconds() { return Read(CLOCK_MONOTONIC); }
double ThreadCpuSeconds() { return Read(CLOCK_THREAD_CPUTIME_ID); }
double ProcessCpuSeconds() { return Read(CLOCK_PROCESS_CPUTIME_ID); }

}  // namespace gm
