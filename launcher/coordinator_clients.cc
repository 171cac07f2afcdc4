// The coordinator's client sessions (launcher/coordinator_server.h): SUBSCRIBE,
// plans and resumes, the epoch a rank may skip to, WORKERS, ACKs and FAULTs.
#include <sys/socket.h>

#include <algorithm>

#include "core/clock.h"
#include "core/json.h"
#include "core/log.h"
#include "core/thread_annotations.h"
#include "dataplane/auth.h"
#include "dataplane/messages.h"
#include "dataplane/messages_control.h"
#include "dataplane/messages_offload.h"
#include "launcher/coordinator_server.h"

namespace gm {
namespace {

// How long a second client for a rank waits for the first one's session to end
// before it is refused.
constexpr double kSessionHandoverS = 5;
constexpr double kPlanWaitS = 5;  // a GET_PLAN for a future epoch waits this long per answer
// Seconds a rank resuming a later epoch waits for every other rank to resume it too.
constexpr double kSkipAgreementS = 60;

}  // namespace

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
    if (other != rank && read == state().epoch() && skip_refused_.empty())
      skip_refused_ = "rank " + std::to_string(other) + " reads epoch " + std::to_string(read);
  }
  skip_ranks_.insert(rank);
  cv_.notify_all();
  const auto world = static_cast<size_t>(config_.world_size);
  lock.WaitFor(cv_, kSkipAgreementS, [&]() REQUIRES(mu_) {
    return stopping_ || !skip_refused_.empty() || skip_ranks_.size() >= world ||
           state().epoch() >= epoch || state().EpochTouched();
  });
  if (state().epoch() >= epoch) return Status::Ok();  // another rank moved the run
  std::string why = skip_refused_;
  if (why.empty() && state().EpochTouched())
    why = "epoch " + std::to_string(state().epoch()) + " is being read";
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
  if (epoch > state().epoch()) {
    // A new run continuing an earlier one's checkpoint: the earlier epochs were
    // delivered by that run. Only before this run delivered anything of its epoch.
    if (state().EpochTouched()) {
      return Status::InvalidArgument(
          "rank " + std::to_string(rank) + " resumes epoch " + std::to_string(epoch) +
          ", but this run is delivering epoch " + std::to_string(state().epoch()) +
          " to other ranks: every rank must resume from the same checkpoint");
    }
    GM_RETURN_IF_ERROR(AgreeToSkip(rank, epoch, lock));
    if (state().epoch() < epoch) {
      if (state().EpochTouched()) {
        return Status::InvalidArgument("rank " + std::to_string(rank) + " resumes epoch " +
                                       std::to_string(epoch) + ", but epoch " +
                                       std::to_string(state().epoch()) +
                                       " was read meanwhile: every rank must resume from the "
                                       "same checkpoint");
      }
      GM_ASSIGN_OR_RETURN(EpochPlan plan, PlanFor(epoch));
      GM_RETURN_IF_ERROR(coord_.SkipToEpoch(plan));
      epochs_done_ = epoch;
      LogInfo("run: every rank resumes at epoch " + std::to_string(epoch) +
              " (epochs before it were delivered by an earlier run)");
      cv_.notify_all();
    }
  }
  Status st = resume.at ? coord_.ResumeAt(rank, epoch, resume.position, *resume.at)
                        : coord_.Resume(rank, epoch, resume.position);
  if (!st.ok() && !resume.at && st.message().find("is not known") != std::string::npos) {
    return Status::InvalidArgument(
        st.message() +
        ": the state has no split index (saved by an older goldminer); "
        "a state from Loader.state_dict() of this version can be resumed in a new run");
  }
  return st;
}

