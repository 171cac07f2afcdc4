// The coordinator's worker sessions (launcher/coordinator_server.h): REGISTER,
// splits asked for and done (their sizes checked), heartbeats and stage reports.

#include <algorithm>

#include "core/clock.h"
#include "core/log.h"
#include "core/thread_annotations.h"
#include "dataplane/auth.h"
#include "dataplane/messages_control.h"
#include "launcher/coordinator_server.h"
#include "worker/engine.h"

namespace gm {

CoordinatorServer::SplitYield CoordinatorServer::YieldOf(uint64_t size, uint64_t skipped) const {
  const uint64_t left = size - std::min(size, skipped);
  const uint64_t b = static_cast<uint64_t>(pipeline_.batch_size());
  if (pipeline_.drop_last()) return {left / b, left / b * b};
  return {(left + b - 1) / b, left};
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
  const uint64_t batches = YieldOf(size, done.skipped).batches;
  if (done.batch_count != batches) {
    return Status::InvalidArgument(what + ", but the rest make " + std::to_string(batches) +
                                   " batches of " + std::to_string(pipeline_.batch_size()));
  }
  return Status::Ok();
}

void CoordinatorServer::CheckDelivered(uint64_t epoch, uint64_t split) {
  const auto& splits = pipeline_.splits();
  if (epoch != state().epoch() || split >= splits.size() || splits[split].count == 0 ||
      !failure_.empty())
    return;
  const std::optional<CoordinatorState::Delivery> got = state().Delivered(split);
  if (!got) return;
  // Under on_error "skip" the count is the maker's word: checked once it is told.
  // Until then (a maker that left before its SPLIT_DONE never tells) the run
  // says the split went unchecked; one told after the epoch ended is checked then
  // (CheckLateSplitDone).
  if (pipeline_.on_error() != OnError::kFail && !got->skip_told) {
    unchecked_[{epoch, split}] = *got;
    return;
  }
  unchecked_.erase({epoch, split});
  VerifyDelivery(epoch, split, *got, got->skipped);
}

void CoordinatorServer::CheckLateSplitDone(WorkerId id, const SplitDoneMsg& done) {
  auto it = unchecked_.find({done.epoch, done.split});
  if (done.epoch >= state().epoch() || it == unchecked_.end() || it->second.maker != id ||
      !failure_.empty())
    return;
  const CoordinatorState::Delivery got = it->second;
  unchecked_.erase(it);
  VerifyDelivery(done.epoch, done.split, got, done.skipped);
}

void CoordinatorServer::VerifyDelivery(uint64_t epoch, uint64_t split,
                                       const CoordinatorState::Delivery& got, uint64_t skipped) {
  const uint64_t size = pipeline_.splits()[split].count;
  const uint64_t b = static_cast<uint64_t>(pipeline_.batch_size());
  const uint64_t whole = YieldOf(size, skipped).samples;
  // Where equal shares between ranks cut the split after `batches` full
  // batches, those are due.
  const uint64_t expected = std::min(got.batches * b, whole);
  if (got.samples == expected && skipped <= size) return;
  failure_ = SplitName(epoch, split) + " (" + std::to_string(size) +
             " samples) reached the trainer with " + std::to_string(got.samples) + " samples and " +
             std::to_string(skipped) + " said skipped, where " + std::to_string(expected) +
             " were due: a worker cut it short or hid what it skipped, so the run stops";
  LogError("coordinator: " + failure_);
  cv_.notify_all();
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
    GM_ASSIGN_OR_RETURN(id, AdmitWorker(registration));
    data_addr_[id] = registration.data_addr;
    worker_fd_[id] = socket.fd();
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
    LogDebug("coordinator: worker " + std::to_string(id) + " registered, data at " +
             data_addr_[id]);
  }
  RegisteredMsg registered;
  registered.worker_id = id;
  registered.pipeline = config_.pipeline_doc;
  registered.pipeline_origin = config_.pipeline_origin;
  registered.base_dir = config_.base_dir;
  registered.samples_per_split = static_cast<int64_t>(config_.samples_per_split);
  registered.heartbeat_s = config_.heartbeat_s;
  registered.liveness_timeout_s = config_.liveness_timeout_s;
  registered.reconnect_s = config_.reconnect_s;
  registered.offload_key = offload_issuer_->public_key();
  Status st =
      SendFrame(socket, MsgType::kRegistered, registered.Encode(), Deadline::After(kSendTimeoutS));
  bool done = false;
  while (st.ok() && !done) {
    Result<Frame> frame =
        RecvFrame(socket, kControlLimits, Deadline::After(config_.liveness_timeout_s));
    st = frame.ok() ? HandleWorkerFrame(socket, id, *frame, &done) : frame.status();
  }
  MutexLock lock(mu_);
  // Its unfinished splits go back to the queue (a journal that cannot be written
  // is said: the state is then ahead of it).
  if (Status exited = coord_.WorkerExited(id); !exited.ok() && exited.code() == Code::kIoError) {
    LogError("coordinator: " + exited.message());
  }
  data_addr_.erase(id);
  producing_.erase(id);
  worker_cpu_last_.erase(id);
  virtual_load_.erase(id);
  told_to_leave_.erase(id);
  worker_fd_.erase(id);
  const bool faulted = dropped_.contains(id);  // said when the FAULT came
  if (!faulted && !st.ok() && !stopping_) {
    LogWarning("coordinator: worker " + std::to_string(id) + " gone (" + st.message() +
               "); its unfinished splits go to others");
  }
  return Status::Ok();
}

