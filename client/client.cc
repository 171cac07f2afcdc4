#include "client/client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/log.h"
#include "core/step_log.h"
#include "core/thread_annotations.h"
#include "dataplane/auth.h"
#include "dataplane/messages.h"
#include "dataplane/protocol.h"
#include "dataplane/reorder.h"
#include "dataplane/shm.h"

namespace gm {
namespace {

constexpr size_t kAckBatch = 16;  // acks sent together

// Connects to "HOST:PORT", "[V6]:PORT" or "unix:PATH".
Result<Socket> ConnectAddress(const std::string& address, double timeout_s) {
  if (address.starts_with("unix:")) return Socket::ConnectUnix(address.substr(5), timeout_s);
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon != std::string::npos) {
    auto [end, ec] =
        std::from_chars(address.data() + colon + 1, address.data() + address.size(), port);
    if (ec != std::errc() || end != address.data() + address.size()) port = 0;
  }
  if (port <= 0 || port > 65535) {
    return Status::InvalidArgument("address \"" + address + "\" is not HOST:PORT or unix:PATH");
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return Socket::ConnectTcp(host, port, timeout_s);
}

// Connects and authenticates as `role` with `key` to a server that must prove it
// plays `server_role` ("coordinator", or "worker" at a data port). `before`, when
// given, vets the connected socket before the handshake sends a byte. A server
// that drops the connection during the handshake is dialled again within
// `timeout_s` (DialHandshake).
Result<Socket> Dial(const std::string& address, const std::string& key, std::string_view role_name,
                    double timeout_s, std::string_view server_role,
                    const std::function<Status(const Socket&)>& before = nullptr) {
  const Deadline deadline = Deadline::After(timeout_s);
  std::string role;
  GM_ASSIGN_OR_RETURN(Socket socket, DialHandshake(
                                         [&]() -> Result<Socket> {
                                           GM_ASSIGN_OR_RETURN(
                                               Socket s,
                                               ConnectAddress(address, deadline.remaining_s()));
                                           if (before) GM_RETURN_IF_ERROR(before(s));
                                           return s;
                                         },
                                         key, role_name, deadline, &role));
  if (role != server_role) {
    return Status::InvalidArgument(address + " answered as \"" + PeerText(role) + "\", not as a " +
                                   std::string(server_role) + ": check the address");
  }
  return socket;
}

// Dials a worker's same-host socket (dataplane/shm.h). Only a process of this
// user may answer there: another user who took the name first is refused before
// a byte is sent (and a relay to the worker's TCP port would fail the handshake,
// whose MACs cover the transport). Unavailable when nothing listens.
Result<Socket> DialSameHost(const std::string& address, const std::string& ticket,
                            const std::string& role, double timeout_s) {
  return Dial("unix:" + SameHostName(address), ticket, role, timeout_s, "worker",
              [](const Socket& socket) -> Status {
                GM_ASSIGN_OR_RETURN(Socket::PeerCredentials peer, socket.peer_credentials());
                if (peer.uid == ::geteuid()) return Status::Ok();
                return Status::InvalidArgument(socket.peer() + " is held by user id " +
                                               std::to_string(peer.uid) + " (pid " +
                                               std::to_string(peer.pid) + "), not by this user (" +
                                               std::to_string(::geteuid()) +
                                               "): another user took the worker's same-host name");
              });
}

// The message of a peer's ERROR, escaped and cut for quoting.
std::string ErrorText(const nlohmann::json& meta) {
  return PeerText(ErrorMsg::Decode(meta).message);
}

// The reorder buffer's view of a PLAN for `epoch`.
Result<EpochPlan> ToEpochPlan(const PlanMsg& msg, uint64_t epoch) {
  if (msg.epoch != epoch) {
    return Status::Corrupt("coordinator PLAN for epoch " + std::to_string(msg.epoch) +
                           " where epoch " + std::to_string(epoch) + " was asked for");
  }
  EpochPlan plan;
  plan.epoch = epoch;
  for (const auto& [split, count] : msg.splits) {
    plan.splits.push_back({split, count < 0 ? kUnknownCount : static_cast<uint64_t>(count)});
  }
  return plan;
}

}  // namespace

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

namespace {

// A BATCH whose data is in a segment (dataplane/shm.h): maps the segment the
// frame passes (fd: true) or finds the one it names, and views it without a copy.
// Corrupt for a segment on a TCP connection, an id out of range or never passed,
// a descriptor that is missing or not a sealed memfd of a fitting size.
Result<Batch> DecodeSegmentBatch(WorkerConn& conn, const Frame& frame, const FrameLimits& limits) {
  const nlohmann::json& shm = frame.meta["shm"];
  if (!conn.same_host) return Status::Corrupt("sent a segment over TCP");
  if (!shm.is_object() || !shm.contains("id") || !shm["id"].is_number_unsigned() ||
      shm["id"].get<uint64_t>() >= kMaxSegments || !shm.contains("fd") || !shm["fd"].is_boolean()) {
    return Status::Corrupt("BATCH: $.shm: expected {\"id\": 0.." +
                           std::to_string(kMaxSegments - 1) + ", \"fd\": true|false}");
  }
  const auto id = shm["id"].get<uint64_t>();
  if (conn.segments.size() <= id) conn.segments.resize(id + 1);
  if (shm["fd"].get<bool>()) {
    const int fd = conn.socket.TakeFd();
    if (fd < 0) return Status::Corrupt("BATCH: $.shm.fd is true but no descriptor came with it");
    auto bytes = frame.meta.find("data_bytes");
    const uint64_t need =
        bytes != frame.meta.end() && bytes->is_number_unsigned() ? bytes->get<uint64_t>() : 0;
    GM_ASSIGN_OR_RETURN(conn.segments[id], Segment::Map(fd, need, limits.max_payload_bytes));
  }
  const std::shared_ptr<Segment>& segment = conn.segments[id];
  if (!segment)
    return Status::Corrupt("BATCH names segment " + std::to_string(id) + ", never passed");
  auto use = std::make_shared<SegmentUse>();
  use->segment = segment;
  use->id = id;
  use->queue = conn.released;
  return DecodeBatch(frame, Batch::External{segment->data(), segment->size(), std::move(use)});
}

}  // namespace

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
  std::set<std::string> refused GUARDED_BY(mu);              // workers that lied (CheckHolders)
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
  uint64_t ack_epoch = 0;
  Status deferred;  // a failure after a batch was taken, reported by the next call
  // Set when $GOLDMINER_PROFILE_DIR is: one "S" line per batch Next() returns.
  std::unique_ptr<StepLogWriter> step_log;

