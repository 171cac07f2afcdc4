#include "launcher/coordinator_server.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "core/clock.h"
#include "core/digest.h"
#include "core/host.h"
#include "core/json.h"
#include "core/log.h"
#include "core/os/file_util.h"
#include "core/text_format.h"
#include "core/thread_annotations.h"
#include "dataplane/auth.h"
#include "dataplane/messages.h"
#include "dataplane/messages_control.h"
#include "worker/engine.h"

namespace gm {
namespace {

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
  std::unique_ptr<JournalFile> journal_file;
  JournalSink sink;  // none: nothing journaled
  if (!config.journal_path.empty()) {
    GM_ASSIGN_OR_RETURN(JournalFile file, JournalFile::Open(config.journal_path));
    journal_file = std::make_unique<JournalFile>(std::move(file));
    sink = [f = journal_file.get()](std::string_view line) { return f->Append(line); };
  }
  // A journal with lines in it: this coordinator goes on where its writer stopped.
  std::string journal;
  if (!config.journal_path.empty() && std::filesystem::exists(config.journal_path)) {
    GM_ASSIGN_OR_RETURN(journal, ReadFile(config.journal_path));
  }
  std::vector<nlohmann::json> notes;
  GM_ASSIGN_OR_RETURN(
      JournaledCoordinator coord,
      journal.empty()
          ? JournaledCoordinator::Create(co, std::move(sink))
          : JournaledCoordinator::Replay(co, journal, config.journal_path,
                                         config.clock ? config.clock->Now() : SystemClock().Now(),
                                         std::move(sink), [&notes](const nlohmann::json& note) {
                                           notes.push_back(note);
                                           return Status::Ok();
                                         }));
  GM_ASSIGN_OR_RETURN(Listener listener, Listener::ListenTcp(config.host, config.port));
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer(
      config, std::move(pipeline), std::move(journal_file), std::move(coord), listener.port()));
  // From the secret: a coordinator started again issues the same proofs.
  GM_ASSIGN_OR_RETURN(OffloadIssuer issuer, OffloadIssuer::FromSecret(config.secret));
  server->offload_issuer_ = std::move(issuer);
  if (!journal.empty()) {
    MutexLock lock(server->mu_);
    for (const nlohmann::json& note : notes) {
      GM_RETURN_IF_ERROR(server->RestoreNote(note).WithContext(
          config.journal_path + ": a note that does not fit this run"));
    }
    const CoordinatorStats stats = server->state().Stats();
    server->workers_registered_ = stats.workers.size();
    server->epochs_done_ = stats.epoch;
    server->workers_end_ = server->state().ended();  // the run was ending: "exit" to all
    server->AdvanceEpochIfDone();
    const auto live =
        std::count_if(stats.workers.begin(), stats.workers.end(),
                      [](const WorkerStats& w) { return w.status != WorkerStatus::kGone; });
    LogInfo("coordinator: started again from its journal " + config.journal_path + " (" +
            std::to_string(server->coord_.lines()) + " lines): epoch " +
            std::to_string(stats.epoch) + ", " + std::to_string(live) +
            " worker(s) to come back within " + Fixed(config.liveness_timeout_s, 0) + " s");
  } else if (!config.offload_only) {  // a run without a pipeline plans no epoch
    MutexLock lock(server->mu_);
    GM_ASSIGN_OR_RETURN(EpochPlan plan, server->PlanFor(0));
    GM_RETURN_IF_ERROR(server->coord_.StartEpoch(plan).WithContext("epoch 0"));
  }
  ConnectionServer::Options options;
  options.name = "coordinator";
  options.hello_role = "coordinator";
  GM_ASSIGN_OR_RETURN(
      server->connections_,
      ConnectionServer::Start(
          std::move(options),
          [s = server.get()](const ConnectionServer::Connection& c) { s->Serve(c); }));
  server->tick_thread_ = std::thread([s = server.get()] { s->TickLoop(); });
  GM_RETURN_IF_ERROR(server->connections_->Listen(std::move(listener)));
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
                                     std::unique_ptr<JournalFile> journal_file,
                                     JournaledCoordinator coord, int port)
    : config_(std::move(config)),
      pipeline_(std::move(pipeline)),
      order_(OrderDigest(config_)),
      port_(port),
      journal_file_(std::move(journal_file)),
      coord_(std::move(coord)) {}

CoordinatorServer::~CoordinatorServer() { Stop(); }

std::string CoordinatorServer::address() const {
  std::string host = config_.advertise_host;
  if (host.empty()) host = IsWildcardHost(config_.host) ? ReachableHostName() : config_.host;
  return JoinHostPort(host, port_);
}

bool CoordinatorServer::WaitFinished(double timeout_s) {
  MutexLock lock(mu_);
  return lock.WaitFor(cv_, timeout_s, [&]() REQUIRES(mu_) { return finished_ || stopping_; }) &&
         finished_;
}

