// CoordinatorServer: the coordinator of a run, on a TCP port. Data workers and
// trainer clients connect to it (dataplane/messages_control.h, connections 1 and 2); it
// keeps the run's CoordinatorState, hands out splits, records acknowledgements,
// declares silent workers lost and moves from epoch to epoch.
//
// Threads: one accepting, one per connection (dataplane/connection_server.h),
// one ticking (liveness). Every
// access to the state is under one mutex. Start() returns once listening;
// Stop() (or the destructor) closes everything and joins every thread.
//
// Files: coordinator_server.cc (connections, epochs, liveness),
// coordinator_workers.cc (worker sessions), coordinator_clients.cc (client sessions).
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/log.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "dataplane/connection_server.h"
#include "dataplane/messages_control.h"
#include "dataplane/messages_offload.h"
#include "dataplane/offload_proof.h"
#include "dataplane/protocol.h"
#include "dataplane/socket.h"
#include "launcher/coordinator_journal.h"
#include "launcher/coordinator_state.h"
#include "worker/pipeline.h"

namespace gm {

// The pipeline document of a run without one (CoordinatorConfig::offload_only).
inline constexpr std::string_view kOffloadOnlyPipeline =
    R"({"version": 1, "source": {"type": "range", "count": 1}, "stages": [],
        "batch": {"size": 1}})";
// How long a virtual worker placed on a data worker counts in its load before
// one of its reports shows it open (CoordinatorServer::VirtualLoad).
inline constexpr double kPlacementShownS = 30;
// How long a GET_SPLIT of a run without a pipeline is held before "wait".
inline constexpr double kOffloadOnlyRetryS = 1.0;
// How soon a draining worker that still holds splits asks again (ASSIGN "drain").
inline constexpr double kDrainRetryS = 0.1;
inline constexpr size_t kMaxOffloadNotes = 1024;  // OFFLOAD_NOTE lines kept per run

// "off" turns CoordinatorConfig::epochs_in_flight off for the runs `goldminer run` starts.
inline constexpr std::string_view kEpochsInFlightEnv = "GOLDMINER_EPOCHS_IN_FLIGHT";

struct CoordinatorConfig {
  std::string host = "127.0.0.1";  // address to listen on
  // Host in the address given to workers and trainers; empty: `host`, or this
  // machine's name when `host` is a wildcard (0.0.0.0, ::).
  std::string advertise_host;
  int port = 0;  // 0: any free port
  // The run's secret (hex); never leaves the coordinator's process (goldminer
  // run hands it to that process over a pipe: launcher/coordinator_process.h).
  std::string secret;
  // The pipeline as workers receive it: the document, where it came from, and
  // the directory its relative paths resolve against (shared by all nodes).
  nlohmann::json pipeline_doc;
  std::string pipeline_origin;
  std::string base_dir;
  // A run without a pipeline (`goldminer run` with no --pipeline): the workers
  // host only the trainers' offloaded DataLoaders (OFFLOAD, virtual workers).
  // No epoch is planned, GET_SPLIT is answered "wait" after a hold of
  // kOffloadOnlyRetryS (at once "exit" when the run ends meanwhile),
  // and a goldminer.Loader's SUBSCRIBE is refused with the reason.
  // pipeline_doc is then kOffloadOnlyPipeline, which workers load and never read.
  bool offload_only = false;
  size_t samples_per_split = 256;
  int world_size = 1;
  int epochs = 1;  // epochs the run serves; 0: as many as the trainers ask for
  // Epochs in flight together: once every split of an epoch is handed out, idle
  // workers start on the next epoch's (CoordinatorState::PlanAhead), and the
  // trainers keep those batches until they reach it. Off: each epoch starts
  // when every rank has acknowledged the one before (GOLDMINER_EPOCHS_IN_FLIGHT=off).
  bool epochs_in_flight = true;
  double heartbeat_s = 1.0;
  double liveness_timeout_s = 10.0;
  // A client connection silent this long is closed (its library says HEARTBEAT
  // every kClientHeartbeatS while the trainer computes).
  double client_idle_s = kClientIdleS;
  std::string run_id;
  // Where the coordinator journals every change of its state, a line each
  // (launcher/coordinator_journal.h), for a coordinator started again to replay;
  // empty: none. A line that cannot be written fails the call that made it.
  // A file that holds lines already is replayed first: the coordinator goes on
  // from where the one that wrote it stopped (give it the same port), its workers
  // and trainers coming back with their ids and sessions (dataplane/messages_control.h).
  // A journal cut short or corrupted fails Start, naming the file and line.
  std::string journal_path;
  // How long a worker or a trainer's client that lost this coordinator dials it
  // again before it gives up (REGISTERED and SUBSCRIBED reconnect_s): long
  // enough for `goldminer run` to start it again from its journal.
  double reconnect_s = 15;
  // What the workers' liveness (heartbeats, Tick) is measured on; nullptr: the
  // system's. A test hands a FakeClock and moves it instead of waiting.
  const Clock* clock = nullptr;
};

