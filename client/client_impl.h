// Inside the trainer's client (client/client.h): its state (Client::Impl) and
// the links it keeps, shared by client.cc (the coordinator link: subscribe,
// plans, heartbeat, acks, faults, the progress deadline, Next) and
// client_workers.cc (the worker links: dialling, credit, receiving batches,
// what a worker's batches may hold). Not installed; nothing else includes it.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "client/buffer_pool.h"
#include "client/client.h"
#include "core/clock.h"
#include "core/step_log.h"
#include "core/thread_annotations.h"
#include "dataplane/messages_control.h"
#include "dataplane/protocol.h"
#include "dataplane/reorder.h"
#include "dataplane/shm.h"
#include "dataplane/socket.h"

namespace gm {

// Connects to "HOST:PORT", "[V6]:PORT" or "unix:PATH" and answers the server's
// handshake (which names itself `server_role`) with `key` as `role_name`;
// `before`, when given, vets the connected socket first (client_workers.cc).
Result<Socket> Dial(const std::string& address, const std::string& key, std::string_view role_name,
                    double timeout_s, std::string_view server_role,
                    const std::function<Status(const Socket&)>& before = nullptr);

// A coordinator that went away (`why`), reached again: `attempt` is tried every
// 0.1 s for `reconnect_s`, given the connect timeout left, until it succeeds or
// says (*again = false) that trying again is no use. Unavailable naming `who`
// and the last failure when the time passes first.
Status Redial(const std::string& who, double reconnect_s, double connect_timeout_s,
              const Status& why,
              const std::function<Status(double timeout_s, bool* again)>& attempt);

// Dials a worker's same-host socket (dataplane/shm.h) at the worker whose TCP data
// port is `address`, as `role` with `ticket`; only a process of this user may
// answer there. Unavailable when nothing listens (another host).
Result<Socket> DialSameHost(const std::string& address, const std::string& ticket,
                            const std::string& role, double timeout_s);

// One data connection to a worker. `socket` is used for sending by the trainer's
// thread and for receiving by `thread`; the counters are guarded by Impl::mu.
// Segment ids the trainer is done with, to return with the next CREDIT. Shared
// with the batches' owners, which may be freed on any thread, after the
// connection is gone too.
struct ReleaseQueue {
  Mutex mu;
  std::vector<uint64_t> ids GUARDED_BY(mu);
};

// A received batch's hold on its segment: keeps the mapping, and returns the id
// when the last view of the batch is dropped.
struct SegmentUse {
  std::shared_ptr<Segment> segment;
  uint64_t id = 0;
  std::shared_ptr<ReleaseQueue> queue;
  ~SegmentUse() {
    if (!queue) return;
    MutexLock lock(queue->mu);
    queue->ids.push_back(id);
  }
};

struct WorkerConn {
  uint64_t id = 0;
  // The re-order buffer's name for the worker (Impl::source_of): the same for
  // every connection to one address, so what a worker's batches hold there is
  // counted across its reconnections.
  uint64_t source = 0;
  std::string address;
  Socket socket;
  std::thread thread;
  bool same_host = false;  // connected on the worker's same-host socket (dataplane/shm.h)
  std::vector<std::shared_ptr<Segment>> segments;  // by id; the receiver thread's
  std::shared_ptr<ReleaseQueue> released = std::make_shared<ReleaseQueue>();
  uint64_t granted = 0;   // credit sent
  uint64_t received = 0;  // batches received
  uint64_t owed = 0;      // credit to send at the next chance
  bool dead = false;
  bool closing = false;
};

struct Client::Impl {
  ClientOptions options;
  const Clock* clock = &SystemClock();  // options.clock once connected
  // Buffers of batches the trainer is done with (Client::Recycle, gm_batch_free).
  std::shared_ptr<BufferPool> pool = std::make_shared<BufferPool>(16);
  std::string coordinator_name;
  Socket coordinator;    // the trainer's thread receives; sends go through SendToCoordinator
  uint64_t session = 0;  // this rank's session at the coordinator (SUBSCRIBED)
  std::string ticket;    // its key for the data ports (dataplane/auth.h)
  std::string order;     // what the run's batch order derives from (SUBSCRIBED)
  std::string device_stages = "[]";  // SUBSCRIBED device_stages, as JSON text
  int64_t seed = 0;
  const bool same_host_ = SameHostEnabled();  // try workers' same-host sockets

  // Sends on the coordinator connection come from the trainer's thread and from
  // the heartbeat thread, which says HEARTBEAT when nothing else was sent for
  // kClientHeartbeatS (the coordinator closes connections silent for kClientIdleS).
  Mutex send_mu;
  double last_send GUARDED_BY(send_mu) = 0;  // clock->Now()
  std::thread heartbeat;
  std::condition_variable heartbeat_cv;  // with mu; its own, so batches do not wake it
  bool heartbeat_stop GUARDED_BY(mu) = false;

