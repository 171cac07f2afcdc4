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

#include "client/client_impl.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/step_log.h"
#include "core/thread_annotations.h"
#include "dataplane/auth.h"
#include "dataplane/messages.h"
#include "dataplane/messages_control.h"
#include "dataplane/protocol.h"
#include "dataplane/reorder.h"
#include "dataplane/shm.h"

namespace gm {
namespace {

constexpr size_t kAckBatch = 16;  // acks sent together
// Acknowledgements kept per epoch to say again to a coordinator reached again
// (Impl::acked): far more than a socket buffer holds unread, 4 MB at most.
constexpr size_t kMaxKeptAcks = 1 << 17;

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
  bool transport_failed = false;
  Result<Frame> frame = RequestOnce(type, meta, answer, &transport_failed);
  if (frame.ok() || !transport_failed || session == 0 || options.reconnect_s <= 0) return frame;
  GM_RETURN_IF_ERROR(Reconnect(frame.status()));
  return RequestOnce(type, meta, answer, &transport_failed);
}

Status Redial(const std::string& who, double reconnect_s, double connect_timeout_s,
              const Status& why,
              const std::function<Status(double timeout_s, bool* again)>& attempt) {
  const Deadline deadline = Deadline::After(reconnect_s);
  Status last = why;
  while (!deadline.expired()) {
    bool again = true;
    last = attempt(std::min(connect_timeout_s, std::max(0.1, deadline.remaining_s())), &again);
    if (last.ok() || !again) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::Unavailable(who + " did not come back within " +
                             std::to_string(std::lround(reconnect_s)) + " s: " + last.message());
}

Status Client::Impl::Reconnect(const Status& why) {
  LogInfo("client: rank " + std::to_string(options.rank) + ": " + why.message() +
          "; dialling it again for " + std::to_string(std::lround(options.reconnect_s)) + " s");
  GM_RETURN_IF_ERROR(Redial(
      coordinator_name, options.reconnect_s, options.connect_timeout_s, why,
      [this](double timeout_s, bool* again) -> Status {
        auto socket =
            Dial(options.coordinator, options.secret, kClientRole, timeout_s, "coordinator");
        if (!socket.ok()) return socket.status();
        {
          MutexLock lock(send_mu);
          coordinator = std::move(*socket);
          last_send = clock->Now();
        }
        SubscribeMsg resubscribe{options.rank, options.world_size};
        resubscribe.session = session;
        bool transport_failed = false;
        Result<Frame> answer = RequestOnce(MsgType::kSubscribe, resubscribe.Encode(),
                                           MsgType::kSubscribed, &transport_failed);
        *again = transport_failed;  // refused: said why
        if (!answer.ok()) return answer.status();
        *again = false;
        Result<SubscribedMsg> subscribed = SubscribedMsg::Decode(answer->meta);
        if (!subscribed.ok()) return subscribed.status().WithContext(coordinator_name);
        if (subscribed->session != session) {
          return Status::Unavailable(
              coordinator_name + " came back without this trainer's session " +
              std::to_string(session) + " (it gave session " + std::to_string(subscribed->session) +
              "): it is not the run's coordinator started again from its journal");
        }
        return Status::Ok();
      }));
  // What the old coordinator may not have read; a repeat is harmless.
  for (const auto& [epoch, msg] : acked) {
    for (size_t at = 0; at < msg.batches.size(); at += kMaxAckBatches) {
      const size_t end = std::min(msg.batches.size(), at + kMaxAckBatches);
      AckMsg part{epoch,
                  {msg.batches.begin() + static_cast<std::ptrdiff_t>(at),
                   msg.batches.begin() + static_cast<std::ptrdiff_t>(end)},
                  {msg.samples.begin() + static_cast<std::ptrdiff_t>(at),
                   msg.samples.begin() + static_cast<std::ptrdiff_t>(end)}};
      GM_RETURN_IF_ERROR(
          SendToCoordinator(MsgType::kAck, part.Encode(), Deadline::After(options.timeout_s)));
    }
  }
  LogInfo("client: rank " + std::to_string(options.rank) + ": back at " + coordinator_name +
          " in session " + std::to_string(session));
  return Status::Ok();
}

Result<Frame> Client::Impl::RequestOnce(MsgType type, const nlohmann::json& meta, MsgType answer,
                                        bool* transport_failed) {
  Deadline deadline = Deadline::After(options.timeout_s);
  Status sent = SendToCoordinator(type, meta, deadline);
  *transport_failed = !sent.ok();
  if (!sent.ok()) return Status::Unavailable(coordinator_name + ": " + sent.message());
  auto frame = RecvFrame(coordinator, kControlLimits, deadline);
  *transport_failed = !frame.ok();
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
  // Not dialled again, whatever the coordinator still lists until it has dropped
  // it (goldminer-run(1): a worker reported is not used again by this trainer).
  refused.insert(address);
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
  AckMsg ack{ack_epoch, std::move(acks), std::move(ack_samples)};
  acks.clear();
  ack_samples.clear();
  if (options.reconnect_s > 0) {  // kept for a coordinator reached again
    AckMsg& kept = acked[ack.epoch];
    kept.epoch = ack.epoch;
    kept.batches.insert(kept.batches.end(), ack.batches.begin(), ack.batches.end());
    kept.samples.insert(kept.samples.end(), ack.samples.begin(), ack.samples.end());
    while (acked.size() > 2) acked.erase(acked.begin());
    // Bounded: a coordinator that dies loses what it had not read, a socket
    // buffer's worth; the older half goes when an epoch's list passes the bound.
    if (kept.batches.size() > kMaxKeptAcks) {
      const auto half = static_cast<std::ptrdiff_t>(kMaxKeptAcks / 2);
      kept.batches.erase(kept.batches.begin(), kept.batches.begin() + half);
      if (kept.samples.size() > static_cast<size_t>(half))
        kept.samples.erase(kept.samples.begin(), kept.samples.begin() + half);
    }
  }
  Status sent = SendToCoordinator(MsgType::kAck, ack.Encode(), Deadline::After(options.timeout_s));
  if (sent.ok()) return Status::Ok();
  const Status why = Status::Unavailable(coordinator_name + ": " + sent.message());
  if (options.reconnect_s <= 0) return why;
  return Reconnect(why);  // which says these again
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
  ack_samples.push_back(batch.size());
  return std::move(batch);
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
    // The awaited batch is here but not known to come from its split's holder:
    // ask the coordinator now rather than at the next refresh.
    const bool ask_holders = reorder.AwaitsView();
    // Progress rule (dataplane/messages_control.h): every live connection out of credit -> +1
    // each, and the awaited split's holder out of credit -> +1 (the others may hold
    // credit they have nothing to spend on), within the look-ahead bound
    // (ClientOptions::max_buffered_bytes). Past the bound too while the awaited
    // split has no holder: the workers, stopped inside later splits, must finish
    // them to ask for work and take it (its holder was lost after the buffer
    // filled); each adds at most what is left of the split it makes.
    const bool orphaned = reorder.AwaitedOrphaned();
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
      const bool holds = conn->source == holder;
      if (!out_of_credit(*conn) || !(all_used || holds)) continue;
      const Bound bound = LookAheadBound(*conn, holds);
      if (bound == Bound::kUnder || (orphaned && all_used)) {
        ++conn->owed;
        continue;
      }
      bounded = true;
      // Its unverified part full: the next view may verify it, so no stall yet.
      // The whole bound full of what the holder sent itself while the awaited
      // batch is not among it: the holder's doing, so the stall clock runs.
      if (holds && bound == Bound::kUnverified) holder_bounded = true;
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
    if (ask_holders || clock->Now() >= next_refresh) {
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
  // The coordinator says how long it may take to come back; the trainer may say less.
  impl->options.reconnect_s = std::min(impl->options.reconnect_s, subscribed->reconnect_s);
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
  // The coordinator forgot what this rank acknowledged past the position: none of
  // it is said again.
  impl_->acked.clear();
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
