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
// How long a second client for a rank waits for the first one's session to end
// before it is refused.
constexpr double kSessionHandoverS = 5;
constexpr double kTickS = 0.25;
constexpr double kSendTimeoutS = 30;
constexpr double kPlanWaitS = 5;  // a GET_PLAN for a future epoch waits this long per answer

int64_t CountOrMinusOne(uint64_t count) {
  return count == kUnknownCount ? -1 : static_cast<int64_t>(count);
}

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

// Seconds a rank resuming a later epoch waits for every other rank to resume it too.
constexpr double kSkipAgreementS = 60;

Status CoordinatorServer::AgreeToSkip(int rank, uint64_t epoch, MutexLock& lock) {
  const std::string who =
      "rank " + std::to_string(rank) + " resumes epoch " + std::to_string(epoch);
  if (skip_ranks_.empty()) {
    skip_epoch_ = epoch;
    skip_refused_.clear();
  } else if (epoch != skip_epoch_) {
    skip_refused_ = "ranks resume different epochs (" + std::to_string(skip_epoch_) + " and " +
                    std::to_string(epoch) + ")";
    cv_.notify_all();
    return Status::InvalidArgument(who + ", but " + skip_refused_ +
                                   ": every rank must resume from the same checkpoint");
  }
  for (const auto& [other, read] : plan_read_) {
    if (other != rank && read == state_.epoch() && skip_refused_.empty())
      skip_refused_ = "rank " + std::to_string(other) + " reads epoch " + std::to_string(read);
  }
  skip_ranks_.insert(rank);
  cv_.notify_all();
  const auto world = static_cast<size_t>(config_.world_size);
  lock.WaitFor(cv_, kSkipAgreementS, [&]() REQUIRES(mu_) {
    return stopping_ || !skip_refused_.empty() || skip_ranks_.size() >= world ||
           state_.epoch() >= epoch || state_.EpochTouched();
  });
  if (state_.epoch() >= epoch) return Status::Ok();  // another rank moved the run
  std::string why = skip_refused_;
  if (why.empty() && state_.EpochTouched())
    why = "epoch " + std::to_string(state_.epoch()) + " is being read";
  if (why.empty() && skip_ranks_.size() < world) {
    why = std::to_string(world - skip_ranks_.size()) + " other rank(s) did not resume it within " +
          std::to_string(static_cast<int>(kSkipAgreementS)) + " s";
  }
  if (why.empty() && stopping_) why = "the run is stopping";
  if (!why.empty()) {
    skip_ranks_.erase(rank);
    return Status::InvalidArgument(who + ", but " + why +
                                   ": every rank must resume from the same checkpoint");
  }
  skip_ranks_.clear();
  return Status::Ok();  // every rank agreed: this one moves the run
}

Status CoordinatorServer::ResumeRank(int rank, const ResumeMsg& resume, MutexLock& lock) {
  const uint64_t epoch = resume.epoch;
  if (config_.epochs > 0 && epoch >= static_cast<uint64_t>(config_.epochs)) {
    return Status::InvalidArgument(
        "the trainer resumes epoch " + std::to_string(epoch) + ", but this run serves epochs 0.." +
        std::to_string(config_.epochs - 1) + " (--epochs " + std::to_string(config_.epochs) + ")");
  }
  if (epoch > state_.epoch()) {
    // A new run continuing an earlier one's checkpoint: the earlier epochs were
    // delivered by that run. Only before this run delivered anything of its epoch.
    if (state_.EpochTouched()) {
      return Status::InvalidArgument(
          "rank " + std::to_string(rank) + " resumes epoch " + std::to_string(epoch) +
          ", but this run is delivering epoch " + std::to_string(state_.epoch()) +
          " to other ranks: every rank must resume from the same checkpoint");
    }
    GM_RETURN_IF_ERROR(AgreeToSkip(rank, epoch, lock));
    if (state_.epoch() < epoch) {
      if (state_.EpochTouched()) {
        return Status::InvalidArgument("rank " + std::to_string(rank) + " resumes epoch " +
                                       std::to_string(epoch) + ", but epoch " +
                                       std::to_string(state_.epoch()) +
                                       " was read meanwhile: every rank must resume from the "
                                       "same checkpoint");
      }
      GM_ASSIGN_OR_RETURN(EpochPlan plan, PlanFor(epoch));
      GM_RETURN_IF_ERROR(state_.SkipToEpoch(plan));
      epochs_done_ = epoch;
      LogInfo("run: every rank resumes at epoch " + std::to_string(epoch) +
              " (epochs before it were delivered by an earlier run)");
      cv_.notify_all();
    }
  }
  Status st = resume.at ? state_.ResumeAt(rank, epoch, resume.position, *resume.at)
                        : state_.Resume(rank, epoch, resume.position);
  if (!st.ok() && !resume.at && st.message().find("is not known") != std::string::npos) {
    return Status::InvalidArgument(
        st.message() +
        ": the state has no split index (saved by an older goldminer); "
        "a state from Loader.state_dict() of this version can be resumed in a new run");
  }
  return st;
}