  ~Impl();
  Status SendToCoordinator(MsgType type, const nlohmann::json& meta, Deadline deadline);
  void HeartbeatLoop();
  Result<Frame> Request(MsgType type, const nlohmann::json& meta, MsgType answer);
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
  void CheckHolders(const WorkersMsg& workers, uint64_t view);
  void ReapDead();
  Status Refresh();
  Status LoadEpoch(uint64_t epoch, uint64_t position);
  Status LoadPlan(const PlanMsg& answer, uint64_t epoch, uint64_t position,
                  std::optional<SequenceKey> at);
  Status CheckState(const ResumeState& state) const;
  std::optional<Batch> TakeLocked(MutexLock& lock) REQUIRES(mu);
  bool UnderLookAheadBound(const WorkerConn& conn) const REQUIRES(mu);
  // The re-order buffer's source id of the worker at `address` (made on first use).
  uint64_t SourceOf(const std::string& address) REQUIRES(mu) {
    return source_of.emplace(address, source_of.size() + 1).first->second;
  }
  std::string LookAheadText() const REQUIRES(mu);
  Result<std::optional<Batch>> Wait();
};

Status Client::Impl::SendToCoordinator(MsgType type, const nlohmann::json& meta,
                                       Deadline deadline) {
  MutexLock lock(send_mu);
  last_send = clock->Now();
  return SendFrame(coordinator, type, meta, deadline);
}

// Waits until a heartbeat period has passed since the last frame sent (whoever
// sent it), then says HEARTBEAT unless another frame went out meanwhile. FAULTs
// (Fault) are sent as soon as they are known, not at the trainer's next call.
void Client::Impl::HeartbeatLoop() {
  const double every = options.heartbeat_s;
  while (true) {
    double due = 0;
    {
      MutexLock send_lock(send_mu);
      due = last_send + every;
    }
    {
      MutexLock lock(mu);
      WaitUntil(*clock, lock, heartbeat_cv, due,
                [&]() REQUIRES(mu) { return heartbeat_stop || !faults.empty(); });
      if (heartbeat_stop) return;
    }
    (void)FlushFaults();  // a failure shows at the trainer's next request
    MutexLock send_lock(send_mu);
    if (clock->Now() - last_send >= every) {
      last_send = clock->Now();
      // A failure shows at the trainer's next request; nothing to do here.
      (void)SendFrame(coordinator, MsgType::kHeartbeat, nlohmann::json::object(),
                      Deadline::After(every));
    }
  }
}

