// What a worker's CPU spends to hand batches to a trainer, measured on this host
// for `goldminer profile` (core/profile.h, DeliveryCost): the calling thread
// sends sealed frames (dataplane/session.h) over a loopback TCP connection to a
// thread that reads them, first small ones (the cost of a frame: the MAC and the
// send), then batches of the pipeline's size (the cost of a payload byte).
//
// Loopback puts the receiving side's protocol work on the sending CPU too, so the
// per-byte figure is an upper bound for a real NIC. Pin the calling thread first
// (as ProfilePipeline does) to measure one worker CPU.
#pragma once

#include <cstddef>

#include "core/profile.h"
#include "core/status.h"

namespace gm {

// `batch_bytes`: one batch's payload at the last stage (clamped to 1 MiB..8 MiB).
// Errors: a loopback socket cannot be opened, or a send or receive fails.
Result<DeliveryCost> MeasureDelivery(size_t batch_bytes);

}  // namespace gm
