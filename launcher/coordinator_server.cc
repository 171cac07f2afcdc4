#include "launcher/coordinator_server.h"

#include <sys/socket.h>

#include <algorithm>

#include "core/clock.h"
#include "core/log.h"
#include "worker/auth.h"
#include "worker/engine.h"
#include "worker/messages.h"

namespace gm {
namespace {

constexpr double kAcceptPollS = 0.5;
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
  GM_ASSIGN_OR_RETURN(Pipeline pipeline, Pipeline::FromJson(config.pipeline_doc,
                                                            config.pipeline_origin,
                                                            config.base_dir, po));
  CoordinatorOptions co;
  co.world_size = config.world_size;
  co.max_inflight_per_worker = 1;
  co.liveness_timeout_s = config.liveness_timeout_s;
  GM_ASSIGN_OR_RETURN(CoordinatorState state, CoordinatorState::Create(co));
  GM_ASSIGN_OR_RETURN(Listener listener, Listener::ListenTcp(config.host, config.port));
  std::unique_ptr<CoordinatorServer> server(
      new CoordinatorServer(config, std::move(pipeline), std::move(state), std::move(listener)));
  {
    std::lock_guard<std::mutex> lock(server->mu_);
    GM_ASSIGN_OR_RETURN(EpochPlan plan, server->PlanFor(0));
    GM_RETURN_IF_ERROR(server->state_.StartEpoch(plan).WithContext("epoch 0"));
  }
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  server->tick_thread_ = std::thread([s = server.get()] { s->TickLoop(); });
  return server;
}

CoordinatorServer::CoordinatorServer(CoordinatorConfig config, Pipeline pipeline,
                                     CoordinatorState state, Listener listener)
    : config_(std::move(config)),
      pipeline_(std::move(pipeline)),
      listener_(std::move(listener)),
      state_(std::move(state)) {}

CoordinatorServer::~CoordinatorServer() { Stop(); }

std::string CoordinatorServer::address() const { return listener_.address(); }

bool CoordinatorServer::WaitFinished(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                      [&] { return finished_ || stopping_; }) &&
         finished_;
}

CoordinatorSummary CoordinatorServer::Summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  return CoordinatorSummary{state_.Stats(), epochs_done_, workers_registered_, refused_,
                            worker_stages_};
}

void CoordinatorServer::Stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && connections_.empty() && !accept_thread_.joinable()) return;
    stopping_ = true;
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);  // wakes blocked receives
    cv_.notify_all();
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  if (tick_thread_.joinable()) tick_thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(connections_);
  }
  for (auto& t : threads) t.join();
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
    // reported as an error by the state machine when the worker tells).
    if (config_.world_size > 1) {
      if (splits[id].count == 0) {
        return Status::InvalidArgument(
            "several trainer ranks need a source whose split sizes are known up front "
            "(files, jsonl, range); " + splits[id].name + " has an unknown size");
      }
      const uint64_t b = static_cast<uint64_t>(pipeline_.batch_size());
      count = pipeline_.drop_last() ? splits[id].count / b : (splits[id].count + b - 1) / b;
    }
    plan.splits.push_back(PlanSplit{id, count});
  }
  return plan;
}

nlohmann::json CoordinatorServer::PlanMessage(uint64_t epoch) {
  nlohmann::json splits = nlohmann::json::array();
  for (const auto& slot_split : EpochSplitOrder(pipeline_, epoch)) {
    splits.push_back({slot_split, CountOrMinusOne(state_.BatchCount(slot_split))});
  }
  nlohmann::json workers = nlohmann::json::array();
  for (const auto& [id, addr] : data_addr_) workers.push_back(addr);
  return {{"epoch", epoch}, {"splits", splits}, {"workers", workers}};
}

void CoordinatorServer::AdvanceEpochIfDone() {
  while (!finished_ && state_.EpochDone()) {
    ++epochs_done_;
    if (config_.epochs > 0 && epochs_done_ >= static_cast<uint64_t>(config_.epochs)) {
      finished_ = true;
      LogInfo("run: every epoch delivered");
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
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    Result<Socket> socket = listener_.Accept(kAcceptPollS);
    if (!socket.ok()) continue;  // timeout: look at stopping_ again
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    open_fds_.insert(socket->fd());
    connections_.emplace_back([this, s = std::make_shared<Socket>(std::move(*socket))]() mutable {
      const int fd = s->fd();
      Serve(std::move(*s));
      std::lock_guard<std::mutex> inner(mu_);
      open_fds_.erase(fd);
    });
  }
}

void CoordinatorServer::TickLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::duration<double>(kTickS), [&] { return stopping_; })) {
    for (WorkerId lost : state_.Tick(MonotonicSeconds())) {
      LogWarning("coordinator: worker " + std::to_string(lost) + " (" + data_addr_[lost] +
                 ") silent for " + std::to_string(config_.liveness_timeout_s) +
                 " s: declared lost, its splits go to others");
      data_addr_.erase(lost);
    }
  }
}