Result<Frame> Client::Impl::Request(MsgType type, const nlohmann::json& meta, MsgType answer) {
  Deadline deadline = Deadline::After(options.timeout_s);
  Status sent = SendToCoordinator(type, meta, deadline);
  if (!sent.ok()) return Status::Unavailable(coordinator_name + ": " + sent.message());
  auto frame = RecvFrame(coordinator, kControlLimits, deadline);
  if (!frame.ok()) return Status::Unavailable(coordinator_name + ": " + frame.status().message());
  if (frame->type == MsgType::kError) {
    return Status::Unavailable(coordinator_name + " refused " + std::string(MsgTypeName(type)) +
                               ": " + ErrorText(frame->meta));
  }
  if (frame->type != answer) {
    return Status::Corrupt(coordinator_name + " answered " + std::string(MsgTypeName(type)) +
                           " with " + std::string(MsgTypeName(frame->type)) + ", expected " +
                           std::string(MsgTypeName(answer)));
  }
  return frame;
}

void Client::Impl::Fault(const std::string& address, uint64_t source, const std::string& why) {
  reorder.Disown(source);
  if (!faulted.insert(address).second) return;
  faults.push_back(FaultMsg{address, reorder.epoch(), why});
  ++events;
  heartbeat_cv.notify_all();  // sent now, even while the trainer computes
}

Status Client::Impl::FlushFaults() {
  std::vector<FaultMsg> out;
  {
    MutexLock lock(mu);
    out.swap(faults);
  }
  for (const FaultMsg& fault : out) {
    Status sent =
        SendToCoordinator(MsgType::kFault, fault.Encode(), Deadline::After(options.timeout_s));
    if (!sent.ok()) return Status::Unavailable(coordinator_name + ": " + sent.message());
  }
  return Status::Ok();
}

void Client::Impl::CloseConnectionsOf(uint64_t source) {
  for (auto& [id, conn] : conns) {
    if (conn->source != source || conn->dead) continue;
    conn->closing = true;
    ++stats.connections_lost;
    ::shutdown(conn->socket.fd(), SHUT_RDWR);
  }
}

void Client::Impl::CheckStall(std::optional<uint64_t> holder, bool holder_bounded, double now) {
  if (reorder.epoch() != stall.epoch || reorder.key() != stall.awaited || holder != stall.holder ||
      holder_bounded) {
    // Something moved, or the client's own bound keeps the holder from sending.
    stall = {reorder.epoch(), reorder.key(), holder, now};
    return;
  }
  if (!holder || now - stall.since < options.stall_s) return;
  const std::string why =
      "it held " + reorder.Awaited() + ", which rank " + std::to_string(options.rank) +
      " waits for, " + std::to_string(std::lround(now - stall.since)) +
      " s without sending it (the stall timeout, " + std::string(kStallTimeoutEnv) + ")";
  stall.since = now;  // the next report, if any, after another stall_s
  std::string address;
  for (const auto& [a, source] : source_of) {
    if (source == *holder) address = a;
  }
  if (address.empty()) return;
  LogWarning("client: worker " + address + ": " + why +
             "; reported to the coordinator, which gives its splits to other workers");
  Fault(address, *holder, why);
  CloseConnectionsOf(*holder);
}

Status Client::Impl::FlushAcks() {
  if (acks.empty()) return Status::Ok();
  AckMsg ack{ack_epoch, std::move(acks)};
  acks.clear();
  Status sent = SendToCoordinator(MsgType::kAck, ack.Encode(), Deadline::After(options.timeout_s));
  if (!sent.ok()) return Status::Unavailable(coordinator_name + ": " + sent.message());
  return Status::Ok();
}

// Sends the credit owed to each live connection. The trainer's thread is the only
// sender and the only one that destroys connections, so `conn` stays valid.
void Client::Impl::FlushCredits() {
  std::vector<std::pair<WorkerConn*, CreditMsg>> grants;
  {
    MutexLock lock(mu);
    for (auto& [id, conn] : conns) {
      if (conn->dead) continue;
      CreditMsg credit;
      {
        MutexLock released(conn->released->mu);
        credit.release.swap(conn->released->ids);
      }
      if (conn->owed == 0 && credit.release.empty()) continue;
      credit.n = std::min(conn->owed, kMaxCredit);  // the rest at the next chance
      conn->granted += credit.n;
      conn->owed -= credit.n;
      grants.emplace_back(conn.get(), std::move(credit));
    }
  }
  for (auto& [conn, credit] : grants) {
    Status sent = SendFrame(conn->socket, MsgType::kCredit, credit.Encode(),
                            Deadline::After(options.connect_timeout_s));
    if (!sent.ok()) {
      LogWarning("client: worker " + conn->address + ": " + sent.message());
      ::shutdown(conn->socket.fd(), SHUT_RDWR);  // the receiver sees it and marks it dead
    }
  }
}