Status CoordinatorServer::TakeSplitDone(WorkerId id, const SplitDoneMsg& done) {
  if (Status size = CheckSplitSize(done); !size.ok()) {
    // A worker that lies about what it made is dropped (its splits go to
    // others). Where the plan left the count open, the trainer may have read
    // the split short already: the run cannot deliver every sample.
    if (done.epoch == state().epoch() && state().MakesSplit(id, done.split) &&
        state().PlannedCount(done.split) == kUnknownCount && failure_.empty()) {
      failure_ = "worker " + std::to_string(id) + " says " + size.message() +
                 ": the trainer may have read the split short, so the run stops";
      LogError("coordinator: " + failure_);
      cv_.notify_all();
    }
    return size;
  }
  Status st = coord_.SplitDone(id, done.epoch, done.split, done.batch_count, done.skipped);
  if (st.ok()) {
    producing_.insert(id);
    CheckDelivered(done.epoch, done.split);
    CheckLateSplitDone(id, done);
  }
  if (uint64_t held = 0; !st.ok() && worker_warnings_.Allow(&held)) {
    LogWarning("coordinator: worker " + std::to_string(id) + ": " + st.message() + " (" +
               std::to_string(held) + " such warnings held back)");
  }
  AdvanceEpochIfDone();
  return Status::Ok();
}

Result<WorkerId> CoordinatorServer::AdmitWorker(const RegisterMsg& registration) {
  const WorkerId old = registration.worker_id;
  // Dropped on a trainer's report: it does not come back (its connection was
  // closed on purpose, not lost); its launcher starts another in its place.
  if (old != 0 && dropped_.contains(old)) {
    return Status::Aborted("worker " + std::to_string(old) + " (" +
                           PeerText(registration.data_addr) +
                           ") was dropped on a trainer's report and is not taken back");
  }
  // Back with its old id: the state still counts it live (not declared lost), and
  // no connection of it is served. Its last SPLIT_DONEs, which the coordinator may
  // not have read before it died, are taken again where it still holds the split.
  if (old != 0 && !worker_fd_.contains(old) && coord_.Heartbeat(old, Now()).ok()) {
    for (const SplitDoneMsg& done : registration.made) {
      const auto making = state().Making(old);
      if (std::find(making.begin(), making.end(), std::pair{done.epoch, done.split}) ==
          making.end())
        continue;
      if (Status st = TakeSplitDone(old, done); !st.ok()) return st;
    }
    if (state().Making(old).empty()) {
      LogInfo("coordinator: worker " + std::to_string(old) + " (" + registration.data_addr +
              ") is back");
      return old;
    }
    // It holds nothing (it registers between splits), yet the state says it makes
    // a split: one handed to it as the coordinator died, which never reached it.
    // Its splits go to others, and it goes on as a new worker.
    LogInfo("coordinator: worker " + std::to_string(old) + " (" + registration.data_addr +
            ") is back without the split it was handed last; it registers anew");
    GM_RETURN_IF_ERROR(coord_.WorkerExited(old));
  }
  GM_ASSIGN_OR_RETURN(WorkerId id, coord_.RegisterWorker(Now()));
  ++workers_registered_;
  return id;
}