struct CoordinatorSummary {
  CoordinatorStats state;
  uint64_t epochs_done = 0;
  uint64_t workers_registered = 0;
  uint64_t connections_refused = 0;  // failed handshakes and protocol errors
  uint64_t connections_dropped = 0;  // closed at accept: over a bound, or no thread for it
  uint64_t workers_faulted = 0;      // dropped because a trainer's client said so (FAULT)
  // CPU seconds the workers reported using (HEARTBEAT), summed over every worker
  // of the run: what /proc cannot show of workers on other nodes.
  double worker_cpu_s = 0;
  size_t connections_open = 0;  // served now (each by one thread)
  size_t workers_live = 0;      // registered and still connected
  // Of those, the ones that finished a split since they registered: a new worker
  // counts once it makes data at its pace (its exec stage's processes started,
  // its first split through the pipeline).
  size_t workers_producing = 0;
  // Why the run cannot have delivered every sample (a split that reached the
  // trainer short, a worker's count contradicting its split): empty when none.
  std::string failure;
  // Splits complete under on_error "skip" whose maker never said what it
  // skipped (it left first), so their samples were not checked against their
  // size; the run's last line says so instead of "every epoch delivered".
  size_t splits_unchecked = 0;
  // What became of the trainers' DataLoaders (OFFLOAD_NOTE), one line each, in
  // arrival order: the first kMaxOffloadNotes, and how many more came.
  std::vector<std::string> offload_notes;
  uint64_t offload_notes_dropped = 0;
  uint64_t dataloaders_served = 0;      // notes: on virtual workers
  uint64_t dataloaders_native = 0;      // of those, in --offload native mode
  uint64_t dataloaders_stock = 0;       // notes: on stock local workers
  uint64_t dataloaders_in_process = 0;  // notes: num_workers=0, in the trainer's process
  bool offload_only = false;            // CoordinatorConfig::offload_only
  // The latest per-stage totals each worker reported (HEARTBEAT, SPLIT_DONE).
  std::map<WorkerId, std::vector<StageStats>> worker_stages;  // each one's latest report
  // Where tagged workers run, by tag (REGISTER's tag, host, step): the launcher's
  // name for a worker joined to its node and Slurm step. The latest kMaxPlaces.
  struct Place {
    std::string host;
    std::string step;
  };
  std::map<std::string, Place> places;
};

class CoordinatorServer {
 public:
  // Loads the pipeline (to plan epochs), listens and starts serving.
  static Result<std::unique_ptr<CoordinatorServer>> Start(const CoordinatorConfig& config);
  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  // "host:port" to give workers and clients (see CoordinatorConfig::advertise_host).
  std::string address() const;
  // The port it listens on.
  int port() const { return port_; }
  // The run's pipeline, as loaded from the config (immutable).
  const Pipeline& pipeline() const { return pipeline_; }
  // Waits until every epoch of the run is done (all ranks acknowledged their
  // shares) or the timeout passes; true when done.
  bool WaitFinished(double timeout_s);
  CoordinatorSummary Summary() const;
  // The run is over for its workers: every GET_SPLIT from now on is answered
  // "exit", so a worker stopped at the end (SIGTERM: a drain) leaves at once
  // instead of waiting for acknowledgements no trainer will send.
  void EndWorkers();
  // Says how the run's epochs ended ("every epoch delivered", or what was
  // skipped or left unchecked): after the workers left, so that a SPLIT_DONE
  // sent as the trainer acknowledged the split's last batch is counted. Once.
  void SayEnd();
  void Stop();

