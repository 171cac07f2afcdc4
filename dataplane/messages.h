// The data plane's messages: who sends what to whom, with which JSON meta fields.
// Frames, handshake and BATCH encoding are in dataplane/protocol.h and auth.h; the
// messages fix the conversation on top of them. All three roles (coordinator in
// `goldminer run`, data workers, trainer clients) and the pool follow it; the man
// page goldminer-protocol(7) is written from it.
//
// Connections (each starts with the handshake; roles "worker" and "client"), each
// family with its own header:
//   1. worker -> coordinator (control)                 dataplane/messages_control.h
//   2. client (one per trainer rank) -> coordinator    dataplane/messages_control.h
//   3. client -> worker (data: CREDIT, BATCH)          dataplane/messages_control.h
//   4. client -> coordinator (offload control)         dataplane/messages_offload.h
//   5. client -> worker (a virtual DataLoader worker)  dataplane/messages_offload.h
//   6. run -> pool                                     dataplane/messages_pool.h
// This header holds what they share: the version, the common bounds, and ERROR,
// which either side of any connection may send.
//
// Typed messages. Every message a role receives (the coordinator from workers
// and clients, a worker from the coordinator and at its data port from clients,
// a client from the coordinator) is decoded by its struct's Decode, never read
// from the JSON at the use (BATCH: DecodeBatch and BatchMeta in
// dataplane/protocol.h): Decode checks each field's presence, type and range and
// fails with Corrupt naming the message and the field ("SPLIT_DONE: $.batch_count:
// expected an integer from 0 to 16777216, got \"0\""). Encode builds the meta a
// sender sends. Plain values; thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/run_spec.h"
#include "core/status.h"
#include "dataplane/socket.h"

namespace gm {

inline constexpr int kDataPlaneVersion = 1;
// Bounds on what a peer may send in one message.
inline constexpr uint64_t kMaxEpochs = kMaxRunEpochs;  // epoch numbers below this (core/run_spec.h)
inline constexpr uint64_t kMaxSplitId = uint64_t{1} << 32;
inline constexpr uint64_t kMaxSplitSamples = uint64_t{1} << 40;
inline constexpr size_t kMaxAddressBytes = 256;     // "HOST:PORT"
inline constexpr size_t kMaxWorkers = 65536;        // addresses in one PLAN, WORKERS or OFFLOADING
inline constexpr size_t kMaxPlanSplits = 1u << 24;  // splits in one PLAN

// Either way: ERROR {message}; the sender closes afterwards. Decode never fails:
// a missing or non-string message reads "(no message)". The text is the peer's:
// quote it with PeerText (core/log.h).
struct ErrorMsg {
  std::string message;
  nlohmann::json Encode() const;
  static ErrorMsg Decode(const nlohmann::json& meta);
};
// Sends ERROR {message}, best effort (the peer may be gone): the caller closes
// the connection afterwards.
void SendError(Socket& socket, const std::string& message, Deadline deadline);

}  // namespace gm
