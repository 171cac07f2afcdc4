// The data plane's messages: who sends what to whom, with which JSON meta fields.
// Frames, handshake and BATCH encoding are in dataplane/protocol.h and auth.h; this
// file fixes the conversation on top of them. All three roles (coordinator in
// `goldminer run`, data workers, trainer clients) follow it; the man page
// goldminer-protocol(7) is written from it.
//
// Connections (each starts with the handshake; roles "worker" and "client"):
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
//      W->K BATCH       EncodeBatchMeta + {rank, split_batches, shm: {id, fd}} ;
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
// 4. client -> coordinator (offload control): the trainer's DataLoader offload
//    (python/goldminer/offload.py), beside or instead of connection 2.
//      K->C OFFLOAD     {rank[, channel]}  (channel: the one the client had at a
//                       coordinator it lost, given back by one started again)
//      C->K OFFLOADING  {run_id, channel, ticket, workers: ["HOST:PORT", ...],
//                       reconnect_s}
//                       channel: this offload session's number (each OFFLOAD
//                       gets a higher one); ticket: its key at data ports as
//                       role "offload:RANK:CHANNEL" (dataplane/auth.h)
//      K->C GET_WORKERS, HEARTBEAT, BYE as on connection 2 (WORKERS without
//                       holders)
//      K->C OFFLOAD_NOTE {served, dataset, workers, blob_bytes | why} (no
//                       reply): what became of a DataLoader, for the record
//
// 5. client -> worker (a virtual DataLoader worker: worker/virtual_workers.h).
//    The client authenticates with its offload ticket. One connection is one
//    virtual worker: a Python process on the worker's host that speaks
//    goldminer._vwire frames on a byte stream; this connection carries that
//    stream both ways.
//      K->W OFFLOAD_OPEN   {python, modules}  (the trainer's interpreter path, the
//                          modules its blob names, for the host to import first)
//      W->K OFFLOAD_OPENED {pid, host}  or ERROR {message} and close
//      either way OFFLOAD_DATA {sha256} ; payload: the stream's next bytes, at
//                          most kMaxOffloadChunkBytes; sha256 (64 hex) of the
//                          payload, which the seal covers through the meta
//      W->K OFFLOAD_EXIT   {status[, why]}: the process ended (status as
//                          Python's returncode: negative for a signal); the
//                          worker closes after it
//    The client closing its end ends the process (SIGKILL).
//
// 6. run -> pool (`goldminer pool`, the cluster's division of spare CPUs:
//    launcher/pool_server.h). The run authenticates with the pool key as role
//    "run". Request/response; the first report binds the connection to its run.
//      R->P POOL_REPORT {run_id, gpus, cpus_per_worker, base_workers,
//                        extra_workers, demand_samples_per_s, rates: [[workers,
//                        samples_per_s], ...], token?, slurm_job?}
//      P->R POOL_GRANT  {extra_workers, cpus}: the pool workers it may hold
//      R->P POOL_STATUS {}
//      P->R POOL_STATE  {cpus, runs: [{run_id, gpus, extra_workers, cpus,
//                        held_workers, age_s}]}
//
// Typed messages. Every message a role receives (the coordinator from workers
// and clients, a worker from the coordinator and at its data port from clients,
// a client from the coordinator) is decoded by its struct's Decode below, never
// read from the JSON at the use (BATCH: DecodeBatch in dataplane/protocol.h): Decode checks each
// field's presence, type and range and fails with Corrupt naming the message and the field
// ("SPLIT_DONE: $.batch_count: expected an integer from 0 to 16777216, got \"0\""). Encode builds
// the meta a sender sends. Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/run_spec.h"
#include "core/run_stats.h"
#include "core/status.h"
#include "dataplane/batch_order.h"
#include "dataplane/socket.h"