 private:
  // The bound on sending one answer or plan to a peer (coordinator_*.cc).
  static constexpr double kSendTimeoutS = 30;
  // A split count for the wire: kUnknownCount is -1.
  static int64_t CountOrMinusOne(uint64_t count) {
    return count == kUnknownCount ? -1 : static_cast<int64_t>(count);
  }

  CoordinatorServer(CoordinatorConfig config, Pipeline pipeline,
                    std::unique_ptr<JournalFile> journal_file, JournaledCoordinator coord,
                    int port);
  void TickLoop();
  const Clock& clock() const { return config_.clock != nullptr ? *config_.clock : SystemClock(); }
  double Now() const { return clock().Now(); }
  // One connection, on its own thread (ConnectionServer): the handshake, then
  // a worker's or a client's session.
  void Serve(const ConnectionServer::Connection& connection);
  Status ServeWorker(Socket& socket);
  // The id a REGISTER is served as: its old one when it registers again at a
  // restarted coordinator that still counts it live (and takes the SPLIT_DONEs it
  // repeats), else a new one.
  Result<WorkerId> AdmitWorker(const RegisterMsg& registration) REQUIRES(mu_);
  // A worker's SPLIT_DONE (its size checked; one that contradicts the split's
  // size drops the worker).
  Status TakeSplitDone(WorkerId id, const SplitDoneMsg& done) REQUIRES(mu_);
  // Restores what the journal's notes say (Start, after a replay).
  Status RestoreNote(const nlohmann::json& note) REQUIRES(mu_);
  // Writes a note of the server's own bookkeeping to the journal (an error is
  // said, not returned: the state is not behind it).
  void Note(nlohmann::json note) REQUIRES(mu_);
  Status ServeClient(Socket& socket);
  Status ServeSubscribedClient(Socket& socket, int rank,
                               uint64_t session);                 // after SUBSCRIBE was accepted
  Status ServeOffloadClient(Socket& socket, const Frame& first);  // after OFFLOAD
  // What a worker's and a client's sessions answer alike: HEARTBEAT (nothing to
  // do), BYE (`*done`), and Corrupt naming anything else as unexpected from `who`.
  static Status SessionFrame(const Frame& frame, std::string_view who, bool* done);
  Status HandleWorkerFrame(Socket& socket, WorkerId id, const Frame& frame, bool* done);
  Result<AssignMsg> AnswerGetSplit(WorkerId id, const Frame& frame, MutexLock& lock) REQUIRES(mu_);
  AssignMsg AssignReply(const Assignment& a) const REQUIRES(mu_);
  Status HandleClientFrame(Socket& socket, int rank, uint64_t session, const Frame& frame,
                           bool* done);
  Result<EpochPlan> PlanFor(uint64_t epoch) const;
  Status ResumeRank(int rank, const ResumeMsg& resume, MutexLock& lock) REQUIRES(mu_);
  nlohmann::json AnswerGetPlan(int rank, uint64_t session, uint64_t epoch, MutexLock& lock)
      REQUIRES(mu_);
  // Where a new session of `rank` continues the current epoch when an earlier
  // session read it (a trainer restarted without its state): the rank resumes at
  // what was acknowledged, and what was sent and not acknowledged is made again.
  std::optional<std::pair<uint64_t, SequenceKey>> TakeOverRank(int rank, uint64_t session)
      REQUIRES(mu_);
  nlohmann::json AnswerGetWorkers(int rank) const REQUIRES(mu_);
  // The live workers' data addresses, in worker id order (PLAN, WORKERS, OFFLOADING).
  std::vector<std::string> LiveAddresses() const REQUIRES(mu_);
  // The live worker that should host the next virtual DataLoader worker: the one
  // with the fewest (reported plus placed since), the first registered among
  // equals; counted as placed there. Empty when no worker is live.
  std::string PlaceVirtualWorker() REQUIRES(mu_);
  // A rank's RESUME of an epoch past the current one: the run moves there only
  // once every rank has asked for it (waiting up to kSkipAgreementS for the
  // others). InvalidArgument, saying why, when a rank reads the current epoch
  // meanwhile, asks for another one, or the others do not come in time.
  Status AgreeToSkip(int rank, uint64_t epoch, MutexLock& lock) REQUIRES(mu_);
  nlohmann::json PlanMessage(
      uint64_t epoch, const std::optional<std::pair<uint64_t, SequenceKey>>& place = std::nullopt)
      REQUIRES(mu_);
  // InvalidArgument when a SPLIT_DONE contradicts its split's size (when the
  // source knows it): its batch count must be that of the size less the samples
  // it says it skipped, and it may skip none under on_error "fail".
  Status CheckSplitSize(const SplitDoneMsg& done) const;
  // What a split of `size` samples makes with `skipped` of them skipped: its
  // batches and the samples they hold (drop_last drops a short tail).
  struct SplitYield {
    uint64_t batches = 0;
    uint64_t samples = 0;
  };
  SplitYield YieldOf(uint64_t size, uint64_t skipped) const;
  // Once a split of known size is complete (and, under on_error "skip", its
  // maker said what it skipped): the samples the trainer acknowledged must be
  // the size less what was skipped (and drop_last's tail); else failure_ says
  // what was lost and the run stops.
  void CheckDelivered(uint64_t epoch, uint64_t split) REQUIRES(mu_);
  // A split's maker telling what it skipped after its epoch ended (the trainer
  // acknowledged the last batch first): the unchecked split is checked now.
  void CheckLateSplitDone(WorkerId id, const SplitDoneMsg& done) REQUIRES(mu_);
  // The check of CheckDelivered, with the maker's `skipped`.
  void VerifyDelivery(uint64_t epoch, uint64_t split, const CoordinatorState::Delivery& got,
                      uint64_t skipped) REQUIRES(mu_);
  // FAULT from rank `rank`: closes the named worker's connection (ServeWorker then
  // gives its splits to others).
  void DropFaulty(int rank, const FaultMsg& fault) REQUIRES(mu_);
  void AdvanceEpochIfDone() REQUIRES(mu_);
  // Lays the next epoch out ahead when the current one has every split handed
  // out and the run serves a next one (CoordinatorConfig::epochs_in_flight).
  void PlanAheadIfWanted() REQUIRES(mu_);
  void NoteOffload(int64_t rank, const OffloadNoteMsg& note);
  // Counts one DataLoader of `kind` (served, native, in_process, stock) and keeps
  // its `line` (NoteOffload; RestoreNote).
  void CountOffload(const std::string& kind, const std::string& line) REQUIRES(mu_);

