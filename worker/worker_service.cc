#include "worker/worker_service.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "core/clock.h"
#include "core/host.h"
#include "core/log.h"
#include "core/os/paths.h"
#include "core/os/spawn.h"
#include "core/text_format.h"
#include "core/thread_annotations.h"
#include "dataplane/auth.h"
#include "dataplane/messages.h"
#include "dataplane/messages_control.h"
#include "dataplane/shm.h"
#include "worker/engine.h"

namespace gm {

bool HeartbeatDue(double now, double last_send, double last_beat, double period_s) {
  return now - last_send >= period_s || now - last_beat >= kReportEveryBeats * period_s;
}

WorkerSignals::Action WorkerSignals::On(int sig) {
  if (!drain_) return Action::kStop;
  if (sig == SIGUSR2) return Action::kDrain;
  if (sig != SIGTERM) return Action::kStop;
  const double now = clock_.Now();
  if (!first_term_) first_term_ = now;
  return now - *first_term_ < kSameSignalS ? Action::kDrain : Action::kStop;
}

namespace {

constexpr double kReconnectPauseS = 0.1;  // between tries to reach a lost coordinator

// Hands each batch of one assignment to its rank's client connection, one batch
// late: the split's last batch carries split_batches (dataplane/messages_control.h), and only
// the end of the split tells which batch was the last.
class RankSink : public BatchSink {
 public:
  // `session`: the rank's session when the split was handed out (SplitStream).
  RankSink(DataServer& data, int64_t rank, uint64_t session)
      : data_(data), rank_(rank), stream_{session, 0} {}
  // The split's last batch carries its batch count, so the client moves on to
  // the next split without asking the coordinator.
  Status Consume(const Batch& batch) override {
    std::optional<uint64_t> split_batches;
    if (batch.last_of_split) split_batches = batch.split_batch + 1;
    return data_.SendToRank(rank_, batch, split_batches, &stream_);
  }
  // On the same host the samples go straight into a segment the client maps;
  // else into memory of the batch's own that is sent as it is.
  std::optional<Batch::External> Reserve(size_t bytes) override {
    std::optional<Batch::External> segment = data_.ReserveSegment(rank_, bytes);
    return segment ? segment : HeapMemory(bytes);
  }