void Client::Impl::Receive(WorkerConn* conn) {
  const FrameLimits limits{};
  Frame frame;
  Status status;
  while (true) {
    if (frame.payload.capacity() == 0) frame.payload = pool->Take();
    status = RecvFrameInto(conn->socket, limits, Deadline::After(options.timeout_s), frame);
    if (!status.ok()) break;
    if (frame.type == MsgType::kError) {
      status = Status::Unavailable("worker sent ERROR: " + ErrorText(frame.meta));
      break;
    }
    if (frame.type != MsgType::kBatch) {  // a data port sends nothing else
      status = Status::Corrupt("worker sent " + std::string(MsgTypeName(frame.type)) +
                               " on a data connection, where only BATCH and ERROR come");
      break;
    }
    Result<BatchHeader> header = DecodeBatchHeader(frame.meta);
    if (!header.ok()) {
      status = header.status();
      break;
    }
    // A data connection serves one rank (its ticket's): a batch for another is a lie.
    if (header->rank != options.rank) {
      status = Status::Corrupt("sent a BATCH for rank " + std::to_string(header->rank) +
                               " on rank " + std::to_string(options.rank) + "'s connection");
      break;
    }
    const std::optional<uint64_t> split_batches = header->split_batches;
    Result<Batch> batch = frame.meta.contains("shm") ? DecodeSegmentBatch(*conn, frame, limits)
                                                     : DecodeBatch(std::move(frame));
    if (const int stray = conn->socket.TakeFd(); stray >= 0) {
      ::close(stray);
      batch = Status::Corrupt("passed a descriptor that no frame claimed");
    }
    frame = Frame{};
    if (!batch.ok()) {
      status = batch.status();
      break;
    }
    MutexLock lock(mu);
    if (conn->received >= conn->granted) {  // a worker sends one batch per credit
      status = Status::Corrupt("sent batch " + std::to_string(conn->received + 1) + " with only " +
                               std::to_string(conn->granted) + " granted");
      break;
    }
    ++conn->received;
    if (batch->external) ++stats.same_host_batches;
    last_arrival = clock->Now();
    std::string why;
    ReorderBuffer::Outcome outcome =
        reorder.Offer(std::move(*batch), conn->source, split_batches, &why);
    if (outcome == ReorderBuffer::Outcome::kRejected) {  // no honest worker sends it
      status = Status::Corrupt(why);
      break;
    }
    if (outcome != ReorderBuffer::Outcome::kBuffered) ++conn->owed;  // its credit comes back now
    ++events;
    cv.notify_all();
  }
  MutexLock lock(mu);
  if (!conn->closing) {
    LogWarning("client: dropping worker " + conn->address + ": " + status.message());
    ++stats.connections_lost;
    // What no honest worker sends (a rejected or malformed batch) is reported, so
    // that the coordinator drops the worker and its splits are made by others. A
    // connection that merely ended is not.
    if (status.code() == Code::kCorrupt) Fault(conn->address, conn->source, status.message());
  }
  conn->dead = true;
  ++events;
  cv.notify_all();
}

void Client::Impl::ConnectWorkers(const std::vector<std::string>& addresses) {
  for (const std::string& address : addresses) {
    {
      MutexLock lock(mu);
      bool known = std::any_of(conns.begin(), conns.end(), [&](const auto& c) {
        return !c.second->dead && c.second->address == address;
      });
      if (known || refused.contains(address)) continue;
    }
    // The worker's same-host socket first (dataplane/shm.h): it exists only when
    // the worker shares this host and network namespace. A refusal there (none,
    // or a handshake that fails: not our worker) falls back to TCP.
    Result<Socket> socket = Status::Unavailable("no same-host path");
    bool same_host = false;
    if (same_host_) {
      socket = DialSameHost(address, ticket, TicketRole(options.rank, session),
                            options.connect_timeout_s);
      same_host = socket.ok();
      if (!socket.ok() && socket.status().code() != Code::kUnavailable) {
        LogWarning("client: worker " + address + ": same-host socket refused (" +
                   socket.status().message() + "); using TCP");
      }
    }
    if (!same_host) {
      socket = Dial(address, ticket, TicketRole(options.rank, session), options.connect_timeout_s,
                    "worker");
    }
    Deadline deadline = Deadline::After(options.connect_timeout_s);
    Status status = socket.status();
    SubscribeMsg subscribe{options.rank, -1, same_host};
    if (status.ok()) status = SendFrame(*socket, MsgType::kSubscribe, subscribe.Encode(), deadline);
    if (status.ok()) {
      CreditMsg credit;
      credit.n = static_cast<uint64_t>(options.prefetch);
      status = SendFrame(*socket, MsgType::kCredit, credit.Encode(), deadline);
    }
    if (!status.ok()) {
      LogWarning("client: cannot connect to worker " + address + ": " + status.message());
      continue;
    }
    auto conn = std::make_unique<WorkerConn>();
    conn->id = next_conn_id++;
    conn->address = address;
    conn->socket = std::move(*socket);
    conn->same_host = same_host;
    if (same_host) conn->socket.AcceptFds();
    conn->granted = static_cast<uint64_t>(options.prefetch);
    WorkerConn* raw = conn.get();
    MutexLock lock(mu);
    raw->source = SourceOf(address);
    conns.emplace(raw->id, std::move(conn));
    raw->thread = std::thread([this, raw] { Receive(raw); });
  }
}