  const CoordinatorConfig config_;
  // Signs the offload channels it issues (dataplane/offload_proof.h). Set by
  // Start() before any connection is served; read-only after.
  std::optional<OffloadIssuer> offload_issuer_;
  const Pipeline pipeline_;
  const std::string order_;  // digest of what the batch order derives from (SUBSCRIBED)
  const int port_;           // listened on

  mutable Mutex mu_;
  std::condition_variable cv_;  // epoch changes, finish, stop
  // The run's state (read through state()), every change journaled when
  // config_.journal_path is set; the file the journal's lines go to.
  const std::unique_ptr<JournalFile> journal_file_;
  JournaledCoordinator coord_ GUARDED_BY(mu_);
  const CoordinatorState& state() const REQUIRES(mu_) { return coord_.state(); }
  std::map<WorkerId, std::string> data_addr_ GUARDED_BY(mu_);  // live workers
  std::set<WorkerId> producing_ GUARDED_BY(mu_);               // live workers that finished a split
  std::set<WorkerId> told_to_leave_ GUARDED_BY(mu_);  // sent "exit" unasked (HandleWorkerFrame)
  // Live workers' control sockets, so that a FAULT can close one (each entry goes
  // before its socket closes).
  std::map<WorkerId, int> worker_fd_ GUARDED_BY(mu_);
  // Every worker dropped by FAULT (the newest kMaxDropped: ids only grow): one
  // still live is on its way out, and one that dials again under its id is not
  // taken back.
  static constexpr size_t kMaxDropped = 4096;
  std::set<WorkerId> dropped_ GUARDED_BY(mu_);
  uint64_t workers_faulted_ GUARDED_BY(mu_) = 0;
  // CPU the workers said they used (HEARTBEAT cpu_s: each one's process and its
  // children): the latest figure of each live worker, and the sum of what every
  // worker added since it registered.
  std::map<WorkerId, double> worker_cpu_last_ GUARDED_BY(mu_);
  // A data worker's virtual workers: what its last HEARTBEAT reported, and the
  // placements since (Now() of each) that no report has shown open yet. A report
  // that grows by k shows the k oldest open; a placement not shown within
  // kPlacementShownS (its trainer never came) is forgotten. A report written
  // before a placement and read after it (the worker's frames wait while its
  // GET_SPLIT is held) cannot hide the placement.
  struct VirtualLoad {
    uint64_t reported = 0;
    std::deque<double> placed;
  };
  void ReportVirtualLoad(WorkerId id, uint64_t open) REQUIRES(mu_);
  std::map<WorkerId, VirtualLoad> virtual_load_ GUARDED_BY(mu_);
  double worker_cpu_s_ GUARDED_BY(mu_) = 0;
  std::map<int, std::string> rank_peers_ GUARDED_BY(mu_);  // subscribed ranks -> peer
  uint64_t sessions_ GUARDED_BY(mu_) = 0;          // client sessions issued (the last one's number)
  uint64_t offload_channels_ GUARDED_BY(mu_) = 0;  // OFFLOAD channels issued
  std::vector<std::string> offload_notes_ GUARDED_BY(mu_);
  uint64_t offload_notes_dropped_ GUARDED_BY(mu_) = 0;
  uint64_t dataloaders_served_ GUARDED_BY(mu_) = 0;
  uint64_t dataloaders_native_ GUARDED_BY(mu_) = 0;
  uint64_t dataloaders_stock_ GUARDED_BY(mu_) = 0;
  uint64_t dataloaders_in_process_ GUARDED_BY(mu_) = 0;
  uint64_t epochs_done_ GUARDED_BY(mu_) = 0;
  // AgreeToSkip: the later epoch some ranks resume into, those ranks, and why
  // the move was called off ("" while it stands).
  uint64_t skip_epoch_ GUARDED_BY(mu_) = 0;
  std::set<int> skip_ranks_ GUARDED_BY(mu_);
  std::string skip_refused_ GUARDED_BY(mu_);
  std::map<int, uint64_t> plan_read_ GUARDED_BY(mu_);  // rank -> epoch of the last PLAN it got
  // rank -> (epoch, session): the session that last read or resumed an epoch.
  std::map<int, std::pair<uint64_t, uint64_t>> epoch_session_ GUARDED_BY(mu_);
  std::map<int, uint64_t> rank_session_ GUARDED_BY(mu_);  // rank -> its newest session
  bool finished_ GUARDED_BY(mu_) = false;
  // Why the run cannot deliver every sample (a worker cut a split the trainer may
  // have read short): every later GET_PLAN and GET_WORKERS is answered with ERROR.
  std::string failure_ GUARDED_BY(mu_);
  // (epoch, split) -> what reached the trainer, for its maker's SPLIT_DONE that
  // may come after the epoch ended.
  std::map<std::pair<uint64_t, uint64_t>, CoordinatorState::Delivery> unchecked_ GUARDED_BY(mu_);
  bool said_end_ GUARDED_BY(mu_) = false;  // SayEnd()
  bool stopping_ GUARDED_BY(mu_) = false;
  bool workers_end_ GUARDED_BY(mu_) = false;  // EndWorkers() was called
  uint64_t workers_registered_ GUARDED_BY(mu_) = 0;
  uint64_t refused_ GUARDED_BY(mu_) = 0;
  std::map<WorkerId, std::vector<StageStats>> worker_stages_ GUARDED_BY(mu_);
  std::map<std::string, CoordinatorSummary::Place> places_ GUARDED_BY(mu_);  // by tag
  std::vector<std::string> place_order_ GUARDED_BY(mu_);                     // oldest first
  RateLimit refused_warnings_{kPeerWarningIntervalS};  // connections that failed
  RateLimit worker_warnings_{kPeerWarningIntervalS};   // SPLIT_DONE a worker got wrong

  std::thread tick_thread_;
  // Accepts, says HELLO, bounds and serves the connections (a thread each); set
  // once by Start.
  std::unique_ptr<ConnectionServer> connections_;
};

}  // namespace gm