// The ASSIGN that answers a GET_SPLIT with `a`.
AssignMsg CoordinatorServer::AssignReply(const Assignment& a) const {
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
      reply.retry_s = kDrainRetryS;  // it leaves soon after its last acknowledgement
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
  if (auto it = rank_session_.find(a.rank); it != rank_session_.end()) reply.session = it->second;
  return reply;
}

// The ASSIGN that answers worker `id`'s GET_SPLIT `frame`.
Result<AssignMsg> CoordinatorServer::AnswerGetSplit(WorkerId id, const Frame& frame,
                                                    MutexLock& lock) {
  GM_ASSIGN_OR_RETURN(GetSplitMsg get, GetSplitMsg::Decode(frame.meta));
  if (get.draining && !state().Draining(id)) {  // said once, when it first asks so
    GM_RETURN_IF_ERROR(coord_.Drain(id));
    LogInfo("coordinator: worker " + std::to_string(id) +
            " drains: it takes no new split and leaves once what it made is acknowledged");
  }
  Assignment a{Assignment::Kind::kExit};
  if (!workers_end_) {
    PlanAheadIfWanted();
    GM_ASSIGN_OR_RETURN(a, coord_.RequestSplit(id));
  }
  // Without a pipeline no split ever comes: the answer is held until the run
  // ends (then "exit" at once, not at the worker's next ask) or for
  // kOffloadOnlyRetryS, and a "wait" after the hold asks again at once.
  const bool held = config_.offload_only && a.kind == Assignment::Kind::kWait;
  if (held) {
    const double until = Now() + std::min(kOffloadOnlyRetryS, config_.liveness_timeout_s / 2);
    WaitUntil(clock(), lock, cv_, until, [&]() REQUIRES(mu_) { return workers_end_ || stopping_; });
    if (stopping_) return Status::Cancelled("coordinator stopping");
    if (workers_end_) a = Assignment{Assignment::Kind::kExit};
  }
  AssignMsg reply = AssignReply(a);
  if (held && reply.kind == AssignMsg::Kind::kWait) reply.retry_s = 0;
  return reply;
}

Status CoordinatorServer::HandleWorkerFrame(Socket& socket, WorkerId id, const Frame& frame,
                                            bool* done) {
  MutexLock lock(mu_);
  if (stopping_) return Status::Cancelled("coordinator stopping");
  GM_RETURN_IF_ERROR(coord_.Heartbeat(id, Now()));
  GM_ASSIGN_OR_RETURN(std::optional<std::vector<StageStats>> stages,
                      DecodeStagesReport(frame.meta, std::string(MsgTypeName(frame.type)).c_str()));
  if (stages) worker_stages_[id] = std::move(*stages);
  switch (frame.type) {
    case MsgType::kGetSplit: {
      GM_ASSIGN_OR_RETURN(AssignMsg reply, AnswerGetSplit(id, frame, lock));
      lock.Unlock();
      return SendFrame(socket, MsgType::kAssign, reply.Encode(), Deadline::After(kSendTimeoutS));
    }
    case MsgType::kSplitDone: {
      GM_ASSIGN_OR_RETURN(SplitDoneMsg done_msg, SplitDoneMsg::Decode(frame.meta));
      return TakeSplitDone(id, done_msg);
    }
    case MsgType::kHeartbeat: {
      // After the run's end, a worker inside a split asks nothing until the split
      // is done, and the split waits for trainer credit that never comes: the
      // coordinator starts the next epoch before the trainer asks for it, so a
      // worker may be making a split of an epoch no trainer takes. It hears
      // "exit" here instead of being signalled, and leaves quietly.
      GM_ASSIGN_OR_RETURN(HeartbeatMsg beat, HeartbeatMsg::Decode(frame.meta));
      // A figure is a total since the worker started: what it added since its
      // last one counts (the first counts whole); a smaller one counts nothing.
      const auto last = worker_cpu_last_.try_emplace(id, 0.0).first;
      worker_cpu_s_ += std::max(0.0, beat.cpu_s - last->second);
      last->second = std::max(last->second, beat.cpu_s);
      ReportVirtualLoad(id, beat.virtual_workers);
      if (!workers_end_ || !beat.making_split || told_to_leave_.contains(id)) return Status::Ok();
      told_to_leave_.insert(id);
      lock.Unlock();
      AssignMsg leave;
      leave.kind = AssignMsg::Kind::kExit;
      return SendFrame(socket, MsgType::kAssign, leave.Encode(), Deadline::After(kSendTimeoutS));
    }
    default:
      return SessionFrame(frame, "a worker", done);
  }
}

}  // namespace gm