void Client::Impl::ReapDead() {
  std::vector<std::unique_ptr<WorkerConn>> dead;
  {
    MutexLock lock(mu);
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->second->dead) {
        dead.push_back(std::move(it->second));
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& conn : dead) conn->thread.join();
}

// The plan of `epoch`. The coordinator answers "wait" while other ranks finish the
// previous epoch (asked again until timeout_s), "end" for an epoch past the run's
// last one and "done" for one every rank has finished: both are errors that say so.
Result<PlanMsg> Client::Impl::GetPlan(uint64_t epoch) {
  const double deadline = clock->Now() + options.timeout_s;
  const std::string e = std::to_string(epoch);
  for (;;) {
    GM_ASSIGN_OR_RETURN(Frame answer,
                        Request(MsgType::kGetPlan, GetPlanMsg{epoch}.Encode(), MsgType::kPlan));
    Result<PlanMsg> plan = PlanMsg::Decode(answer.meta);
    if (!plan.ok()) return plan.status().WithContext(coordinator_name);
    switch (plan->kind) {
      case PlanMsg::Kind::kPlan:
        return plan;
      case PlanMsg::Kind::kEnd:
        return Status::InvalidArgument(
            "epoch " + e + " (counting from 0) was asked for, but the run serves only " +
            std::to_string(plan->epochs) +
            " epoch(s): start `goldminer run` or `goldminer "
            "profile` with --epochs " +
            std::to_string(epoch + 1) + " or more");
      case PlanMsg::Kind::kDone:
        return Status::InvalidArgument("epoch " + e +
                                       " was asked for, but every rank has already "
                                       "finished it");
      case PlanMsg::Kind::kWait:
        break;
    }
    const double now = clock->Now();
    if (now > deadline) {
      return Status::Unavailable("epoch " + e + " did not start within " +
                                 std::to_string(static_cast<int>(options.timeout_s)) +
                                 " s: other ranks have not finished the epoch before it");
    }
    SleepUntil(*clock, now + std::clamp(plan->retry_s, 0.01, 1.0));
  }
}

// Asks the coordinator for the workers (and the plan's counts when some were
// unknown) and connects to new workers.
Status Client::Impl::Refresh() {
  GM_RETURN_IF_ERROR(FlushAcks());
  uint64_t view = 0;
  {
    MutexLock lock(mu);
    view = reorder.AskView();
  }
  GM_ASSIGN_OR_RETURN(Frame answer,
                      Request(MsgType::kGetWorkers, nlohmann::json::object(), MsgType::kWorkers));
  Result<WorkersMsg> workers = WorkersMsg::Decode(answer.meta);
  if (!workers.ok()) return workers.status().WithContext(coordinator_name);
  if (workers->holders_known) CheckHolders(*workers, view);
  bool need_counts = false;
  uint64_t epoch = 0;
  {
    MutexLock lock(mu);
    need_counts = reorder.WaitingForCount();
    epoch = reorder.epoch();
  }
  if (need_counts) {
    GM_ASSIGN_OR_RETURN(PlanMsg counts, GetPlan(epoch));
    GM_ASSIGN_OR_RETURN(EpochPlan plan, ToEpochPlan(counts, epoch));
    MutexLock lock(mu);
    for (const PlanSplit& s : plan.splits) {
      if (s.batch_count == kUnknownCount) continue;
      Status counted = reorder.SetBatchCount(epoch, s.split, s.batch_count);
      if (!counted.ok()) LogWarning("client: " + counted.message());
    }
    ++events;
  }
  ConnectWorkers(workers->workers);
  return Status::Ok();
}

