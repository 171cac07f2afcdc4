#include "launcher/training_run.h"

#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "core/clock.h"
#include "core/host.h"
#include "core/json.h"
#include "core/log.h"
#include "core/os/cpus.h"
#include "core/os/file_util.h"
#include "core/os/paths.h"
#include "core/os/spawn.h"
#include "core/step_log.h"
#include "dataplane/auth.h"
#include "launcher/coordinator_process.h"
#include "launcher/process_launcher.h"
#include "launcher/run_loop.h"
#include "launcher/run_recorder.h"
#include "worker/virtual_workers.h"

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

// The interpreter the trainer command runs, when it is one ("python3 train.py",
// ".venv/bin/python -m pkg"), as the trainer's sys.executable will name it: the
// data workers start its virtual-worker host as the run starts. Empty otherwise
// (torchrun, a shell script): the first DataLoader starts it.
std::string TrainerPython(const std::vector<std::string>& command) {
  if (command.empty() || !IsPythonName(command[0])) return "";
  std::optional<std::string> found = FindProgram(command[0]);
  if (!found) return "";
  std::error_code ec;
  const std::filesystem::path path = std::filesystem::absolute(*found, ec);
  return ec ? std::string() : path.lexically_normal().string();
}

// What every rank's environment adds to ours: the Python package and the client
// library, the step-log folder, and what the run's configuration adds (it wins).
// The package and library are checked first: code found there runs in the trainer.
Result<std::vector<std::string>> TrainerEnv(const RunConfig& c, const std::string& steps_dir) {
  const std::string python = PythonPackageDir(), library = ClientLibraryPath();
  GM_RETURN_IF_ERROR(CheckTrustedPath(
      python + "/goldminer",
      "the Python package goldminer puts on the trainer's PYTHONPATH (GOLDMINER_PYTHONPATH)"));
  GM_RETURN_IF_ERROR(CheckTrustedPath(
      library, "the client library the trainer's goldminer.Loader loads (GOLDMINER_CLIENT_LIB)"));
  // With the offload, the import hook first (it installs it once torch's DataLoader
  // is imported), then the package.
  std::vector<std::string> env = {
      PythonPathPrepending(c.offload_dataloaders ? ProfileHookDir() + ":" + python : python),
      "GOLDMINER_CLIENT_LIB=" + library};
  if (c.offload_dataloaders) env.push_back("GOLDMINER_OFFLOAD=workers");
  env.insert(env.end(), c.trainer_env.begin(), c.trainer_env.end());
  if (!StepDirFromEnv(c.trainer_env)) env.push_back(std::string(kProfileDirEnv) + "=" + steps_dir);
  return env;
}