CoordinatorSummary CoordinatorServer::Summary() const {
  MutexLock lock(mu_);
  CoordinatorSummary s;
  s.state = state().Stats();
  s.epochs_done = epochs_done_;
  s.workers_registered = workers_registered_;
  s.workers_faulted = workers_faulted_;
  s.worker_cpu_s = worker_cpu_s_;
  s.connections_refused = refused_;
  s.connections_dropped = connections_->dropped();
  s.connections_open = connections_->open();
  s.worker_stages = worker_stages_;
  s.places = places_;
  s.workers_live = data_addr_.size();
  s.workers_producing = producing_.size();
  s.failure = failure_;
  s.splits_unchecked = unchecked_.size();
  s.offload_only = config_.offload_only;
  s.offload_notes = offload_notes_;
  s.offload_notes_dropped = offload_notes_dropped_;
  s.dataloaders_served = dataloaders_served_;
  s.dataloaders_native = dataloaders_native_;
  s.dataloaders_stock = dataloaders_stock_;
  s.dataloaders_in_process = dataloaders_in_process_;
  return s;
}

void CoordinatorServer::EndWorkers() {
  MutexLock lock(mu_);
  workers_end_ = true;
  Status st = coord_.EndRun();
  if (!st.ok()) LogError("coordinator: " + st.message());
  cv_.notify_all();  // a GET_SPLIT held (offload only) answers "exit" now
}

void CoordinatorServer::Stop() {
  {
    MutexLock lock(mu_);
    // The sessions that end now are not the workers' exits: a coordinator started
    // again from the journal waits for them.
    coord_.Detach();
    stopping_ = true;  // sessions end; what the lobby hands on now is refused
    cv_.notify_all();
  }
  if (connections_) connections_->Stop();  // shuts every connection down, joins their threads
  if (tick_thread_.joinable()) tick_thread_.join();
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
    plan.splits.emplace_back(slot_split, CountOrMinusOne(state().BatchCount(slot_split)));
  }
  plan.workers = LiveAddresses();
  return plan.Encode();
}

std::string CoordinatorServer::PlaceVirtualWorker() {
  std::optional<WorkerId> best;
  uint64_t best_load = 0;
  for (const auto& [id, addr] : data_addr_) {
    const VirtualLoad& load = virtual_load_[id];
    const uint64_t n = load.reported + load.placed.size();
    if (!best || n < best_load) {
      best = id;
      best_load = n;
    }
  }
  if (!best) return "";
  virtual_load_[*best].placed.push_back(Now());
  return data_addr_.at(*best);
}

void CoordinatorServer::ReportVirtualLoad(WorkerId id, uint64_t open) {
  VirtualLoad& load = virtual_load_[id];
  for (uint64_t shown = open > load.reported ? open - load.reported : 0;
       shown > 0 && !load.placed.empty(); --shown) {
    load.placed.pop_front();
  }
  while (!load.placed.empty() && Now() - load.placed.front() > kPlacementShownS)
    load.placed.pop_front();
  load.reported = open;
}

std::vector<std::string> CoordinatorServer::LiveAddresses() const {
  std::vector<std::string> out;
  out.reserve(data_addr_.size());
  for (const auto& [id, addr] : data_addr_) out.push_back(addr);
  return out;
}

void CoordinatorServer::AdvanceEpochIfDone() {
  while (!finished_ && state().EpochDone()) {
    ++epochs_done_;
    if (config_.epochs > 0 && epochs_done_ >= static_cast<uint64_t>(config_.epochs)) {
      finished_ = true;
      if (!failure_.empty()) LogError("run: every epoch ended, but samples were lost: " + failure_);
    } else {
      auto plan = PlanFor(state().epoch() + 1);
      Status st = plan.ok() ? coord_.StartEpoch(*plan) : plan.status();
      if (!st.ok()) {
        LogError("coordinator: cannot start epoch " + std::to_string(state().epoch() + 1) + ": " +
                 st.message());
        finished_ = true;
      }
    }
    cv_.notify_all();
  }
}

void CoordinatorServer::PlanAheadIfWanted() {
  if (!config_.epochs_in_flight || finished_ || !state().WantsAhead()) return;
  const uint64_t next = state().epoch() + 1;
  if (config_.epochs > 0 && next >= static_cast<uint64_t>(config_.epochs)) return;
  // A plan that cannot be made is said when the epoch is due (AdvanceEpochIfDone).
  auto plan = PlanFor(next);
  if (!plan.ok() || !coord_.PlanAhead(*plan).ok()) return;
  LogDebug("coordinator: epoch " + std::to_string(next) + "'s splits are handed out ahead");
}