// Checks the buffered batches against who holds which split (ReorderBuffer::
// SetHolders); a worker that sent batches of a split it never held is dropped and
// not connected to again.
void Client::Impl::CheckHolders(const WorkersMsg& workers, uint64_t view) {
  MutexLock lock(mu);
  auto source = [&](const std::string& address) REQUIRES(mu) { return SourceOf(address); };
  std::map<uint64_t, uint64_t> holders;
  for (const auto& [split, index] : workers.holders)
    holders[split] = source(workers.workers[index]);
  std::set<uint64_t> listed;
  for (const std::string& address : workers.workers) listed.insert(source(address));
  for (uint64_t liar : reorder.SetHolders(workers.epoch, holders, listed, view)) {
    for (auto& [id, conn] : conns) {
      if (conn->source != liar || conn->dead) continue;
      LogWarning("client: dropping worker " + conn->address +
                 ": it sent batches of splits the coordinator never gave it; its batches are "
                 "dropped and this trainer does not connect to it again");
      refused.insert(conn->address);
      Fault(conn->address, liar, "it sent batches of splits the coordinator never gave it");
    }
    CloseConnectionsOf(liar);
  }
  // A reported worker the coordinator no longer lists may be reported again
  // (another worker at its address later).
  for (auto it = faulted.begin(); it != faulted.end();)
    it = listed.contains(source(*it)) ? std::next(it) : faulted.erase(it);
  ++events;
}

Status Client::Impl::LoadEpoch(uint64_t epoch, uint64_t position) {
  GM_RETURN_IF_ERROR(FlushAcks());
  GM_ASSIGN_OR_RETURN(PlanMsg answer, GetPlan(epoch));
  if (answer.position && answer.epoch == epoch) {
    // An earlier session of this rank left the epoch partway: this one goes on
    // from what it acknowledged (the coordinator has the rest made again).
    LogInfo("client: rank " + std::to_string(options.rank) + " continues epoch " +
            std::to_string(epoch) + " at batch " + std::to_string(*answer.position) +
            ", where an earlier trainer session of this rank left it");
    return LoadPlan(answer, epoch, *answer.position, answer.at);
  }
  return LoadPlan(answer, epoch, position, std::nullopt);
}

Status Client::Impl::LoadPlan(const PlanMsg& answer, uint64_t epoch, uint64_t position,
                              std::optional<SequenceKey> at) {
  GM_ASSIGN_OR_RETURN(EpochPlan plan, ToEpochPlan(answer, epoch));
  {
    MutexLock lock(mu);
    GM_RETURN_IF_ERROR(reorder.StartEpoch(plan, options.world_size, options.rank, position, at));
    stats.duplicates_dropped = reorder.dropped();
  }
  ack_epoch = epoch;
  ConnectWorkers(answer.workers);
  FlushCredits();
  return Status::Ok();
}

// The next batch when it is buffered: advances the sequence and owes its credit.
std::optional<Batch> Client::Impl::TakeLocked(MutexLock& lock) {
  (void)lock;
  auto next = reorder.TakeNext();
  if (!next) return std::nullopt;
  for (auto& [id, conn] : conns) {
    if (!conn->dead && conn->source == next->second) ++conn->owed;  // its credit comes back
  }
  Batch& batch = next->first;
  ++stats.batches;
  stats.samples += batch.size();
  stats.bytes += batch.data_size() + batch.labels.bytes.size();
  acks.emplace_back(batch.split, batch.split_batch);
  return std::move(batch);
}

// Each live worker gets an equal part of the byte bound, so one that fills its
// part with batches nobody needs cannot stop the credit of the one that holds
// the batch awaited.
bool Client::Impl::UnderLookAheadBound(const WorkerConn& conn) const {
  const auto live = static_cast<uint64_t>(
      std::count_if(conns.begin(), conns.end(), [](const auto& c) { return !c.second->dead; }));
  const ReorderBuffer::Held held = reorder.held_from(conn.source);
  return held.batches < options.max_lookahead_batches &&
         held.bytes < options.max_buffered_bytes / std::max<uint64_t>(live, 1);
}

std::string Client::Impl::LookAheadText() const {
  return "; the look-ahead bound stopped further credit: " + std::to_string(reorder.buffered()) +
         " batches (" + std::to_string(reorder.buffered_bytes() >> 20) +
         " MiB) wait in the buffer, at most " + std::to_string(options.max_lookahead_batches) +
         " per worker and an equal part of " + std::to_string(options.max_buffered_bytes >> 20) +
         " MiB each (" + std::string(kClientBufferEnv) + " raises the second)";
}

