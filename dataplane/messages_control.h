// Connections 1 to 3: workers and trainer clients with the coordinator, and a
// client's data connection to a worker (dataplane/messages.h has the shared part).
//
// 1. worker -> coordinator (control). Request/response: the worker sends, the
//    coordinator answers only GET_SPLIT, and once the run is over a HEARTBEAT
//    that says making_split (see HeartbeatMsg); any frame from the worker counts
//    as a heartbeat.
//      W->C REGISTER    {data_addr: "HOST:PORT", host, pid, threads[, worker_id,
//                        made]}  (worker_id, made: registering again at a
//                        coordinator started again; see RegisterMsg)
//      C->W REGISTERED  {worker_id, pipeline: <pipeline.json document>,
//                        pipeline_origin: "PATH", base_dir: "DIR",
//                        samples_per_split, heartbeat_s, liveness_timeout_s,
//                        reconnect_s}
//      W->C GET_SPLIT   {draining}  draining: optional, true once the worker was
//                       told to drain (SIGTERM): it takes no new split and leaves
//                       once what it made is acknowledged (the answer is then
//                       "drain", or "exit")
//      C->W ASSIGN      {kind: "assign"|"wait"|"drain"|"exit"|"epoch_done",
//                        epoch, split, rank, start_batch, end_batch (-1: to the
//                        split's end), retry_s (for wait and epoch_done)}
//      W->C SPLIT_DONE  {epoch, split, batch_count, skipped, stages}
//      W->C HEARTBEAT   {batches_sent, splits_done, making_split, cpu_s, stages}
//                       (when nothing was sent for heartbeat_s); stages: the
//                       worker's per-stage totals so far, [{name, count, cpu_s,
//                       wall_s, bytes_in, bytes_out}]
//      C->W ASSIGN      {kind: "exit"} once, unasked, in answer to a HEARTBEAT
//                       with making_split true after the run's end: the split's
//                       trainer is gone, so the worker stops it and says BYE
//      W->C BYE         {}  (clean exit after "exit")
//    A worker whose coordinator connection fails finishes the split in hand and
//    dials the coordinator again for reconnect_s (a coordinator started again
//    from its journal takes it back); when none answers it exits (status 3) and
//    its splits are re-made elsewhere. A draining one exits at once.
//
// 2. client (one per trainer rank) -> coordinator (control). Request/response.
//      K->C SUBSCRIBE   {rank, world_size[, session]}  (session: the one the
//                       client had at a coordinator it lost; given back when it
//                       is still the rank's newest)
//      C->K SUBSCRIBED  {run_id, batch_size, world_size, epochs, session, ticket,
//                       order, seed, device_stages, reconnect_s}
//                       session: this rank's session number (each SUBSCRIBE gets
//                       a higher one); ticket: the key for the data ports
//                       (dataplane/auth.h)
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
//      K->C RESUME      {epoch, position[, split_index, split_batch]}
//      C->K PLAN        of that epoch, or ERROR {message} when the state does not
//                       fit the run (then the connection closes)
//      K->C HEARTBEAT   {}   (no answer; when the trainer sent nothing for
//                       kClientHeartbeatS: the coordinator closes a client
//                       connection silent for kClientIdleS)
//      K->C BYE         {}
//    The plan and world size give each rank its batch sequence (RankSequence in
//    dataplane/batch_order.h).
//
// 3. client -> worker (data). The worker streams, the client grants credit. The
//    client authenticates with its ticket as role "client:RANK:SESSION"; a newer
//    session of a rank replaces an older one's connection, an older one is refused.
//      K->W SUBSCRIBE   {rank, shm}  (rank: the ticket's; shm: true asks for
//                       segments, honoured on the same-host socket only)
//      K->W CREDIT      {n, release}   (n more batches may be sent on this
//                       connection; release: segment ids the trainer is done with)
//      W->K BATCH       EncodeBatchMeta + BatchMeta {rank, split_batches, shm: {id, fd}} ;
//                       payload data + labels, or labels only with shm (the data
//                       is in the segment: dataplane/shm.h)
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
//    so a worker holding a later split can never block the split the rank needs,
//    and grants one more to the awaited split's holder (by WORKERS' holders) once
//    it has used its own, since another worker may hold credit it has nothing to
//    spend on (a split taken back from a lost worker goes to one whose credit is
//    used); it stops at the client's look-ahead bound
//    (ClientOptions::max_buffered_bytes) for a worker whose batches are not
//    checked against WORKERS' holders yet.
//
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/engine_stats.h"
#include "core/status.h"
#include "dataplane/batch_order.h"
#include "dataplane/messages.h"
#include "dataplane/protocol.h"

