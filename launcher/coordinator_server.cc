#include "launcher/coordinator_server.h"

#include <sys/socket.h>

#include <algorithm>

#include "core/clock.h"
#include "core/digest.h"
#include "core/host.h"
#include "core/log.h"
#include "core/thread_annotations.h"
#include "dataplane/auth.h"
#include "dataplane/messages.h"
#include "worker/engine.h"

namespace gm {
namespace {

constexpr double kAcceptPollS = 0.5;
constexpr double kAcceptBackoffS = 0.1;  // after accept fails (EMFILE, ENFILE, ENOMEM)
constexpr double kTickS = 0.25;

}  // namespace

Result<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const CoordinatorConfig& config) {
  if (config.world_size < 1) return Status::InvalidArgument("world size must be at least 1");
  if (config.epochs < 0) return Status::InvalidArgument("--epochs must be at least 0");
  PipelineOptions po;
  po.samples_per_split = config.samples_per_split;
  GM_ASSIGN_OR_RETURN(
      Pipeline pipeline,
      Pipeline::FromJson(config.pipeline_doc, config.pipeline_origin, config.base_dir, po));
  CoordinatorOptions co;
  co.world_size = config.world_size;
  co.max_inflight_per_worker = 1;
  co.liveness_timeout_s = config.liveness_timeout_s;
  GM_ASSIGN_OR_RETURN(CoordinatorState state, CoordinatorState::Create(co));
  GM_ASSIGN_OR_RETURN(Listener listener, Listener::ListenTcp(config.host, config.port));
  std::unique_ptr<CoordinatorServer> server(
      new CoordinatorServer(config, std::move(pipeline), std::move(state), std::move(listener)));
  {
    MutexLock lock(server->mu_);
    GM_ASSIGN_OR_RETURN(EpochPlan plan, server->PlanFor(0));
    GM_RETURN_IF_ERROR(server->state_.StartEpoch(plan).WithContext("epoch 0"));
  }
  GM_ASSIGN_OR_RETURN(server->lobby_, Lobby::Start(kHandshakeTimeoutS, DefaultLobbySize()));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  server->tick_thread_ = std::thread([s = server.get()] { s->TickLoop(); });
  return server;
}

// The batch order is a function of the pipeline document (source, stages,
// batch, shuffle, seed, on_error) and the split size; a trainer's checkpoint names
// it so that a run of another pipeline refuses to continue it.
static std::string OrderDigest(const CoordinatorConfig& config) {
  Sha256 digest;
  digest.Update(config.pipeline_doc.dump());
  digest.Update("\nsamples_per_split=" + std::to_string(config.samples_per_split));
  return digest.FinishHex();
}

CoordinatorServer::CoordinatorServer(CoordinatorConfig config, Pipeline pipeline,
                                     CoordinatorState state, Listener listener)
    : config_(std::move(config)),
      pipeline_(std::move(pipeline)),
      order_(OrderDigest(config_)),
      listener_(std::move(listener)),
      state_(std::move(state)) {}

CoordinatorServer::~CoordinatorServer() { Stop(); }

std::string CoordinatorServer::address() const {
  std::string host = config_.advertise_host;
  if (host.empty()) host = IsWildcardHost(config_.host) ? ReachableHostName() : config_.host;
  return JoinHostPort(host, listener_.port());
}

bool CoordinatorServer::WaitFinished(double timeout_s) {
  MutexLock lock(mu_);
  return lock.WaitFor(cv_, timeout_s, [&]() REQUIRES(mu_) { return finished_ || stopping_; }) &&
         finished_;
}

CoordinatorSummary CoordinatorServer::Summary() const {
  MutexLock lock(mu_);
  CoordinatorSummary s;
  s.state = state_.Stats();
  s.epochs_done = epochs_done_;
  s.workers_registered = workers_registered_;
  s.workers_faulted = workers_faulted_;
  s.connections_refused = refused_;
  s.connections_dropped = gate_.dropped() + accept_failures_;
  s.connections_open = gate_.open();
  s.worker_stages = worker_stages_;
  s.places = places_;
  s.workers_live = data_addr_.size();
  return s;
}

