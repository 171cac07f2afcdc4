#include "launcher/local_run.h"

#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "core/clock.h"
#include "core/file_util.h"
#include "core/json.h"
#include "core/host.h"
#include "core/log.h"
#include "core/paths.h"
#include "core/step_log.h"
#include "launcher/process.h"
#include "launcher/run_recorder.h"
#include "dataplane/auth.h"

namespace gm {
namespace {

// The step-log directory a trainer environment sets (GOLDMINER_PROFILE_DIR=...).
std::optional<std::string> StepDirFromEnv(const std::vector<std::string>& env) {
  const std::string prefix = std::string(kProfileDirEnv) + "=";
  for (const std::string& kv : env) {
    if (kv.rfind(prefix, 0) == 0) return kv.substr(prefix.size());
  }
  return std::nullopt;
}

class LocalRun {
 public:
  LocalRun(const LocalRunConfig& c, CoordinatorServer& coordinator, std::string run_id,
           TempDir& dir, RunRecorder& recorder, std::string steps_dir)
      : c_(c), coordinator_(coordinator), run_id_(std::move(run_id)), dir_(dir),
        recorder_(recorder), steps_(steps_dir), steps_dir_(std::move(steps_dir)),
        start_(MonotonicSeconds()) {
    if (c_.autoscale) autoscaler_.emplace(*c_.autoscale);
    next_slot_ = c_.workers;
  }

  Result<LocalRunResult> Execute() {
    LocalRunResult result;
    result.run_id = run_id_;
    result.exit = "exited with status 0";
    Sample();  // the baseline
    for (int i = 0; i < c_.workers; ++i) GM_RETURN_IF_ERROR(StartWorker(i));
    for (int rank = 0; rank < c_.world_size; ++rank) GM_RETURN_IF_ERROR(StartTrainer(rank));
    double stop_deadline = 0;
    double next_sample = start_ + c_.sample_interval_s;
    while (!trainers_.empty()) {
      if (MonotonicSeconds() >= next_sample) {
        Sample();
        next_sample += c_.sample_interval_s;
      }
      if (!result.stopped && StopRequested()) {
        result.stopped = true;
        if (signalled_ && c_.stop_cause) result.stop_cause = c_.stop_cause();
        // Said before stopping anything: if the system kills us before the end, the
        // record still tells why the run stopped.
        recorder_.Event("run", result.stop_cause.empty()
                                   ? std::string("stopping: a signal asked the run to stop")
                                   : "stopping: the job was preempted (" + result.stop_cause +
                                         "); the trainer resumes from its checkpoint in a new run");
        stop_deadline = MonotonicSeconds() + c_.stop_grace_s;
        for (pid_t t : trainers_) group_.Signal(t, SIGTERM);
      }
      if (result.stopped && MonotonicSeconds() > stop_deadline) {
        for (pid_t t : trainers_) group_.Signal(t, SIGKILL);
      }
      std::optional<ChildExit> e = group_.WaitAny(0.2);
      if (!e) continue;
      if (trainers_.erase(e->pid)) {
        if (e->exit_code() != 0 && result.exit_code == 0) {
          if (!result.stopped) {
            LogWarning("run: trainer (pid " + std::to_string(e->pid) + ") " + e->describe);
          }
          result.exit_code = e->exit_code();
          result.exit = e->describe;
        }
      } else if (auto w = workers_.find(e->pid); w != workers_.end()) {
        last_exit_slot_ = w->second.slot;
        // A worker the autoscaler drained is not replaced, however it ended (a
        // Slurm step's srun reports the signal that ended the step).
        const bool drained = draining_.erase(e->pid) > 0;
        recorder_.WorkerEnded(w->second.id, (drained ? "drained: " : "") + e->describe);
        cpu_of_exited_ += cpu_seen_[e->pid];
        cpu_seen_.erase(e->pid);
        workers_.erase(w);
        if (!drained) GM_RETURN_IF_ERROR(OnWorkerExit(*e));
        else GM_RETURN_IF_ERROR(WritePids());
      }
    }
    stopped_ = true;  // the trainers are done: no more scaling
    Sample();         // the last point, with the workers still running
    StopAll();
    return result;
  }