void CoordinatorServer::Serve(Socket socket) {
  std::string role;
  Status st = ServerHandshake(socket, config_.secret, "coordinator",
                              Deadline::After(kHandshakeTimeoutS), &role);
  if (st.ok() && role == "worker") {
    st = ServeWorker(socket);
  } else if (st.ok() && role == "client") {
    st = ServeClient(socket);
  } else if (st.ok()) {
    st = Status::InvalidArgument("unknown role \"" + role + "\"");
  }
  if (!st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      ++refused_;
      LogWarning("coordinator: connection from " + socket.peer() + " dropped: " + st.message());
    }
  }
}

Status CoordinatorServer::ServeWorker(Socket& socket) {
  GM_ASSIGN_OR_RETURN(Frame reg, RecvFrame(socket, kHandshakeLimits,
                                           Deadline::After(kHandshakeTimeoutS)));
  if (reg.type != MsgType::kRegister || !reg.meta.contains("data_addr") ||
      !reg.meta["data_addr"].is_string()) {
    return Status::Corrupt("expected REGISTER {data_addr} from a worker");
  }
  WorkerId id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = state_.RegisterWorker(MonotonicSeconds());
    data_addr_[id] = reg.meta["data_addr"].get<std::string>();
    ++workers_registered_;
    LogInfo("coordinator: worker " + std::to_string(id) + " registered, data at " + data_addr_[id]);
  }
  nlohmann::json registered = {{"worker_id", id},
                               {"pipeline", config_.pipeline_doc},
                               {"pipeline_origin", config_.pipeline_origin},
                               {"base_dir", config_.base_dir},
                               {"samples_per_split", config_.samples_per_split},
                               {"heartbeat_s", config_.heartbeat_s},
                               {"liveness_timeout_s", config_.liveness_timeout_s}};
  Status st = SendFrame(socket, MsgType::kRegistered, registered, Deadline::After(kSendTimeoutS));
  bool done = false;
  while (st.ok() && !done) {
    Result<Frame> frame =
        RecvFrame(socket, FrameLimits{}, Deadline::After(config_.liveness_timeout_s));
    st = frame.ok() ? HandleWorkerFrame(socket, id, *frame, &done) : frame.status();
  }
  std::lock_guard<std::mutex> lock(mu_);
  (void)state_.WorkerExited(id);  // its unfinished splits go back to the queue
  data_addr_.erase(id);
  if (!st.ok() && !stopping_) {
    LogWarning("coordinator: worker " + std::to_string(id) + " gone (" + st.message() +
               "); its unfinished splits go to others");
  }
  return Status::Ok();
}

Status CoordinatorServer::HandleWorkerFrame(Socket& socket, WorkerId id, const Frame& frame,
                                            bool* done) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) return Status::Cancelled("coordinator stopping");
  GM_RETURN_IF_ERROR(state_.Heartbeat(id, MonotonicSeconds()));
  const nlohmann::json& m = frame.meta;
  if (m.contains("stages") && m["stages"].is_array()) worker_stages_[id] = m["stages"];
  switch (frame.type) {
    case MsgType::kGetSplit: {
      GM_ASSIGN_OR_RETURN(Assignment a, state_.RequestSplit(id));
      std::string kind(AssignmentKindName(a.kind));
      std::replace(kind.begin(), kind.end(), ' ', '_');  // "epoch done" -> "epoch_done"
      nlohmann::json reply = {{"kind", kind}, {"retry_s", 0.05}};
      if (a.kind == Assignment::Kind::kAssign) {
        reply.update({{"epoch", a.epoch},
                      {"split", a.split},
                      {"rank", a.rank},
                      {"start_batch", a.start_batch},
                      {"end_batch", CountOrMinusOne(a.end_batch)}});
      }
      lock.unlock();
      return SendFrame(socket, MsgType::kAssign, reply, Deadline::After(kSendTimeoutS));
    }
    case MsgType::kSplitDone: {
      Status st = state_.SplitDone(id, m.value("epoch", uint64_t{0}), m.value("split", uint64_t{0}),
                                   m.value("batch_count", uint64_t{0}));
      if (!st.ok()) LogWarning("coordinator: worker " + std::to_string(id) + ": " + st.message());
      AdvanceEpochIfDone();
      return Status::Ok();
    }
    case MsgType::kHeartbeat: return Status::Ok();
    case MsgType::kBye: *done = true; return Status::Ok();
    default:
      return Status::Corrupt(std::string("unexpected ") + std::string(MsgTypeName(frame.type)) +
                             " from a worker");
  }
}

