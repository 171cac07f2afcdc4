#include "client/client.h"

#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/log.h"
#include "core/step_log.h"
#include "dataplane/auth.h"
#include "dataplane/messages.h"
#include "dataplane/protocol.h"
#include "dataplane/reorder.h"

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

// Connects and authenticates as "client" to a server that must prove it plays
// `server_role` ("coordinator", or "worker" at a data port).
Result<Socket> Dial(const std::string& address, const std::string& secret, double timeout_s,
                    std::string_view server_role) {
  GM_ASSIGN_OR_RETURN(Socket socket, ConnectAddress(address, timeout_s));
  std::string role;
  GM_RETURN_IF_ERROR(ClientHandshake(
      socket, secret, "client", Deadline::After(std::min(timeout_s, kHandshakeTimeoutS)), &role));
  if (role != server_role) {
    return Status::InvalidArgument(address + " answered as \"" + PeerText(role) + "\", not as a " +
                                   std::string(server_role) + ": check the address");
  }
  return socket;
}

// A string field of a peer's message, escaped and cut for quoting (PeerText).
std::string MetaString(const nlohmann::json& meta, const char* key) {
  auto it = meta.find(key);
  return it != meta.end() && it->is_string() ? PeerText(it->get<std::string>()) : std::string();
}

Result<std::vector<std::string>> ParseWorkers(const nlohmann::json& meta, std::string_view what) {
  std::vector<std::string> out;
  auto it = meta.find("workers");
  if (it == meta.end()) return out;
  if (!it->is_array()) return Status::Corrupt(std::string(what) + ": \"workers\" is not an array");
  for (const auto& w : *it) {
    if (!w.is_string())
      return Status::Corrupt(std::string(what) + ": a worker address is not a string");
    out.push_back(w.get<std::string>());
  }
  return out;
}

Result<EpochPlan> ParsePlan(const nlohmann::json& meta, uint64_t epoch) {
  const std::string what = "coordinator PLAN for epoch " + std::to_string(epoch);
  auto splits = meta.find("splits");
  if (splits == meta.end() || !splits->is_array()) {
    return Status::Corrupt(what + ": \"splits\" is missing or not an array");
  }
  EpochPlan plan;
  plan.epoch = epoch;
  for (const auto& s : *splits) {
    if (!s.is_array() || s.size() != 2 || !s[0].is_number_unsigned() || !s[1].is_number_integer()) {
      return Status::Corrupt(what + ": a split is not [split, batch_count]: " + s.dump());
    }
    int64_t count = s[1].get<int64_t>();
    plan.splits.push_back(
        {s[0].get<uint64_t>(), count < 0 ? kUnknownCount : static_cast<uint64_t>(count)});
  }
  return plan;
}

}  // namespace

// One data connection to a worker. `socket` is used for sending by the trainer's
// thread and for receiving by `thread`; the counters are guarded by Impl::mu.
struct WorkerConn {
  uint64_t id = 0;
  std::string address;
  Socket socket;
  std::thread thread;
  uint64_t granted = 0;   // credit sent
  uint64_t received = 0;  // batches received
  uint64_t owed = 0;      // credit to send at the next chance
  bool dead = false;
  bool closing = false;
};

struct Client::Impl {
  ClientOptions options;
  // Buffers of batches the trainer is done with (Client::Recycle, gm_batch_free).
  std::shared_ptr<BufferPool> pool = std::make_shared<BufferPool>(16);
  std::string coordinator_name;
  Socket coordinator;

  mutable std::mutex mu;
  std::condition_variable cv;
  // Guarded by mu.
  ReorderBuffer reorder;
  std::map<uint64_t, std::unique_ptr<WorkerConn>> conns;
  ClientStats stats;
  double last_arrival = 0;  // MonotonicSeconds() of the latest batch received
  uint64_t events = 0;      // bumped with every notify, so a waiter misses none

