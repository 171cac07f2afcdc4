#include "dataplane/data_server.h"

#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "core/json.h"
#include "core/log.h"
#include "core/thread_annotations.h"
#include "dataplane/auth.h"
#include "dataplane/messages.h"
#include "dataplane/messages_control.h"
#include "dataplane/protocol.h"
#include "dataplane/shm.h"

namespace gm {
namespace {

// Tags of the two listeners (ConnectionServer::Listen).
constexpr int kTcpTag = 0;
constexpr int kSameHostTag = 1;
// How long a second connection for a rank waits for the first one to go.
constexpr double kRankHandoverS = 5;
// Limits for what a client sends on the data port: small meta, never a payload.
constexpr FrameLimits kClientLimits{64u << 10, 0, kFrameFinishS};

}  // namespace

struct DataServer::Conn {
  explicit Conn(std::shared_ptr<Socket> s)
      : owner(std::move(s)), socket(*owner), peer(socket.peer()) {}
  // Wakes this connection's reader (and fails a send under way) without closing
  // the descriptor, which other threads may still be using.
  void Hangup() { ::shutdown(socket.fd(), SHUT_RDWR); }

  const std::shared_ptr<Socket> owner;  // shared with the ConnectionServer
  Socket& socket;                       // the reader thread receives, SendToRank sends
  const std::string peer;
  int64_t rank = -1;     // the ticket's rank; SUBSCRIBE must name the same
  uint64_t session = 0;  // the ticket's session at the coordinator
  // Guarded by DataServer::mu_ (a member of another object: not annotated).
  uint64_t credit = 0;
  bool same_host = false;  // accepted on the same-host socket
  bool shm = false;        // ... and its client asked for segments (set before Attach)
  SegmentPool segments;    // lent to the client with batches (dataplane/shm.h)
};

// A segment lent for one batch before its send (ReserveSegment). Dropped
// unsent, it goes back to its connection's pool; the deleter's type tells
// SendToRank that a batch's memory is such a segment (std::get_deleter).
struct DataServer::Reservation {
  std::weak_ptr<Conn> conn;
  SegmentPool::Lease lease;
  bool sent = false;
};

void DataServer::ReservationDeleter::operator()(Reservation* r) const {
  if (!r->sent) {
    if (std::shared_ptr<Conn> conn = r->conn.lock()) conn->segments.Abandon(r->lease);
  }
  delete r;
}

DataServer::DataServer(std::string secret, int port, std::string address)
    : secret_(std::move(secret)), port_(port), address_(std::move(address)) {}

Result<std::unique_ptr<DataServer>> DataServer::Start(const std::string& host, int port,
                                                      std::string secret) {
  GM_ASSIGN_OR_RETURN(Listener listener, Listener::ListenTcp(host, port));
  std::unique_ptr<DataServer> server(
      new DataServer(std::move(secret), listener.port(), listener.address()));
  ConnectionServer::Options options;
  options.name = "data port " + server->address_;
  options.hello_role = "worker";
  GM_ASSIGN_OR_RETURN(
      server->connections_,
      ConnectionServer::Start(
          std::move(options),
          [s = server.get()](const ConnectionServer::Connection& c) { s->Serve(c); }));
  GM_RETURN_IF_ERROR(server->connections_->Listen(std::move(listener), kTcpTag));
  return server;
}

Status DataServer::ListenSameHost(const std::string& advertised) {
  GM_ASSIGN_OR_RETURN(Listener listener, Listener::ListenUnix(SameHostName(advertised)));
  return connections_->Listen(std::move(listener), kSameHostTag);
}

DataServer::~DataServer() { Shutdown(); }

void DataServer::Serve(const ConnectionServer::Connection& connection) {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
  }
  auto conn = std::make_shared<Conn>(connection.socket());
  conn->same_host = connection.tag() == kSameHostTag;
  // Only clients with a ticket from the coordinator get in: the role they claim
  // names their rank and session, and the ticket for it is derived from our key.
  // An offload ticket opens a virtual DataLoader worker instead (SetOffloadHandler).
  bool offload = false;
  auto key_for = [this, &conn, &offload](std::string_view claimed) -> Result<std::string> {
    if (ParseTicketRole(claimed, &conn->rank, &conn->session)) {
      return TicketKey(secret_, conn->rank, conn->session);
    }
    if (ParseOffloadRole(claimed, &conn->rank, &conn->session)) {
      offload = true;
      return OffloadTicketKey(secret_, conn->rank, conn->session);
    }
    return Status::InvalidArgument("not a ticket");
  };
  Status st = ServerHandshake(conn->socket, key_for, "worker", Deadline::After(kHandshakeTimeoutS),
                              nullptr, &connection.hello_nonce());
  if (st.ok()) connection.Authenticated();
  if (st.ok() && offload) {
    OffloadHandler handler;
    {
      MutexLock lock(mu_);
      handler = offload_handler_;
    }
    if (handler) {
      st = handler(conn->socket, conn->rank, conn->session);
    } else {
      st = Status::InvalidArgument("this worker hosts no virtual DataLoader workers");
      SendError(conn->socket, st.message(), Deadline::After(1));
    }
    if (st.ok()) return;
  }
  if (st.ok()) st = Subscribe(*conn);
  if (st.ok()) st = Attach(conn);
  if (!st.ok()) {
    bool stopping;
    {
      MutexLock lock(mu_);
      stopping = stopping_;
    }
    if (uint64_t held = 0; !stopping && refused_warnings_.Allow(&held)) {
      // Socket errors name the peer already.
      std::string why = st.message();
      if (why.rfind(conn->peer + ": ", 0) == 0) why.erase(0, conn->peer.size() + 2);
      LogWarning("data port " + address_ + ": dropped connection from " + conn->peer + ": " + why +
                 " (" + std::to_string(held) + " such warnings held back)");
    }
    conn->Hangup();
    return;
  }
  ReadCredit(conn);
  Detach(conn);
}