  // Stops every child still running (SIGTERM, SIGKILL after 10 s) and records how
  // each worker ended. Safe to call again.
  void StopAll() {
    stopped_ = true;  // no more scaling
    for (const ChildExit& e : group_.TerminateAll(10)) {
      if (e.exit_code() != 0 && e.exit_code() != 128 + SIGTERM) {
        LogDebug("run: worker " + std::to_string(e.pid) + " " + e.describe);
      }
      auto w = workers_.find(e.pid);
      if (w == workers_.end()) continue;
      recorder_.WorkerEnded(w->second.id, "stopped at the end of the run: " + e.describe);
      cpu_of_exited_ += cpu_seen_[e.pid];
      cpu_seen_.erase(e.pid);
      workers_.erase(w);
    }
  }

 private:
  bool StopRequested() {
    if (c_.signal != nullptr) {
      if (int sig = c_.signal->exchange(0)) {
        LogWarning("run: signal " + std::to_string(sig) + ": stopping the trainer and workers");
        signalled_ = true;
        return true;
      }
    }
    return c_.should_stop && c_.should_stop();
  }

  // Starts the worker of `slot` (0 .. workers-1; a replacement keeps its slot).
  Status StartWorker(int slot) {
    std::string exe = c_.worker_exe.empty() ? ExecutablePath() : c_.worker_exe;
    if (exe.empty()) exe = "goldminer";
    const int threads = static_cast<size_t>(slot) < c_.worker_threads.size()
                            ? c_.worker_threads[static_cast<size_t>(slot)]
                            : c_.threads_per_worker;
    std::vector<std::string> argv =
        c_.worker_prefix ? c_.worker_prefix(slot, threads) : std::vector<std::string>{};
    for (std::string a : {exe, std::string("worker"), std::string("--coordinator"),
                          coordinator_.address(), std::string("--threads"),
                          std::to_string(threads), std::string("--listen"),
                          JoinHostPort(c_.bind, 0)}) {
      argv.push_back(std::move(a));
    }
    GM_ASSIGN_OR_RETURN(pid_t pid,
                        group_.Spawn(argv, {"GOLDMINER_SECRET_FILE=" + dir_.path() + "/worker.key",
                                            "GOLDMINER_RUN_ID=" + run_id_}));
    const int64_t id = next_worker_id_++;
    workers_[pid] = Worker{slot, id};
    recorder_.WorkerStarted(id, pid, HostName());
    recorder_.Event("worker", "worker " + std::to_string(id) + " started (pid " +
                                  std::to_string(pid) + ", " + std::to_string(threads) +
                                  " thread(s))");
    return WritePids();
  }

  Status StartTrainer(int rank) {
    const char* old = std::getenv("PYTHONPATH");
    std::string pythonpath = PythonPackageDir() + (old && *old ? ":" + std::string(old) : "");
    std::vector<std::string> env = {"GOLDMINER_ADDR=" + coordinator_.address(),
                                    "GOLDMINER_SECRET_FILE=" + dir_.path() + "/client.key",
                                    "GOLDMINER_RUN_ID=" + run_id_,
                                    "GOLDMINER_RUN_DIR=" + dir_.path(),
                                    "PYTHONPATH=" + pythonpath,
                                    "GOLDMINER_CLIENT_LIB=" + ClientLibraryPath(),
                                    "RANK=" + std::to_string(rank),
                                    "LOCAL_RANK=" + std::to_string(rank),
                                    "WORLD_SIZE=" + std::to_string(c_.world_size)};
    env.insert(env.end(), c_.trainer_env.begin(), c_.trainer_env.end());
    if (!StepDirFromEnv(c_.trainer_env)) {
      env.push_back(std::string(kProfileDirEnv) + "=" + steps_dir_);
    }
    GM_ASSIGN_OR_RETURN(pid_t pid, group_.Spawn(c_.command, env));
    trainers_.insert(pid);
    return Status::Ok();
  }

  // A worker that crashed is replaced (up to max_restarts); its splits are re-made
  // by the others meanwhile. A clean exit (drained) is not replaced.
  Status OnWorkerExit(const ChildExit& e) {
    if (e.exit_code() == 0) {
      recorder_.Event("worker", "worker (pid " + std::to_string(e.pid) + ") " + e.describe);
      return WritePids();
    }
    if (restarts_ >= c_.max_restarts) {
      LogWarning("run: worker " + std::to_string(e.pid) + " " + e.describe +
                 "; not replaced (--max-restarts " + std::to_string(c_.max_restarts) + " reached)");
      recorder_.Event("worker", "worker (pid " + std::to_string(e.pid) + ") " + e.describe +
                                    "; not replaced (max restarts reached)");
      return WritePids();
    }
    ++restarts_;
    LogWarning("run: worker " + std::to_string(e.pid) + " " + e.describe + "; starting another");
    recorder_.Event("worker", "worker (pid " + std::to_string(e.pid) + ") " + e.describe +
                                  "; starting another");
    return StartWorker(last_exit_slot_);
  }

