// The data plane's messages: who sends what to whom, with which JSON meta fields.
// Frames, handshake and BATCH encoding are in dataplane/protocol.h and auth.h; this
// file fixes the conversation on top of them. All three roles (coordinator in
// `goldminer run`, data workers, trainer clients) follow it; the man page
// goldminer-protocol(7) is written from it.
//
// Connections (each starts with the handshake; roles "worker" and "client"):
//
// 1. worker -> coordinator (control). Request/response: the worker sends, the
//    coordinator answers only GET_SPLIT; any frame from the worker counts as a
//    heartbeat.
//      W->C REGISTER    {data_addr: "HOST:PORT", host, pid, threads}
//      C->W REGISTERED  {worker_id, pipeline: <pipeline.json document>,
//                        pipeline_origin: "PATH", base_dir: "DIR",
//                        samples_per_split, heartbeat_s, liveness_timeout_s}
//      W->C GET_SPLIT   {}
//      C->W ASSIGN      {kind: "assign"|"wait"|"drain"|"exit"|"epoch_done",
//                        epoch, split, rank, start_batch, end_batch (-1: to the
//                        split's end), retry_s (for wait and epoch_done)}
//      W->C SPLIT_DONE  {epoch, split, batch_count, stages}
//      W->C HEARTBEAT   {batches_sent, splits_done, making_split, cpu_s, stages}
//                       (when nothing was sent for heartbeat_s); stages: the
//                       worker's per-stage totals so far, [{name, count, cpu_s,
//                       wall_s, bytes_in, bytes_out}]
//      W->C BYE         {}  (clean exit after "exit")
//    A worker whose coordinator connection fails exits (status 3) within the
//    liveness timeout; its splits are re-made elsewhere.
//
// 2. client (one per trainer rank) -> coordinator (control). Request/response.
//      K->C SUBSCRIBE   {rank, world_size}
//      C->K SUBSCRIBED  {run_id, batch_size, world_size, epochs}
//      K->C GET_PLAN    {epoch}
//      C->K PLAN        {epoch, splits: [[split, batch_count (-1: unknown)], ...]
//                        in plan order, workers: ["HOST:PORT", ...]}
//                       batch_count is the planned count, or the one a worker
//                       reported in SPLIT_DONE once known. GET_PLAN for an epoch
//                       that has not started yet is answered when it starts (the
//                       previous one is done), or after 5 s with {epoch, wait:
//                       true, retry_s} (ask again); for an epoch past the run's
//                       last, PLAN is {epoch, end: true, epochs}; for one every
//                       rank finished, {epoch, done: true}. How a client learns unknown
//                       counts: when blocked on its next batch it asks GET_PLAN
//                       again (at most every 0.2 s) and applies the counts.
//      K->C GET_WORKERS {}
//      C->K WORKERS     {workers: ["HOST:PORT", ...]}
//      K->C ACK         {epoch, batches: [[split, split_batch], ...]}   (no answer)
//      K->C RESUME      {epoch, position}                              (no answer)
//      K->C BYE         {}
//    The plan and world size give each rank its batch sequence (RankSequence in
//    dataplane/batch_order.h).
//
// 3. client -> worker (data). The worker streams, the client grants credit.
//      K->W SUBSCRIBE   {rank}
//      K->W CREDIT      {n}   (n more batches may be sent on this connection)
//      W->K BATCH       EncodeBatchMeta + {rank, split_batches} ; payload data + labels
//    split_batches is present only on the split's LAST batch (a worker that makes
//    the split to its end holds each batch back until it knows whether another
//    follows) and is the split's batch count; the client uses it to move on to
//    the next split when the plan's count is unknown (-1). A split that makes no
//    batch at all sends nothing: the client learns its count 0 by asking GET_PLAN
//    again while it waits (the coordinator knows it from SPLIT_DONE).
//    A worker sends the batches of an assignment for rank r, in split_batch order,
//    on rank r's connection, one per credit; with no connection for rank r yet it
//    waits (heartbeats go on). Progress rule: a client blocked on its next batch
//    whose every connection has used its credit grants one more credit to each,
//    so a worker holding a later split can never block the split the rank needs
//    (each worker holds at most one split at a time, so what a client buffers is
//    bounded by the number of workers times one split's batches).
//
// Typed messages. Every message a listening role receives from a peer it does not
// trust (the coordinator from workers and clients, a worker's data port from
// clients) is decoded by its struct's Decode below, never read from the JSON at
// the use: Decode checks each field's presence, type and range and fails with
// Corrupt naming the message and the field ("SPLIT_DONE: $.batch_count: expected
// an integer from 0 to 16777216, got \"0\""). Encode builds the meta a sender
// sends. Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace gm {