void CoordinatorServer::Stop() {
  {
    MutexLock lock(mu_);
    if (stopping_ && connections_.empty() && !accept_thread_.joinable()) return;
    stopping_ = true;
    for (Connection& c : connections_) {
      if (!c.done) ::shutdown(c.fd, SHUT_RDWR);  // wakes blocked receives
    }
    cv_.notify_all();
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  lobby_.reset();  // what waits there is closed (Admit refuses once stopping_)
  if (tick_thread_.joinable()) tick_thread_.join();
  std::list<Connection> connections;
  {
    MutexLock lock(mu_);
    connections.swap(connections_);
  }
  for (Connection& c : connections) c.thread.join();
  listener_.Close();
}

Result<EpochPlan> CoordinatorServer::PlanFor(uint64_t epoch) const {
  EpochPlan plan;
  plan.epoch = epoch;
  const auto& splits = pipeline_.splits();
  for (size_t id : EpochSplitOrder(pipeline_, epoch)) {
    uint64_t count = kUnknownCount;
    // With several ranks, equal shares need every count up front: the planned
    // count of a split of known size (a skipped sample that changes it is
    // reported as an error by the state machine when the worker tells). With one
    // rank, a split of known size that may skip nothing (on_error "fail") is
    // planned too, so the client refuses a worker that cuts it short.
    const bool fixed = splits[id].count > 0 && pipeline_.on_error() == OnError::kFail;
    if (config_.world_size > 1 || fixed) {
      if (splits[id].count == 0) {
        return Status::InvalidArgument(
            "several trainer ranks need a source whose split sizes are known up front "
            "(files, jsonl, range); " +
            splits[id].name + " has an unknown size");
      }
      const uint64_t b = static_cast<uint64_t>(pipeline_.batch_size());
      count = pipeline_.drop_last() ? splits[id].count / b : (splits[id].count + b - 1) / b;
    }
    plan.splits.push_back(PlanSplit{id, count});
  }
  return plan;
}

nlohmann::json CoordinatorServer::PlanMessage(
    uint64_t epoch, const std::optional<std::pair<uint64_t, SequenceKey>>& place) {
  PlanMsg plan;
  plan.epoch = epoch;
  if (place) {
    plan.position = place->first;
    plan.at = place->second;
  }
  for (const auto& slot_split : EpochSplitOrder(pipeline_, epoch)) {
    plan.splits.emplace_back(slot_split, CountOrMinusOne(state_.BatchCount(slot_split)));
  }
  for (const auto& [id, addr] : data_addr_) plan.workers.push_back(addr);
  return plan.Encode();
}

void CoordinatorServer::AdvanceEpochIfDone() {
  while (!finished_ && state_.EpochDone()) {
    ++epochs_done_;
    if (config_.epochs > 0 && epochs_done_ >= static_cast<uint64_t>(config_.epochs)) {
      finished_ = true;
      const uint64_t skipped = state_.Stats().samples_skipped;
      if (skipped == 0) {
        LogInfo("run: every epoch delivered");
      } else {
        LogWarning("run: every epoch ended, but the workers skipped " + std::to_string(skipped) +
                   " samples they could not read (on_error \"skip\"; their warnings name "
                   "them); every other sample was delivered");
      }
    } else {
      auto plan = PlanFor(state_.epoch() + 1);
      Status st = plan.ok() ? state_.StartEpoch(*plan) : plan.status();
      if (!st.ok()) {
        LogError("coordinator: cannot start epoch " + std::to_string(state_.epoch() + 1) + ": " +
                 st.message());
        finished_ = true;
      }
    }
    cv_.notify_all();
  }
}

void CoordinatorServer::AcceptLoop() {
  for (;;) {
    ReapFinished();
    {
      MutexLock lock(mu_);
      if (stopping_) return;
    }
    Result<Socket> socket = listener_.Accept(kAcceptPollS);
    if (socket.ok()) {
      // HELLO first (the server speaks first), then the client's answer is awaited
      // in the lobby: a peer that closes or says nothing costs no thread.
      Result<std::string> nonce = SendServerHello(*socket, "coordinator", Deadline::After(1));
      if (!nonce.ok()) continue;  // gone already
      lobby_->Add(std::move(*socket),
                  [this, n = std::move(*nonce)](Socket s) { Admit(std::move(s), n); });
      continue;
    }
    if (socket.status().code() == Code::kUnavailable) continue;  // timeout: look again
    // Out of descriptors or memory: accept fails at once until something is
    // closed, so wait rather than spin, and say so now and then.
    MutexLock lock(mu_);
    ++accept_failures_;
    if (uint64_t held = 0; drop_warnings_.Allow(&held)) {
      LogWarning("coordinator: " + socket.status().message() + " (retrying; " +
                 std::to_string(connections_.size()) + " connections open; " +
                 std::to_string(held) + " such warnings held back)");
    }
    lock.WaitFor(cv_, kAcceptBackoffS, [&]() REQUIRES(mu_) { return stopping_; });
  }
}

void CoordinatorServer::ReapFinished() {
  std::list<Connection> finished;
  {
    MutexLock lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      auto next = std::next(it);
      if (it->done) finished.splice(finished.end(), connections_, it);
      it = next;
    }
  }
  for (Connection& c : finished) c.thread.join();
}