  mutable Mutex mu;
  std::condition_variable cv;
  ReorderBuffer reorder GUARDED_BY(mu);
  std::map<uint64_t, std::unique_ptr<WorkerConn>> conns GUARDED_BY(mu);
  std::map<std::string, uint64_t> source_of GUARDED_BY(mu);  // worker address -> source
  std::set<std::string> refused GUARDED_BY(mu);  // workers reported (Fault): never dialled again
  // Workers that said BYE: not dialled while the coordinator still lists them (it
  // does until it hears their connection close), dialled again once a list leaves
  // them out (an address a later worker may be given).
  std::set<std::string> departed GUARDED_BY(mu);
  // FAULTs to send (Fault), and the workers reported while the coordinator lists them.
  std::vector<FaultMsg> faults GUARDED_BY(mu);
  std::set<std::string> faulted GUARDED_BY(mu);
  // The progress deadline (ClientOptions::stall_s): what Wait() awaits (its epoch
  // and place in the rank's sequence), from whom, since when.
  struct Stall {
    uint64_t epoch = 0;
    SequenceKey awaited;
    std::optional<uint64_t> holder;
    double since = 0;
  };
  Stall stall GUARDED_BY(mu);
  ClientStats stats GUARDED_BY(mu);
  double last_arrival GUARDED_BY(mu) = 0;  // clock->Now() of the latest batch received
  uint64_t events GUARDED_BY(mu) = 0;      // bumped with every notify, so a waiter misses none

  // Used by the trainer's thread only.
  uint64_t next_conn_id = 1;
  std::vector<std::pair<uint64_t, uint64_t>> acks;  // (split, split_batch) not sent yet
  std::vector<uint64_t> ack_samples;                // each one's sample count
  uint64_t ack_epoch = 0;
  // What was acknowledged of the last two epochs, by epoch (batches and samples as
  // in ACK), said again to a coordinator reached again (Reconnect).
  std::map<uint64_t, AckMsg> acked;
  Status deferred;  // a failure after a batch was taken, reported by the next call
  // Set when $GOLDMINER_PROFILE_DIR is: one "S" line per batch Next() returns.
  std::unique_ptr<StepLogWriter> step_log;

  ~Impl();
  Status SendToCoordinator(MsgType type, const nlohmann::json& meta, Deadline deadline);
  void HeartbeatLoop();
  // Sends `type` and waits for `answer`; a coordinator that went away is reached
  // again (Reconnect) and asked once more.
  Result<Frame> Request(MsgType type, const nlohmann::json& meta, MsgType answer);
  Result<Frame> RequestOnce(MsgType type, const nlohmann::json& meta, MsgType answer,
                            bool* transport_failed);
  // Dials the coordinator again for options.reconnect_s after `why`, subscribes in
  // this client's session and says again what `acked` holds. Unavailable when no
  // coordinator answers in time, or one answers without the session (a new run).
  Status Reconnect(const Status& why);
  Result<PlanMsg> GetPlan(uint64_t epoch);
  Status FlushAcks();
  void FlushCredits();
  // Reports the worker at `address` (re-order source `source`) to the coordinator
  // (FAULT, sent by FlushFaults) and forgets the counts it told; once per listing.
  void Fault(const std::string& address, uint64_t source, const std::string& why) REQUIRES(mu);
  Status FlushFaults();
  // The progress deadline, checked in Wait(): the awaited batch's holder sent
  // nothing of it for stall_s (with credit to): reported and disconnected.
  void CheckStall(std::optional<uint64_t> holder, bool holder_bounded, double now) REQUIRES(mu);
  // Closes the live connections to re-order source `source`, counted as lost; the
  // caller has said why (their receivers do not warn again).
  void CloseConnectionsOf(uint64_t source) REQUIRES(mu);
  void ConnectWorkers(const std::vector<std::string>& addresses);
  void Receive(WorkerConn* conn);
  // `conn`'s receiver ended with `status` (`left`: the worker said BYE first).
  void Ended(WorkerConn* conn, const Status& status, bool left) EXCLUDES(mu);
  void CheckHolders(const WorkersMsg& workers, uint64_t view);
  void ReapDead();
  Status Refresh();
  Status LoadEpoch(uint64_t epoch, uint64_t position);
  Status LoadPlan(const PlanMsg& answer, uint64_t epoch, uint64_t position,
                  std::optional<SequenceKey> at);
  Status CheckState(const ResumeState& state) const;
  std::optional<Batch> TakeLocked(MutexLock& lock) REQUIRES(mu);
  // Whether the look-ahead bound (ClientOptions::max_buffered_bytes) lets `conn`
  // have more credit: kUnverified when what its worker sent that is not verified
  // yet fills its part; kTotal when the buffer is full (for the awaited split's
  // holder, `holder`: when what it sent itself fills the whole bound).
  enum class Bound { kUnder, kUnverified, kTotal };
  Bound LookAheadBound(const WorkerConn& conn, bool holder) const REQUIRES(mu);
  // The re-order buffer's source id of the worker at `address` (made on first use).
  uint64_t SourceOf(const std::string& address) REQUIRES(mu) {
    return source_of.emplace(address, source_of.size() + 1).first->second;
  }
  std::string LookAheadText() const REQUIRES(mu);
  Result<std::optional<Batch>> Wait();
};

}  // namespace gm
