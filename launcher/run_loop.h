// The loop of a training run, on both backends: it starts the data workers and
// the trainer ranks through a launcher (under the supervisor), samples the run's
// figures on a clock, feeds them to the autoscaler and applies its decisions,
// records workers and events, and stops everything when the trainers are done or a
// stop is asked for. Everything it touches outside itself comes in through
// RunLoopEdges, so a unit test runs it on a fake launcher, a fake rate source and
// a FakeClock (tests/unit/run_loop_test.cc); launcher/training_run.h wires the real
// ones (processes, the coordinator, the trainers' step logs, /proc).
//
// Threads: Execute and StopAll run on the calling thread; the edges are called on it.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/run_rates.h"
#include "core/run_spec.h"
#include "core/status.h"
#include "core/step_log.h"
#include "dataplane/messages_pool.h"
#include "launcher/autoscaler.h"
#include "launcher/coordinator_server.h"
#include "launcher/process_launcher.h"
#include "launcher/run_recorder.h"
#include "launcher/supervisor.h"

namespace gm {

// What the loop needs of the world. Every member is required, unless it says otherwise.
struct RunLoopEdges {
  Clock* clock = nullptr;                         // periods, grace and backoff
  ProcessLauncher* launcher = nullptr;            // where workers and trainers start
  std::string coordinator_address;                // given to workers and trainers
  std::function<CoordinatorSummary()> summary;    // the coordinator's view, now
  std::function<StepCounter::Totals()> trainers;  // samples and data wait so far
  // CPU seconds a running worker has used (nullopt: not known now).
  // CPU seconds of each process tree of `pids` still running (one read for all).
  std::function<std::map<pid_t, double>(const std::vector<pid_t>& pids)> cpu_seconds;
  // Called once the workers are to stop at the end of the run, before they are
  // signalled (the coordinator's EndWorkers). May be empty.
  std::function<void()> end_workers;
  // How the job of an elastic worker that ended on its own ended, by the step
  // name it registered with ("JOB.STEP"): e.g. "preempted", "cancelled"; "" when
  // not known. May be empty.
  std::function<std::string(const std::string& step)> elastic_job_end;
  // Sends the run's figures to the pool (launcher/pool_client.h) and returns its
  // grant, or nullopt when the pool did not answer (the run keeps what it holds).
  // Empty: no pool; elastic workers are bounded by elastic_max only.
  std::function<std::optional<PoolGrantMsg>(const PoolReportMsg&)> pool;
  // Why a worker that has not registered yet waits, in Slurm's words (`elastic`:
  // a job of its own; else a step of the allocation); "" when not known. May be
  // empty.
  std::function<std::string(bool elastic)> why_waiting;
};

// What the loop is told to run; a part of launcher/training_run.h's RunConfig.
struct RunLoopOptions {
  RunSpec spec;
  std::string bind = "127.0.0.1";  // the workers' data ports listen here
  std::string run_dir;             // private (0700): role keys, the worker PID list
  // Processes that may start on other nodes (every worker; a trainer command that
  // is srun) get their role's key in their environment (GOLDMINER_SECRET), not the
  // path of its file in run_dir, which is on this node only (/tmp is node-local on
  // most clusters). The Slurm backend sets it; srun hands the environment to the
  // task, readable by the run's user and root only, as the file is.
  bool keys_by_value = false;
  std::string worker_exe;                      // the goldminer binary; empty: this executable
  std::vector<std::string> trainer_env;        // what every rank gets ("NAME=value")
  std::vector<int> trainer_cpus, worker_cpus;  // masks of local children (empty: ours)
  int max_restarts = 3;
  double stop_grace_s = 5;
  // A drained worker's grace (its --drain-grace): it finishes the split in hand and
  // waits for the trainer's acknowledgements this long at most; SIGKILL follows 5 s
  // later if it is still running.
  double drain_grace_s = 10;
  // Workers beyond the allocation (--elastic-partition): an addition is elastic
  // once `elastic_from` workers of the allocation are running (-1: never), with
  // `elastic_cpus` threads. One that has not registered elastic_start_timeout_s
  // after it was submitted (the partition has no room) is cancelled, and no
  // elastic worker is tried for elastic_retry_s.
  int elastic_from = -1;
  int elastic_cpus = 1;
  double elastic_start_timeout_s = 120;
  double elastic_retry_s = 300;
  // A worker (step or job) not registered this long after it started is reported
  // once, with why it waits (RunLoopEdges::why_waiting).
  double register_report_s = 30;
  // At the end, the workers told to leave (RunLoopEdges::end_workers) have this
  // long to leave on their own before they are drained and then stopped.
  double leave_grace_s = 5;
  // With a pool (RunLoopEdges::pool): the run reports every pool_period_s, as
  // `pool_run_id` with `pool_gpus` GPUs, and holds at most the elastic workers the
  // pool grants (none before its first grant); one it holds beyond a grant is
  // drained.
  double pool_period_s = 10;
  std::string pool_run_id;
  double pool_gpus = 1;
  std::string pool_slurm_job;  // the Slurm job the run is in (POOL_REPORT's slurm_job)
  double sample_interval_s = 2;
  // Called with the figures of every sample interval (launcher/training_run.h:
  // the status line); the loop itself prints nothing. Null: nothing is called.
  std::function<void(const std::string& run_id, const RunRates&)> on_rates;
  std::optional<AutoscalerOptions> autoscale;
  std::function<bool()> should_stop;  // polled every loop turn; may be empty
  std::string warm_python;  // the trainer's interpreter: `worker --warm-python` (empty: none)
  std::function<int()> take_signal;              // TrainingRun's (training_run.h); may be empty
  std::function<bool()> signal_reached_trainer;  // TrainingRun's; may be empty
  std::function<std::string()> stop_cause;       // asked once when a signal stops the run
};

// How the trainers ended, as the loop saw it.
struct RunLoopOutcome {
  int exit_code = 0;  // the first failing trainer's exit code (128+signal), else 0
  std::string exit = "exited with status 0";
  bool stopped = false;  // should_stop or a signal ended the trainers
  std::string stop_cause;
  // Worker processes started (replacements and jobs included), less those sent
  // away before they registered (drained: given back, an elastic job cancelled
  // unstarted; refused by Slurm): each of those was said as it happened.
  int workers_started = 0;
  int workers_ran = 0;  // of them, those that registered (ran, not only waited)
};

class RunLoop {
 public:
  // `recorder` and everything the edges point at must outlive the loop.
  RunLoop(RunLoopOptions options, RunLoopEdges edges, std::string run_id, RunRecorder& recorder);
  ~RunLoop();
  RunLoop(const RunLoop&) = delete;
  RunLoop& operator=(const RunLoop&) = delete;