  // Used by the trainer's thread only.
  uint64_t next_conn_id = 1;
  std::vector<std::pair<uint64_t, uint64_t>> acks;  // (split, split_batch) not sent yet
  uint64_t ack_epoch = 0;
  Status deferred;  // a failure after a batch was taken, reported by the next call
  // Set when $GOLDMINER_PROFILE_DIR is: one "S" line per batch Next() returns.
  std::unique_ptr<StepLogWriter> step_log;

  ~Impl();
  Result<Frame> Request(MsgType type, const nlohmann::json& meta, MsgType answer);
  Result<Frame> GetPlan(uint64_t epoch);
  Status FlushAcks();
  void FlushCredits();
  void ConnectWorkers(const std::vector<std::string>& addresses);
  void Receive(WorkerConn* conn);
  void ReapDead();
  Status Refresh();
  Status LoadEpoch(uint64_t epoch, uint64_t position);
  std::optional<Batch> TakeLocked(std::unique_lock<std::mutex>& lock);
  Result<std::optional<Batch>> Wait();
};

Result<Frame> Client::Impl::Request(MsgType type, const nlohmann::json& meta, MsgType answer) {
  Deadline deadline = Deadline::After(options.timeout_s);
  Status sent = SendFrame(coordinator, type, meta, deadline);
  if (!sent.ok()) return Status::Unavailable(coordinator_name + ": " + sent.message());
  auto frame = RecvFrame(coordinator, kControlLimits, deadline);
  if (!frame.ok()) return Status::Unavailable(coordinator_name + ": " + frame.status().message());
  if (frame->type == MsgType::kError) {
    return Status::Unavailable(coordinator_name + " refused " + std::string(MsgTypeName(type)) +
                               ": " + MetaString(frame->meta, "message"));
  }
  if (frame->type != answer) {
    return Status::Corrupt(coordinator_name + " answered " + std::string(MsgTypeName(type)) +
                           " with " + std::string(MsgTypeName(frame->type)) + ", expected " +
                           std::string(MsgTypeName(answer)));
  }
  return frame;
}

Status Client::Impl::FlushAcks() {
  if (acks.empty()) return Status::Ok();
  AckMsg ack{ack_epoch, std::move(acks)};
  acks.clear();
  Status sent = SendFrame(coordinator, MsgType::kAck, ack.Encode(), Deadline::After(options.timeout_s));
  if (!sent.ok()) return Status::Unavailable(coordinator_name + ": " + sent.message());
  return Status::Ok();
}

// Sends the credit owed to each live connection. The trainer's thread is the only
// sender and the only one that destroys connections, so `conn` stays valid.
void Client::Impl::FlushCredits() {
  std::vector<std::pair<WorkerConn*, uint64_t>> grants;
  {
    std::lock_guard lock(mu);
    for (auto& [id, conn] : conns) {
      if (conn->dead || conn->owed == 0) continue;
      const uint64_t n = std::min(conn->owed, kMaxCredit);  // the rest at the next chance
      grants.emplace_back(conn.get(), n);
      conn->granted += n;
      conn->owed -= n;
    }
  }
  for (auto [conn, n] : grants) {
    Status sent = SendFrame(conn->socket, MsgType::kCredit, CreditMsg{n}.Encode(),
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
      status = Status::Unavailable("worker sent ERROR: " + MetaString(frame.meta, "message"));
      break;
    }
    if (frame.type != MsgType::kBatch) continue;
    std::optional<uint64_t> split_batches;
    auto count = frame.meta.find("split_batches");
    if (count != frame.meta.end() && count->is_number_unsigned())
      split_batches = count->get<uint64_t>();
    auto batch = DecodeBatch(std::move(frame));
    frame = Frame{};
    if (!batch.ok()) {
      status = batch.status();
      break;
    }
    std::lock_guard lock(mu);
    if (conn->received >= conn->granted) {  // a worker sends one batch per credit
      status = Status::Corrupt("sent batch " + std::to_string(conn->received + 1) + " with only " +
                               std::to_string(conn->granted) + " granted");
      break;
    }
    ++conn->received;
    last_arrival = MonotonicSeconds();
    std::string why;
    ReorderBuffer::Outcome outcome =
        reorder.Offer(std::move(*batch), conn->id, split_batches, &why);
    if (outcome != ReorderBuffer::Outcome::kBuffered) ++conn->owed;  // its credit comes back now
    if (outcome == ReorderBuffer::Outcome::kRejected)
      LogWarning("client: worker " + conn->address + ": " + why);
    ++events;
    cv.notify_all();
  }
  std::lock_guard lock(mu);
  if (!conn->closing) {
    LogWarning("client: dropping worker " + conn->address + ": " + status.message());
    ++stats.connections_lost;
  }
  conn->dead = true;
  ++events;
  cv.notify_all();
}