Status CoordinatorServer::ServeClient(Socket& socket) {
  GM_ASSIGN_OR_RETURN(Frame sub,
                      RecvFrame(socket, kHandshakeLimits, Deadline::After(kHandshakeTimeoutS)));
  if (sub.type == MsgType::kOffload) return ServeOffloadClient(socket, sub);
  if (sub.type != MsgType::kSubscribe) {
    return Status::Corrupt("expected SUBSCRIBE or OFFLOAD from a client, got " +
                           std::string(MsgTypeName(sub.type)));
  }
  GM_ASSIGN_OR_RETURN(SubscribeMsg subscription, SubscribeMsg::Decode(sub.meta, true));
  if (config_.offload_only) {
    const std::string why =
        "this run has no pipeline (goldminer run without --pipeline serves only the "
        "trainer's torch DataLoaders): goldminer.Loader reads a pipeline's batches; give "
        "--pipeline FILE, or read the data through a torch DataLoader";
    SendError(socket, why, Deadline::After(1));
    return Status::InvalidArgument(why);
  }
  const int rank = static_cast<int>(subscription.rank);
  const int world = static_cast<int>(subscription.world_size);
  if (rank >= config_.world_size || world != config_.world_size) {
    std::string why = "this run has " + std::to_string(config_.world_size) +
                      " trainer rank(s); a client subscribed as rank " + std::to_string(rank) +
                      " of " + std::to_string(world) +
                      " (goldminer run --world-size N: the ranks the trainer command starts)";
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
    const auto newest = rank_session_.find(rank);
    if (subscription.session != 0 && newest != rank_session_.end() &&
        newest->second == subscription.session) {
      // The rank's client, back at a coordinator that restarted (or after its
      // connection broke): it goes on in its session, its tickets still good.
      session = subscription.session;
      LogInfo("coordinator: rank " + std::to_string(rank) + " is back in session " +
              std::to_string(session));
    } else {
      session = ++sessions_;
      rank_session_[rank] = session;
      Note({{"rank", rank}, {"session", session}});
    }
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
  subscribed.reconnect_s = config_.reconnect_s;
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

// One line of the run's record per note, the first kMaxOffloadNotes (a trainer
// that makes DataLoaders in a loop says the same thing again: counted only).
void CoordinatorServer::NoteOffload(int64_t rank, const OffloadNoteMsg& note) {
  const std::string who = "rank " + std::to_string(rank) + ": a DataLoader of " + note.dataset;
  const std::string line =
      note.served ? who + " runs its " + std::to_string(note.workers) +
                        " worker(s) as virtual workers on the data workers, " + note.mode +
                        " mode (" + std::to_string((note.blob_bytes + 1023) / 1024) +
                        " KiB of dataset, collate_fn and worker_init_fn shipped)"
      : note.in_process ? who + " runs in the trainer's process: " + PeerText(note.why)
                        : who + " runs on stock local workers: " + PeerText(note.why);
  const std::string kind = note.served       ? (note.mode == "native" ? "native" : "served")
                           : note.in_process ? "in_process"
                                             : "stock";
  MutexLock lock(mu_);
  // Journaled while kept (at most kMaxOffloadNotes, so a peer cannot grow the
  // journal): a coordinator started again says the same of the run's DataLoaders.
  if (offload_notes_.size() < kMaxOffloadNotes) Note({{"offload", line}, {"kind", kind}});
  CountOffload(kind, line);
}

void CoordinatorServer::CountOffload(const std::string& kind, const std::string& line) {
  ++(kind == "served" || kind == "native" ? dataloaders_served_
     : kind == "in_process"               ? dataloaders_in_process_
                                          : dataloaders_stock_);
  if (kind == "native") ++dataloaders_native_;
  if (offload_notes_.size() < kMaxOffloadNotes) {
    offload_notes_.push_back(line);
  } else {
    ++offload_notes_dropped_;
  }
}

// A trainer's DataLoader offload (connection 4 of dataplane/messages_offload.h): a
// channel number and its ticket, the workers, then only GET_WORKERS and
// heartbeats. It takes no rank's session: a goldminer.Loader of the same rank
// goes on beside it. Channels are not bounded here: each holds one connection,
// which the connection server bounds.
Status CoordinatorServer::ServeOffloadClient(Socket& socket, const Frame& first) {
  GM_ASSIGN_OR_RETURN(OffloadMsg offload, OffloadMsg::Decode(first.meta));
  if (offload.rank >= config_.world_size) {
    return Status::InvalidArgument("this run has " + std::to_string(config_.world_size) +
                                   " trainer rank(s); a client offloads as rank " +
                                   std::to_string(offload.rank) +
                                   " (goldminer run --world-size N: the ranks the trainer "
                                   "command starts)");
  }
  OffloadingMsg answer;
  answer.run_id = config_.run_id;
  {
    MutexLock lock(mu_);
    if (offload.channel != 0 && offload.channel <= offload_channels_) {
      // Back at a coordinator started again (or after its connection broke): the
      // same channel, whose virtual workers go on; its proof is the same.
      answer.channel = offload.channel;
      LogInfo("coordinator: rank " + std::to_string(offload.rank) + " offload channel " +
              std::to_string(answer.channel) + " is back");
    } else {
      answer.channel = ++offload_channels_;
      Note({{"channel", answer.channel}});
    }
    answer.workers = LiveAddresses();
  }
  answer.reconnect_s = config_.reconnect_s;
  answer.ticket =
      OffloadTicketKey(RoleKey(config_.secret, kWorkerRole), offload.rank, answer.channel);
  GM_ASSIGN_OR_RETURN(answer.proof, offload_issuer_->Proof(offload.rank, answer.channel));
  GM_RETURN_IF_ERROR(
      SendFrame(socket, MsgType::kOffloading, answer.Encode(), Deadline::After(kSendTimeoutS)));
  LogDebug("coordinator: rank " + std::to_string(offload.rank) + " offload channel " +
           std::to_string(answer.channel) + " from " + socket.peer());
  for (bool done = false; !done;) {
    GM_ASSIGN_OR_RETURN(Frame frame,
                        RecvFrame(socket, kControlLimits, Deadline::After(config_.client_idle_s)));
    if (frame.type == MsgType::kOffloadNote) {
      GM_ASSIGN_OR_RETURN(OffloadNoteMsg note, OffloadNoteMsg::Decode(frame.meta));
      NoteOffload(offload.rank, note);
      continue;
    }
    if (frame.type != MsgType::kGetWorkers) {
      GM_RETURN_IF_ERROR(SessionFrame(frame, "an offload client", &done));
      continue;
    }
    // {place: true}: the one data worker to host the client's next virtual worker.
    GM_ASSIGN_OR_RETURN(const bool place,
                        JsonNode(frame.meta, "GET_WORKERS").BoolOr("place", false));
    WorkersMsg workers;
    {
      MutexLock lock(mu_);
      if (!place) {
        workers.workers = LiveAddresses();
      } else if (std::string where = PlaceVirtualWorker(); !where.empty()) {
        workers.workers = {where};
      }
    }
    GM_RETURN_IF_ERROR(
        SendFrame(socket, MsgType::kWorkers, workers.Encode(), Deadline::After(kSendTimeoutS)));
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
               [&]() REQUIRES(mu_) { return stopping_ || finished_ || state().epoch() >= epoch; });
  if (state().epoch() < epoch) {
    answer.kind = PlanMsg::Kind::kWait;
    return answer.Encode();
  }
  if (state().epoch() > epoch) {
    answer.kind = PlanMsg::Kind::kDone;
    return answer.Encode();
  }
  plan_read_[rank] = epoch;
  const auto place = TakeOverRank(rank, session);
  if (epoch_session_[rank] != std::pair{epoch, session}) {
    epoch_session_[rank] = {epoch, session};
    Note({{"rank", rank}, {"session", session}, {"read", epoch}, {"plan", true}});
  }
  return PlanMessage(epoch, place);
}

std::optional<std::pair<uint64_t, SequenceKey>> CoordinatorServer::TakeOverRank(int rank,
                                                                                uint64_t session) {
  auto last = epoch_session_.find(rank);
  if (last == epoch_session_.end() || last->second.first != state().epoch() ||
      last->second.second == session) {
    return std::nullopt;
  }
  const auto [position, at] = state().RankCursor(rank);
  Status st = coord_.ResumeAt(rank, state().epoch(), position, at);
  const std::string who =
      "coordinator: rank " + std::to_string(rank) + " session " + std::to_string(session);
  if (!st.ok()) {
    LogWarning(who + " could not continue where session " + std::to_string(last->second.second) +
               " left epoch " + std::to_string(state().epoch()) + ": " + st.message());
    return std::nullopt;
  }
  LogInfo(who + " continues epoch " + std::to_string(state().epoch()) + " at batch " +
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
  workers.epoch = state().epoch();
  workers.holders_known = true;
  for (const auto& [split, holder] : state().Holders(rank)) {
    if (auto it = index.find(holder); it != index.end())
      workers.holders.emplace_back(split, it->second);
  }
  for (const auto& [split, worker] : state().Revoked(rank)) {
    if (auto it = index.find(worker);
        it != index.end() && workers.revoked.size() < WorkersMsg::kMaxRevoked)
      workers.revoked.emplace_back(split, it->second);
  }
  return workers.Encode();
}

void CoordinatorServer::DropFaulty(int rank, const FaultMsg& fault) {
  // The trainer holds the client key: it is trusted with its own run's data, so
  // its word drops a worker (the launcher replaces it). A worker not live (gone
  // already, or an address no worker has) is left alone.
  auto it = std::find_if(data_addr_.begin(), data_addr_.end(),
                         [&](const auto& entry) { return entry.second == fault.worker; });
  if (it == data_addr_.end() || dropped_.contains(it->first)) return;  // dropped, not yet gone
  const WorkerId id = it->first;
  dropped_.insert(id);
  if (dropped_.size() > kMaxDropped) dropped_.erase(dropped_.begin());
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
      for (size_t i = 0; i < ack.batches.size(); ++i) {
        const auto [split, split_batch] = ack.batches[i];
        auto outcome =
            coord_.Ack(rank, ack.epoch, split, split_batch,
                       ack.samples.empty() ? std::nullopt : std::optional(ack.samples[i]));
        if (!outcome.ok())
          return outcome.status().WithContext("ACK from rank " + std::to_string(rank));
        if (*outcome == AckOutcome::kAcked) CheckDelivered(ack.epoch, split);
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
      Note({{"rank", rank}, {"session", session}, {"read", resume.epoch}});
      reply = PlanMessage(resume.epoch);
      break;
    }
    case MsgType::kFault: {
      GM_ASSIGN_OR_RETURN(FaultMsg fault, FaultMsg::Decode(frame.meta));
      DropFaulty(rank, fault);
      return Status::Ok();
    }
    default:
      return SessionFrame(frame, "a client", done);
  }
  lock.Unlock();
  return SendFrame(socket, reply_type, reply, Deadline::After(kSendTimeoutS));
}

}  // namespace gm