 private:
  DataServer& data_;
  const int64_t rank_;
  SplitStream stream_;
};

// Connects to the coordinator and runs the handshake as a worker, within
// `timeout_s`. Dialled again when the coordinator drops the connection during the
// handshake (its lobby is full during a flood): dataplane/auth.h.
Result<Socket> DialCoordinator(const WorkerServiceOptions& options, double timeout_s) {
  GM_ASSIGN_OR_RETURN(auto coordinator, ParseHostPort(options.coordinator, "--coordinator"));
  const Deadline deadline = Deadline::After(timeout_s);
  std::string role;
  Result<Socket> control = DialHandshake(
      [&] {
        return Socket::ConnectTcp(coordinator.host, coordinator.port, deadline.remaining_s());
      },
      options.secret, "worker", deadline, &role);
  if (!control.ok()) return control.status().WithContext("coordinator " + options.coordinator);
  if (role != "coordinator") {
    return Status::InvalidArgument("coordinator " + options.coordinator + " answered as \"" +
                                   PeerText(role) +
                                   "\", not as a coordinator: check --coordinator");
  }
  return control;
}

}  // namespace

WorkerService::WorkerService(const WorkerServiceOptions& options, std::unique_ptr<DataServer> data,
                             Socket control)
    : options_(options),
      coordinator_(options.coordinator),
      data_(std::move(data)),
      control_(std::move(control)) {}

WorkerService::~WorkerService() {
  {
    MutexLock lock(mu_);
    heartbeat_done_ = true;
    cv_.notify_all();
  }
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  data_->Shutdown();
}

Result<std::unique_ptr<WorkerService>> WorkerService::Start(const WorkerServiceOptions& options) {
  if (options.threads < 1) return Status::InvalidArgument("worker: --threads must be at least 1");
  if (options.secret.empty()) {
    return Status::InvalidArgument("worker: no run secret (set " + std::string(kSecretFileEnv) +
                                   " or " + std::string(kSecretEnv) + ")");
  }
  GM_RETURN_IF_ERROR(ParseHostPort(options.coordinator, "--coordinator").status());
  GM_ASSIGN_OR_RETURN(auto listen, ParseHostPort(options.listen, "--listen"));
  Result<std::unique_ptr<DataServer>> data =
      DataServer::Start(listen.host, listen.port, options.secret);
  if (!data.ok()) return Status::IoError("--listen: " + data.status().message());
  GM_ASSIGN_OR_RETURN(Socket control, DialCoordinator(options, options.connect_timeout_s));
  std::unique_ptr<WorkerService> service(
      new WorkerService(options, std::move(*data), std::move(control)));
  std::string host = options.advertise_host;
  if (host.empty()) {
    const bool wildcard = IsWildcardHost(listen.host) || listen.host.empty();
    host = wildcard ? ReachableHostName() : listen.host;
  }
  service->data_addr_ = JoinHostPort(host, service->data_->port());
  if (SameHostEnabled()) {  // trainers on this host get batches in shared memory
    Status same_host = service->data_->ListenSameHost(service->data_addr_);
    if (!same_host.ok()) {
      LogWarning("worker " + service->data_addr_ + ": no same-host path (" + same_host.message() +
                 "); clients on this host use TCP");
    }
  }
  if (options.max_virtual_workers > 0) {  // before REGISTER: no offload ticket names us yet
    VirtualWorkers::Options vw;
    vw.max_channels = options.max_virtual_workers;
    const char* python = std::getenv(std::string(kPythonEnv).c_str());
    vw.python = python != nullptr ? python : "";
    vw.package_dir = PythonPackageDir();
    vw.host_name = service->data_addr_;
    service->virtual_workers_ = std::make_unique<VirtualWorkers>(std::move(vw));
    service->data_->SetOffloadHandler(
        [vws = service->virtual_workers_.get()](Socket& socket, int64_t rank, uint64_t channel) {
          return vws->Serve(socket, rank, channel);
        });
    if (!options.warm_python.empty()) {
      if (Status warm = service->virtual_workers_->Warm(options.warm_python); !warm.ok()) {
        LogDebug("worker: no virtual-worker host started ahead: " + warm.message());
      }
    }
  }
  GM_RETURN_IF_ERROR(service->Register());
  return service;
}

Status WorkerService::Register(bool again) {
  RegisterMsg msg;
  if (again) {
    msg.worker_id = worker_id_;
    msg.made.assign(recent_done_.begin(), recent_done_.end());
  }
  msg.data_addr = data_addr_;
  // For the run's record: where this worker runs, and the name its launcher gave it.
  msg.host = HostName();
  msg.tag = options_.tag;
  msg.step = options_.step_name;
  // For people reading logs and traces.
  msg.pid = static_cast<int64_t>(::getpid());
  msg.threads = options_.threads;
  GM_RETURN_IF_ERROR(SendControl(MsgType::kRegister, msg.Encode()));
  GM_ASSIGN_OR_RETURN(
      Frame reg, RecvControl(MsgType::kRegistered, Deadline::After(options_.connect_timeout_s)));
  Result<RegisteredMsg> registered = RegisteredMsg::Decode(reg.meta);
  if (!registered.ok()) return registered.status().WithContext("coordinator " + coordinator_);
  worker_id_ = registered->worker_id;
  heartbeat_s_ = registered->heartbeat_s;
  liveness_timeout_s_ = registered->liveness_timeout_s;
  reconnect_s_ = registered->reconnect_s;
  if (virtual_workers_) virtual_workers_->SetIssuer(registered->offload_key);
  // Data the coordinator leaves unacknowledged this long fails the connection, so
  // a coordinator whose host vanished is noticed within the liveness timeout.
  const unsigned int user_timeout_ms = static_cast<unsigned int>(liveness_timeout_s_ * 1000);
  (void)::setsockopt(control_.fd(), IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms,
                     sizeof user_timeout_ms);
  if (again) return Status::Ok();  // the pipeline is the run's: built already
  PipelineOptions popts;
  popts.threads = options_.threads;
  popts.samples_per_split = static_cast<size_t>(registered->samples_per_split);
  Result<Pipeline> pipeline = Pipeline::FromJson(registered->pipeline, registered->pipeline_origin,
                                                 registered->base_dir, popts);
  if (!pipeline.ok()) {
    (void)SendControl(
        MsgType::kError,
        ErrorMsg{"worker " + data_addr_ + ": " + pipeline.status().message()}.Encode());
    return pipeline.status();
  }
  pipeline_.emplace(std::move(*pipeline));
  LogDebug("worker " + std::to_string(worker_id_) + ": registered with " + coordinator_ +
           "; data port " + data_addr_);
  return Status::Ok();
}

Status WorkerService::SendControl(MsgType type, const nlohmann::json& meta) {
  MutexLock lock(send_mu_);
  Status st = SendFrame(control_, type, meta, Deadline::After(liveness_timeout_s_));
  if (st.ok()) last_send_.store(clock().Now());
  return st;
}

Result<Frame> WorkerService::RecvControl(MsgType expected, Deadline deadline) {
  Result<Frame> frame = RecvFrame(control_, kControlLimits, deadline);
  if (!frame.ok()) {
    MarkLost(frame.status());
    return Gone(frame.status());
  }
  if (frame->type == MsgType::kError) {
    refused_.store(true);
    return Status::Unavailable("coordinator " + coordinator_ + " refused this worker: " +
                               PeerText(ErrorMsg::Decode(frame->meta).message));
  }
  if (frame->type != expected) {
    return Status::Corrupt("coordinator " + coordinator_ + " sent " +
                           std::string(MsgTypeName(frame->type)) + " where " +
                           std::string(MsgTypeName(expected)) + " was expected");
  }
  return frame;
}

void WorkerService::MarkLost(const Status& why) {
  MutexLock lock(mu_);
  if (!lost_.ok()) return;
  lost_ = why;
  lost_at_ = clock().Now();
  cv_.notify_all();
}

Status WorkerService::Reconnect(const Status& why) {
  const std::string who = "worker " + std::to_string(worker_id_);
  LogInfo(who + ": the coordinator " + coordinator_ + " is gone (" + why.message() +
          "); trying to reach it again for " + Fixed(reconnect_s_, 0) + " s");
  Status last = why;
  for (;;) {
    {
      MutexLock lock(mu_);
      if (stop_) return Status::Ok();
      if (given_up_ || clock().Now() - lost_at_ >= reconnect_s_) {
        given_up_ = true;
        return Gone(last);
      }
    }
    Result<Socket> dialled = DialCoordinator(options_, std::min(options_.connect_timeout_s, 2.0));
    Status st = dialled.status();
    if (dialled.ok()) {
      {
        MutexLock send(send_mu_);
        control_ = std::move(*dialled);
      }
      const uint64_t old = worker_id_;
      st = Register(true);
      if (st.ok()) {
        recent_done_.clear();
        {
          MutexLock lock(mu_);
          lost_ = Status::Ok();  // what fails from here on is a new loss
        }
        LogInfo(who + ": back at the coordinator " + coordinator_ +
                (worker_id_ == old ? std::string()
                                   : " as worker " + std::to_string(worker_id_) +
                                         " (the split it was handed last never reached it)"));
        return Status::Ok();
      }
      if (st.code() != Code::kUnavailable) return st;  // a broken answer
      // The coordinator is there and said no (it dropped this worker on purpose):
      // dialling again would get the same answer.
      if (refused_.load()) {
        MutexLock lock(mu_);
        given_up_ = true;
        return st;
      }
    }
    last = st;
    MutexLock lock(mu_);
    WaitUntil(clock(), lock, cv_, clock().Now() + kReconnectPauseS,
              [&]() REQUIRES(mu_) { return stop_; });
  }
}

Status WorkerService::Gone(const Status& why) const {
  return Status::Unavailable("the coordinator " + coordinator_ + " is gone (" + why.message() +
                             "); this worker exits and its split is made elsewhere");
}

Status WorkerService::Run() {
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
  Status st = Serve();
  if (st.code() == Code::kUnavailable) {
    MutexLock lock(mu_);
    if (draining_) {  // asked to leave, and nobody is left to hand anything to
      LogInfo("worker " + std::to_string(worker_id_) + ": drain ended: " + st.message());
      st = Status::Ok();
    }
  }
  {
    MutexLock lock(mu_);
    heartbeat_done_ = true;
    cv_.notify_all();
  }
  heartbeat_thread_.join();
  data_->Shutdown();
  control_.Close();
  return st;
}

void WorkerService::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  data_->Interrupt(Status::Cancelled("the worker is stopping"));
}