Status CoordinatorServer::CheckSplitSize(const SplitDoneMsg& done) const {
  const auto& splits = pipeline_.splits();
  if (done.split >= splits.size() || splits[done.split].count == 0) return Status::Ok();
  const uint64_t size = splits[done.split].count;
  const std::string what = SplitName(done.epoch, done.split) + " (" + std::to_string(size) +
                           " samples) has " + std::to_string(done.batch_count) + " batches with " +
                           std::to_string(done.skipped) + " samples skipped";
  if (done.skipped > 0 && pipeline_.on_error() == OnError::kFail) {
    return Status::InvalidArgument(what + ", but on_error is \"fail\"");
  }
  if (done.skipped > size) return Status::InvalidArgument(what + ": more than it holds");
  const uint64_t left = size - done.skipped;
  const uint64_t b = static_cast<uint64_t>(pipeline_.batch_size());
  const uint64_t batches = pipeline_.drop_last() ? left / b : (left + b - 1) / b;
  if (done.batch_count != batches) {
    return Status::InvalidArgument(what + ", but the rest make " + std::to_string(batches) +
                                   " batches of " + std::to_string(b));
  }
  return Status::Ok();
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

Status CoordinatorServer::ServeWorker(Socket& socket) {
  GM_ASSIGN_OR_RETURN(Frame reg,
                      RecvFrame(socket, kHandshakeLimits, Deadline::After(kHandshakeTimeoutS)));
  if (reg.type != MsgType::kRegister) {
    return Status::Corrupt("expected REGISTER from a worker, got " +
                           std::string(MsgTypeName(reg.type)));
  }
  GM_ASSIGN_OR_RETURN(RegisterMsg registration, RegisterMsg::Decode(reg.meta));
  WorkerId id;
  {
    MutexLock lock(mu_);
    id = state_.RegisterWorker(Now());
    data_addr_[id] = registration.data_addr;
    worker_fd_[id] = socket.fd();
    ++workers_registered_;
    // Bounded: a peer that registers again and again holds at most kMaxPlaces.
    constexpr size_t kMaxPlaces = 4096;
    if (!registration.tag.empty() && !places_.contains(registration.tag)) {
      if (place_order_.size() >= kMaxPlaces) {
        places_.erase(place_order_.front());
        place_order_.erase(place_order_.begin());
      }
      place_order_.push_back(registration.tag);
    }
    if (!registration.tag.empty()) {
      places_[registration.tag] = {registration.host, registration.step};
    }
    LogInfo("coordinator: worker " + std::to_string(id) + " registered, data at " + data_addr_[id]);
  }
  RegisteredMsg registered;
  registered.worker_id = id;
  registered.pipeline = config_.pipeline_doc;
  registered.pipeline_origin = config_.pipeline_origin;
  registered.base_dir = config_.base_dir;
  registered.samples_per_split = static_cast<int64_t>(config_.samples_per_split);
  registered.heartbeat_s = config_.heartbeat_s;
  registered.liveness_timeout_s = config_.liveness_timeout_s;
  Status st =
      SendFrame(socket, MsgType::kRegistered, registered.Encode(), Deadline::After(kSendTimeoutS));
  bool done = false;
  while (st.ok() && !done) {
    Result<Frame> frame =
        RecvFrame(socket, kControlLimits, Deadline::After(config_.liveness_timeout_s));
    st = frame.ok() ? HandleWorkerFrame(socket, id, *frame, &done) : frame.status();
  }
  MutexLock lock(mu_);
  (void)state_.WorkerExited(id);  // its unfinished splits go back to the queue
  data_addr_.erase(id);
  worker_fd_.erase(id);
  const bool faulted = faulted_.erase(id) > 0;  // said when the FAULT came
  if (!faulted && !st.ok() && !stopping_) {
    LogWarning("coordinator: worker " + std::to_string(id) + " gone (" + st.message() +
               "); its unfinished splits go to others");
  }
  return Status::Ok();
}

Status CoordinatorServer::HandleWorkerFrame(Socket& socket, WorkerId id, const Frame& frame,
                                            bool* done) {
  MutexLock lock(mu_);
  if (stopping_) return Status::Cancelled("coordinator stopping");
  GM_RETURN_IF_ERROR(state_.Heartbeat(id, Now()));
  GM_ASSIGN_OR_RETURN(std::optional<std::vector<StageStats>> stages,
                      DecodeStagesReport(frame.meta, std::string(MsgTypeName(frame.type)).c_str()));
  if (stages) worker_stages_[id] = std::move(*stages);
  switch (frame.type) {
    case MsgType::kGetSplit: {
      GM_ASSIGN_OR_RETURN(Assignment a, state_.RequestSplit(id));
      AssignMsg reply;
      switch (a.kind) {
        case Assignment::Kind::kAssign:
          reply.kind = AssignMsg::Kind::kAssign;
          break;
        case Assignment::Kind::kWait:
          reply.kind = AssignMsg::Kind::kWait;
          break;
        case Assignment::Kind::kDrain:
          reply.kind = AssignMsg::Kind::kDrain;
          break;
        case Assignment::Kind::kExit:
          reply.kind = AssignMsg::Kind::kExit;
          break;
        case Assignment::Kind::kEpochDone:
          reply.kind = AssignMsg::Kind::kEpochDone;
          break;
      }
      reply.epoch = a.epoch;
      reply.split = a.split;
      reply.rank = a.rank;
      reply.start_batch = a.start_batch;
      reply.end_batch = CountOrMinusOne(a.end_batch);
      if (auto it = rank_session_.find(a.rank); it != rank_session_.end())
        reply.session = it->second;
      lock.Unlock();
      return SendFrame(socket, MsgType::kAssign, reply.Encode(), Deadline::After(kSendTimeoutS));
    }
    case MsgType::kSplitDone: {
      GM_ASSIGN_OR_RETURN(SplitDoneMsg done_msg, SplitDoneMsg::Decode(frame.meta));
      if (Status size = CheckSplitSize(done_msg); !size.ok()) {
        // A worker that lies about what it made is dropped (its splits go to
        // others). Where the plan left the count open, the trainer may have read
        // the split short already: the run cannot deliver every sample.
        if (done_msg.epoch == state_.epoch() && state_.MakesSplit(id, done_msg.split) &&
            state_.PlannedCount(done_msg.split) == kUnknownCount && failure_.empty()) {
          failure_ = "worker " + std::to_string(id) + " says " + size.message() +
                     ": the trainer may have read the split short, so the run stops";
          LogError("coordinator: " + failure_);
          cv_.notify_all();
        }
        return size;
      }
      Status st = state_.SplitDone(id, done_msg.epoch, done_msg.split, done_msg.batch_count,
                                   done_msg.skipped);
      if (uint64_t held = 0; !st.ok() && worker_warnings_.Allow(&held)) {
        LogWarning("coordinator: worker " + std::to_string(id) + ": " + st.message() + " (" +
                   std::to_string(held) + " such warnings held back)");
      }
      AdvanceEpochIfDone();
      return Status::Ok();
    }
    case MsgType::kHeartbeat:
      return Status::Ok();
    case MsgType::kBye:
      *done = true;
      return Status::Ok();
    default:
      return Status::Corrupt(std::string("unexpected ") + std::string(MsgTypeName(frame.type)) +
                             " from a worker");
  }
}

Status CoordinatorServer::ServeClient(Socket& socket) {
  GM_ASSIGN_OR_RETURN(Frame sub,
                      RecvFrame(socket, kHandshakeLimits, Deadline::After(kHandshakeTimeoutS)));
  if (sub.type != MsgType::kSubscribe) {
    return Status::Corrupt("expected SUBSCRIBE from a client, got " +
                           std::string(MsgTypeName(sub.type)));
  }
  GM_ASSIGN_OR_RETURN(SubscribeMsg subscription, SubscribeMsg::Decode(sub.meta, true));
  const int rank = static_cast<int>(subscription.rank);
  const int world = static_cast<int>(subscription.world_size);
  if (rank >= config_.world_size || world != config_.world_size) {
    std::string why = "this run has " + std::to_string(config_.world_size) +
                      " trainer rank(s); a client subscribed as rank " + std::to_string(rank) +
                      " of " + std::to_string(world);
    SendError(socket, why, Deadline::After(1));
    return Status::InvalidArgument(why);
  }
  // One session per rank: a second client for a rank that is being served is
  // refused, never silently swapped in (it would take the rank's acknowledgements).
  // It waits a little first: a trainer that replaces its loader (resume) may
  // subscribe before the old session's close has been seen. Each session gets a
  // new number, higher than every earlier one: the ticket it is given for the data
  // ports carries it, and a data port lets a rank's newer session replace an
  // older one (whose batches and acknowledgements stop there), never the reverse.
  uint64_t session = 0;
  {
    MutexLock lock(mu_);
    lock.WaitFor(cv_, kSessionHandoverS,
                 [&]() REQUIRES(mu_) { return stopping_ || !rank_peers_.contains(rank); });
    auto [it, fresh] = rank_peers_.emplace(rank, socket.peer());
    if (!fresh) {
      std::string why = "rank " + std::to_string(rank) + " is already subscribed from " +
                        it->second +
                        "; a restarted trainer can subscribe once the old "
                        "process's connection has closed";
      SendError(socket, why, Deadline::After(1));
      return Status::InvalidArgument(why);
    }
    session = ++sessions_;
    rank_session_[rank] = session;
  }
  Status st = ServeSubscribedClient(socket, rank, session);
  MutexLock lock(mu_);
  rank_peers_.erase(rank);
  cv_.notify_all();
  return st;
}

Status CoordinatorServer::ServeSubscribedClient(Socket& socket, int rank, uint64_t session) {
  SubscribedMsg subscribed;
  subscribed.run_id = config_.run_id;
  subscribed.batch_size = pipeline_.batch_size();
  subscribed.world_size = config_.world_size;
  subscribed.epochs = config_.epochs;
  subscribed.session = session;
  subscribed.ticket = TicketKey(RoleKey(config_.secret, kWorkerRole), rank, session);
  subscribed.order = order_;
  subscribed.seed = pipeline_.seed();
  subscribed.device_stages = pipeline_.device_stages();
  GM_RETURN_IF_ERROR(
      SendFrame(socket, MsgType::kSubscribed, subscribed.Encode(), Deadline::After(kSendTimeoutS)));
  bool done = false;
  while (!done) {
    // A trainer may compute for a long time between batches; its client says
    // HEARTBEAT meanwhile, so a connection silent for kClientIdleS is not a trainer.
    GM_ASSIGN_OR_RETURN(Frame frame,
                        RecvFrame(socket, kControlLimits, Deadline::After(config_.client_idle_s)));
    GM_RETURN_IF_ERROR(HandleClientFrame(socket, rank, session, frame, &done));
  }
  return Status::Ok();
}

// The answer to GET_PLAN: the epoch's PLAN, or {end}, {wait} or {done}.
nlohmann::json CoordinatorServer::AnswerGetPlan(int rank, uint64_t session, uint64_t epoch,
                                                MutexLock& lock) {
  PlanMsg answer;
  answer.epoch = epoch;
  if (config_.epochs > 0 && epoch >= static_cast<uint64_t>(config_.epochs)) {
    answer.kind = PlanMsg::Kind::kEnd;
    answer.epochs = config_.epochs;
    return answer.Encode();
  }
  // A rank that reads the current epoch calls off a move to a later one.
  if (!skip_ranks_.empty() && epoch < skip_epoch_ && skip_refused_.empty()) {
    skip_refused_ = "rank " + std::to_string(rank) + " reads epoch " + std::to_string(epoch);
    cv_.notify_all();
  }
  // A later epoch starts when every rank has finished this one.
  lock.WaitFor(cv_, kPlanWaitS,
               [&]() REQUIRES(mu_) { return stopping_ || finished_ || state_.epoch() >= epoch; });
  if (state_.epoch() < epoch) {
    answer.kind = PlanMsg::Kind::kWait;
    return answer.Encode();
  }
  if (state_.epoch() > epoch) {
    answer.kind = PlanMsg::Kind::kDone;
    return answer.Encode();
  }
  plan_read_[rank] = epoch;
  const auto place = TakeOverRank(rank, session);
  epoch_session_[rank] = {epoch, session};
  return PlanMessage(epoch, place);
}

std::optional<std::pair<uint64_t, SequenceKey>> CoordinatorServer::TakeOverRank(int rank,
                                                                                uint64_t session) {
  auto last = epoch_session_.find(rank);
  if (last == epoch_session_.end() || last->second.first != state_.epoch() ||
      last->second.second == session) {
    return std::nullopt;
  }
  const auto [position, at] = state_.RankCursor(rank);
  Status st = state_.ResumeAt(rank, state_.epoch(), position, at);
  const std::string who =
      "coordinator: rank " + std::to_string(rank) + " session " + std::to_string(session);
  if (!st.ok()) {
    LogWarning(who + " could not continue where session " + std::to_string(last->second.second) +
               " left epoch " + std::to_string(state_.epoch()) + ": " + st.message());
    return std::nullopt;
  }
  LogInfo(who + " continues epoch " + std::to_string(state_.epoch()) + " at batch " +
          std::to_string(position) + ", where session " + std::to_string(last->second.second) +
          " left it (a trainer restarted without its state); what that session was sent and "
          "did not acknowledge is made again");
  return std::make_pair(position, at);
}

// The answer to GET_WORKERS: the live workers and who holds the rank's splits.
nlohmann::json CoordinatorServer::AnswerGetWorkers(int rank) const {
  WorkersMsg workers;
  std::map<WorkerId, uint64_t> index;
  for (const auto& [id, addr] : data_addr_) {
    index[id] = workers.workers.size();
    workers.workers.push_back(addr);
  }
  workers.epoch = state_.epoch();
  workers.holders_known = true;
  for (const auto& [split, holder] : state_.Holders(rank)) {
    if (auto it = index.find(holder); it != index.end())
      workers.holders.emplace_back(split, it->second);
  }
  return workers.Encode();
}

void CoordinatorServer::DropFaulty(int rank, const FaultMsg& fault) {
  // The trainer holds the client key: it is trusted with its own run's data, so
  // its word drops a worker (the launcher replaces it). A worker not live (gone
  // already, or an address no worker has) is left alone.
  auto it = std::find_if(data_addr_.begin(), data_addr_.end(),
                         [&](const auto& entry) { return entry.second == fault.worker; });
  if (it == data_addr_.end() || faulted_.contains(it->first)) return;
  const WorkerId id = it->first;
  faulted_.insert(id);
  ++workers_faulted_;
  LogWarning("coordinator: rank " + std::to_string(rank) + " reports worker " + std::to_string(id) +
             " (" + PeerText(fault.worker) + "): " + PeerText(fault.why) +
             "; it is dropped and its splits go to others");
  if (auto fd = worker_fd_.find(id); fd != worker_fd_.end())
    ::shutdown(fd->second, SHUT_RDWR);  // its connection's thread sees it and ends
}

Status CoordinatorServer::HandleClientFrame(Socket& socket, int rank, uint64_t session,
                                            const Frame& frame, bool* done) {
  MutexLock lock(mu_);
  if (stopping_) return Status::Cancelled("coordinator stopping");
  nlohmann::json reply;
  MsgType reply_type = MsgType::kPlan;
  const bool asks = frame.type == MsgType::kGetPlan || frame.type == MsgType::kGetWorkers;
  if (asks && !failure_.empty()) {
    const std::string why = "the run failed: " + failure_;
    lock.Unlock();
    SendError(socket, why, Deadline::After(1));
    return Status::Cancelled(why);
  }
  switch (frame.type) {
    case MsgType::kGetPlan: {
      GM_ASSIGN_OR_RETURN(GetPlanMsg get_plan, GetPlanMsg::Decode(frame.meta));
      reply = AnswerGetPlan(rank, session, get_plan.epoch, lock);
      break;
    }
    case MsgType::kGetWorkers: {
      reply = AnswerGetWorkers(rank);
      reply_type = MsgType::kWorkers;
      break;
    }
    case MsgType::kAck: {
      GM_ASSIGN_OR_RETURN(AckMsg ack, AckMsg::Decode(frame.meta));
      for (const auto& [split, split_batch] : ack.batches) {
        auto outcome = state_.Ack(rank, ack.epoch, split, split_batch);
        if (!outcome.ok())
          return outcome.status().WithContext("ACK from rank " + std::to_string(rank));
      }
      AdvanceEpochIfDone();
      return Status::Ok();
    }
    case MsgType::kResume: {
      GM_ASSIGN_OR_RETURN(ResumeMsg resume, ResumeMsg::Decode(frame.meta));
      if (Status st = ResumeRank(rank, resume, lock); !st.ok()) {
        // The trainer learns why; the session ends (its state is not this run's).
        lock.Unlock();
        SendError(socket, st.message(), Deadline::After(1));
        return st;
      }
      epoch_session_[rank] = {resume.epoch, session};
      reply = PlanMessage(resume.epoch);
      break;
    }
    case MsgType::kFault: {
      GM_ASSIGN_OR_RETURN(FaultMsg fault, FaultMsg::Decode(frame.meta));
      DropFaulty(rank, fault);
      return Status::Ok();
    }
    case MsgType::kHeartbeat:
      return Status::Ok();
    case MsgType::kBye:
      *done = true;
      return Status::Ok();
    default:
      return Status::Corrupt(std::string("unexpected ") + std::string(MsgTypeName(frame.type)) +
                             " from a client");
  }
  lock.Unlock();
  return SendFrame(socket, reply_type, reply, Deadline::After(kSendTimeoutS));
}

}  // namespace gm
