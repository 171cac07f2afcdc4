// The data worker service behind `goldminer worker --coordinator HOST:PORT`.
//
// Start() listens on the data port (dataplane/data_server.h), connects to the
// coordinator, runs the handshake as role "worker", sends REGISTER and builds the
// pipeline from REGISTERED. Run() then asks for splits (GET_SPLIT) and makes each
// assigned one with RunSplit, streaming its batches to the trainer client of the
// assignment's rank one per credit, and reports SPLIT_DONE with the split's full
// batch count; it follows connections 1 and 3 of dataplane/messages_control.h.
//
// While Run() runs, a heartbeat thread sends HEARTBEAT whenever the worker has
// sent the coordinator nothing for heartbeat_s, and watches the control
// connection: a coordinator that closes it, resets it or leaves data unacknowledged
// for liveness_timeout_s (TCP_USER_TIMEOUT) is gone. The worker then finishes the
// split in hand (its batches go to the trainer meanwhile) and tries to reach the
// coordinator again for REGISTERED's reconnect_s: a coordinator started again
// from its journal (launcher/coordinator_journal.h) takes it back under its id,
// with the SPLIT_DONEs it sent last, which the old one may not have read. When
// none answers in time, Run() returns Unavailable naming it (the split in hand
// is abandoned). A worker holds at most one split at a time and never keeps one
// across GET_SPLIT calls.
//
// Thread-safety: Run() is called once, from one thread. Stop() and the accessors
// are safe from any thread (not from a signal handler: call Stop() from a thread
// that waits for the signal).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "dataplane/data_server.h"
#include "dataplane/messages_control.h"
#include "dataplane/protocol.h"
#include "dataplane/socket.h"
#include "worker/engine.h"
#include "worker/pipeline.h"
#include "worker/virtual_workers.h"

namespace gm {

// Whether a worker sends HEARTBEAT at `now` (seconds of one clock): when it sent
// the coordinator nothing for `period_s` since `last_send`, and at least every
// kReportEveryBeats periods since its last heartbeat `last_beat` whatever else it
// sends, so that its CPU and virtual workers reach the coordinator.
inline constexpr double kReportEveryBeats = 5;
bool HeartbeatDue(double now, double last_send, double last_beat, double period_s);

// What `goldminer worker --coordinator` does on each signal it watches. With
// drains on (--drain-grace above 0): the first SIGTERM and every SIGUSR2 (goldminer
// run's drain of a Slurm step) drain the worker, and a SIGTERM within
// kSameSignalS of the first is that one again (Slurm may deliver one request's
// SIGTERM twice within milliseconds: slurmstepd signals the step's processes and
// their group, seen with `scancel --signal=TERM JOB.STEP` on Slurm 22.05). Any
// other signal, a later SIGTERM, or any signal with drains off stops it.
class WorkerSignals {
 public:
  enum class Action { kDrain, kStop };
  static constexpr double kSameSignalS = 1;
  WorkerSignals(bool drain, const Clock& clock) : drain_(drain), clock_(clock) {}
  Action On(int sig);

 private:
  const bool drain_;
  const Clock& clock_;
  std::optional<double> first_term_;  // on clock_
};

struct WorkerServiceOptions {
  std::string coordinator;             // "HOST:PORT" of the run's coordinator
  std::string listen = "127.0.0.1:0";  // the data port ("HOST:0": the kernel picks a port)
  std::string advertise_host;          // host in data_addr; empty: see Start()
  int threads = 1;                     // engine threads (>= 1)
  std::string secret;                  // the worker key (dataplane/auth.h; LoadSecret())
  double connect_timeout_s = 10;       // connecting, and waiting for REGISTERED
  // For the run's record, sent in REGISTER: the name the run gave this worker
  // ($GOLDMINER_WORKER_TAG) and the name its launcher knows it by (a Slurm step's
  // JOB.STEP, as squeue -s and scancel write it). Either may be empty.
  std::string tag;
  std::string step_name;
  // Virtual DataLoader workers this worker hosts at once (worker/virtual_workers.h);
  // 0: none (offload connections are refused).
  size_t max_virtual_workers = 64;
  // The interpreter whose virtual-worker host starts at once (VirtualWorkers::Warm);
  // empty: at the first DataLoader.
  std::string warm_python;
  // How long a drain (Drain()) may take before the worker stops as Stop() does.
  double drain_grace_s = 10;
  // The clock of the drain's grace, the heartbeat period and the waits between
  // asks (a test's FakeClock); nullptr: SystemClock(). Socket deadlines stay on
  // real time (core/clock.h).
  const Clock* clock = nullptr;
};

class WorkerService {
 public:
  // Listens, connects and registers. data_addr is advertise_host (when set), else
  // the listen host, or this machine's host name when listening on a wildcard
  // ("0.0.0.0", "::"), with the bound port. IoError when the data port cannot
  // listen; Unavailable when the coordinator cannot be reached, refuses the
  // worker or closes before REGISTERED; InvalidArgument for a bad
  // option, a failed handshake or a pipeline the worker cannot build (the
  // coordinator is then sent ERROR naming it).
  static Result<std::unique_ptr<WorkerService>> Start(const WorkerServiceOptions& options);
  ~WorkerService();
  WorkerService(const WorkerService&) = delete;
  WorkerService& operator=(const WorkerService&) = delete;