void WorkerService::Drain() {
  MutexLock lock(mu_);
  if (draining_ || stop_) return;
  draining_ = true;
  drain_deadline_ = clock().Now() + options_.drain_grace_s;
  // Detail (-v): whoever drained it says why (the run: the autoscaler's decision,
  // the pool's grant, the run's end; Slurm: the job's record).
  LogDebug("worker " + std::to_string(worker_id_) + ": draining: no new split; leaving once " +
           "what it made is acknowledged (at most " + Fixed(options_.drain_grace_s, 1) + " s)");
  cv_.notify_all();
}

Status WorkerService::Bye() {
  const uint64_t hosted = virtual_workers_ ? virtual_workers_->served() : 0;
  LogDebug("worker " + data_addr_ + ": sent " + std::to_string(data_->batches_sent()) +
           " batches, " + std::to_string(data_->shm_batches_sent()) + " in shared memory (" +
           std::to_string(data_->in_place_batches_sent()) + " written in place)" +
           (hosted > 0 ? "; hosted " + std::to_string(hosted) + " virtual DataLoader worker(s), " +
                             std::to_string(virtual_workers_->shared()) +
                             " of their results in shared memory"
                       : std::string()));
  data_->SayBye();  // no split is in hand: the trainers hear that this worker leaves
  Status st = SendControl(MsgType::kBye, nlohmann::json::object());
  if (!st.ok())
    LogWarning("worker: BYE to coordinator " + coordinator_ + " failed: " + st.message());
  return Status::Ok();
}