void CoordinatorServer::Admit(Socket socket, std::string hello_nonce) {
  MutexLock lock(mu_);
  if (stopping_) return;
  const std::optional<uint64_t> gate_id = gate_.Admit(socket.fd(), socket.peer());
  if (!gate_id) {
    if (uint64_t held = 0; drop_warnings_.Allow(&held)) {
      LogWarning("coordinator: closed a connection from " + socket.peer() + ": " +
                 std::to_string(gate_.open()) + " connections are open (" + std::to_string(held) +
                 " such warnings held back)");
    }
    return;
  }
  Connection& c = connections_.emplace_back();
  c.fd = socket.fd();
  c.gate_id = *gate_id;
  try {
    c.thread = std::thread([this, s = std::make_shared<Socket>(std::move(socket)), &c,
                            nonce = std::move(hello_nonce)]() mutable {
      Serve(*s, c.gate_id, nonce);
      gate_.Closed(c.gate_id);  // before the descriptor closes, so it is never reused under it
      s.reset();
      MutexLock inner(mu_);
      c.done = true;
    });
  } catch (const std::system_error& e) {  // no thread to serve it: drop this one only
    gate_.Closed(c.gate_id);
    connections_.pop_back();
    LogWarning(std::string("coordinator: cannot start a thread for a connection: ") + e.what());
  }
}

void CoordinatorServer::TickLoop() {
  MutexLock lock(mu_);
  while (!lock.WaitFor(cv_, kTickS, [&]() REQUIRES(mu_) { return stopping_; })) {
    for (WorkerId lost : state_.Tick(Now())) {
      LogWarning("coordinator: worker " + std::to_string(lost) + " (" + data_addr_[lost] +
                 ") silent for " + std::to_string(config_.liveness_timeout_s) +
                 " s: declared lost, its splits go to others");
      data_addr_.erase(lost);
    }
  }
}

void CoordinatorServer::Serve(Socket& socket, uint64_t gate_id, const std::string& hello_nonce) {
  std::string role;
  // Workers and clients prove the key of their role (dataplane/auth.h).
  auto key_for = [this](std::string_view claimed) -> Result<std::string> {
    if (claimed == kWorkerRole || claimed == kClientRole) return RoleKey(config_.secret, claimed);
    return Status::InvalidArgument("no such role");
  };
  Status st = ServerHandshake(socket, key_for, "coordinator", Deadline::After(kHandshakeTimeoutS),
                              &role, &hello_nonce);
  const bool role_known = st.ok();
  if (st.ok()) gate_.Authenticated(gate_id);
  if (st.ok() && role == "worker") {
    st = ServeWorker(socket);
  } else if (st.ok() && role == "client") {
    st = ServeClient(socket);
  } else if (st.ok()) {
    st = Status::InvalidArgument("unknown role \"" + PeerText(role) + "\"");
  }
  if (!st.ok() && role_known && st.code() != Code::kUnavailable) {
    // Tell an authenticated peer why (a bad field, an unexpected message) before
    // closing: a buggy client learns what to fix. Best effort.
    SendError(socket, st.message(), Deadline::After(1));
  }
  if (!st.ok()) {
    MutexLock lock(mu_);
    if (stopping_) return;
    ++refused_;
    // A trainer that ends closes its connection: not worth a warning. Others are,
    // at most one per interval (a peer can make thousands).
    const std::string line =
        "coordinator: connection from " + socket.peer() + " dropped: " + st.message();
    if (st.code() == Code::kUnavailable && role_known) {
      LogDebug(line);
    } else if (refused_warnings_.Allow()) {
      LogWarning(line + " (such warnings are shown at most every " +
                 std::to_string(static_cast<int>(refused_warnings_.interval_s())) + " s; " +
                 std::to_string(refused_) + " so far)");
    }
  }
}

}  // namespace gm