Status CoordinatorServer::RestoreNote(const nlohmann::json& note) {
  const JsonNode n(note, "note");
  if (note.contains("offload")) {
    GM_ASSIGN_OR_RETURN(std::string line, n.String("offload"));
    GM_ASSIGN_OR_RETURN(std::string kind, n.String("kind"));
    if (kind != "served" && kind != "native" && kind != "in_process" && kind != "stock")
      return Status::InvalidArgument("a DataLoader of kind \"" + kind + "\"");
    CountOffload(kind, line);
    return Status::Ok();
  }
  GM_ASSIGN_OR_RETURN(int64_t rank, n.IntOr("rank", -1));
  if (note.contains("channel")) {
    GM_ASSIGN_OR_RETURN(int64_t channel, n.Int("channel"));
    offload_channels_ =
        std::max(offload_channels_, static_cast<uint64_t>(std::max<int64_t>(channel, 0)));
    return Status::Ok();
  }
  if (rank < 0 || rank >= config_.world_size)
    return Status::InvalidArgument("rank " + std::to_string(rank));
  GM_ASSIGN_OR_RETURN(int64_t session, n.Int("session"));
  if (session < 1) return Status::InvalidArgument("session " + std::to_string(session));
  const int r = static_cast<int>(rank);
  const auto s = static_cast<uint64_t>(session);
  if (note.contains("read")) {
    GM_ASSIGN_OR_RETURN(int64_t epoch, n.Int("read"));
    if (epoch < 0) return Status::InvalidArgument("epoch " + std::to_string(epoch));
    epoch_session_[r] = {static_cast<uint64_t>(epoch), s};
    GM_ASSIGN_OR_RETURN(bool plan, n.BoolOr("plan", false));
    if (plan) plan_read_[r] = static_cast<uint64_t>(epoch);
    return Status::Ok();
  }
  sessions_ = std::max(sessions_, s);
  rank_session_[r] = s;
  return Status::Ok();
}

void CoordinatorServer::Note(nlohmann::json note) {
  if (Status st = coord_.Note(std::move(note)); !st.ok()) LogError("coordinator: " + st.message());
}

void CoordinatorServer::SayEnd() {
  MutexLock lock(mu_);
  if (said_end_ || !finished_ || !failure_.empty() || config_.epochs <= 0 ||
      epochs_done_ < static_cast<uint64_t>(config_.epochs))
    return;
  said_end_ = true;
  const uint64_t skipped = state().Stats().samples_skipped;
  if (!unchecked_.empty()) {
    const auto [e, s] = unchecked_.begin()->first;
    LogWarning("run: every epoch ended, but " + std::to_string(unchecked_.size()) +
               " split(s) could not be checked against their size (" + SplitName(e, s) +
               " the first): their maker left before saying what it skipped (on_error "
               "\"skip\"), so what reached the trainer is not known to be whole; " +
               std::to_string(skipped) + " samples were said skipped");
  } else if (skipped == 0) {
    LogInfo("run: every epoch delivered");
  } else {
    LogWarning("run: every epoch ended, but the workers skipped " + std::to_string(skipped) +
               " samples they could not read (on_error \"skip\"; their warnings name "
               "them); every other sample was delivered");
  }
}

Status CoordinatorServer::SessionFrame(const Frame& frame, std::string_view who, bool* done) {
  switch (frame.type) {
    case MsgType::kHeartbeat:
      return Status::Ok();
    case MsgType::kBye:
      *done = true;
      return Status::Ok();
    default:
      return Status::Corrupt("unexpected " + std::string(MsgTypeName(frame.type)) + " from " +
                             std::string(who));
  }
}

void CoordinatorServer::TickLoop() {
  MutexLock lock(mu_);
  while (!lock.WaitFor(cv_, kTickS, [&]() REQUIRES(mu_) { return stopping_; })) {
    Result<std::vector<WorkerId>> lost_now = coord_.Tick(Now());
    if (!lost_now.ok()) LogError("coordinator: " + lost_now.status().message());
    for (WorkerId lost : lost_now.ok() ? *lost_now : std::vector<WorkerId>()) {
      LogWarning("coordinator: worker " + std::to_string(lost) + " (" + data_addr_[lost] +
                 ") silent for " + std::to_string(config_.liveness_timeout_s) +
                 " s: declared lost, its splits go to others");
      data_addr_.erase(lost);
    }
  }
}

void CoordinatorServer::Serve(const ConnectionServer::Connection& connection) {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
  }
  Socket& socket = *connection.socket();
  std::string role;
  // Workers and clients prove the key of their role (dataplane/auth.h).
  auto key_for = [this](std::string_view claimed) -> Result<std::string> {
    if (claimed == kWorkerRole || claimed == kClientRole) return RoleKey(config_.secret, claimed);
    return Status::InvalidArgument("no such role");
  };
  Status st = ServerHandshake(socket, key_for, "coordinator", Deadline::After(kHandshakeTimeoutS),
                              &role, &connection.hello_nonce());
  const bool role_known = st.ok();
  if (st.ok()) connection.Authenticated();
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