// The run loop on the real edges: the coordinator, the trainers' step logs, /proc
// and the configured clock and launcher. Everything it started is stopped when it
// returns, whatever happened.
Result<RunLoopOutcome> RunWithLoop(const RunConfig& c, CoordinatorProcess& coordinator,
                                   const std::string& run_id, const std::string& run_dir,
                                   const std::string& steps_dir, RunRecorder& recorder) {
  std::unique_ptr<ProcessLauncher> own_launcher;
  if (c.launcher == nullptr) own_launcher = MakeChildLauncher();
  auto steps = std::make_shared<StepCounter>(steps_dir);
  RunLoopEdges edges;
  edges.clock = c.clock != nullptr ? c.clock : &SystemClock();
  edges.launcher = c.launcher != nullptr ? c.launcher : own_launcher.get();
  edges.coordinator_address = coordinator.address();
  edges.summary = [&coordinator] { return coordinator.Summary(); };
  edges.end_workers = [&coordinator] { coordinator.EndWorkers(); };
  edges.elastic_job_end = c.elastic_job_end;
  edges.why_waiting = c.why_waiting;
  edges.pool = c.pool;
  edges.trainers = [steps] {
    steps->Update();
    return steps->totals();
  };
  edges.cpu_seconds = CpuSecondsOfTrees;  // with their virtual DataLoader workers
  RunLoopOptions o;
  o.spec = c.spec;
  o.bind = c.bind;
  o.run_dir = run_dir;
  o.keys_by_value = c.launcher != nullptr && c.launcher->name() == "slurm";
  o.worker_exe = c.worker_exe;
  GM_ASSIGN_OR_RETURN(o.trainer_env, TrainerEnv(c, steps_dir));
  o.trainer_cpus = c.trainer_cpus;
  o.worker_cpus = c.worker_cpus;
  o.max_restarts = c.max_restarts;
  o.stop_grace_s = c.stop_grace_s;
  o.drain_grace_s = c.drain_grace_s;
  o.elastic_from = c.elastic_from;
  o.elastic_cpus = c.elastic_cpus;
  o.pool_run_id = run_id;
  o.pool_gpus = c.spec.world_size;
  // The pool may check the GPUs against the job's (goldminer pool --check-gpus).
  if (const char* job = std::getenv("SLURM_JOB_ID");
      job != nullptr && *job != '\0' && std::string_view(job).size() <= 32 &&
      std::string_view(job).find_first_not_of("0123456789") == std::string_view::npos) {
    o.pool_slurm_job = job;
  }
  if (c.autoscale) o.pool_period_s = c.autoscale->period_s;
  o.sample_interval_s = c.sample_interval_s;
  o.on_rates = c.on_rates;
  o.autoscale = c.autoscale;
  // A coordinator that cannot be started again stops the run (RunTraining says why).
  o.should_stop = [&c, &coordinator] {
    return (c.should_stop && c.should_stop()) || !coordinator.Watch();
  };
  // Without a pipeline the trainer's DataLoaders are the run's data: the workers
  // start their Python host (torch imported) as the run starts. With one, a host
  // starts when a DataLoader first asks: ahead, its torch import would take the
  // CPU the pipeline's first batches need, and its memory, for nothing when the
  // trainer offloads no DataLoader (bench/dataplane_bench.py: 0.54 of in-process
  // with it on 2 cores, 1.05 without).
  if (c.offload_dataloaders && c.spec.pipeline.empty())
    o.warm_python = TrainerPython(c.spec.command);
  o.take_signal = c.take_signal;
  o.signal_reached_trainer = c.signal_reached_trainer;
  o.stop_cause = c.stop_cause;
  RunLoop loop(std::move(o), std::move(edges), run_id, recorder);
  Result<RunLoopOutcome> outcome = loop.Execute();
  EndStatusLine();  // what follows starts on a line of its own
  return outcome;   // the loop's destructor stops what is still running
}

CoordinatorConfig CoordinatorConfigOf(const RunConfig& c, const std::string& secret,
                                      const nlohmann::json& doc, const std::string& origin,
                                      const std::string& run_id) {
  CoordinatorConfig cc;
  cc.host = c.bind;
  cc.port = c.port;
  cc.secret = secret;
  cc.pipeline_doc = doc;
  cc.pipeline_origin = origin;
  cc.offload_only = c.spec.pipeline.empty();
  cc.base_dir = std::filesystem::path(origin).parent_path().string();
  cc.samples_per_split = c.spec.samples_per_split;
  cc.world_size = c.spec.world_size;
  cc.epochs = c.spec.epochs;
  // GOLDMINER_EPOCHS_IN_FLIGHT=off: each epoch waits for the one before to be read
  // whole (to compare, as bench/dataplane_bench.py does).
  const char* in_flight = std::getenv(std::string(kEpochsInFlightEnv).c_str());
  cc.epochs_in_flight = in_flight == nullptr || std::string_view(in_flight) != "off";
  cc.liveness_timeout_s = c.liveness_timeout_s;
  cc.run_id = run_id;
  return cc;
}

