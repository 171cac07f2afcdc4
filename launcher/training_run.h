// A training run, on either backend: the coordinator in this process, N `goldminer
// worker --coordinator` processes (children here, or Slurm job steps: the launcher
// decides) and the trainer command (one process per rank, here). Crashed workers
// are restarted (up to max_restarts); the run ends when every trainer process has
// exited. Used by `goldminer run` and by `goldminer profile` (which stops the
// trainer itself). The loop itself is launcher/run_loop.h; this file wires it to
// the real edges (the coordinator, the trainers' step logs, /proc, the system clock)
// and keeps the run's record.
//
// Threads: RunTraining blocks the calling thread until the run ends; should_stop is
// called on that thread.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/run_rates.h"
#include "core/run_spec.h"
#include "core/status.h"
#include "core/store/run_store.h"
#include "dataplane/messages_pool.h"
#include "launcher/autoscaler.h"
#include "launcher/coordinator_server.h"
#include "launcher/process_launcher.h"

namespace gm {

struct RunConfig {
  // What to run: the pipeline, the workers and their sizes, epochs, world size,
  // split size and the trainer command (core/run_spec.h).
  RunSpec spec;
  // Address the coordinator and the workers' data ports listen on: 127.0.0.1
  // (this machine only), a node's address, or 0.0.0.0 (every interface; peers
  // then connect by this machine's host name).
  std::string bind = "127.0.0.1";
  int port = 0;  // coordinator TCP port; 0: any free one
  double liveness_timeout_s = 10;
  int max_restarts = 3;  // crashed workers replaced at most this many times (supervisor)
  std::vector<std::string> trainer_env;  // "NAME=value" added to each trainer's environment
  // The trainers' PyTorch DataLoaders (num_workers > 0) run their workers as
  // virtual workers on the run's data workers (python/goldminer/offload.py): the
  // import hook goes first on their PYTHONPATH, with GOLDMINER_OFFLOAD=workers.
  bool offload_dataloaders = true;
  // CPUs the trainer processes, and the workers started as children here, run on
  // (their mask from the first instruction); empty: this process's.
  std::vector<int> trainer_cpus;
  std::vector<int> worker_cpus;
  std::string worker_exe;  // the goldminer binary for workers; empty: this executable
  // Where the processes start (launcher/process_launcher.h); null: children of this
  // process. The supervisor (launcher/supervisor.h) starts, replaces and stops them.
  ProcessLauncher* launcher = nullptr;
  // Polled about every 0.2 s while trainers run; true stops them (SIGTERM, then
  // SIGKILL after stop_grace_s). May be empty.
  std::function<bool()> should_stop;
  double stop_grace_s = 5;
  double drain_grace_s = 10;  // a drained worker's grace (RunLoopOptions)
  // Workers beyond the allocation (RunLoopOptions::elastic_from; -1: none), and how
  // an elastic worker's job ended (RunLoopEdges::elastic_job_end; may be empty).
  int elastic_from = -1;
  int elastic_cpus = 1;
  std::function<std::string(const std::string& step)> elastic_job_end;
  // Why a worker not registered yet waits (RunLoopEdges::why_waiting; may be empty).
  std::function<std::string(bool elastic)> why_waiting;
  // The pool (RunLoopEdges::pool; may be empty): the run reports as its run id, with
  // its world size as its GPUs, every autoscaler period.
  std::function<std::optional<PoolGrantMsg>(const PoolReportMsg&)> pool;
  // Takes the signal (SIGTERM, SIGINT) that arrived since the last call, 0 for
  // none (cmd/stop_signals.h); non-zero stops the trainers like should_stop and
  // asks stop_cause. Polled with should_stop, and once more after the last
  // trainer ended (a signal that reached the trainers too). May be empty.
  std::function<int()> take_signal;
  // Whether the signal take_signal last returned reached the trainer too (a
  // terminal's Ctrl-C goes to its whole foreground process group): then it is
  // not sent again. May be empty (never).
  std::function<bool()> signal_reached_trainer;
  // Asked once, when a signal stops the run: why the surrounding system stopped it
  // ("requeued", "time limit", ...; launcher/slurm_job.h). Non-empty: the run is
  // recorded as "preempted" with that cause, else as "cancelled". May be empty.
  std::function<std::string()> stop_cause;
  // Log the pipeline's OrderNotice() (the profile has said it already).
  bool order_notice = true;
  // The run's record (launcher/run_recorder.h): where (null: nowhere), under which
  // id (empty: run-<time>-<pid>), what to note with it, and how often to add a point
  // to its time series. The trainers' step logs (GOLDMINER_PROFILE_DIR, unless
  // trainer_env sets it) give the delivered rate and the data wait.
  RunStore* store = nullptr;
  std::string run_name;
  std::string plan_path;
  std::optional<int64_t> plan_id;  // the plan's row in `store` (core/store/run_records.h)
  std::string job_id;              // the batch system's job id, as recorded ("": none)
  double sample_interval_s = 2;
  // Called with the figures of every sample interval (cmd/verb_run.cc shows the
  // status line: rewritten in place on a terminal, else a log line every 30 s).
  // Null: nothing is shown.
  std::function<void(const std::string& run_id, const RunRates&)> on_rates;
  // Adds and drains workers while the run goes (launcher/autoscaler.h), deciding on
  // the sampled figures; each decision is logged and recorded as a "scale" event.
  // Absent: the worker count stays.
  std::optional<AutoscalerOptions> autoscale;
  // The clock of periods, grace and backoff; null: SystemClock().
  Clock* clock = nullptr;
};

struct RunResult {
  std::string run_id;
  int exit_code = 0;        // the first failing trainer's exit code (128+signal), else 0
  std::string exit;         // "exited with status 0", "was killed by signal 9 (Killed)", ...
  bool stopped = false;     // should_stop or a signal ended the trainers
  std::string status;       // as recorded: "succeeded", "failed", "cancelled" or "preempted"
  std::string stop_cause;   // when preempted: why (RunConfig::stop_cause)
  int workers_started = 0;  // worker processes started
  int workers_ran = 0;      // of them, those that registered
  CoordinatorSummary summary;
};

// A fresh run id: "run-<unix time>-<pid>".
std::string NewRunId();

// Runs the training run. Errors: the pipeline cannot be read, the coordinator cannot
// listen, the run's name is taken in the store, a process cannot be started (naming
// the program; the run is then recorded as failed). A trainer that fails is not an
// error: its exit code is in the result.
Result<RunResult> RunTraining(const RunConfig& config);

}  // namespace gm