  Status WritePids() {
    std::string text;
    for (const auto& [p, w] : workers_) text += std::to_string(p) + "\n";
    return WriteFileAtomic(dir_.path() + "/workers", text);
  }

 public:
  // A point of the run's time series (launcher/run_recorder.h).
  void Sample() {
    if (!recorder_.enabled() && !c_.progress && !autoscaler_) return;
    steps_.Update();
    const StepCounter::Totals t = steps_.totals();
    RunSample s;
    s.t_s = MonotonicSeconds() - start_;
    s.samples = t.samples;
    s.wait_ns = t.wait_ns;
    s.workers = static_cast<int>(workers_.size());
    s.worker_cpu_s = cpu_of_exited_;
    for (const auto& [pid, w] : workers_) {
      if (auto cpu = ProcessCpuSeconds(pid)) cpu_seen_[pid] = *cpu;
      s.worker_cpu_s += cpu_seen_[pid];
    }
    const CoordinatorSummary summary = coordinator_.Summary();
    s.epoch = summary.state.epoch;
    std::vector<nlohmann::json> reports;
    for (const auto& [id, report] : summary.worker_stages) reports.push_back(report);
    recorder_.StageCosts(reports);
    const std::optional<RunRates> rates = recorder_.Sample(s);
    if (rates && autoscaler_ && !stopped_) Scale(*rates);
    if (!rates || !c_.progress) return;
    const std::string line = "run " + run_id_ + ": " + RatesLine(*rates);
    if (::isatty(2)) {
      std::fprintf(stderr, "\r%-100s", line.c_str());
      status_line_shown_ = true;
    } else if (rates->t_s >= next_progress_log_) {
      LogInfo(line);
      next_progress_log_ = rates->t_s + 30;
    }
  }

  // Applies the autoscaler's decision for this sample, if any.
  void Scale(const RunRates& rates) {
    const int running = static_cast<int>(workers_.size() - draining_.size());
    std::optional<ScaleDecision> d = autoscaler_->Observe(rates, running);
    if (!d) return;
    EndStatusLine();
    LogInfo("run: autoscaler: " + d->reason);
    recorder_.Event("scale", std::to_string(running) + " -> " + std::to_string(running + d->delta) +
                                 " workers: " + d->reason);
    if (d->delta > 0) {
      Status st = StartWorker(next_slot_++);
      if (!st.ok()) LogWarning("run: autoscaler: cannot add a worker: " + st.message());
      return;
    }
    // Drain the newest worker not draining yet: SIGTERM (it finishes what it holds
    // and exits 0; the coordinator takes back what it did not deliver).
    pid_t newest = 0;
    int64_t newest_id = -1;
    for (const auto& [pid, w] : workers_) {
      if (!draining_.count(pid) && w.id > newest_id) newest = pid, newest_id = w.id;
    }
    if (newest == 0) return;
    draining_.insert(newest);
    group_.Signal(newest, SIGTERM);
  }

  // Ends the status line on a terminal, so what follows starts on a line of its own.
  void EndStatusLine() {
    if (status_line_shown_) std::fputc('\n', stderr);
    status_line_shown_ = false;
  }

 private:
  struct Worker {
    int slot = 0;     // 0 .. workers-1: its size, kept by a replacement
    int64_t id = 0;   // in the run's record; a replacement gets a new one
  };