void DataServer::SetOffloadHandler(OffloadHandler handler) {
  MutexLock lock(mu_);
  offload_handler_ = std::move(handler);
}

Status DataServer::Subscribe(Conn& conn) {
  GM_ASSIGN_OR_RETURN(Frame frame,
                      RecvFrame(conn.socket, kClientLimits, Deadline::After(kHandshakeTimeoutS)));
  if (frame.type != MsgType::kSubscribe) {
    return Status::Corrupt("sent " + std::string(MsgTypeName(frame.type)) +
                           " where SUBSCRIBE was expected");
  }
  GM_ASSIGN_OR_RETURN(SubscribeMsg sub, SubscribeMsg::Decode(frame.meta, false));
  if (sub.rank != conn.rank) {
    return Status::InvalidArgument("SUBSCRIBE: $.rank: " + std::to_string(sub.rank) +
                                   ", but its ticket is for rank " + std::to_string(conn.rank));
  }
  conn.shm = conn.same_host && sub.shm;  // over TCP the client gets bytes, whatever it asks
  return Status::Ok();
}

// One connection per rank, of the rank's newest session. A newer session (the
// coordinator issued it after the older one ended: a trainer that restarted and
// resumed) replaces the older one's connection, which gets no more batches; an
// older session is refused. A second connection of the same session (a client
// reconnecting) waits a little for the first to go, then is refused. Never
// silently swapped in: a newcomer would take the rank's batches from the trainer.
Status DataServer::Attach(const std::shared_ptr<Conn>& conn) {
  std::string why;
  {
    MutexLock lock(mu_);
    why = Admit(conn, lock);
  }
  if (why.empty()) return Status::Ok();
  SendError(conn->socket, why, Deadline::After(1));
  return Status::InvalidArgument(why);
}

// Attach's decision, under the lock: "" when the connection now serves its rank,
// else why it is refused.
std::string DataServer::Admit(const std::shared_ptr<Conn>& conn, MutexLock& lock) {
  const std::string rank = "rank " + std::to_string(conn->rank);
  uint64_t& newest = newest_session_[conn->rank];
  if (conn->session < newest) {
    return rank + " session " + std::to_string(conn->session) + " was replaced by session " +
           std::to_string(newest);
  }
  LearnSession(conn->rank, conn->session, "from " + conn->peer, lock);
  lock.WaitFor(cv_, kRankHandoverS, [&]() REQUIRES(mu_) {
    return stopping_ || newest != conn->session || !ranks_.contains(conn->rank);
  });
  if (newest != conn->session) {
    return rank + " session " + std::to_string(conn->session) + " was replaced by session " +
           std::to_string(newest);
  }
  auto [it, fresh] = ranks_.emplace(conn->rank, conn);
  if (!fresh) return rank + " is already connected from " + it->second->peer;
  LogDebug("data port " + address_ + ": rank " + std::to_string(conn->rank) + " connected from " +
           conn->peer);
  cv_.notify_all();
  return "";
}