Status WorkerService::Serve() {
  for (;;) {
    GetSplitMsg get;
    Status lost;
    {
      MutexLock lock(mu_);
      lost = lost_;
      if (lost.ok() && stop_) break;
      get.draining = draining_;
    }
    if (!lost.ok()) {
      // A draining worker leaves: what it made and the trainer did not take is
      // made elsewhere, as after any lost worker.
      if (get.draining) return Gone(lost);
      GM_RETURN_IF_ERROR(Reconnect(lost));
      MutexLock lock(mu_);
      if (stop_ && !lost_.ok()) return Status::Ok();  // stopped meanwhile: nobody to say BYE to
      continue;
    }
    if (Status sent = SendControl(MsgType::kGetSplit, get.Encode()); !sent.ok()) {
      MarkLost(sent);
      continue;
    }
    Result<Frame> assign = RecvControl(MsgType::kAssign, Deadline::After(liveness_timeout_s_));
    if (!assign.ok()) {
      MutexLock lock(mu_);
      if (!lost_.ok()) continue;  // the connection failed: reach the coordinator again
      return assign.status();
    }
    Result<AssignMsg> a = AssignMsg::Decode(assign->meta);
    if (!a.ok()) return a.status().WithContext("coordinator " + coordinator_);
    if (a->kind == AssignMsg::Kind::kAssign) {
      GM_RETURN_IF_ERROR(RunAssignment(*a));
    } else if (a->kind == AssignMsg::Kind::kExit) {
      if (get.draining) {
        LogDebug("worker " + std::to_string(worker_id_) +
                 ": drained: every batch it made was acknowledged");
      }
      break;
    } else {
      // Nothing is held between requests, so "drain" needs no more than "wait".
      WaitRetry(a->retry_s, get.draining);
    }
  }
  return Bye();
}