// The run's row as it begins.
RunRecord RecordOf(const RunConfig& c, const std::string& run_id, const std::string& origin) {
  RunRecord record;
  record.id = run_id;
  record.backend = c.launcher != nullptr ? c.launcher->name() : "local";
  if (!c.spec.pipeline.empty()) record.pipeline_path = origin;
  record.plan_path = c.plan_path;
  record.plan_id = c.plan_id;
  record.command = c.spec.command;
  record.world_size = c.spec.world_size;
  if (!c.job_id.empty()) record.job_id = c.job_id;
  record.host = HostName();
  record.pid = ::getpid();
  return record;
}

// How the run ended, as recorded: succeeded or failed (the trainer's exit), or
// cancelled or preempted (a stop; preempted when the system said why).
RunResult ResultOf(const RunLoopOutcome& outcome, const std::string& run_id) {
  RunResult result;
  result.run_id = run_id;
  result.exit_code = outcome.exit_code;
  result.exit = outcome.exit;
  result.stopped = outcome.stopped;
  result.stop_cause = outcome.stop_cause;
  result.workers_started = outcome.workers_started;
  result.workers_ran = outcome.workers_ran;
  result.status = !result.stopped             ? (result.exit_code == 0 ? "succeeded" : "failed")
                  : result.stop_cause.empty() ? "cancelled"
                                              : "preempted";
  return result;
}

// The pipeline document and the absolute path it came from. Without a pipeline
// file the workers host only the trainer's offloaded DataLoaders
// (CoordinatorConfig::offload_only): the placeholder document, "(no pipeline)".
Result<std::pair<nlohmann::json, std::string>> PipelineOf(const RunConfig& c) {
  const bool offload_only = c.spec.pipeline.empty();
  if (offload_only && !c.offload_dataloaders) {
    return Status::InvalidArgument(
        "a run without --pipeline serves only the trainer's torch DataLoaders, and "
        "--offload off turns that off: give --pipeline FILE, or drop --offload off");
  }
  GM_ASSIGN_OR_RETURN(nlohmann::json doc, offload_only
                                              ? ParseJson(kOffloadOnlyPipeline, "(no pipeline)")
                                              : LoadJsonFile(c.spec.pipeline));
  std::error_code ec;
  std::string origin =
      std::filesystem::absolute(offload_only ? "(no pipeline)" : c.spec.pipeline, ec).string();
  if (ec) return Status::IoError(c.spec.pipeline + ": " + ec.message());
  return std::pair{std::move(doc), std::move(origin)};
}

// The coordinator, in a process of its own journaling into the run's directory
// `dir`: one that dies is started again from the journal on its address
// (launcher/coordinator_process.h).
Result<std::unique_ptr<CoordinatorProcess>> StartCoordinator(CoordinatorConfig cc,
                                                             const RunConfig& c,
                                                             const std::string& dir) {
  cc.journal_path = dir + "/coordinator.journal";
  CoordinatorProcess::Options co;
  co.exe = c.worker_exe.empty() ? ExecutablePath() : c.worker_exe;
  if (GetLogLevel() == LogLevel::kDebug) co.log_flags = {"-v"};
  if (GetLogLevel() >= LogLevel::kError) co.log_flags = {"-q"};
  return CoordinatorProcess::Start(std::move(cc), co);
}

// What the run does, in one line.
std::string RunLine(const RunConfig& c, const std::string& run_id, const std::string& address) {
  const bool offload_only = c.spec.pipeline.empty();
  const bool native = std::find(c.trainer_env.begin(), c.trainer_env.end(),
                                "GOLDMINER_OFFLOAD_MODE=native") != c.trainer_env.end();
  return "run " + run_id + ": coordinator at " + address + ", " + std::to_string(c.spec.workers) +
         " workers, " + std::to_string(c.spec.world_size) + " trainer rank(s)" +
         (offload_only ? "; no --pipeline: the workers serve only the trainer's torch "
                         "DataLoaders, each worker process of theirs a virtual worker on them"
                       : "") +
         (native ? "; --offload native: a DataLoader goldminer recognises is made by its "
                   "engine, its random crops and flips drawn by goldminer (not stock's batches)"
                 : "");
}

}  // namespace