Result<std::optional<Batch>> Client::Impl::Wait() {
  const double started = clock->Now();
  double next_refresh = started + kClientRefreshS;
  MutexLock lock(mu);
  last_arrival = std::max(last_arrival, started);
  while (true) {
    const uint64_t seen = events;
    stats.duplicates_dropped = reorder.dropped();
    if (reorder.done()) return std::optional<Batch>();
    if (auto batch = TakeLocked(lock)) return std::optional<Batch>(std::move(*batch));
    // Progress rule (dataplane/messages.h): every live connection out of credit -> +1
    // each, and the awaited split's holder out of credit -> +1 (the others may hold
    // credit they have nothing to spend on), within the look-ahead bound
    // (ClientOptions::max_buffered_bytes).
    const auto out_of_credit = [](const WorkerConn& conn) {
      return !conn.dead && conn.granted + conn.owed <= conn.received;
    };
    const std::optional<uint64_t> holder = reorder.AwaitedHolder();
    bool all_used = true;
    for (auto& [id, conn] : conns) {
      if (!conn->dead && !out_of_credit(*conn)) all_used = false;
    }
    bool bounded = false, holder_bounded = false;
    for (auto& [id, conn] : conns) {
      if (!out_of_credit(*conn) || !(all_used || conn->source == holder)) continue;
      if (UnderLookAheadBound(*conn)) {
        ++conn->owed;
      } else {
        bounded = true;
        if (conn->source == holder) holder_bounded = true;
      }
    }
    const double now = clock->Now();
    if (stall.since < started) stall = {reorder.epoch(), reorder.key(), holder, now};  // a new wait
    CheckStall(holder, holder_bounded, now);
    if (now - last_arrival >= options.timeout_s) {
      return Status::Unavailable(
          "no batch from any worker for " + std::to_string(std::lround(options.timeout_s)) +
          " s while waiting for " + reorder.Awaited() + " (rank " + std::to_string(options.rank) +
          ", " + std::to_string(conns.size()) + " worker connection(s))" +
          (bounded ? LookAheadText() : std::string()));
    }
    lock.Unlock();
    GM_RETURN_IF_ERROR(FlushAcks());
    GM_RETURN_IF_ERROR(FlushFaults());
    FlushCredits();
    ReapDead();
    if (clock->Now() >= next_refresh) {
      GM_RETURN_IF_ERROR(Refresh());
      next_refresh = clock->Now() + kClientRefreshS;
    }
    lock.Lock();
    double until =
        std::min({next_refresh, last_arrival + options.timeout_s, stall.since + options.stall_s});
    WaitUntil(*clock, lock, cv, until, [&]() REQUIRES(mu) { return events != seen; });
  }
}

