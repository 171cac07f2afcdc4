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
#include "launcher/process_launcher.h"
#include "launcher/supervisor.h"
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
        start_(MonotonicSeconds()),
        own_launcher_(c.launcher != nullptr ? nullptr : MakeLocalLauncher()),
        supervisor_(c.launcher != nullptr ? *c.launcher : *own_launcher_,
                    SupervisorOptions{c.max_restarts, 0.25, 8, c.stop_grace_s, 10, {},
                                      [this](LaunchRequest& r) { Tag(r); }}) {
    if (c_.autoscale) autoscaler_.emplace(*c_.autoscale);
    next_slot_ = c_.spec.workers;
  }

  Result<LocalRunResult> Execute() {
    LocalRunResult result;
    result.run_id = run_id_;
    result.exit = "exited with status 0";
    Sample();  // the baseline
    for (int i = 0; i < c_.spec.workers; ++i) GM_RETURN_IF_ERROR(StartWorker(i));
    for (int rank = 0; rank < c_.spec.world_size; ++rank) GM_RETURN_IF_ERROR(StartTrainer(rank));
    double next_sample = start_ + c_.sample_interval_s;
    while (supervisor_.running(ProcessRole::kTrainer) > 0) {
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
        // SIGTERM now, SIGKILL after the grace period (the supervisor's).
        for (pid_t t : supervisor_.pids(ProcessRole::kTrainer)) supervisor_.Stop(t);
      }
      std::vector<ProcessReplaced> replaced;
      std::optional<ProcessEnded> e = supervisor_.Poll(0.2, &replaced);
      for (const ProcessReplaced& r : replaced) GM_RETURN_IF_ERROR(OnReplaced(r));
      if (!e) continue;
      if (e->role == ProcessRole::kTrainer) {
        if (e->exit.exit_code() != 0 && result.exit_code == 0) {
          if (!result.stopped) {
            LogWarning("run: trainer (pid " + std::to_string(e->exit.pid) + ") " + e->exit.describe);
          }
          result.exit_code = e->exit.exit_code();
          result.exit = e->exit.describe;
        }
      } else {
        GM_RETURN_IF_ERROR(OnWorkerEnded(*e));
      }
    }
    // The signal may have reached the trainers too (Slurm signals every process of
    // the job) and ended them before this loop saw it: the run was still stopped.
    if (!result.stopped && StopRequested()) {
      result.stopped = true;
      if (signalled_ && c_.stop_cause) result.stop_cause = c_.stop_cause();
    }
    stopped_ = true;  // the trainers are done: no more scaling
    Sample();         // the last point, with the workers still running
    StopAll();
    return result;
  }

  // Stops every process still running (SIGTERM, SIGKILL after 10 s) and records how
  // each worker ended. Safe to call again.
  void StopAll() {
    stopped_ = true;  // no more scaling
    if (!workers_.empty()) PlaceWorkers(coordinator_.Summary());
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
    LaunchRequest r;
    r.role = ProcessRole::kWorker;
    r.slot = slot;
    r.threads = c_.spec.ThreadsOf(slot);
    r.argv = {exe, "worker", "--coordinator", coordinator_.address(), "--threads",
              std::to_string(r.threads), "--listen", JoinHostPort(c_.bind, 0)};
    r.env = {"GOLDMINER_SECRET_FILE=" + dir_.path() + "/worker.key", "GOLDMINER_RUN_ID=" + run_id_};
    r.cpus = c_.worker_cpus;
    GM_ASSIGN_OR_RETURN(pid_t pid, supervisor_.Start(r));
    return Started(pid, slot, r.threads);
  }

  // Names a worker by the id its record will have (Started gives the next id): it
  // tells the coordinator, which tells us where it runs (PlaceWorkers).
  void Tag(LaunchRequest& r) {
    if (r.role == ProcessRole::kWorker) {
      r.env.push_back("GOLDMINER_WORKER_TAG=" + std::to_string(next_worker_id_));
    }
  }

  // Records where workers run once they said so at registration (node, Slurm step).
  void PlaceWorkers(const CoordinatorSummary& summary) {
    for (auto& [pid, w] : workers_) {
      if (w.placed) continue;
      auto it = summary.places.find(std::to_string(w.id));
      if (it == summary.places.end()) continue;
      recorder_.WorkerPlaced(w.id, it->second.host, it->second.step);
      w.placed = true;
    }
  }

  // Records a worker that started (a new one, or a replacement).
  Status Started(pid_t pid, int slot, int threads) {
    const int64_t id = next_worker_id_++;
    workers_[pid] = Worker{slot, id};
    // A local worker runs here; a Slurm step's node is known once it registers.
    recorder_.WorkerStarted(id, pid, supervisor_.backend() == "local" ? HostName() : "");
    recorder_.Event("worker", "worker " + std::to_string(id) + " started (pid " +
                                  std::to_string(pid) + ", " + std::to_string(threads) +
                                  " thread(s))");
    return WritePids();
  }

  Status OnReplaced(const ProcessReplaced& r) {
    if (!r.error.empty()) {
      LogWarning("run: cannot start a replacement worker: " + r.error);
      recorder_.Event("worker", "replacement of slot " + std::to_string(r.slot) +
                                    " could not start: " + r.error);
      return Status::Ok();
    }
    return Started(r.pid, r.slot, c_.spec.ThreadsOf(r.slot));
  }

  // A worker ended: recorded; a crash was answered by the supervisor (a replacement
  // after a delay, until --max-restarts); a drained worker is not replaced.
  Status OnWorkerEnded(const ProcessEnded& e) {
    auto w = workers_.find(e.exit.pid);
    if (w == workers_.end()) return Status::Ok();
    PlaceWorkers(coordinator_.Summary());  // a short-lived worker: where it ran
    recorder_.WorkerEnded(w->second.id, (e.drained ? "drained: " : "") + e.exit.describe);
    Forget(e.exit.pid);
    const std::string who = "worker (pid " + std::to_string(e.exit.pid) + ") " + e.exit.describe;
    if (e.will_replace) {
      LogWarning("run: " + who + "; starting another");
      recorder_.Event("worker", who + "; starting another");
    } else if (e.restarts_exhausted) {
      LogWarning("run: " + who + "; not replaced (--max-restarts " +
                 std::to_string(c_.max_restarts) + " reached)");
      recorder_.Event("worker", who + "; not replaced (max restarts reached)");
    } else if (!e.drained) {
      recorder_.Event("worker", who);
    }
    return WritePids();
  }

  void Forget(pid_t pid) {
    cpu_of_exited_ += cpu_seen_[pid];
    cpu_seen_.erase(pid);
    draining_.erase(pid);
    workers_.erase(pid);
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
                                    "WORLD_SIZE=" + std::to_string(c_.spec.world_size)};
    env.insert(env.end(), c_.trainer_env.begin(), c_.trainer_env.end());
    if (!StepDirFromEnv(c_.trainer_env)) {
      env.push_back(std::string(kProfileDirEnv) + "=" + steps_dir_);
    }
    LaunchRequest r;
    r.role = ProcessRole::kTrainer;
    r.argv = c_.spec.command;
    r.env = std::move(env);
    r.slot = rank;
    r.cpus = c_.trainer_cpus;
    GM_ASSIGN_OR_RETURN(pid_t pid, supervisor_.Start(r));
    (void)pid;
    return Status::Ok();
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
    PlaceWorkers(summary);
    s.workers_ready = static_cast<int>(summary.workers_live);
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
    supervisor_.Drain(newest);
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
    bool placed = false;  // its node and step are recorded
  };

  const LocalRunConfig& c_;
  CoordinatorServer& coordinator_;
  const std::string run_id_;
  TempDir& dir_;  // the run's private directory: the role keys (0600), the worker PIDs
  RunRecorder& recorder_;
  StepCounter steps_;            // the trainers' step logs
  const std::string steps_dir_;
  const double start_;
  std::unique_ptr<ProcessLauncher> own_launcher_;  // when the config gives none: local
  Supervisor supervisor_;            // starts, replaces, drains and stops the processes
  std::map<pid_t, Worker> workers_;  // running workers
  int64_t next_worker_id_ = 0;
  std::map<pid_t, double> cpu_seen_;  // running workers' CPU seconds, last read
  double cpu_of_exited_ = 0;          // CPU seconds of workers that have exited
  bool status_line_shown_ = false;  // a status line is on the terminal, without '\n'
  double next_progress_log_ = 0;
  std::optional<Autoscaler> autoscaler_;
  bool signalled_ = false;     // a signal (not should_stop) stopped the run
  std::set<pid_t> draining_;  // workers told to drain (SIGTERM), still running
  int next_slot_ = 0;         // the slot of the next worker the autoscaler adds
  bool stopped_ = false;      // StopAll ran
  int restarts_ = 0;
};

}  // namespace