void Client::Impl::ConnectWorkers(const std::vector<std::string>& addresses) {
  for (const std::string& address : addresses) {
    {
      std::lock_guard lock(mu);
      bool known = std::any_of(conns.begin(), conns.end(), [&](const auto& c) {
        return !c.second->dead && c.second->address == address;
      });
      if (known) continue;
    }
    auto socket = Dial(address, options.secret, options.connect_timeout_s, "worker");
    Deadline deadline = Deadline::After(options.connect_timeout_s);
    Status status = socket.status();
    if (status.ok())
      status = SendFrame(*socket, MsgType::kSubscribe, SubscribeMsg{options.rank}.Encode(), deadline);
    if (status.ok()) {
      status = SendFrame(*socket, MsgType::kCredit,
                         CreditMsg{static_cast<uint64_t>(options.prefetch)}.Encode(), deadline);
    }
    if (!status.ok()) {
      LogWarning("client: cannot connect to worker " + address + ": " + status.message());
      continue;
    }
    auto conn = std::make_unique<WorkerConn>();
    conn->id = next_conn_id++;
    conn->address = address;
    conn->socket = std::move(*socket);
    conn->granted = static_cast<uint64_t>(options.prefetch);
    WorkerConn* raw = conn.get();
    std::lock_guard lock(mu);
    conns.emplace(raw->id, std::move(conn));
    raw->thread = std::thread([this, raw] { Receive(raw); });
  }
}