Client::Impl::~Impl() {
  {
    MutexLock lock(mu);
    heartbeat_stop = true;
    heartbeat_cv.notify_all();
  }
  if (heartbeat.joinable()) heartbeat.join();
  if (coordinator.valid()) {
    (void)FlushAcks();
    (void)SendToCoordinator(MsgType::kBye, nlohmann::json::object(), Deadline::After(1.0));
  }
  {
    MutexLock lock(mu);
    for (auto& [id, conn] : conns) {
      conn->closing = true;
      ::shutdown(conn->socket.fd(), SHUT_RDWR);
    }
  }
  for (auto& [id, conn] : conns) conn->thread.join();
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& given) {
  GM_ASSIGN_OR_RETURN(ClientOptions options, ResolveClientOptions(given));
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (options.clock != nullptr) impl->clock = options.clock;
  impl->coordinator_name = "coordinator " + options.coordinator;
  auto socket = Dial(options.coordinator, options.secret, kClientRole, options.connect_timeout_s,
                     "coordinator");
  if (!socket.ok()) return socket.status().WithContext(impl->coordinator_name);
  impl->coordinator = std::move(*socket);
  GM_ASSIGN_OR_RETURN(
      Frame answer,
      impl->Request(MsgType::kSubscribe, SubscribeMsg{options.rank, options.world_size}.Encode(),
                    MsgType::kSubscribed));
  Result<SubscribedMsg> subscribed = SubscribedMsg::Decode(answer.meta);
  if (!subscribed.ok()) return subscribed.status().WithContext(impl->coordinator_name);
  const int64_t world = subscribed->world_size;
  if (world != options.world_size) {
    return Status::InvalidArgument(
        "this trainer has world size " + std::to_string(options.world_size) + " but " +
        impl->coordinator_name + " runs with world size " + std::to_string(world));
  }
  impl->session = subscribed->session;
  impl->ticket = subscribed->ticket;
  impl->order = subscribed->order;
  impl->device_stages = subscribed->device_stages.dump();
  impl->seed = subscribed->seed;
  {
    MutexLock lock(impl->mu);
    impl->reorder.set_batch_size(static_cast<uint64_t>(subscribed->batch_size));
  }
  impl->step_log = StepLogWriter::FromEnvironment("goldminer");
  Impl* raw = impl.get();
  impl->heartbeat = std::thread([raw] { raw->HeartbeatLoop(); });
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Status Client::StartEpoch(uint64_t epoch) { return impl_->LoadEpoch(epoch, 0); }

Status Client::Impl::CheckState(const ResumeState& state) const {
  const std::string why = "cannot resume this state (epoch " + std::to_string(state.epoch) +
                          ", batch " + std::to_string(state.position) + "): ";
  if (!state.order.empty() && !order.empty() && state.order != order) {
    return Status::InvalidArgument(
        why + "it belongs to another pipeline (order " + state.order.substr(0, 12) + ", seed " +
        std::to_string(state.seed) + "), and this run's is order " + order.substr(0, 12) +
        ", seed " + std::to_string(seed) +
        ": the batch order depends on the pipeline file, its seed and --samples-per-split; "
        "resume with the run's original settings");
  }
  if (state.world_size >= 0 && state.world_size != options.world_size) {
    return Status::InvalidArgument(why + "it was saved with world size " +
                                   std::to_string(state.world_size) + ", and this run has " +
                                   std::to_string(options.world_size) + " rank(s)");
  }
  if (state.rank >= 0 && state.rank != options.rank) {
    return Status::InvalidArgument(why + "it is rank " + std::to_string(state.rank) +
                                   "'s, and this trainer is rank " + std::to_string(options.rank) +
                                   ": each rank resumes its own state");
  }
  return Status::Ok();
}

Status Client::Resume(const ResumeState& state) {
  GM_RETURN_IF_ERROR(impl_->CheckState(state));
  GM_RETURN_IF_ERROR(impl_->FlushAcks());
  ResumeMsg msg;
  msg.epoch = state.epoch;
  msg.position = state.position;
  msg.at = state.at;
  // The coordinator answers with the epoch's PLAN, or ERROR saying why it refused.
  GM_ASSIGN_OR_RETURN(Frame answer, impl_->Request(MsgType::kResume, msg.Encode(), MsgType::kPlan));
  Result<PlanMsg> plan = PlanMsg::Decode(answer.meta);
  if (!plan.ok()) return plan.status().WithContext(impl_->coordinator_name);
  if (plan->kind != PlanMsg::Kind::kPlan) {
    return Status::Corrupt(impl_->coordinator_name + " answered RESUME of epoch " +
                           std::to_string(state.epoch) + " without the epoch's plan");
  }
  return impl_->LoadPlan(*plan, state.epoch, state.position, state.at);
}

Result<std::optional<Batch>> Client::Next() {
  if (!impl_->deferred.ok()) return std::exchange(impl_->deferred, Status::Ok());
  const uint64_t wait_begin_ns = impl_->step_log ? MonotonicNanos() : 0;
  const double started = impl_->clock->Now();
  bool started_epoch = false;
  {
    MutexLock lock(impl_->mu);
    started_epoch = impl_->reorder.started();
  }
  Status status = started_epoch ? Status::Ok() : StartEpoch(0);
  Result<std::optional<Batch>> out =
      status.ok() ? impl_->Wait() : Result<std::optional<Batch>>(status);
  bool done = false;
  {
    MutexLock lock(impl_->mu);
    impl_->stats.data_wait_s += impl_->clock->Now() - started;
    done = impl_->reorder.done();
  }
  if (out.ok()) {
    impl_->FlushCredits();
    // The batch is already consumed: hand it over, report a failure next time.
    if (done || impl_->acks.size() >= kAckBatch) impl_->deferred = impl_->FlushAcks();
  }
  if (impl_->step_log && out.ok() && out->has_value())
    impl_->step_log->Record({wait_begin_ns, MonotonicNanos(), (*out)->size()});
  return out;
}

ClientStats Client::stats() const {
  MutexLock lock(impl_->mu);
  ClientStats out = impl_->stats;
  out.duplicates_dropped = impl_->reorder.dropped();
  out.workers_connected = static_cast<uint64_t>(std::count_if(
      impl_->conns.begin(), impl_->conns.end(), [](const auto& c) { return !c.second->dead; }));
  out.same_host_connections = static_cast<uint64_t>(
      std::count_if(impl_->conns.begin(), impl_->conns.end(),
                    [](const auto& c) { return !c.second->dead && c.second->same_host; }));
  return out;
}

ResumeState Client::state() const {
  MutexLock lock(impl_->mu);
  ResumeState out;
  out.epoch = impl_->reorder.epoch();
  out.position = impl_->reorder.position();
  if (impl_->reorder.started()) out.at = impl_->reorder.key();
  out.order = impl_->order;
  out.seed = impl_->order.empty() ? -1 : impl_->seed;
  out.world_size = impl_->options.world_size;
  out.rank = impl_->options.rank;
  return out;
}

const std::string& Client::device_stages() const { return impl_->device_stages; }

int Client::rank() const { return impl_->options.rank; }
int Client::world_size() const { return impl_->options.world_size; }

void Client::Recycle(Batch&& batch) { impl_->pool->Give(std::move(batch.data.bytes)); }

std::shared_ptr<BufferPool> Client::buffer_pool() const { return impl_->pool; }

}  // namespace gm
