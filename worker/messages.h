// The data plane's messages: who sends what to whom, with which JSON meta fields.
// Frames, handshake and BATCH encoding are in worker/protocol.h and auth.h; this
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
//    worker/batch_order.h).
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
#pragma once

#include <cstdint>

namespace gm {

inline constexpr int kDataPlaneVersion = 1;
inline constexpr double kDefaultHeartbeatS = 1.0;
inline constexpr double kDefaultLivenessTimeoutS = 10.0;
inline constexpr int kDefaultPrefetchBatches = 4;  // initial CREDIT per worker connection

}  // namespace gm