  // Starts the workers and the ranks and runs until every rank has exited. An error
  // when a process cannot be started (naming the program) or the PID list cannot
  // be written; a trainer that fails is not an error (it is in the outcome).
  Result<RunLoopOutcome> Execute();
  // Stops every process still running and records how each worker ended. Safe to
  // call again; the destructor calls it (after a failed Execute, what was started).
  void StopAll();

 private:
  struct Worker {
    int slot = 0;               // 0 .. workers-1: its size, kept by a replacement
    int64_t id = 0;             // in the run's record; a replacement gets a new one
    bool placed = false;        // its node and step are recorded
    bool elastic = false;       // a job of its own beyond the allocation
    double started_s = 0;       // clock time it was started (submitted, if elastic)
    std::string step;           // the step name it registered with (JOB.STEP)
    bool waiting_said = false;  // its wait to register was reported
  };

  bool StopRequested();
  void MarkStopped(RunLoopOutcome& out);
  void BeginStop(RunLoopOutcome& out);
  void OnTrainerEnded(const ProcessEnded& e, RunLoopOutcome& out);
  Status StartWorker(int slot);
  Status StartTrainer(int rank);
  // "GOLDMINER_SECRET=KEY" (by_value: read from `file` in run_dir) or
  // "GOLDMINER_SECRET_FILE=PATH" (RunLoopOptions::keys_by_value).
  Result<std::string> KeyVariable(std::string_view file, bool by_value) const;
  void Tag(LaunchRequest& r);
  void PlaceWorkers(const CoordinatorSummary& summary);
  Status Started(pid_t pid, int slot, int threads, bool elastic);
  void CancelUnstartedElastic();
  void ReportWaiting();
  // Workers not registered that were started less than register_report_s ago.
  int StartedTooLateToRegister() const;
  void LeaveAtEnd();
  void ElasticRefused(const std::string& why);
  void ReportToPool(const RunRates& rates);
  std::optional<pid_t> NextToDrain(bool elastic_only) const;
  void Drain(pid_t pid);
  int ElasticRunning() const;  // elastic workers not draining
  int ElasticHeld() const;     // every elastic worker, draining ones too
  int WorkerLimit() const;
  Status OnReplaced(const ProcessReplaced& r);
  Status OnWorkerEnded(const ProcessEnded& e);
  void Forget(pid_t pid);
  Status WritePids();
  void Sample();
  void RecordOffloadNotes(const CoordinatorSummary& summary);
  void Scale(const RunRates& rates);

  const RunLoopOptions o_;
  const RunLoopEdges edges_;
  const std::string run_id_;
  RunRecorder& recorder_;
  const double start_;
  Supervisor supervisor_;            // starts, replaces, drains and stops the processes
  std::map<pid_t, Worker> workers_;  // running workers
  int64_t next_worker_id_ = 0;
  std::map<pid_t, double> cpu_seen_;   // running workers' CPU seconds, last read
  double cpu_of_exited_ = 0;           // CPU seconds of workers that have exited
  size_t offload_notes_recorded_ = 0;  // of CoordinatorSummary::offload_notes
  bool offload_dropped_said_ = false;
  std::optional<Autoscaler> autoscaler_;
  bool signalled_ = false;         // a signal (not should_stop) stopped the run
  int stop_signal_ = SIGTERM;      // what the trainers get first when the run stops
  std::set<pid_t> draining_;       // workers told to drain (SIGTERM), still running
  int next_slot_ = 0;              // the slot of the next worker the autoscaler adds
  double elastic_hold_until_ = 0;  // no elastic worker is started before this clock time
  int pool_grant_ = 0;             // elastic workers the pool grants (with a pool)
  bool pool_answered_ = false;     // the pool answered once (its first grant is recorded)
  double next_pool_report_ = 0;    // clock time of the next report
  double demand_ = 0;              // the trainers' demand, estimated (ReportToPool)
  std::deque<double> demands_;     // the last periods' estimates of it
  double period_rate_ = 0, period_busy_ = 0;       // this pool period: sums of rate and 1 - wait
  int period_n_ = 0;                               // and how many intervals
  std::map<int, std::pair<double, int>> rate_at_;  // running workers -> (sum of rates, samples)
  bool stopped_ = false;  // the trainers are done, or StopAll ran: no more scaling
  int workers_ran_ = 0;   // workers that registered, in all
  int sent_away_ = 0;     // workers drained or refused before they registered
  // Worker jobs Slurm refused or ended before they registered; at
  // kMaxElasticRefusals none is submitted again for this run.
  int elastic_refusals_ = 0;
  bool elastic_refused_ = false;
};

}  // namespace gm