void DataServer::ReadCredit(const std::shared_ptr<Conn>& conn) {
  const std::string who = "rank " + std::to_string(conn->rank) + " at " + conn->peer;
  for (;;) {
    // No deadline: a trainer may grant no credit for as long as it likes. Shutdown
    // and a replacing connection end this wait with Hangup().
    Result<Frame> frame = RecvFrame(conn->socket, kClientLimits, Deadline::Never());
    if (!frame.ok()) {
      const std::string line =
          "data port " + address_ + ": " + who + ": " + frame.status().message();
      frame.status().code() == Code::kUnavailable ? LogDebug(line) : LogWarning(line);
      return;
    }
    if (frame->type == MsgType::kBye) return;
    Result<CreditMsg> credit =
        frame->type == MsgType::kCredit
            ? CreditMsg::Decode(frame->meta)
            : Result<CreditMsg>(Status::Corrupt("sent " + std::string(MsgTypeName(frame->type)) +
                                                " where CREDIT was expected"));
    Status released = credit.ok() ? Status::Ok() : credit.status();
    for (size_t i = 0; released.ok() && i < credit->release.size(); ++i) {
      released = conn->shm ? conn->segments.Release(credit->release[i])
                           : Status::Corrupt("released a segment on a connection without segments");
    }
    if (!released.ok()) {
      LogWarning("data port " + address_ + ": dropped " + who + ": " + released.message());
      return;
    }
    MutexLock lock(mu_);
    conn->credit += credit->n;
    cv_.notify_all();
  }
}

void DataServer::Detach(const std::shared_ptr<Conn>& conn) {
  MutexLock lock(mu_);
  auto it = ranks_.find(conn->rank);
  if (it != ranks_.end() && it->second == conn) ranks_.erase(it);
  conn->credit = 0;
  conn->Hangup();
  cv_.notify_all();
}

void DataServer::LearnSession(int64_t rank, uint64_t session, const std::string& by,
                              MutexLock& lock) {
  (void)lock;
  uint64_t& newest = newest_session_[rank];
  if (session <= newest) return;
  newest = session;
  if (auto old = ranks_.find(rank); old != ranks_.end() && old->second->session < session) {
    LogInfo("data port " + address_ + ": rank " + std::to_string(rank) + ": session " +
            std::to_string(session) + " " + by + " replaces session " +
            std::to_string(old->second->session) + " from " + old->second->peer +
            ", which gets no more batches");
    old->second->credit = 0;
    old->second->Hangup();
    ranks_.erase(old);
  }
  cv_.notify_all();
}

Result<std::shared_ptr<DataServer::Conn>> DataServer::TakeCredit(int64_t rank,
                                                                 const SplitStream* stream) {
  MutexLock lock(mu_);
  const uint64_t at_least = stream ? stream->at_least : 0;
  LearnSession(rank, at_least, "(the coordinator's newest)", lock);
  lock.Wait(cv_, [&]() REQUIRES(mu_) {
    if (!interrupt_.ok()) return true;
    auto it = ranks_.find(rank);
    return it != ranks_.end() && it->second->credit > 0 && it->second->session >= at_least;
  });
  if (!interrupt_.ok()) return interrupt_;
  std::shared_ptr<Conn> conn = ranks_[rank];
  if (stream && stream->sent_to != 0 && conn->session != stream->sent_to) {
    return Status::Aborted("rank " + std::to_string(rank) + "'s session " +
                           std::to_string(stream->sent_to) + " was replaced by session " +
                           std::to_string(conn->session) +
                           " (a restarted trainer): the coordinator has the split made again "
                           "from what was acknowledged");
  }
  --conn->credit;
  return conn;
}