// A split that fails for want of a resource (Code::kResourceExhausted) is made
// again this many times, this many seconds apart, before the worker gives up.
constexpr int kResourceRetries = 5;
constexpr double kResourceRetryS = 1;

Status WorkerService::RunAssignment(const AssignMsg& assign) {
  SplitTask task;
  task.epoch = assign.epoch;
  task.split = assign.split;
  const int64_t rank = assign.rank;
  const int64_t start = static_cast<int64_t>(assign.start_batch);
  const int64_t end = assign.end_batch;
  task.start_batch = assign.start_batch;
  task.end_batch = end < 0 ? UINT64_MAX : static_cast<uint64_t>(end);
  const std::string what =
      "epoch " + std::to_string(task.epoch) + " split " + std::to_string(task.split);
  LogDebug("worker " + std::to_string(worker_id_) + ": " + what + " for rank " +
           std::to_string(rank) + ", batches " + std::to_string(start) + ".." +
           (end < 0 ? std::string("end") : std::to_string(end - 1)));
  RankSink sink(*data_, rank, assign.session);
  EngineOptions engine;
  engine.threads = options_.threads;
  SetMaking(true);
  Result<RunStats> stats = RunSplit(*pipeline_, engine, task, sink);
  // Short of descriptors, memory or processes: wait and make the split again from
  // its first batch (what was sent already reaches the trainer as copies, which
  // it drops), a few times, before giving up on it.
  for (int attempt = 1; !stats.ok() && stats.status().code() == Code::kResourceExhausted &&
                        attempt <= kResourceRetries;
       ++attempt) {
    LogWarning("worker " + std::to_string(worker_id_) + ": " + what + ": " +
               stats.status().message() + "; making it again in " +
               std::to_string(static_cast<int>(kResourceRetryS)) + " s (attempt " +
               std::to_string(attempt) + " of " + std::to_string(kResourceRetries) + ")");
    WaitRetry(kResourceRetryS, true);
    {
      MutexLock lock(mu_);
      if (stop_ || given_up_) break;
    }
    stats = RunSplit(*pipeline_, engine, task, sink);
  }
  SetMaking(false);
  if (stats.ok()) AddStageTotals(stats->stages);
  if (!stats.ok()) {
    MutexLock lock(mu_);
    if (given_up_) return Gone(lost_);
    if (stop_) return Status::Ok();                 // Serve() says BYE; the split is made elsewhere
    if (stats.status().code() == Code::kAborted) {  // the coordinator has it made again
      LogInfo("worker " + std::to_string(worker_id_) + ": " + what + ": " +
              stats.status().message());
      return Status::Ok();
    }
    return stats.status().WithContext(what);
  }
  splits_done_.fetch_add(1);
  const SplitDoneMsg done{task.epoch, task.split, stats->split_batches, stats->skipped,
                          StageTotals()};
  // Kept to say again at a coordinator started again (the old one may have died
  // before reading it); a send that fails is said there too.
  recent_done_.push_back(
      SplitDoneMsg{done.epoch, done.split, done.batch_count, done.skipped, std::nullopt});
  if (recent_done_.size() > kMaxRegisterMade) recent_done_.pop_front();
  {
    MutexLock lock(mu_);
    if (!lost_.ok()) return Status::Ok();
  }
  if (Status st = SendControl(MsgType::kSplitDone, done.Encode()); !st.ok()) MarkLost(st);
  return Status::Ok();
}

void WorkerService::WaitRetry(double retry_s, bool said_draining) {
  retry_s = std::min(std::max(retry_s, 0.0), liveness_timeout_s_);
  MutexLock lock(mu_);
  // A drain the coordinator has not heard of is said at once (GET_SPLIT
  // draining): a worker with nothing in hand then leaves without sleeping out the
  // retry.
  WaitUntil(clock(), lock, cv_, clock().Now() + retry_s,
            [&]() REQUIRES(mu_) { return stop_ || !lost_.ok() || (draining_ && !said_draining); });
}