std::string NewRunId() {
  return "run-" + std::to_string(::time(nullptr)) + "-" + std::to_string(::getpid());
}

Result<LocalRunResult> RunLocal(const LocalRunConfig& c) {
  if (c.spec.command.empty()) {
    return Status::InvalidArgument(
        "a trainer command is needed after --, e.g. "
        "-- python3 train.py");
  }
  GM_ASSIGN_OR_RETURN(nlohmann::json doc, LoadJsonFile(c.spec.pipeline));
  const std::string origin = std::filesystem::absolute(c.spec.pipeline).string();
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
  cc.samples_per_split = c.spec.samples_per_split;
  cc.world_size = c.spec.world_size;
  cc.epochs = c.spec.epochs;
  cc.liveness_timeout_s = c.liveness_timeout_s;
  cc.run_id = run_id;
  GM_ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorServer> coordinator, CoordinatorServer::Start(cc));
  LogInfo("run " + run_id + ": coordinator at " + coordinator->address() + ", " +
          std::to_string(c.spec.workers) + " workers, " + std::to_string(c.spec.world_size) +
          " trainer rank(s)");
  if (const std::string notice = coordinator->pipeline().OrderNotice();
      c.order_notice && !notice.empty()) {
    LogInfo("run: " + notice);
  }
  RunRecorder recorder(c.store, run_id, c.spec.world_size);
  RunRecord record;
  record.id = run_id;
  record.backend = c.backend;
  record.pipeline_path = origin;
  record.plan_path = c.plan_path;
  record.command = c.spec.command;
  record.world_size = c.spec.world_size;
  if (const char* job = std::getenv("SLURM_JOB_ID"); job && *job) record.job_id = job;
  record.host = HostName();
  record.pid = ::getpid();
  GM_RETURN_IF_ERROR(recorder.Begin(record));
  recorder.Event("run", "run started: " + std::to_string(c.spec.workers) + " worker(s), " +
                            std::to_string(c.spec.world_size) + " trainer rank(s), coordinator at " +
                            coordinator->address());
  if (!c.trainer_cpus.empty() || !c.worker_cpus.empty()) {
    const auto cpus = [](const std::vector<int>& list) {
      return list.empty() ? std::string("any CPU") : "CPU(s) " + FormatCpuList(list);
    };
    const std::string where = "the trainer on " + cpus(c.trainer_cpus) +
                              ", workers started here on " + cpus(c.worker_cpus);
    LogInfo("run: " + where);
    recorder.Event("run", where);
  }
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
