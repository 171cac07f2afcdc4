// The trainer client's worker links (client/client_impl.h): dialling a worker
// (its same-host socket first), credit, the receiver threads, batches in shared
// memory, reaping dead connections and refusing workers that lie about holders.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "client/client_impl.h"
#include "core/host.h"
#include "core/log.h"
#include "dataplane/auth.h"

namespace gm {
namespace {

// Connects to "HOST:PORT", "[V6]:PORT" or "unix:PATH".
Result<Socket> ConnectAddress(const std::string& address, double timeout_s) {
  if (address.starts_with("unix:")) return Socket::ConnectUnix(address.substr(5), timeout_s);
  GM_ASSIGN_OR_RETURN(HostPort to, ParseHostPort(address, "worker address (or unix:PATH)", 1));
  return Socket::ConnectTcp(to.host, to.port, timeout_s);
}

// A BATCH whose data is in a segment (dataplane/shm.h): maps the segment the
// frame passes (fd: true) or finds the one it names, and views it without a copy.
// Corrupt for a segment on a TCP connection, one never passed, a descriptor that
// is missing or not a sealed memfd of a fitting size.
Result<Batch> DecodeSegmentBatch(WorkerConn& conn, const Frame& frame,
                                 const BatchMeta::Segment& shm, const FrameLimits& limits) {
  if (!conn.same_host) return Status::Corrupt("sent a segment over TCP");
  const uint64_t id = shm.id;  // below kMaxSegments (BatchMeta::Decode)
  if (conn.segments.size() <= id) conn.segments.resize(id + 1);
  if (shm.fd) {
    const int fd = conn.socket.TakeFd();
    if (fd < 0) return Status::Corrupt("BATCH: $.shm.fd is true but no descriptor came with it");
    // At least the data's bytes (DecodeBatch checks data_bytes against the shape).
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

// Connects and authenticates as `role` with `key` to a server that must prove it
// plays `server_role` ("coordinator", or "worker" at a data port). `before`, when
// given, vets the connected socket before the handshake sends a byte. A server
// that drops the connection during the handshake is dialled again within
// `timeout_s` (DialHandshake).
Result<Socket> Dial(const std::string& address, const std::string& key, std::string_view role_name,
                    double timeout_s, std::string_view server_role,
                    const std::function<Status(const Socket&)>& before) {
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

void Client::Impl::CloseConnectionsOf(uint64_t source) {
  for (auto& [id, conn] : conns) {
    if (conn->source != source || conn->dead) continue;
    conn->closing = true;
    ++stats.connections_lost;
    ::shutdown(conn->socket.fd(), SHUT_RDWR);
  }
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
  bool left = false;  // the worker said BYE: it drained or was told to exit
  while (true) {
    if (frame.payload.capacity() == 0) frame.payload = pool->Take();
    status = RecvFrameInto(conn->socket, limits, Deadline::After(options.timeout_s), frame);
    if (!status.ok()) break;
    if (frame.type == MsgType::kBye) {
      left = true;
      break;
    }
    if (frame.type == MsgType::kError) {
      status = Status::Unavailable("worker sent ERROR: " +
                                   PeerText(ErrorMsg::Decode(frame.meta).message));
      break;
    }
    if (frame.type != MsgType::kBatch) {  // a data port sends nothing else
      status = Status::Corrupt("worker sent " + std::string(MsgTypeName(frame.type)) +
                               " on a data connection, where only BATCH, ERROR and BYE come");
      break;
    }
    Result<BatchMeta> header = BatchMeta::Decode(frame.meta);
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
    Result<Batch> batch = header->shm ? DecodeSegmentBatch(*conn, frame, *header->shm, limits)
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
  Ended(conn, status, left);
}

void Client::Impl::Ended(WorkerConn* conn, const Status& status, bool left) {
  MutexLock lock(mu);
  if (left && !conn->closing) {
    // What it sent stays (its batches are as good as any); a split it held and did
    // not finish is the coordinator's to hand out again, as for a worker that broke.
    LogDebug("client: worker " + conn->address + " left (it said BYE)");
    departed.insert(conn->address);
  } else if (!conn->closing) {
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
  {
    MutexLock lock(mu);
    std::erase_if(departed, [&](const std::string& address) {
      return std::find(addresses.begin(), addresses.end(), address) == addresses.end();
    });
  }
  for (const std::string& address : addresses) {
    {
      MutexLock lock(mu);
      bool known = std::any_of(conns.begin(), conns.end(), [&](const auto& c) {
        return !c.second->dead && c.second->address == address;
      });
      if (known || refused.contains(address) || departed.contains(address)) continue;
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
  std::set<std::pair<uint64_t, uint64_t>> revoked;
  for (const auto& [split, index] : workers.revoked)
    revoked.emplace(split, source(workers.workers[index]));
  for (uint64_t liar : reorder.SetHolders(workers.epoch, holders, listed, view, revoked)) {
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

// Each live worker gets an equal part of the bound for batches not verified yet,
// so one that fills its part with batches nobody needs cannot stop the credit of
// the one that holds the batch awaited. Verified batches (of splits their worker
// holds, not awaited yet) count in the whole bound: past it only the awaited
// split's holder gets credit, and only while what it sent itself is under the
// whole bound. So the buffer never holds more than twice the bound, plus the
// credit granted (prefetch + 1 per connection), whatever the workers send.
Client::Impl::Bound Client::Impl::LookAheadBound(const WorkerConn& conn, bool holder) const {
  const auto live = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::count_if(conns.begin(), conns.end(),
                                             [](const auto& c) { return !c.second->dead; })));
  const ReorderBuffer::Held unverified = reorder.held_from(conn.source);
  if (unverified.batches >= options.max_lookahead_batches ||
      unverified.bytes >= options.max_buffered_bytes / live)
    return Bound::kUnverified;
  const ReorderBuffer::Held kept = holder ? reorder.kept_from(conn.source) : reorder.kept();
  if (kept.batches >= options.max_lookahead_batches * live ||
      kept.bytes >= options.max_buffered_bytes)
    return Bound::kTotal;
  return Bound::kUnder;
}

}  // namespace gm
