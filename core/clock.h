// Time sources. Monotonic wall seconds and per-thread CPU seconds, both as doubles.
#pragma once

namespace gm {

// Seconds on a monotonic clock (arbitrary origin).
double MonotonicSeconds();
// CPU seconds (user + system) consumed by the calling thread.
double ThreadCpuSeconds();
// CPU seconds (user + system) consumed by the whole process.
double ProcessCpuSeconds();

}  // namespace gm