void WorkerService::HeartbeatLoop() {
  // Checking four times per heartbeat_s keeps the gap between frames under
  // 1.25 * heartbeat_s and notices a closed connection within heartbeat_s / 4.
  const double tick = heartbeat_s_ / 4;
  MutexLock lock(mu_);
  while (!heartbeat_done_) {
    if (WaitUntil(clock(), lock, cv_, clock().Now() + tick,
                  [&]() REQUIRES(mu_) { return heartbeat_done_; }))
      return;
    if (draining_ && !stop_ && clock().Now() >= drain_deadline_) {
      lock.Unlock();
      LogWarning("worker " + std::to_string(worker_id_) + ": the drain's grace (" +
                 Fixed(options_.drain_grace_s, 1) +
                 " s) ended before all it made was acknowledged: stopping; the rest is made "
                 "elsewhere from its last acknowledged batch");
      Stop();
      lock.Lock();
      continue;
    }
    if (!lost_.ok()) {
      // Run's thread reaches the coordinator again; past reconnect_s the split in
      // hand is abandoned (its trainer may be gone too) and the worker exits.
      if (!given_up_ && clock().Now() - lost_at_ >= reconnect_s_) {
        given_up_ = true;
        const Status why = lost_;
        cv_.notify_all();
        lock.Unlock();
        data_->Interrupt(Gone(why));
        lock.Lock();
      }
      continue;
    }
    lock.Unlock();
    Status st = CheckControl();
    if (!st.ok()) MarkLost(st);
    lock.Lock();
  }
}

Status WorkerService::CheckControl() {
  // Which split (if any) is being made before the look at the connection: the
  // main thread reads the connection only between splits, after asking.
  const auto in_split = [this] {
    MutexLock lock(mu_);
    return making_split_ ? std::optional<uint64_t>(splits_begun_) : std::nullopt;
  };
  const std::optional<uint64_t> before = in_split();
  char byte = 0;
  ssize_t n = 0;
  int error = 0;
  {
    MutexLock send(send_mu_);  // Reconnect replaces control_ holding it
    n = ::recv(control_.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    error = errno;
  }
  if (n == 0) return Status::Unavailable("it closed the connection");
  if (n < 0 && error != EAGAIN && error != EWOULDBLOCK && error != EINTR) {
    return Status::Unavailable(std::strerror(error));
  }
  if (n > 0 && before && in_split() == before) {
    // A frame the worker did not ask for, in the same split: the coordinator's
    // "exit" at the run's end (dataplane/messages_control.h, HEARTBEAT). The split's
    // trainer is gone; the worker stops it and says BYE, as after a signal.
    bool first;
    {
      MutexLock lock(mu_);
      first = !stop_;
    }
    if (first) {
      LogDebug("worker " + std::to_string(worker_id_) +
               ": the run is over: leaving its split unfinished");
      Stop();
    }
    return Status::Ok();
  }
  const double now = clock().Now();
  if (!HeartbeatDue(now, last_send_.load(), last_beat_, heartbeat_s_)) return Status::Ok();
  last_beat_ = now;
  HeartbeatMsg beat;
  beat.batches_sent = data_->batches_sent();
  beat.splits_done = splits_done_.load();
  beat.making_split = before.has_value();
  beat.virtual_workers = virtual_workers_ ? virtual_workers_->open() : 0;
  // With its children: the virtual DataLoader workers' Python hosts are its.
  Result<double> tree = CpuSecondsOfTree(::getpid());
  beat.cpu_s = std::min(tree.ok() ? *tree : ProcessCpuSeconds(), kMaxStageSeconds);
  nlohmann::json meta = beat.Encode();
  meta["stages"] = EncodeStagesReport(StageTotals());
  return SendControl(MsgType::kHeartbeat, meta);
}

void WorkerService::SetMaking(bool making) {
  MutexLock lock(mu_);
  making_split_ = making;
  if (making) ++splits_begun_;
}

void WorkerService::AddStageTotals(const std::vector<StageStats>& stages) {
  MutexLock lock(mu_);
  MergeStageStats(stage_totals_, stages);
}

std::vector<StageStats> WorkerService::StageTotals() {
  MutexLock lock(mu_);
  return stage_totals_;
}

}  // namespace gm