Status CoordinatorServer::ServeClient(Socket& socket) {
  GM_ASSIGN_OR_RETURN(Frame sub, RecvFrame(socket, kHandshakeLimits,
                                           Deadline::After(kHandshakeTimeoutS)));
  const int rank = sub.meta.value("rank", -1);
  const int world = sub.meta.value("world_size", -1);
  if (sub.type != MsgType::kSubscribe || rank < 0 || rank >= config_.world_size ||
      world != config_.world_size) {
    std::string why = "this run has " + std::to_string(config_.world_size) +
                      " trainer rank(s); a client subscribed as rank " + std::to_string(rank) +
                      " of " + std::to_string(world);
    (void)SendFrame(socket, MsgType::kError, {{"message", why}}, Deadline::After(1));
    return Status::InvalidArgument(why);
  }
  nlohmann::json subscribed = {{"run_id", config_.run_id},
                               {"batch_size", pipeline_.batch_size()},
                               {"world_size", config_.world_size},
                               {"epochs", config_.epochs}};
  GM_RETURN_IF_ERROR(
      SendFrame(socket, MsgType::kSubscribed, subscribed, Deadline::After(kSendTimeoutS)));
  bool done = false;
  while (!done) {
    // A trainer may compute for a long time between batches: no liveness limit.
    GM_ASSIGN_OR_RETURN(Frame frame, RecvFrame(socket, FrameLimits{}, Deadline::Never()));
    GM_RETURN_IF_ERROR(HandleClientFrame(socket, rank, frame, &done));
  }
  return Status::Ok();
}

Status CoordinatorServer::HandleClientFrame(Socket& socket, int rank, const Frame& frame,
                                            bool* done) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) return Status::Cancelled("coordinator stopping");
  const nlohmann::json& m = frame.meta;
  nlohmann::json reply;
  MsgType reply_type = MsgType::kPlan;
  switch (frame.type) {
    case MsgType::kGetPlan: {
      const uint64_t epoch = m.value("epoch", uint64_t{0});
      if (config_.epochs > 0 && epoch >= static_cast<uint64_t>(config_.epochs)) {
        reply = {{"epoch", epoch}, {"end", true}, {"epochs", config_.epochs}};
        break;
      }
      // A later epoch starts when every rank has finished this one.
      cv_.wait_for(lock, std::chrono::duration<double>(kPlanWaitS),
                   [&] { return stopping_ || finished_ || state_.epoch() >= epoch; });
      if (state_.epoch() < epoch) {
        reply = {{"epoch", epoch}, {"wait", true}, {"retry_s", 0.05}};
      } else if (state_.epoch() > epoch) {
        reply = {{"epoch", epoch}, {"done", true}};
      } else {
        reply = PlanMessage(epoch);
      }
      break;
    }
    case MsgType::kGetWorkers: {
      nlohmann::json workers = nlohmann::json::array();
      for (const auto& [id, addr] : data_addr_) workers.push_back(addr);
      reply = {{"workers", workers}};
      reply_type = MsgType::kWorkers;
      break;
    }
    case MsgType::kAck: {
      const uint64_t epoch = m.value("epoch", uint64_t{0});
      for (const auto& b : m.value("batches", nlohmann::json::array())) {
        if (!b.is_array() || b.size() != 2 || !b[0].is_number_unsigned() ||
            !b[1].is_number_unsigned()) {
          return Status::Corrupt("ACK batches must be [split, split_batch] pairs");
        }
        auto outcome = state_.Ack(rank, epoch, b[0].get<uint64_t>(), b[1].get<uint64_t>());
        if (!outcome.ok()) return outcome.status().WithContext("ACK from rank " + std::to_string(rank));
      }
      AdvanceEpochIfDone();
      return Status::Ok();
    }
    case MsgType::kResume:
      GM_RETURN_IF_ERROR(state_.Resume(rank, m.value("epoch", uint64_t{0}),
                                       m.value("position", uint64_t{0})));
      return Status::Ok();
    case MsgType::kBye: *done = true; return Status::Ok();
    default:
      return Status::Corrupt(std::string("unexpected ") + std::string(MsgTypeName(frame.type)) +
                             " from a client");
  }
  lock.unlock();
  return SendFrame(socket, reply_type, reply, Deadline::After(kSendTimeoutS));
}

}  // namespace gm
