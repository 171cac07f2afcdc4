#include "launcher/run_loop.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "core/host.h"
#include "core/log.h"
#include "core/os/file_util.h"
#include "core/os/paths.h"
#include "core/text_format.h"
#include "dataplane/auth.h"
#include "dataplane/messages_pool.h"
#include "dataplane/socket.h"

namespace gm {
namespace {

// A drained worker still running this long after its grace is killed.
constexpr double kDrainKillMarginS = 5;
// Worker jobs refused (or ended before they registered) before the run submits no
// more of them.
constexpr int kMaxElasticRefusals = 3;

}  // namespace

RunLoop::RunLoop(RunLoopOptions options, RunLoopEdges edges, std::string run_id,
                 RunRecorder& recorder)
    : o_(std::move(options)),
      edges_(std::move(edges)),
      run_id_(std::move(run_id)),
      recorder_(recorder),
      start_(edges_.clock->Now()),
      supervisor_(*edges_.launcher,
                  SupervisorOptions{o_.max_restarts, 0.25, 8, o_.stop_grace_s, 10,
                                    o_.drain_grace_s + kDrainKillMarginS, edges_.clock,
                                    [this](LaunchRequest& r) { Tag(r); }}) {
  if (o_.autoscale) autoscaler_.emplace(*o_.autoscale);
  next_slot_ = o_.spec.workers;
}

RunLoop::~RunLoop() { StopAll(); }

Result<RunLoopOutcome> RunLoop::Execute() {
  RunLoopOutcome out;
  Sample();  // the baseline
  for (int i = 0; i < o_.spec.workers; ++i) GM_RETURN_IF_ERROR(StartWorker(i));
  const int trainers = o_.spec.command_starts_ranks ? 1 : o_.spec.world_size;
  for (int rank = 0; rank < trainers; ++rank) GM_RETURN_IF_ERROR(StartTrainer(rank));
  double next_sample = start_ + o_.sample_interval_s;
  while (supervisor_.running(ProcessRole::kTrainer) > 0) {
    if (edges_.clock->Now() >= next_sample) {
      Sample();
      ReportWaiting();
      if (o_.elastic_from >= 0 && !stopped_) CancelUnstartedElastic();
      next_sample += o_.sample_interval_s;
    }
    if (!out.stopped && StopRequested()) BeginStop(out);
    std::vector<ProcessReplaced> replaced;
    std::optional<ProcessEnded> e = supervisor_.Poll(0.2, &replaced);
    for (const ProcessReplaced& r : replaced) GM_RETURN_IF_ERROR(OnReplaced(r));
    if (!e) continue;
    if (e->role == ProcessRole::kTrainer) {
      OnTrainerEnded(*e, out);
    } else {
      GM_RETURN_IF_ERROR(OnWorkerEnded(*e));
    }
  }
  // The signal may have reached the trainers too (Slurm signals every process of
  // the job) and ended them before this loop saw it: the run was still stopped.
  if (!out.stopped && StopRequested()) MarkStopped(out);
  stopped_ = true;  // the trainers are done: no more scaling
  Sample();         // the last point, with the workers still running
  // A worker started in the run's last register_report_s (an elastic job the
  // autoscaler asked for just before the end) had no time to register: it is
  // not one that waited unseen, so it is not counted as started at all.
  const int young = StartedTooLateToRegister();
  StopAll();
  out.workers_started = static_cast<int>(next_worker_id_) - young - sent_away_;
  out.workers_ran = workers_ran_;
  if (out.workers_ran < out.workers_started) {
    const std::string why = std::to_string(out.workers_ran) + " of " +
                            std::to_string(out.workers_started) +
                            " workers ran: the others never registered (see the lines above, "
                            "and the workers table of goldminer report)";
    LogWarning("run: " + why);
    recorder_.Event("run", why);
  }
  return out;
}

// The run was stopped; a signal's cause is asked of the system once.
void RunLoop::MarkStopped(RunLoopOutcome& out) {
  out.stopped = true;
  if (signalled_ && o_.stop_cause) out.stop_cause = o_.stop_cause();
}

void RunLoop::BeginStop(RunLoopOutcome& out) {
  MarkStopped(out);
  // Said before stopping anything: if the system kills us before the end, the
  // record still tells why the run stopped.
  recorder_.Event("run", out.stop_cause.empty()
                             ? std::string("stopping: a signal asked the run to stop")
                             : "stopping: the job was preempted (" + out.stop_cause +
                                   "); the trainer resumes from its checkpoint in a new run");
  // SIGTERM (or Ctrl-C's SIGINT) now, SIGKILL after the grace period (the supervisor's).
  for (pid_t t : supervisor_.pids(ProcessRole::kTrainer)) supervisor_.Stop(t, stop_signal_);
}

// A rank that fails ends the run, as under torchrun: the others would wait for
// its share of the epoch for ever. They are stopped (SIGTERM, then SIGKILL after
// the grace period) and the run takes the first failure's status.
void RunLoop::OnTrainerEnded(const ProcessEnded& e, RunLoopOutcome& out) {
  if (e.exit.exit_code() == 0 || out.exit_code != 0) return;
  out.exit_code = e.exit.exit_code();
  out.exit = e.exit.describe;
  const std::vector<pid_t> others = supervisor_.pids(ProcessRole::kTrainer);
  // Alone, the trainer's own error and the run's exit status say it all.
  const std::string ended =
      "run: trainer (pid " + std::to_string(e.exit.pid) + ") " + e.exit.describe;
  if (others.empty() || out.stopped) {
    LogDebug(ended);
    return;
  }
  LogWarning(ended + ": stopping the other " + std::to_string(others.size()) +
             " trainer rank(s): a rank that fails ends the run");
  recorder_.Event("run", "a trainer rank " + e.exit.describe + ": the other ranks are stopped");
  for (pid_t t : others) supervisor_.Stop(t);
}

void RunLoop::StopAll() {
  stopped_ = true;  // no more scaling
  if (!workers_.empty()) PlaceWorkers(edges_.summary());
  if (edges_.end_workers && !workers_.empty()) {
    edges_.end_workers();
    LeaveAtEnd();
  }
  for (const ProcessEnded& e : supervisor_.StopAll()) {
    if (e.exit.exit_code() != 0 && e.exit.exit_code() != 128 + SIGTERM) {
      LogDebug("run: process " + std::to_string(e.exit.pid) + " " + e.exit.describe);
    }
    auto w = workers_.find(e.exit.pid);
    if (w == workers_.end()) continue;
    recorder_.WorkerEnded(w->second.id, "stopped at the end of the run: " + e.exit.describe);
    Forget(e.exit.pid);
  }
}

// The workers were told the run is over (their next GET_SPLIT says "exit"): they
// leave on their own within a retry or two. Those still running after
// leave_grace_s are drained (under Slurm, SIGTERM to the step's task, not to srun,
// which would cancel the step and say so), and what is left then is the
// supervisor's to stop. A worker that has not registered (a step or job still
// waiting for Slurm) cannot hear the coordinator and is stopped at once.
void RunLoop::LeaveAtEnd() {
  const double deadline = edges_.clock->Now() + o_.leave_grace_s;
  bool drained = false;
  while (!workers_.empty()) {
    std::vector<pid_t> registered;
    for (const auto& [pid, w] : workers_) {
      if (w.placed) registered.push_back(pid);
    }
    if (registered.empty()) return;
    if (!drained && edges_.clock->Now() >= deadline) {
      for (pid_t pid : registered) {
        if (!draining_.count(pid)) Drain(pid);
      }
      drained = true;
    }
    if (drained && edges_.clock->Now() >= deadline + o_.drain_grace_s) return;
    std::vector<ProcessReplaced> replaced;  // none: the run is stopping
    std::optional<ProcessEnded> e = supervisor_.Poll(0.2, &replaced);
    if (!e) continue;
    auto w = workers_.find(e->exit.pid);
    if (w == workers_.end()) continue;
    recorder_.WorkerEnded(w->second.id, "left at the end of the run: " + e->exit.describe);
    Forget(e->exit.pid);
  }
}

bool RunLoop::StopRequested() {
  if (o_.take_signal) {
    if (int sig = o_.take_signal()) {
      // Ctrl-C: the trainer hears SIGINT, as it would alone (Python's
      // KeyboardInterrupt, exit 130), once: a terminal's reached it already.
      // SIGTERM (scancel, preemption) and the rest: SIGTERM.
      const bool reached = o_.signal_reached_trainer && o_.signal_reached_trainer();
      stop_signal_ = sig != SIGINT ? SIGTERM : reached ? 0 : SIGINT;
      (sig == SIGINT ? LogDebug : LogInfo)("run: signal " + std::to_string(sig) +
                                           ": stopping the trainer and workers");
      signalled_ = true;
      return true;
    }
  }
  return o_.should_stop && o_.should_stop();
}

Result<std::string> RunLoop::KeyVariable(std::string_view file, bool by_value) const {
  const std::string path = o_.run_dir + "/" + std::string(file);
  if (!by_value) return std::string(kSecretFileEnv) + "=" + path;
  GM_ASSIGN_OR_RETURN(std::string key, ReadSecretFile(path));
  return std::string(kSecretEnv) + "=" + key;
}

// Starts the worker of `slot` (0 .. workers-1; a replacement keeps its slot).
Status RunLoop::StartWorker(int slot) {
  std::string exe = o_.worker_exe.empty() ? ExecutablePath() : o_.worker_exe;
  if (exe.empty()) exe = "goldminer";
  LaunchRequest r;
  r.role = ProcessRole::kWorker;
  r.slot = slot;
  r.threads = o_.spec.ThreadsOf(slot);
  // Beyond the allocation's own workers (a draining one still holds its CPUs), an
  // addition is a job of its own in the elastic partition.
  int in_allocation = 0;
  for (const auto& [pid, w] : workers_) in_allocation += w.elastic ? 0 : 1;
  if (o_.elastic_from >= 0 && in_allocation >= o_.elastic_from) {
    if (edges_.clock->Now() < elastic_hold_until_) {
      return Status::Unavailable(
          "the allocation's CPUs are used, and the elastic partition had no room for the "
          "last worker job: none is submitted for " +
          Fixed(elastic_hold_until_ - edges_.clock->Now(), 0) + " s");
    }
    if (elastic_refused_) {
      return Status::Unavailable("Slurm refused this run's worker jobs: none is submitted");
    }
    if (edges_.pool && ElasticHeld() >= pool_grant_) {
      return Status::Unavailable("the allocation's CPUs are used, and the pool grants " +
                                 std::to_string(pool_grant_) + " elastic worker(s)");
    }
    r.elastic = true;
    r.replace = false;  // a job Slurm ended or refused is not submitted again in a loop
    r.threads = o_.elastic_cpus;
  }
  r.off_trainer_node = o_.spec.RemoteOf(slot);
  r.memory_bytes = o_.spec.MemoryOf(slot);
  r.argv = {exe,
            "worker",
            "--coordinator",
            edges_.coordinator_address,
            "--threads",
            std::to_string(r.threads),
            "--listen",
            JoinHostPort(o_.bind, 0),
            "--drain-grace",
            Fixed(o_.drain_grace_s, 1)};
  if (GetLogLevel() <= LogLevel::kDebug) r.argv.insert(r.argv.begin() + 1, "-v");  // run -v
  if (!o_.warm_python.empty()) r.argv.insert(r.argv.end(), {"--warm-python", o_.warm_python});
  GM_ASSIGN_OR_RETURN(std::string key, KeyVariable("worker.key", o_.keys_by_value));
  r.env = {key, "GOLDMINER_RUN_ID=" + run_id_};
  r.cpus = o_.worker_cpus;
  Result<pid_t> pid = supervisor_.Start(r);
  if (!pid.ok() && r.elastic && pid.status().code() == Code::kInvalidArgument) {
    ElasticRefused(pid.status().message());
    return Status::Unavailable("said above");
  }
  if (!pid.ok()) return pid.status();
  return Started(*pid, slot, r.threads, r.elastic);
}

// An elastic worker whose job has not started (registered) in its time is
// cancelled (SIGTERM to its srun withdraws the pending job), and none is tried
// for a while: the scaler does not submit and cancel in a loop.
void RunLoop::CancelUnstartedElastic() {
  const double now = edges_.clock->Now();
  for (auto& [pid, w] : workers_) {
    if (!w.elastic || w.placed || draining_.count(pid) ||
        now - w.started_s < o_.elastic_start_timeout_s) {
      continue;
    }
    elastic_hold_until_ = now + o_.elastic_retry_s;
    const std::string why = "worker " + std::to_string(w.id) + "'s job did not start within " +
                            Fixed(o_.elastic_start_timeout_s, 0) +
                            " s (the elastic partition has no room): cancelled; no elastic "
                            "worker for " +
                            Fixed(o_.elastic_retry_s, 0) + " s";
    LogWarning("run: " + why);
    recorder_.Event("worker", why);
    Drain(pid);
  }
}

// Names a worker by the id its record will have (Started gives the next id): it
// tells the coordinator, which tells us where it runs (PlaceWorkers).
void RunLoop::Tag(LaunchRequest& r) {
  if (r.role == ProcessRole::kWorker) {
    r.env.push_back("GOLDMINER_WORKER_TAG=" + std::to_string(next_worker_id_));
  }
}

// Records where workers run once they said so at registration (node, Slurm step).
void RunLoop::PlaceWorkers(const CoordinatorSummary& summary) {
  for (auto& [pid, w] : workers_) {
    if (w.placed) continue;
    auto it = summary.places.find(std::to_string(w.id));
    if (it == summary.places.end()) continue;
    recorder_.WorkerPlaced(w.id, it->second.host, it->second.step);
    w.placed = true;
    w.step = it->second.step;
    ++workers_ran_;
  }
}

int RunLoop::StartedTooLateToRegister() const {
  const double now = edges_.clock->Now();
  int young = 0;
  for (const auto& [pid, w] : workers_) {
    if (!w.placed && now - w.started_s < o_.register_report_s) ++young;
  }
  if (young > 0) {
    LogDebug("run: " + std::to_string(young) +
             " worker(s) started in the run's last seconds did not register before its end");
  }
  return young;
}

// A worker that has not registered within register_report_s is said once, with
// why Slurm keeps it waiting: nothing waits unseen. (An elastic one that waits
// longer is cancelled: CancelUnstartedElastic.)
void RunLoop::ReportWaiting() {
  if (stopped_) return;
  const double now = edges_.clock->Now();
  for (auto& [pid, w] : workers_) {
    if (w.placed || w.waiting_said || draining_.count(pid) ||
        now - w.started_s < o_.register_report_s) {
      continue;
    }
    w.waiting_said = true;
    std::string reason = edges_.why_waiting ? edges_.why_waiting(w.elastic) : "";
    const std::string why = "worker " + std::to_string(w.id) +
                            (w.elastic ? " (a job" : " (a step") + ") has not started after " +
                            Fixed(now - w.started_s, 0) + " s" +
                            (reason.empty() ? "" : ": " + reason);
    LogWarning("run: " + why);
    recorder_.Event("worker", why);
  }
}

// Slurm refused a worker job (at submission, or it ended before it registered):
// said once; the next is tried after elastic_retry_s, and after
// kMaxElasticRefusals none is for this run.
void RunLoop::ElasticRefused(const std::string& why) {
  ++elastic_refusals_;
  elastic_hold_until_ = edges_.clock->Now() + o_.elastic_retry_s;
  const bool last = elastic_refusals_ >= kMaxElasticRefusals;
  if (last) elastic_refused_ = true;
  if (elastic_refusals_ > 1 && !last) return;  // said the first time
  const std::string said =
      why + (last ? "; " + std::to_string(elastic_refusals_) +
                        " worker jobs refused: no more for this run"
                  : "; none is submitted for " + Fixed(o_.elastic_retry_s, 0) +
                        " s (--worker-mem SIZE, --elastic-cpus N and --elastic-partition P "
                        "change the request)");
  LogWarning("run: " + said);
  recorder_.Event("worker", said);
}

// Records a worker that started (a new one, or a replacement).
Status RunLoop::Started(pid_t pid, int slot, int threads, bool elastic) {
  const int64_t id = next_worker_id_++;
  workers_[pid] = Worker{slot, id, false, elastic, edges_.clock->Now(), ""};
  // A local worker runs here; a Slurm step's node is known once it registers.
  recorder_.WorkerStarted(id, pid, supervisor_.backend() == "local" ? HostName() : "", elastic);
  recorder_.Event("worker",
                  "worker " + std::to_string(id) + " started (pid " + std::to_string(pid) + ", " +
                      std::to_string(threads) + " thread(s)" +
                      (elastic ? ", a job of its own in the elastic partition" : "") + ")");
  return WritePids();
}

Status RunLoop::OnReplaced(const ProcessReplaced& r) {
  if (!r.error.empty()) {
    LogWarning("run: cannot start a replacement worker: " + r.error);
    recorder_.Event(
        "worker", "replacement of slot " + std::to_string(r.slot) + " could not start: " + r.error);
    return Status::Ok();
  }
  return Started(r.pid, r.slot, r.threads, r.elastic);
}

// A worker ended: recorded; a crash was answered by the supervisor (a replacement
// after a delay, until --max-restarts); a drained worker is not replaced.
Status RunLoop::OnWorkerEnded(const ProcessEnded& e) {
  auto w = workers_.find(e.exit.pid);
  if (w == workers_.end()) return Status::Ok();
  PlaceWorkers(edges_.summary());  // a short-lived worker: where it ran
  // An elastic worker's job that Slurm ended (preemption, scancel) ends the worker
  // too, with a drain that exits 0: its record says what Slurm did.
  std::string how = e.drained ? "drained: " : "";
  if (w->second.elastic && !e.drained && !w->second.step.empty() && edges_.elastic_job_end) {
    const std::string job_end = edges_.elastic_job_end(w->second.step);
    if (!job_end.empty()) how = job_end + ": ";
  }
  recorder_.WorkerEnded(w->second.id, how + e.exit.describe);
  const bool refused =
      w->second.elastic && !w->second.placed && !e.drained && !e.stopped && e.exit.exit_code() != 0;
  const int64_t id = w->second.id;
  // Drained before it registered (the pool took its CPUs back, its job never
  // started) or refused: not a worker that failed to register.
  if (!w->second.placed && (e.drained || refused)) ++sent_away_;
  Forget(e.exit.pid);
  if (refused && !stopped_) {
    ElasticRefused("worker " + std::to_string(id) + "'s job ended before it started (srun " +
                   e.exit.describe + ": Slurm's words are in the lines above)");
    return WritePids();
  }
  const std::string who = "worker (pid " + std::to_string(e.exit.pid) + ") " + e.exit.describe;
  if (e.will_replace) {
    LogWarning("run: " + who + "; starting another");
    recorder_.Event("worker", who + "; starting another");
  } else if (e.restarts_exhausted) {
    LogWarning("run: " + who + "; not replaced (--max-restarts " + std::to_string(o_.max_restarts) +
               " reached)");
    recorder_.Event("worker", who + "; not replaced (max restarts reached)");
  } else if (!e.drained) {
    recorder_.Event(
        "worker", how.empty() ? who : who + " (its job was " + how.substr(0, how.size() - 2) + ")");
  }
  return WritePids();
}

void RunLoop::Forget(pid_t pid) {
  cpu_of_exited_ += cpu_seen_[pid];
  cpu_seen_.erase(pid);
  draining_.erase(pid);
  workers_.erase(pid);
}

Status RunLoop::StartTrainer(int rank) {
  LaunchRequest r;
  r.role = ProcessRole::kTrainer;
  r.argv = o_.spec.command;
  GM_ASSIGN_OR_RETURN(std::string key,
                      KeyVariable("client.key", o_.keys_by_value && o_.spec.command_starts_ranks));
  r.env = {"GOLDMINER_ADDR=" + edges_.coordinator_address, key, "GOLDMINER_RUN_ID=" + run_id_,
           "GOLDMINER_RUN_DIR=" + o_.run_dir};
  if (!o_.spec.command_starts_ranks) {  // else each task's SLURM_PROCID says
    r.env.insert(r.env.end(), {"RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank),
                               "WORLD_SIZE=" + std::to_string(o_.spec.world_size)});
  }
  r.env.insert(r.env.end(), o_.trainer_env.begin(), o_.trainer_env.end());
  r.slot = rank;
  r.cpus = o_.trainer_cpus;
  return supervisor_.Start(r).status();
}

// The running workers' PIDs, one a line, in the run's directory (tests and people
// find the workers of a run there).
Status RunLoop::WritePids() {
  std::string text;
  for (const auto& [p, w] : workers_) text += std::to_string(p) + "\n";
  return WriteFileAtomic(o_.run_dir + "/workers", text);
}

// A point of the run's time series (launcher/run_recorder.h).
void RunLoop::Sample() {
  if (!recorder_.enabled() && !o_.on_rates && !autoscaler_) return;
  const CoordinatorSummary summary = edges_.summary();
  RecordOffloadNotes(summary);
  const StepCounter::Totals t = edges_.trainers();
  RunSample s;
  s.t_s = edges_.clock->Now() - start_;
  s.samples = t.samples;
  s.wait_ns = t.wait_ns;
  s.workers = static_cast<int>(workers_.size());
  s.worker_cpu_s = cpu_of_exited_;
  std::vector<pid_t> pids;
  for (const auto& [pid, w] : workers_) pids.push_back(pid);
  for (const auto& [pid, cpu] : edges_.cpu_seconds(pids)) cpu_seen_[pid] = cpu;
  for (const pid_t pid : pids) s.worker_cpu_s += cpu_seen_[pid];
  // Workers on other nodes (Slurm steps: the process here is srun) are seen in
  // what they report; on this host both count the same processes.
  s.worker_cpu_s = std::max(s.worker_cpu_s, summary.worker_cpu_s);
  PlaceWorkers(summary);
  // A worker counts as ready once it finished a split (its first one includes its
  // start-up: an exec stage's processes importing their libraries); with only
  // offloaded DataLoaders (no split), once it registered.
  s.workers_ready =
      static_cast<int>(summary.offload_only ? summary.workers_live : summary.workers_producing);
  s.workers_live = 0;
  for (const auto& [pid, w] : workers_) s.workers_live += w.placed ? 1 : 0;
  s.epoch = summary.state.epoch;
  std::vector<std::vector<StageStats>> reports;
  for (const auto& [id, report] : summary.worker_stages) reports.push_back(report);
  recorder_.StageCosts(reports);
  const std::optional<RunRates> rates = recorder_.Sample(s);
  if (rates && edges_.pool && o_.elastic_from >= 0 && !stopped_) ReportToPool(*rates);
  if (rates && autoscaler_ && !stopped_) Scale(*rates);
  if (rates && o_.on_rates) o_.on_rates(run_id_, *rates);
}

// What became of the trainers' DataLoaders since the last sample, as events.
void RunLoop::RecordOffloadNotes(const CoordinatorSummary& summary) {
  for (; offload_notes_recorded_ < summary.offload_notes.size(); ++offload_notes_recorded_)
    recorder_.Event("offload", summary.offload_notes[offload_notes_recorded_]);
  if (summary.offload_notes_dropped > 0 && !offload_dropped_said_) {
    offload_dropped_said_ = true;
    recorder_.Event("offload", "more DataLoaders than " + std::to_string(kMaxOffloadNotes) +
                                   ": the rest are not recorded one by one");
  }
}

int RunLoop::ElasticRunning() const {
  int n = 0;
  for (const auto& [pid, w] : workers_) n += w.elastic && !draining_.count(pid) ? 1 : 0;
  return n;
}

// Elastic workers draining too: until one exits, its job holds the CPUs the pool lent.
int RunLoop::ElasticHeld() const {
  int n = 0;
  for (const auto& [pid, w] : workers_) n += w.elastic ? 1 : 0;
  return n;
}

// The run's figures for the pool (the delivered rate at each worker count it ran
// at, its trainers' demand) every pool period; the pool's grant bounds its elastic
// workers, and one held beyond a lower grant is drained (the pool gives its CPUs
// to another run).
void RunLoop::ReportToPool(const RunRates& r) {
  if (r.samples_per_s > 0 && r.workers > 0 &&
      (r.workers_ready < 0 || r.workers_ready == r.workers)) {
    auto& [sum, n] = rate_at_[r.workers];
    sum += r.samples_per_s;
    ++n;
    period_rate_ += r.samples_per_s;
    period_busy_ += 1 - std::clamp(r.data_wait_fraction, 0.0, 1.0);
    ++period_n_;
  }
  const double now = edges_.clock->Now();
  if (now < next_pool_report_) return;
  // The trainers' demand over this period: what they took per second of not
  // waiting (rate / (1 - wait) over the period, not one interval's, whose jitter
  // reads as demand); the median of the last kDemandPeriods periods is reported.
  constexpr size_t kDemandPeriods = 5;
  if (period_busy_ > 0 && period_rate_ > 0 && period_busy_ >= 0.05 * period_n_) {
    demands_.push_back(period_rate_ / period_busy_);
    if (demands_.size() > kDemandPeriods) demands_.pop_front();
    std::vector<double> sorted(demands_.begin(), demands_.end());
    std::sort(sorted.begin(), sorted.end());
    demand_ = sorted[sorted.size() / 2];
  }
  period_rate_ = period_busy_ = 0;
  period_n_ = 0;
  if (!(demand_ > 0)) return;
  next_pool_report_ = now + o_.pool_period_s;
  PoolReportMsg report;
  report.run_id = o_.pool_run_id;
  report.gpus = o_.pool_gpus;
  report.slurm_job = o_.pool_slurm_job;
  report.cpus_per_worker = o_.elastic_cpus;
  report.base_workers = o_.elastic_from;
  report.extra_workers = ElasticRunning();
  report.demand_samples_per_s = demand_;
  for (const auto& [workers, figures] : rate_at_) {
    if (report.rates.size() < kMaxPoolCounts) {
      report.rates.emplace_back(workers, figures.first / figures.second);
    }
  }
  const std::optional<PoolGrantMsg> grant = edges_.pool(report);
  if (!grant) return;  // the pool did not answer: keep what is held
  if (grant->extra_workers != pool_grant_ || !pool_answered_) {
    pool_answered_ = true;
    recorder_.Event("pool", "the pool grants " + std::to_string(grant->extra_workers) +
                                " elastic worker(s) (" + std::to_string(grant->cpus) +
                                " CPUs; it held " + std::to_string(report.extra_workers) + ")" +
                                (grant->reason.empty() ? "" : ": " + grant->reason));
    recorder_.PoolGrant(PoolGrantRecord{0, "", grant->extra_workers, grant->cpus,
                                        report.extra_workers, grant->reason,
                                        report.Encode().dump()});
  }
  pool_grant_ = static_cast<int>(grant->extra_workers);
  // Beyond the grant: drain the newest elastic workers (the pool gives their CPUs
  // to another run).
  while (ElasticRunning() > pool_grant_) {
    const std::optional<pid_t> pid = NextToDrain(true);
    if (!pid) break;
    const std::string why = "worker " + std::to_string(workers_.at(*pid).id) +
                            " drained: the pool grants " + std::to_string(pool_grant_) +
                            " elastic worker(s)";
    LogInfo("run: " + why);
    recorder_.Event("pool", why);
    Drain(*pid);
  }
}

// Applies the autoscaler's decision for this sample, if any.
void RunLoop::Scale(const RunRates& rates) {
  const int running = static_cast<int>(workers_.size() - draining_.size());
  autoscaler_->set_limit(WorkerLimit());
  std::optional<ScaleDecision> d = autoscaler_->Observe(rates, running);
  if (!d) return;
  LogInfo("run: autoscaler: " + d->reason);
  recorder_.Event("scale", std::to_string(running) + " -> " + std::to_string(running + d->delta) +
                               " workers: " + d->reason);
  for (int i = 0; i < d->delta; ++i) {
    const int refusals = elastic_refusals_;
    Status st = StartWorker(next_slot_++);
    if (st.ok()) continue;
    // A refusal by Slurm was said (ElasticRefused); anything else is said here.
    if (elastic_refusals_ == refusals) {
      LogWarning("run: autoscaler: cannot add a worker: " + st.message());
    }
    return;  // the count the autoscaler sees next says how many started
  }
  for (int i = 0; i < -d->delta; ++i) {
    if (std::optional<pid_t> pid = NextToDrain(false)) Drain(*pid);
  }
}

// The most workers (not draining) the run may hold now: beyond the allocation,
// what the pool grants, or only the elastic ones running while the partition had
// no room (StartWorker's rules, so the autoscaler proposes nothing it refuses).
int RunLoop::WorkerLimit() const {
  constexpr int kNone = 1 << 30;
  if (o_.elastic_from < 0) return kNone;
  if (elastic_refused_ || edges_.clock->Now() < elastic_hold_until_) {
    return o_.elastic_from + ElasticRunning();
  }
  // A draining elastic worker is not counted as running but still holds its grant.
  if (edges_.pool) {
    return o_.elastic_from + std::max(0, pool_grant_ - (ElasticHeld() - ElasticRunning()));
  }
  return kNone;
}

// The newest worker not draining yet, an elastic one first (its CPUs are lent by
// other jobs' partition); with `elastic_only`, elastic ones only.
std::optional<pid_t> RunLoop::NextToDrain(bool elastic_only) const {
  std::optional<pid_t> next;
  std::pair<bool, int64_t> best{false, -1};
  for (const auto& [pid, w] : workers_) {
    if (draining_.count(pid) || (elastic_only && !w.elastic)) continue;
    if (std::make_pair(w.elastic, w.id) > best) next = pid, best = {w.elastic, w.id};
  }
  return next;
}

// SIGTERM: it finishes what it holds and exits 0 once that is acknowledged
// (goldminer-worker(1), DRAIN); the coordinator takes back what it did not deliver.
void RunLoop::Drain(pid_t pid) {
  draining_.insert(pid);
  auto w = workers_.find(pid);
  supervisor_.Drain(pid, w == workers_.end() ? std::string() : w->second.step);
}

}  // namespace gm