Status DataServer::SendToRank(int64_t rank, const Batch& batch,
                              std::optional<uint64_t> split_batches, SplitStream* stream) {
  GM_RETURN_IF_ERROR(CheckBatch(batch));
  nlohmann::json meta = EncodeBatchMeta(batch);
  BatchMeta{rank, split_batches, std::nullopt}.AddTo(meta);
  const std::array<iovec, 2> payload = BatchPayload(batch);
  // Collated into a segment of ReserveSegment's?
  Reservation* reserved = nullptr;
  if (batch.external && std::get_deleter<ReservationDeleter>(batch.external->owner) != nullptr) {
    reserved = static_cast<Reservation*>(batch.external->owner.get());
  }
  for (;;) {
    GM_ASSIGN_OR_RETURN(std::shared_ptr<Conn> conn, TakeCredit(rank, stream));
    // Same host: the data is in a segment the client maps, written there by the
    // batcher (reserved) or copied once here; none passes through the kernel.
    // With no segment free, inline as over TCP.
    std::optional<SegmentPool::Lease> lease;
    const bool in_place = reserved != nullptr && reserved->conn.lock() == conn;
    if (in_place) {
      lease = reserved->lease;
    } else if (conn->shm && batch.data_size() > 0) {
      lease = conn->segments.Acquire(batch.data_size());
      if (lease) std::memcpy(lease->segment->data(), batch.data_ptr(), batch.data_size());
    }
    Status st;
    if (lease) {
      nlohmann::json shm_meta = meta;
      BatchMeta{rank, split_batches, BatchMeta::Segment{lease->id, lease->fresh}}.AddTo(shm_meta);
      const iovec labels = payload[1];
      st = SendFrame(conn->socket, MsgType::kBatch, shm_meta, std::span<const iovec>(&labels, 1),
                     Deadline::After(kBatchSendTimeoutS), lease->fresh ? lease->segment->fd() : -1);
      if (st.ok()) {
        shm_batches_sent_.fetch_add(1);
        if (in_place) {
          reserved->sent = true;  // lent to the client now, until it releases it
          in_place_batches_sent_.fetch_add(1);
        }
      }
    } else {
      st = SendFrame(conn->socket, MsgType::kBatch, meta, payload,
                     Deadline::After(kBatchSendTimeoutS));
    }
    if (st.ok()) {
      batches_sent_.fetch_add(1);
      if (stream) stream->sent_to = conn->session;
      return Status::Ok();
    }
    // A client that went away (a trainer killed or restarted) is expected and
    // loses nothing: said at info. A live client that stopped reading is a warning.
    const bool gone = st.message().rfind("peer closed the connection", 0) == 0;
    (gone ? LogInfo : LogWarning)(
        "data port " + address_ + ": sending batch " + std::to_string(batch.split_batch) +
        " of split " + std::to_string(batch.split) + " to rank " + std::to_string(rank) + " at " +
        conn->peer + " failed: " + st.message() + "; it is sent again when the client reconnects");
    Detach(conn);
  }
}

std::optional<Batch::External> DataServer::ReserveSegment(int64_t rank, size_t bytes) {
  std::shared_ptr<Conn> conn;
  {
    MutexLock lock(mu_);
    auto it = ranks_.find(rank);
    if (it == ranks_.end()) return std::nullopt;
    conn = it->second;
  }
  if (!conn->shm || bytes == 0) return std::nullopt;  // shm is set before the rank is
  std::optional<SegmentPool::Lease> lease = conn->segments.Acquire(bytes);
  if (!lease) return std::nullopt;
  uint8_t* data = lease->segment->data();
  std::shared_ptr<void> owner(new Reservation{conn, std::move(*lease)}, ReservationDeleter{});
  return Batch::External{data, bytes, std::move(owner)};
}

void DataServer::Interrupt(Status why) {
  MutexLock lock(mu_);
  if (interrupt_.ok()) interrupt_ = std::move(why);
  cv_.notify_all();
}

void DataServer::SayBye() {
  std::vector<std::shared_ptr<Conn>> conns;
  {
    MutexLock lock(mu_);
    for (const auto& [rank, conn] : ranks_) conns.push_back(conn);
  }
  const Deadline deadline = Deadline::After(1);
  for (const std::shared_ptr<Conn>& conn : conns) {
    (void)SendFrame(conn->socket, MsgType::kBye, nlohmann::json::object(), deadline);
  }
}

void DataServer::Shutdown() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    if (interrupt_.ok()) interrupt_ = Status::Cancelled("the data port " + address_ + " shut down");
    cv_.notify_all();
  }
  if (connections_) connections_->Stop();  // hangs every connection up, joins their threads
  MutexLock lock(mu_);
  ranks_.clear();
}

}  // namespace gm