  // Serves until the coordinator says "exit" or Stop() is called: then sends BYE
  // and returns OK. Unavailable naming the coordinator when it is gone;
  // the engine's error when a split fails (on_error "fail"); Corrupt for a
  // coordinator message that breaks the protocol. The data port is shut when it
  // returns.
  Status Run();

  // Asks Run() to finish: a batch send under way completes, the split in hand is
  // abandoned (the coordinator re-assigns it), BYE is sent and Run() returns OK.
  void Stop();
  // Asks Run() to drain (SIGTERM: the autoscaler, scancel, Slurm's preemption): no
  // new split is taken (GET_SPLIT {draining}); the split in hand is finished; the
  // data port serves until the coordinator says every batch this worker made was
  // acknowledged ("exit"), then BYE and Run() returns OK, so nothing the trainer
  // received is made again. When drain_grace_s passes first, it stops as Stop()
  // does (what is not acknowledged is made elsewhere from its last acknowledged
  // batch). A coordinator gone during a drain ends it too (OK: the run is over).
  // Idempotent; Stop() after it stops at once.
  void Drain();

  int data_port() const { return data_->port(); }
  const std::string& data_addr() const { return data_addr_; }
  uint64_t worker_id() const { return worker_id_; }
  uint64_t splits_done() const { return splits_done_.load(); }

 private:
  WorkerService(const WorkerServiceOptions& options, std::unique_ptr<DataServer> data,
                Socket control);
  // REGISTER and REGISTERED on control_; `again`: at a coordinator that was
  // lost, with the old id and the last SPLIT_DONEs (the pipeline is kept).
  Status Register(bool again = false);
  // The coordinator is gone (`why`): dials it again until it answers, registers
  // again and goes on; Unavailable naming it when reconnect_s passes first.
  Status Reconnect(const Status& why);
  // Marks the coordinator lost (the first `why` is kept), from either thread.
  void MarkLost(const Status& why);
  Status SendControl(MsgType type, const nlohmann::json& meta);
  Result<Frame> RecvControl(MsgType expected, Deadline deadline);
  Status Bye();
  Status Serve();
  Status RunAssignment(const AssignMsg& assign);
  // Waits retry_s (at most the liveness timeout) before asking the coordinator
  // again; less when the worker stops, is lost, or begins to drain after its last
  // GET_SPLIT said it was not draining (`said_draining`).
  void WaitRetry(double retry_s, bool said_draining);
  void HeartbeatLoop();
  Status CheckControl();
  Status Gone(const Status& why) const;
  const Clock& clock() const { return options_.clock != nullptr ? *options_.clock : SystemClock(); }

  const WorkerServiceOptions options_;
  const std::string coordinator_;
  std::unique_ptr<DataServer> data_;
  std::unique_ptr<VirtualWorkers> virtual_workers_;  // used by data_'s threads: outlives them
  // Run's thread receives, and replaces it (Reconnect) holding send_mu_; sends and
  // the heartbeat thread's look at it hold send_mu_.
  Socket control_;
  std::string data_addr_;
  void SetMaking(bool making);
  // Per-stage costs of every split made so far, for HEARTBEAT and SPLIT_DONE.
  void AddStageTotals(const std::vector<StageStats>& stages);
  std::vector<StageStats> StageTotals();

  std::optional<Pipeline> pipeline_;
  uint64_t worker_id_ = 0;
  double heartbeat_s_ = 1;
  double liveness_timeout_s_ = 10;
  double reconnect_s_ = 30;  // REGISTERED reconnect_s
  // The last SPLIT_DONEs sent (at most kMaxRegisterMade), said again at a
  // coordinator that restarted. Run's thread only.
  std::deque<SplitDoneMsg> recent_done_;
  std::atomic<uint64_t> splits_done_{0};

  Mutex send_mu_;                     // one sender on control_ at a time
  std::atomic<double> last_send_{0};  // clock() of the last control frame sent
  double last_beat_ = 0;              // clock() of the last HEARTBEAT (CheckControl's thread)

  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ GUARDED_BY(mu_) = false;            // Stop() was called
  bool draining_ GUARDED_BY(mu_) = false;        // Drain() was called
  double drain_deadline_ GUARDED_BY(mu_) = 0;    // on clock(): Stop() then
  bool heartbeat_done_ GUARDED_BY(mu_) = false;  // the heartbeat thread must end
  Status lost_ GUARDED_BY(mu_);                  // why the coordinator is gone
  double lost_at_ GUARDED_BY(mu_) = 0;           // clock() when it was found gone
  bool given_up_ GUARDED_BY(mu_) = false;        // reconnect_s passed: the worker exits
  std::atomic<bool> refused_{false};  // the coordinator answered ERROR: it will not take it back
  std::vector<StageStats> stage_totals_ GUARDED_BY(mu_);  // all splits made so far
  bool making_split_ GUARDED_BY(mu_) = false;             // a split is being made
  uint64_t splits_begun_ GUARDED_BY(mu_) = 0;             // SetMaking(true) calls
  std::thread heartbeat_thread_;
};

}  // namespace gm
