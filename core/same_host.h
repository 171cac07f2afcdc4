// The same-host transport's size that the planner and the data plane agree on.
#pragma once

namespace gm {

// Shared-memory segments, one batch each, that a worker on the trainer's host
// lends its client (dataplane/shm.h, kLentSegments): memory a plan counts for it
// (planner/placement.cc).
inline constexpr int kSameHostSegmentsPerWorker = 8;

}  // namespace gm