namespace gm {

inline constexpr size_t kMaxAckBatches = 4096;                // [split, batch] pairs per ACK
inline constexpr size_t kMaxReportedStages = 256;             // entries of a "stages" report
inline constexpr uint64_t kMaxCredit = 1024;                  // batches one CREDIT may grant
inline constexpr size_t kMaxDeviceStages = 16;                // entries of SUBSCRIBED device_stages
inline constexpr uint64_t kMaxCreditReleases = kMaxSegments;  // segment ids one CREDIT releases

inline constexpr double kDefaultHeartbeatS = 1.0;
inline constexpr double kDefaultLivenessTimeoutS = 10.0;
// A client sends HEARTBEAT on its coordinator connection when it sent nothing for
// this long; the coordinator closes a client connection silent for kClientIdleS.
inline constexpr double kClientHeartbeatS = 10.0;
inline constexpr double kClientIdleS = 60.0;
inline constexpr int kDefaultPrefetchBatches = 4;  // initial CREDIT per worker connection

// W->C SPLIT_DONE {epoch, split, batch_count, skipped, stages}.
struct SplitDoneMsg {
  uint64_t epoch = 0;
  uint64_t split = 0;
  uint64_t batch_count = 0;  // at most kMaxSplitBatches
  // Samples of the split the worker skipped (on_error: skip), at most
  // kMaxSplitSamples; optional, 0 when absent. The coordinator checks batch_count
  // against the split's size less these when the size is known.
  uint64_t skipped = 0;
  std::optional<std::vector<StageStats>> stages;  // the worker's stage totals (StagesReport)
  nlohmann::json Encode() const;
  static Result<SplitDoneMsg> Decode(const nlohmann::json& meta);
};

// W->C REGISTER {data_addr, ...}.
// Optional, for the run's record: host (the worker's node), tag (what its launcher
// named it: GOLDMINER_WORKER_TAG), step (its Slurm step, "JOB.STEP"); each printable,
// at most 256 bytes.
// A worker that lost its coordinator and reaches a restarted one registers
// again with its old id (worker_id) and the SPLIT_DONEs it sent last (made: the
// last kMaxRegisterMade, as SPLIT_DONE's fields without stages), which the
// coordinator may not have read before it died; it holds no split then.
inline constexpr size_t kMaxRegisterMade = 8;
struct RegisterMsg {
  std::string data_addr;  // "HOST:PORT", printable, at most kMaxAddressBytes, port 1..65535
  std::string host;
  std::string tag;
  std::string step;
  int64_t pid = 0;                      // optional: 1 .. 2^22 (0: not sent)
  int64_t threads = 0;                  // optional: 1 .. 4096 (0: not sent)
  uint64_t worker_id = 0;               // optional: 1 .. 2^62 (0: a new worker)
  std::vector<SplitDoneMsg> made = {};  // optional, with worker_id only
  nlohmann::json Encode() const;
  static Result<RegisterMsg> Decode(const nlohmann::json& meta);
};

// W->C GET_SPLIT {draining}.
struct GetSplitMsg {
  bool draining = false;  // optional, false when absent
  nlohmann::json Encode() const;
  static Result<GetSplitMsg> Decode(const nlohmann::json& meta);
};

// W->C HEARTBEAT {batches_sent, splits_done, making_split, cpu_s[, stages]}; every
// field optional (0 or false when absent). The stages report travels beside them
// (EncodeStagesReport, DecodeStagesReport).
struct HeartbeatMsg {
  uint64_t batches_sent = 0;
  uint64_t splits_done = 0;
  bool making_split = false;     // the worker is inside a split: it asks nothing until done
  double cpu_s = 0;              // the worker's CPU seconds so far, 0 .. kMaxStageSeconds
  uint64_t virtual_workers = 0;  // virtual DataLoader workers it hosts now, 0 .. 2^20
  nlohmann::json Encode() const;
  static Result<HeartbeatMsg> Decode(const nlohmann::json& meta);
};

// The optional "stages" report of HEARTBEAT and SPLIT_DONE: the worker's totals
// per stage since it started, in pipeline order, at most kMaxReportedStages
// entries {name, count, cpu_s, wall_s, bytes_in, bytes_out}: name printable ASCII
// (spaces allowed), 1 to kMaxStageNameBytes; count and bytes integers from 0 to
// kMaxStageTotal; cpu_s and wall_s numbers from 0 to kMaxStageSeconds. Decoded
// into StageStats (extra_cpu_s and peak_bytes_out stay 0): nullopt when absent,
// Corrupt naming the field when malformed.
inline constexpr size_t kMaxStageNameBytes = 1024;
inline constexpr int64_t kMaxStageTotal = int64_t{1} << 62;
inline constexpr double kMaxStageSeconds = 1e12;
Result<std::optional<std::vector<StageStats>>> DecodeStagesReport(const nlohmann::json& meta,
                                                                  const char* message);
nlohmann::json EncodeStagesReport(const std::vector<StageStats>& stages);

// K->C SUBSCRIBE {rank, world_size}; K->W SUBSCRIBE {rank} (world_size -1: absent).
struct SubscribeMsg {
  int64_t rank = 0;         // 0 .. 65535
  int64_t world_size = -1;  // 1 .. 65536, or -1 when not sent
  bool shm = false;         // K->W: send batch data in segments (dataplane/shm.h)
  // K->C, optional: the session this client had at a coordinator that went away
  // (0: none). A restarted coordinator gives the same session back when it is the
  // rank's newest (the client goes on where it was); else a new one.
  uint64_t session = 0;
  nlohmann::json Encode() const;
  static Result<SubscribeMsg> Decode(const nlohmann::json& meta, bool need_world_size);
};

// K->C GET_PLAN {epoch}.
struct GetPlanMsg {
  uint64_t epoch = 0;
  nlohmann::json Encode() const;
  static Result<GetPlanMsg> Decode(const nlohmann::json& meta);
};

// K->C ACK {epoch, batches: [[split, split_batch], ...][, samples: [n, ...]]}.
// samples, optional: each batch's sample count as the trainer got it (1..2^40,
// one per batch); the coordinator checks a complete split's sum against its size.
struct AckMsg {
  uint64_t epoch = 0;
  std::vector<std::pair<uint64_t, uint64_t>> batches;  // at most kMaxAckBatches
  std::vector<uint64_t> samples;                       // empty, or one per batch
  nlohmann::json Encode() const;
  static Result<AckMsg> Decode(const nlohmann::json& meta);
};

// K->C RESUME {epoch, position[, split_index, split_batch]}.
struct ResumeMsg {
  uint64_t epoch = 0;
  uint64_t position = 0;  // batches of the rank's share already consumed
  // Where the position lies in the rank's sequence (both or neither): lets a new
  // run resume without the counts of the splits before it.
  std::optional<SequenceKey> at;
  nlohmann::json Encode() const;
  static Result<ResumeMsg> Decode(const nlohmann::json& meta);
};

// K->W CREDIT {n}.
struct CreditMsg {
  uint64_t n = 0;  // 1 .. kMaxCredit more batches (0 allowed with releases)
  // Segments the trainer is done with (dataplane/shm.h): ids below
  // kMaxCreditReleases, at most that many.
  std::vector<uint64_t> release;
  nlohmann::json Encode() const;
  static Result<CreditMsg> Decode(const nlohmann::json& meta);
};
// C->K SUBSCRIBED {run_id, batch_size, world_size, epochs, session, ticket[,
// order, seed]}.
struct SubscribedMsg {
  std::string run_id;
  int64_t batch_size = 0;  // 1 .. 2^24
  int64_t world_size = 1;  // 1 .. 65536
  int64_t epochs = 0;      // 0 (as the trainer asks) .. kMaxEpochs
  uint64_t session = 0;    // this client's session number at the coordinator, >= 1
  std::string ticket;      // the key for data ports (dataplane/auth.h), 64 hex
  // What the batch order derives from: 64 hex of the run's pipeline document and
  // split size, and the pipeline's seed. Empty from a peer that does not say.
  std::string order;
  int64_t seed = 0;  // 0 .. 2^63-1
  // The pipeline's stages "on": "device" (worker/pipeline.h), which the trainer's
  // client applies to each batch: at most kMaxDeviceStages objects with an "op".
  nlohmann::json device_stages = nlohmann::json::array();
  // How long a client that lost the coordinator dials it again (at most its own
  // ClientOptions::reconnect_s); optional, 0 .. 86400, 0 when absent: not at all.
  double reconnect_s = 0;
  nlohmann::json Encode() const;
  static Result<SubscribedMsg> Decode(const nlohmann::json& meta);
};

// C->W REGISTERED {worker_id, pipeline, pipeline_origin, base_dir,
// samples_per_split, heartbeat_s, liveness_timeout_s, offload_key}.
struct RegisteredMsg {
  uint64_t worker_id = 0;
  nlohmann::json pipeline;  // the pipeline document (an object)
  std::string pipeline_origin;
  std::string base_dir = ".";
  int64_t samples_per_split = 256;  // 1 .. 2^24
  double heartbeat_s = 1.0;         // (0, 3600]
  double liveness_timeout_s = 10;   // (0, 86400]
  // How long a worker that lost its coordinator tries to reach it again (a
  // restarted one replays its journal) before it exits; optional, (0, 86400].
  double reconnect_s = 15;
  // The coordinator's public key for offload proofs (dataplane/offload_proof.h), 64
  // hex; optional: without it the worker opens no virtual DataLoader worker.
  std::string offload_key;
  nlohmann::json Encode() const;
  static Result<RegisteredMsg> Decode(const nlohmann::json& meta);
};

// C->W ASSIGN {kind, epoch, split, rank, start_batch, end_batch, retry_s}.
struct AssignMsg {
  enum class Kind { kAssign, kWait, kDrain, kExit, kEpochDone };
  Kind kind = Kind::kWait;
  // Set for kAssign:
  uint64_t epoch = 0;
  uint64_t split = 0;
  int64_t rank = 0;
  uint64_t start_batch = 0;
  int64_t end_batch = -1;  // -1: to the split's end
  // The rank's trainer session when the split was handed out (0: none yet, or
  // not sent): the worker's data port refuses older sessions' tickets for it.
  uint64_t session = 0;
  double retry_s = 0.05;  // for the others: ask again after this long, [0, 3600]
  nlohmann::json Encode() const;
  static Result<AssignMsg> Decode(const nlohmann::json& meta);
};

// C->K PLAN {epoch, splits, workers} | {epoch, wait, retry_s} | {epoch, end,
// epochs} | {epoch, done}.
struct PlanMsg {
  enum class Kind { kPlan, kWait, kEnd, kDone };
  Kind kind = Kind::kPlan;
  uint64_t epoch = 0;
  // kPlan: [split, batch_count (-1: unknown)] in plan order, and the workers.
  std::vector<std::pair<uint64_t, int64_t>> splits;
  std::vector<std::string> workers;
  // kPlan, optional: where this rank stands in the epoch (position, split_index,
  // split_batch as in RESUME), sent to a new session of a rank that an earlier
  // session left partway (a trainer restarted without its state): it continues
  // there, and what the earlier session was sent but did not acknowledge is made
  // again.
  std::optional<uint64_t> position;
  std::optional<SequenceKey> at;
  double retry_s = 0.05;  // kWait
  int64_t epochs = 0;     // kEnd: the run's epoch count
  nlohmann::json Encode() const;
  static Result<PlanMsg> Decode(const nlohmann::json& meta);
};

// C->K WORKERS {workers: ["HOST:PORT", ...]}.
// WORKERS {workers, epoch, holders}: holders pairs each split of the asking
// rank's share of `epoch` (the coordinator's current one) that a worker holds
// (made or being made, not yet acknowledged) with that worker's index in
// `workers`. The client checks the batches it buffers against it.
struct WorkersMsg {
  std::vector<std::string> workers;  // each at most kMaxAddressBytes, printable
  uint64_t epoch = 0;
  std::vector<std::pair<uint64_t, uint64_t>> holders;  // (split, index into workers)
  bool holders_known = false;  // epoch and holders were sent (they are optional)
  // (split, index into workers): splits the coordinator took back from that worker
  // when this rank's trainer restarted; the worker's batches of them that still
  // come are dropped, and are no fault. Optional; at most kMaxRevoked.
  std::vector<std::pair<uint64_t, uint64_t>> revoked;
  static constexpr size_t kMaxRevoked = 65536;
  nlohmann::json Encode() const;
  static Result<WorkersMsg> Decode(const nlohmann::json& meta);
};

// K->C FAULT {worker, epoch, why}: the client took `worker` (its data address, as
// in WORKERS) to be faulty: it sent a batch no honest worker sends, or it held
// the batch this rank waits for past the stall timeout. The coordinator drops
// that worker, so its splits are made by others. No reply. `why` is the client's
// text, at most kMaxFaultWhyBytes.
struct FaultMsg {
  std::string worker;
  uint64_t epoch = 0;
  std::string why;
  nlohmann::json Encode() const;
  static Result<FaultMsg> Decode(const nlohmann::json& meta);
};
inline constexpr size_t kMaxFaultWhyBytes = 1024;

}  // namespace gm