std::string NewRunId() {
  return "run-" + std::to_string(::time(nullptr)) + "-" + std::to_string(::getpid());
}

Result<RunResult> RunTraining(const RunConfig& c) {
  if (c.spec.command.empty()) {
    return Status::InvalidArgument(
        "a trainer command is needed after --, e.g. "
        "-- python3 train.py");
  }
  const bool offload_only = c.spec.pipeline.empty();
  GM_ASSIGN_OR_RETURN(auto pipeline, PipelineOf(c));
  const auto& [doc, origin] = pipeline;
  GM_ASSIGN_OR_RETURN(TempDir dir, TempDir::Make("goldminer-run-"));
  GM_ASSIGN_OR_RETURN(std::string secret, NewSecret());
  // The secret stays in this process and the coordinator's (given over a pipe);
  // workers and trainers get their role's key only (dataplane/auth.h).
  GM_RETURN_IF_ERROR(WriteSecretFile(dir.path() + "/worker.key", RoleKey(secret, kWorkerRole)));
  GM_RETURN_IF_ERROR(WriteSecretFile(dir.path() + "/client.key", RoleKey(secret, kClientRole)));
  const std::string run_id = !c.run_name.empty() ? c.run_name : NewRunId();

  GM_ASSIGN_OR_RETURN(
      std::unique_ptr<CoordinatorProcess> coordinator,
      StartCoordinator(CoordinatorConfigOf(c, secret, doc, origin, run_id), c, dir.path()));
  // What the run does, in one line (-v: its detail as it goes).
  LogInfo(RunLine(c, run_id, coordinator->address()));
  if (const std::string& notice = coordinator->order_notice();
      c.order_notice && !notice.empty() && !offload_only) {
    LogInfo("run: " + notice);
  }
  RunRecorder recorder(c.store, run_id, c.spec.world_size);
  GM_RETURN_IF_ERROR(recorder.Begin(RecordOf(c, run_id, origin)));
  recorder.Event("run", "run started: " + std::to_string(c.spec.workers) + " worker(s), " +
                            std::to_string(c.spec.world_size) +
                            " trainer rank(s), coordinator at " + coordinator->address());
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
  Result<RunLoopOutcome> outcome =
      RunWithLoop(c, *coordinator, run_id, dir.path(), steps_dir, recorder);
  const CoordinatorSummary summary = coordinator->Finish();
  if (coordinator->restarts() > 0) {
    recorder.Event("run", "the coordinator died and was started again from its journal " +
                              std::to_string(coordinator->restarts()) + " time(s)");
  }
  if (const std::string failed = coordinator->failure(); !failed.empty() && outcome.ok()) {
    outcome = Status::Unavailable(failed);
  }
  if (!outcome.ok()) {
    recorder.Event("run", "run failed: " + outcome.status().message());
    recorder.End("failed", 1);
    return outcome.status();
  }
  RunResult result = ResultOf(*outcome, run_id);
  result.summary = summary;
  if (!result.summary.failure.empty() && result.status == "succeeded") {
    // The trainer ended well, but what it read was not every sample: the run failed.
    LogError("run: the trainer exited 0, but samples were lost: " + result.summary.failure);
    recorder.Event("run", "samples lost: " + result.summary.failure);
    result.status = "failed";
    result.exit_code = 1;
  }
  recorder.Event("run", "run " + result.status +
                            (result.stop_cause.empty() ? "" : " (" + result.stop_cause + ")") +
                            ": the trainer " + result.exit);
  recorder.End(result.status, result.exit_code);
  return result;
}

}  // namespace gm