void Client::Impl::ReapDead() {
  std::vector<std::unique_ptr<WorkerConn>> dead;
  {
    std::lock_guard lock(mu);
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
Result<Frame> Client::Impl::GetPlan(uint64_t epoch) {
  const double deadline = MonotonicSeconds() + options.timeout_s;
  const std::string e = std::to_string(epoch);
  for (;;) {
    GM_ASSIGN_OR_RETURN(Frame answer,
                        Request(MsgType::kGetPlan, GetPlanMsg{epoch}.Encode(), MsgType::kPlan));
    const nlohmann::json& m = answer.meta;
    auto flag = [&m](const char* key) {
      auto it = m.find(key);
      return it != m.end() && it->is_boolean() && it->get<bool>();
    };
    if (flag("end")) {
      auto n = m.find("epochs");
      const std::string served = n != m.end() && n->is_number_unsigned()
                                     ? "only " + std::to_string(n->get<uint64_t>()) + " epoch(s)"
                                     : "fewer epochs";
      return Status::InvalidArgument("epoch " + e + " (counting from 0) was asked for, but the run "
                                     "serves " + served + ": start `goldminer run` or `goldminer "
                                     "profile` with --epochs " + std::to_string(epoch + 1) +
                                     " or more");
    }
    if (flag("done")) {
      return Status::InvalidArgument("epoch " + e + " was asked for, but every rank has already "
                                     "finished it");
    }
    if (!flag("wait")) return answer;
    if (MonotonicSeconds() > deadline) {
      return Status::Unavailable("epoch " + e + " did not start within " +
                                 std::to_string(static_cast<int>(options.timeout_s)) +
                                 " s: other ranks have not finished the epoch before it");
    }
    auto retry = m.find("retry_s");
    double retry_s = retry != m.end() && retry->is_number() ? retry->get<double>() : 0.05;
    std::this_thread::sleep_for(std::chrono::duration<double>(std::clamp(retry_s, 0.01, 1.0)));
  }
}

// Asks the coordinator for the workers (and the plan's counts when some were
// unknown) and connects to new workers.
Status Client::Impl::Refresh() {
  GM_RETURN_IF_ERROR(FlushAcks());
  GM_ASSIGN_OR_RETURN(Frame workers,
                      Request(MsgType::kGetWorkers, nlohmann::json::object(), MsgType::kWorkers));
  GM_ASSIGN_OR_RETURN(std::vector<std::string> addresses,
                      ParseWorkers(workers.meta, "coordinator WORKERS"));
  bool need_counts = false;
  uint64_t epoch = 0;
  {
    std::lock_guard lock(mu);
    need_counts = reorder.WaitingForCount();
    epoch = reorder.epoch();
  }
  if (need_counts) {
    GM_ASSIGN_OR_RETURN(Frame answer, GetPlan(epoch));
    GM_ASSIGN_OR_RETURN(EpochPlan plan, ParsePlan(answer.meta, epoch));
    std::lock_guard lock(mu);
    for (const PlanSplit& s : plan.splits) {
      if (s.batch_count == kUnknownCount) continue;
      Status counted = reorder.SetBatchCount(epoch, s.split, s.batch_count);
      if (!counted.ok()) LogWarning("client: " + counted.message());
    }
    ++events;
  }
  ConnectWorkers(addresses);
  return Status::Ok();
}

Status Client::Impl::LoadEpoch(uint64_t epoch, uint64_t position) {
  GM_RETURN_IF_ERROR(FlushAcks());
  GM_ASSIGN_OR_RETURN(Frame answer, GetPlan(epoch));
  GM_ASSIGN_OR_RETURN(EpochPlan plan, ParsePlan(answer.meta, epoch));
  GM_ASSIGN_OR_RETURN(std::vector<std::string> addresses,
                      ParseWorkers(answer.meta, "coordinator PLAN"));
  {
    std::lock_guard lock(mu);
    GM_RETURN_IF_ERROR(reorder.StartEpoch(plan, options.world_size, options.rank, position));
    stats.duplicates_dropped = reorder.dropped();
  }
  ack_epoch = epoch;
  ConnectWorkers(addresses);
  FlushCredits();
  return Status::Ok();
}

// The next batch when it is buffered: advances the sequence and owes its credit.
std::optional<Batch> Client::Impl::TakeLocked(std::unique_lock<std::mutex>& lock) {
  (void)lock;
  auto next = reorder.TakeNext();
  if (!next) return std::nullopt;
  auto conn = conns.find(next->second);
  if (conn != conns.end() && !conn->second->dead) ++conn->second->owed;
  Batch& batch = next->first;
  ++stats.batches;
  stats.samples += batch.size();
  stats.bytes += batch.data.bytes.size() + batch.labels.bytes.size();
  acks.emplace_back(batch.split, batch.split_batch);
  return std::move(batch);
}

Result<std::optional<Batch>> Client::Impl::Wait() {
  const double started = MonotonicSeconds();
  double next_refresh = started + kClientRefreshS;
  std::unique_lock lock(mu);
  last_arrival = std::max(last_arrival, started);
  while (true) {
    const uint64_t seen = events;
    stats.duplicates_dropped = reorder.dropped();
    if (reorder.done()) return std::optional<Batch>();
    if (auto batch = TakeLocked(lock)) return std::optional<Batch>(std::move(*batch));
    // Progress rule (dataplane/messages.h): every live connection out of credit -> +1 each.
    bool all_used = true;
    for (auto& [id, conn] : conns) {
      if (!conn->dead && conn->granted + conn->owed > conn->received) all_used = false;
    }
    if (all_used) {
      for (auto& [id, conn] : conns) conn->owed += conn->dead ? 0 : 1;
    }
    const double now = MonotonicSeconds();
    if (now - last_arrival >= options.timeout_s) {
      return Status::Unavailable(
          "no batch from any worker for " + std::to_string(std::lround(options.timeout_s)) +
          " s while waiting for " + reorder.Awaited() + " (rank " + std::to_string(options.rank) +
          ", " + std::to_string(conns.size()) + " worker connection(s))");
    }
    lock.unlock();
    GM_RETURN_IF_ERROR(FlushAcks());
    FlushCredits();
    ReapDead();
    if (MonotonicSeconds() >= next_refresh) {
      GM_RETURN_IF_ERROR(Refresh());
      next_refresh = MonotonicSeconds() + kClientRefreshS;
    }
    lock.lock();
    double until = std::min(next_refresh, last_arrival + options.timeout_s);
    cv.wait_for(lock, std::chrono::duration<double>(std::max(0.0, until - MonotonicSeconds())),
                [&] { return events != seen; });
  }
}

Client::Impl::~Impl() {
  if (coordinator.valid()) {
    (void)FlushAcks();
    (void)SendFrame(coordinator, MsgType::kBye, nlohmann::json::object(), Deadline::After(1.0));
  }
  {
    std::lock_guard lock(mu);
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
  impl->coordinator_name = "coordinator " + options.coordinator;
  auto socket = Dial(options.coordinator, options.secret, options.connect_timeout_s, "coordinator");
  if (!socket.ok()) return socket.status().WithContext(impl->coordinator_name);
  impl->coordinator = std::move(*socket);
  GM_ASSIGN_OR_RETURN(Frame answer,
                      impl->Request(MsgType::kSubscribe,
                                    SubscribeMsg{options.rank, options.world_size}.Encode(),
                                    MsgType::kSubscribed));
  auto world_it = answer.meta.find("world_size");
  int64_t world = world_it != answer.meta.end() && world_it->is_number_integer()
                      ? world_it->get<int64_t>()
                      : int64_t{options.world_size};
  if (world != options.world_size) {
    return Status::InvalidArgument(
        "this trainer has world size " + std::to_string(options.world_size) + " but " +
        impl->coordinator_name + " runs with world size " + std::to_string(world));
  }
  impl->step_log = StepLogWriter::FromEnvironment("goldminer");
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Status Client::StartEpoch(uint64_t epoch) { return impl_->LoadEpoch(epoch, 0); }

Status Client::Resume(const ResumeState& state) {
  GM_RETURN_IF_ERROR(impl_->FlushAcks());
  Status sent = SendFrame(impl_->coordinator, MsgType::kResume,
                          ResumeMsg{state.epoch, state.position}.Encode(),
                          Deadline::After(impl_->options.timeout_s));
  if (!sent.ok()) return Status::Unavailable(impl_->coordinator_name + ": " + sent.message());
  return impl_->LoadEpoch(state.epoch, state.position);
}

Result<std::optional<Batch>> Client::Next() {
  if (!impl_->deferred.ok()) return std::exchange(impl_->deferred, Status::Ok());
  const uint64_t wait_begin_ns = impl_->step_log ? MonotonicNanos() : 0;
  const double started = MonotonicSeconds();
  bool started_epoch = false;
  {
    std::lock_guard lock(impl_->mu);
    started_epoch = impl_->reorder.started();
  }
  Status status = started_epoch ? Status::Ok() : StartEpoch(0);
  Result<std::optional<Batch>> out =
      status.ok() ? impl_->Wait() : Result<std::optional<Batch>>(status);
  bool done = false;
  {
    std::lock_guard lock(impl_->mu);
    impl_->stats.data_wait_s += MonotonicSeconds() - started;
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
  std::lock_guard lock(impl_->mu);
  ClientStats out = impl_->stats;
  out.duplicates_dropped = impl_->reorder.dropped();
  out.workers_connected = static_cast<uint64_t>(std::count_if(
      impl_->conns.begin(), impl_->conns.end(), [](const auto& c) { return !c.second->dead; }));
  return out;
}

ResumeState Client::state() const {
  std::lock_guard lock(impl_->mu);
  return {impl_->reorder.epoch(), impl_->reorder.position()};
}

int Client::rank() const { return impl_->options.rank; }
int Client::world_size() const { return impl_->options.world_size; }

void Client::Recycle(Batch&& batch) { impl_->pool->Give(std::move(batch.data.bytes)); }

std::shared_ptr<BufferPool> Client::buffer_pool() const { return impl_->pool; }

}  // namespace gm