inline constexpr int kDataPlaneVersion = 1;
// Bounds on what a peer may send in one control message.
inline constexpr uint64_t kMaxEpochs = 1000000;        // epoch numbers below this
inline constexpr uint64_t kMaxSplitId = uint64_t{1} << 32;
inline constexpr size_t kMaxAckBatches = 4096;         // [split, batch] pairs per ACK
inline constexpr size_t kMaxReportedStages = 256;      // entries of a "stages" report
inline constexpr size_t kMaxAddressBytes = 256;        // "HOST:PORT"
inline constexpr uint64_t kMaxCredit = 1024;           // batches one CREDIT may grant

// W->C REGISTER {data_addr, ...}.
struct RegisterMsg {
  std::string data_addr;  // "HOST:PORT", printable, at most kMaxAddressBytes
  nlohmann::json Encode() const;
  static Result<RegisterMsg> Decode(const nlohmann::json& meta);
};

// W->C SPLIT_DONE {epoch, split, batch_count, stages}.
struct SplitDoneMsg {
  uint64_t epoch = 0;
  uint64_t split = 0;
  uint64_t batch_count = 0;  // at most kMaxSplitBatches
  nlohmann::json stages;     // the worker's per-stage totals (null when absent)
  nlohmann::json Encode() const;
  static Result<SplitDoneMsg> Decode(const nlohmann::json& meta);
};

// The optional "stages" report of HEARTBEAT and SPLIT_DONE: an array of at most
// kMaxReportedStages objects. Null when absent; Corrupt when malformed.
Result<nlohmann::json> DecodeStagesReport(const nlohmann::json& meta, const char* message);

// K->C SUBSCRIBE {rank, world_size}; K->W SUBSCRIBE {rank} (world_size -1: absent).
struct SubscribeMsg {
  int64_t rank = 0;         // 0 .. 65535
  int64_t world_size = -1;  // 1 .. 65536, or -1 when not sent
  nlohmann::json Encode() const;
  static Result<SubscribeMsg> Decode(const nlohmann::json& meta, bool need_world_size);
};

// K->C GET_PLAN {epoch}.
struct GetPlanMsg {
  uint64_t epoch = 0;
  nlohmann::json Encode() const;
  static Result<GetPlanMsg> Decode(const nlohmann::json& meta);
};

// K->C ACK {epoch, batches: [[split, split_batch], ...]}.
struct AckMsg {
  uint64_t epoch = 0;
  std::vector<std::pair<uint64_t, uint64_t>> batches;  // at most kMaxAckBatches
  nlohmann::json Encode() const;
  static Result<AckMsg> Decode(const nlohmann::json& meta);
};

// K->C RESUME {epoch, position}.
struct ResumeMsg {
  uint64_t epoch = 0;
  uint64_t position = 0;  // batches of the rank's share already consumed
  nlohmann::json Encode() const;
  static Result<ResumeMsg> Decode(const nlohmann::json& meta);
};

// K->W CREDIT {n}.
struct CreditMsg {
  uint64_t n = 0;  // 1 .. kMaxCredit more batches
  nlohmann::json Encode() const;
  static Result<CreditMsg> Decode(const nlohmann::json& meta);
};
inline constexpr double kDefaultHeartbeatS = 1.0;
inline constexpr double kDefaultLivenessTimeoutS = 10.0;
inline constexpr int kDefaultPrefetchBatches = 4;  // initial CREDIT per worker connection

}  // namespace gm