namespace gm {

inline constexpr int kDataPlaneVersion = 1;
// Bounds on what a peer may send in one control message.
inline constexpr uint64_t kMaxEpochs = kMaxRunEpochs;  // epoch numbers below this (core/run_spec.h)
inline constexpr uint64_t kMaxSplitId = uint64_t{1} << 32;
inline constexpr uint64_t kMaxSplitSamples = uint64_t{1} << 40;
inline constexpr size_t kMaxAckBatches = 4096;     // [split, batch] pairs per ACK
inline constexpr size_t kMaxReportedStages = 256;  // entries of a "stages" report
inline constexpr size_t kMaxAddressBytes = 256;    // "HOST:PORT"
inline constexpr uint64_t kMaxCredit = 1024;
inline constexpr size_t kMaxDeviceStages = 16;
inline constexpr uint64_t kMaxCreditReleases =
    16;  // = kMaxSegments (dataplane/shm.h)       // entries of SUBSCRIBED device_stages // batches
         // one CREDIT may grant

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

// ---- the DataLoader offload (connections 4 and 5) ----

inline constexpr uint64_t kMaxOffloadChunkBytes = uint64_t{16} << 20;  // one OFFLOAD_DATA
inline constexpr size_t kMaxOffloadModules = 4096;                     // OFFLOAD_OPEN modules
inline constexpr size_t kMaxModuleNameBytes = 256;
inline constexpr size_t kMaxPythonPathBytes = 4096;

// K->C OFFLOAD {rank}.
struct OffloadMsg {
  int64_t rank = 0;  // 0 .. 65535
  // Optional: the channel this client had at a coordinator it lost (0: none);
  // one started again gives it back when it issued it (its proofs and tickets
  // stay good), else a new one.
  uint64_t channel = 0;
  nlohmann::json Encode() const;
  static Result<OffloadMsg> Decode(const nlohmann::json& meta);
};

// K->C OFFLOAD_NOTE {served, dataset, workers, blob_bytes, why} (no reply), on
// an offload connection: what became of one of the trainer's DataLoaders, for
// the run's record. served: its workers run as virtual workers (workers: how
// many, 1..65536; blob_bytes: the pickled dataset, collate_fn and worker_init_fn,
// 0..2^40); else it runs on stock local workers, `why` saying why (1..1024
// bytes). dataset: the dataset's class name, 1..256 printable bytes.
struct OffloadNoteMsg {
  bool served = false;
  std::string dataset;
  uint64_t workers = 0;
  uint64_t blob_bytes = 0;
  std::string why;
  // served: "exact" (also when absent), "elastic" or "native" (goldminer run --offload)
  std::string mode = "exact";
  // Not served: "place" "in-process" (num_workers=0: it runs in the trainer's
  // process) or "stock" (absent: stock local workers).
  bool in_process = false;
  nlohmann::json Encode() const;
  static Result<OffloadNoteMsg> Decode(const nlohmann::json& meta);
};
inline constexpr size_t kMaxOffloadNoteWhyBytes = 1024;

// C->K OFFLOADING {run_id, channel, ticket, proof, workers}.
struct OffloadingMsg {
  std::string run_id;
  uint64_t channel = 0;  // >= 1
  std::string ticket;    // 64 hex
  std::string proof;     // 128 hex: the channel's proof (dataplane/offload_proof.h)
  std::vector<std::string> workers;
  double reconnect_s = 0;  // optional, as SUBSCRIBED's (0 when absent)
  nlohmann::json Encode() const;
  static Result<OffloadingMsg> Decode(const nlohmann::json& meta);
};

// K->W OFFLOAD_OPEN {python, modules, proof}: python an absolute path, printable,
// at most kMaxPythonPathBytes; modules dotted Python names ([A-Za-z0-9_.]), each at
// most kMaxModuleNameBytes, at most kMaxOffloadModules of them; proof the
// channel's, from OFFLOADING (128 hex).
struct OffloadOpenMsg {
  std::string python;
  std::vector<std::string> modules;
  std::string proof;
  nlohmann::json Encode() const;
  static Result<OffloadOpenMsg> Decode(const nlohmann::json& meta);
};

// W->K OFFLOAD_OPENED {pid, host}.
struct OffloadOpenedMsg {
  int64_t pid = 0;   // 1 .. 2^22
  std::string host;  // printable, at most 256 bytes
  nlohmann::json Encode() const;
  static Result<OffloadOpenedMsg> Decode(const nlohmann::json& meta);
};

// Either way OFFLOAD_DATA {sha256[, fd]}: `payload` is the frame's payload.
// CheckOffloadData: Corrupt unless sha256 is the payload's. fd (W->K only,
// optional, a bool): a descriptor came with the frame (SCM_RIGHTS, on the data
// port's Unix socket): a sealed memfd of a result's buffers; OffloadDataFd reads
// it (Corrupt for a value that is not a bool).
nlohmann::json EncodeOffloadData(std::string_view payload, bool fd = false);
Status CheckOffloadData(const nlohmann::json& meta, std::string_view payload);
Result<bool> OffloadDataFd(const nlohmann::json& meta);

// W->K OFFLOAD_EXIT {status[, why]}.
struct OffloadExitMsg {
  int64_t status = 0;  // -64 .. 255
  std::string why;     // optional, printable text, at most 1024 bytes
  nlohmann::json Encode() const;
  static Result<OffloadExitMsg> Decode(const nlohmann::json& meta);
};

// R->P POOL_REPORT (connection 6): a run's figures for the pool's division
// (planner/pool_state.h, RunReport: the same fields and ranges).
struct PoolReportMsg {
  std::string run_id;                             // printable ASCII, 1..128 bytes
  double gpus = 1;                                // (0, 1e6]
  int64_t cpus_per_worker = 1;                    // 1..4096
  int64_t base_workers = 0;                       // 0..65536
  int64_t extra_workers = 0;                      // 0..65536
  double demand_samples_per_s = 1;                // (0, 1e12]
  std::vector<std::pair<int64_t, double>> rates;  // at most kMaxPoolCounts; 1..65536, [0, 1e12]
  // The run's token, from its first POOL_GRANT (kPoolTokenHexChars hex);
  // optional ("" when absent): the first report of a run, or on its own
  // connection.
  std::string token;
  // The Slurm job the run runs in (its SLURM_JOB_ID: digits, '_' for an array
  // task, at most 32 characters; "" when absent: a run outside Slurm). A pool
  // that checks GPUs (--check-gpus slurm) counts at most that job's GPUs.
  std::string slurm_job;
  nlohmann::json Encode() const;
  static Result<PoolReportMsg> Decode(const nlohmann::json& meta);
};
inline constexpr size_t kPoolTokenHexChars = 32;
inline constexpr size_t kMaxPoolCounts = 1024;

// P->R POOL_GRANT.
struct PoolGrantMsg {
  int64_t extra_workers = 0;  // 0..65536
  int64_t cpus = 0;           // 0..2^31
  std::string reason;         // optional; printable ASCII and spaces, at most kMaxPoolReasonBytes
  // The run's token (kPoolTokenHexChars hex; optional): a report of the run from
  // any other connection must carry it, so that no other peer can report for it.
  std::string token;
  nlohmann::json Encode() const;
  static Result<PoolGrantMsg> Decode(const nlohmann::json& meta);
};

// P->R POOL_STATE: the pool's budget and its division now.
struct PoolStateMsg {
  struct Run {
    std::string run_id;
    double gpus = 1;
    int64_t extra_workers = 0;  // granted
    int64_t cpus = 0;           // granted
    int64_t held_workers = 0;   // as it last reported
    double age_s = 0;           // since its last report
    // Its last report: the division's inputs (optional; its rates cut to
    // kMaxPoolStateCounts, and given for the first kMaxPoolStateInputs runs only).
    std::optional<PoolReportMsg> report;
  };
  // A change of one run's grant, newest last (optional; absent from an older pool).
  struct Change {
    double age_s = 0;  // how long ago, >= 0
    std::string run_id;
    int64_t from_cpus = 0, to_cpus = 0;  // 0..2^31
    std::string reason;                  // as PoolGrantMsg::reason
  };
  int64_t cpus = 0;
  std::vector<Run> runs;        // at most kMaxPoolRuns
  std::vector<Change> history;  // at most kMaxPoolHistory
  nlohmann::json Encode() const;
  static Result<PoolStateMsg> Decode(const nlohmann::json& meta);
};
inline constexpr size_t kMaxPoolRuns = 4096;
inline constexpr size_t kMaxPoolRunsPerHost = 256;  // first reported from one host
inline constexpr size_t kMaxPoolHistory = 64;
inline constexpr size_t kMaxPoolStateCounts = 32;
inline constexpr size_t kMaxPoolStateInputs = 256;
inline constexpr size_t kMaxPoolReasonBytes = 1024;

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

inline constexpr size_t kMaxWorkers = 65536;        // addresses in one PLAN or WORKERS
inline constexpr size_t kMaxPlanSplits = 1u << 24;  // splits in one PLAN

inline constexpr double kDefaultHeartbeatS = 1.0;
inline constexpr double kDefaultLivenessTimeoutS = 10.0;
// A client sends HEARTBEAT on its coordinator connection when it sent nothing for
// this long; the coordinator closes a client connection silent for kClientIdleS.
inline constexpr double kClientHeartbeatS = 10.0;
inline constexpr double kClientIdleS = 60.0;
inline constexpr int kDefaultPrefetchBatches = 4;  // initial CREDIT per worker connection

}  // namespace gm