  const LocalRunConfig& c_;
  CoordinatorServer& coordinator_;
  const std::string run_id_;
  TempDir& dir_;  // the run's private directory: the role keys (0600), the worker PIDs
  RunRecorder& recorder_;
  StepCounter steps_;            // the trainers' step logs
  const std::string steps_dir_;
  const double start_;
  ProcessGroup group_;
  std::map<pid_t, Worker> workers_;  // running workers
  int64_t next_worker_id_ = 0;
  std::map<pid_t, double> cpu_seen_;  // running workers' CPU seconds, last read
  double cpu_of_exited_ = 0;          // CPU seconds of workers that have exited
  int last_exit_slot_ = 0;        // the slot of the worker OnWorkerExit is about
  bool status_line_shown_ = false;  // a status line is on the terminal, without '\n'
  double next_progress_log_ = 0;
  std::optional<Autoscaler> autoscaler_;
  bool signalled_ = false;     // a signal (not should_stop) stopped the run
  std::set<pid_t> draining_;  // workers told to drain (SIGTERM), still running
  int next_slot_ = 0;         // the slot of the next worker the autoscaler adds
  bool stopped_ = false;      // StopAll ran
  std::set<pid_t> trainers_;
  int restarts_ = 0;
};

}  // namespace

std::string NewRunId() {
  return "run-" + std::to_string(::time(nullptr)) + "-" + std::to_string(::getpid());
}

Result<LocalRunResult> RunLocal(const LocalRunConfig& c) {
  if (c.command.empty()) {
    return Status::InvalidArgument(
        "a trainer command is needed after --, e.g. "
        "-- python3 train.py");
  }
  GM_ASSIGN_OR_RETURN(nlohmann::json doc, LoadJsonFile(c.pipeline));
  const std::string origin = std::filesystem::absolute(c.pipeline).string();
  GM_ASSIGN_OR_RETURN(TempDir dir, TempDir::Make("goldminer-run-"));
  GM_ASSIGN_OR_RETURN(std::string secret, NewSecret());
  // The secret stays in this process (the coordinator); workers and trainers get
  // their role's key only (dataplane/auth.h).
  GM_RETURN_IF_ERROR(WriteSecretFile(dir.path() + "/worker.key", RoleKey(secret, kWorkerRole)));
  GM_RETURN_IF_ERROR(WriteSecretFile(dir.path() + "/client.key", RoleKey(secret, kClientRole)));
  const std::string run_id =
      !c.run_name.empty() ? c.run_name : NewRunId();

  CoordinatorConfig cc;
  cc.host = c.bind;
  cc.port = c.port;
  cc.secret = secret;
  cc.pipeline_doc = doc;
  cc.pipeline_origin = origin;
  cc.base_dir = std::filesystem::path(origin).parent_path().string();
  cc.samples_per_split = c.samples_per_split;
  cc.world_size = c.world_size;
  cc.epochs = c.epochs;
  cc.liveness_timeout_s = c.liveness_timeout_s;
  cc.run_id = run_id;
  GM_ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorServer> coordinator, CoordinatorServer::Start(cc));
  LogInfo("run " + run_id + ": coordinator at " + coordinator->address() + ", " +
          std::to_string(c.workers) + " workers, " + std::to_string(c.world_size) +
          " trainer rank(s)");
  if (const std::string notice = coordinator->pipeline().OrderNotice();
      c.order_notice && !notice.empty()) {
    LogInfo("run: " + notice);
  }
  RunRecorder recorder(c.store, run_id, c.world_size);
  RunRecord record;
  record.id = run_id;
  record.backend = c.backend;
  record.pipeline_path = origin;
  record.plan_path = c.plan_path;
  record.command = c.command;
  record.world_size = c.world_size;
  if (const char* job = std::getenv("SLURM_JOB_ID"); job && *job) record.job_id = job;
  record.host = HostName();
  record.pid = ::getpid();
  GM_RETURN_IF_ERROR(recorder.Begin(record));
  recorder.Event("run", "run started: " + std::to_string(c.workers) + " worker(s), " +
                            std::to_string(c.world_size) + " trainer rank(s), coordinator at " +
                            coordinator->address());
  std::string steps_dir;
  if (auto from_env = StepDirFromEnv(c.trainer_env)) {
    steps_dir = *from_env;
  } else {
    steps_dir = dir.path() + "/steps";
    GM_RETURN_IF_ERROR(MakeDirs(steps_dir));
  }
  LocalRun run(c, *coordinator, run_id, dir, recorder, steps_dir);
  Result<LocalRunResult> result = run.Execute();
  run.StopAll();  // after a failure, what was started
  run.EndStatusLine();
  coordinator->Stop();
  if (!result.ok()) {
    recorder.Event("run", "run failed: " + result.status().message());
    recorder.End("failed", 1);
    return result.status();
  }
  result->summary = coordinator->Summary();
  result->status = !result->stopped            ? (result->exit_code == 0 ? "succeeded" : "failed")
                   : result->stop_cause.empty() ? "cancelled"
                                                : "preempted";
  recorder.Event("run", "run " + result->status +
                            (result->stop_cause.empty() ? "" : " (" + result->stop_cause + ")") +
                            ": the trainer " + result->exit);
  recorder.End(result->status, result->exit_code);
  return result;
}

}  // namespace gm
