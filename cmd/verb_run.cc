// `goldminer run`: a training run with its data workers. It runs the coordinator
// here, starts N `goldminer worker --coordinator` processes (children on this
// machine, or each its own Slurm job step through srun inside an allocation) and the
// trainer command (one process per rank, here), restarts workers that crash,
// records the run in runs.db, and exits with the trainer's exit status.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iterator>
#include <map>
#include <thread>

#include "cmd/cli.h"
#include "cmd/run_flags.h"
#include "cmd/stop_signals.h"
#include "core/host.h"
#include "core/log.h"
#include "core/os/cpus.h"
#include "core/plan.h"
#include "core/store/sqlite_run_store.h"
#include "core/trainer_env.h"
#include "dataplane/auth.h"
#include "launcher/pool_client.h"
#include "launcher/process_launcher.h"
#include "launcher/run_plan.h"
#include "launcher/slurm_job.h"
#include "launcher/slurm_query.h"
#include "launcher/training_run.h"
#include "reports/status_line.h"

namespace gm::cli {
namespace {

// The run's status line: rewritten in place on a terminal, else logged every 30 s
// of the run from its 30th second (a short run stays quiet); with -v, from its first.
std::function<void(const std::string&, const RunRates&)> ShowRates() {
  const double first_s = GetLogLevel() <= LogLevel::kDebug ? 0.0 : 30.0;
  return [next_log_s = first_s](const std::string& run_id, const RunRates& rates) mutable {
    const std::string line = "run " + run_id + ": " + reports::RatesLine(rates);
    if (StderrIsTerminal()) {
      ShowStatusLine(line);
    } else if (rates.t_s >= next_log_s) {
      LogInfo(line);
      next_log_s = rates.t_s + 30;
    }
  };
}

struct RunFlags {
  std::string backend = "auto";
  std::string plan;
  RunSpec spec;  // --pipeline, --workers, ... (cmd/run_flags.h), or from --plan
  std::string bind = "127.0.0.1";
  int port = 0;
  double liveness_timeout_s = 10;
  std::optional<int> stall_timeout_s;  // --stall-timeout: the trainer's GOLDMINER_STALL_TIMEOUT_S
  std::string offload = "exact";       // --offload
  std::string offload_cut = "auto";    // --offload-cut: GOLDMINER_OFFLOAD_CUT
  std::optional<int> dataloader_workers;  // --dataloader-workers: GOLDMINER_DATALOADER_WORKERS
  int max_restarts = 3;
  std::string db = "runs.db";
  bool no_db = false;
  std::string name;
  double sample_interval_s = 2;
  bool no_progress = false;
  std::string autoscale = "off";
  int min_workers = 1;
  int max_workers = 0;  // 0: max(workers, this machine's CPUs)
  double scale_period_s = 10;
  double drain_grace_s = 10;
  std::string elastic_partition;  // --elastic-partition: workers beyond the allocation
  int elastic_max = 4;
  int elastic_cpus = 0;    // 0: the run's largest worker
  std::string worker_mem;  // --worker-mem SIZE: each worker step's and worker job's --mem
  std::string pool;        // --pool HOST:PORT
  std::string pool_key_file;
  int elastic_from = -1;         // set by AutoscaleOptions: the allocation's own workers at most
  std::string trainer_cpus;      // --trainer-cpus LIST
  std::optional<SlurmJob> job;   // the Slurm job we run in, read once (none outside one)
  std::optional<Plan> plan_doc;  // --plan's plan, as read
};

// --trainer-cpus (from the flag, or a plan's kept CPUs; "none": no pinning): the
// trainer on those CPUs, and the workers started here on the others this process
// may use, unless $GOLDMINER_WORKER_CPUS places them (the workers pin themselves
// to it; an overlap is only warned about). Local backend only: under Slurm, worker
// steps get their own CPUs (srun --exact).
Status ApplyTrainerCpus(const RunFlags& f, RunConfig& c) {
  if (f.trainer_cpus.empty() || f.trainer_cpus == "none") return Status::Ok();
  const std::string what = "--trainer-cpus";
  if (f.backend != "local") {
    return Status::InvalidArgument(what +
                                   " is for --backend local: under Slurm each worker is a "
                                   "job step with CPUs of its own (srun --exact), and the "
                                   "trainer has the batch step's");
  }
  GM_ASSIGN_OR_RETURN(c.trainer_cpus, ParseCpuList(f.trainer_cpus, what));
  GM_RETURN_IF_ERROR(CheckCpusAllowed(c.trainer_cpus, what));
  if (const char* env = std::getenv("GOLDMINER_WORKER_CPUS"); env != nullptr && *env != '\0') {
    GM_ASSIGN_OR_RETURN(std::vector<int> workers, ParseCpuList(env, "GOLDMINER_WORKER_CPUS"));
    std::vector<int> shared;
    std::set_intersection(workers.begin(), workers.end(), c.trainer_cpus.begin(),
                          c.trainer_cpus.end(), std::back_inserter(shared));
    if (!shared.empty()) {
      LogWarning("run: GOLDMINER_WORKER_CPUS=" + std::string(env) + " shares CPU(s) " +
                 FormatCpuList(shared) + " with " + what + " " + f.trainer_cpus);
    }
    return Status::Ok();
  }
  GM_ASSIGN_OR_RETURN(std::vector<int> allowed, AllowedCpus());
  std::set_difference(allowed.begin(), allowed.end(), c.trainer_cpus.begin(), c.trainer_cpus.end(),
                      std::back_inserter(c.worker_cpus));
  if (c.worker_cpus.empty()) {
    return Status::InvalidArgument(what + " " + f.trainer_cpus +
                                   " leaves no CPU for the workers "
                                   "(this process may use " +
                                   FormatCpuList(allowed) +
                                   "); keep at least one out of the list, or set "
                                   "GOLDMINER_WORKER_CPUS to say where the workers run");
  }
  return Status::Ok();
}

// auto: slurm inside a job (SLURM_JOB_ID), else local. The Slurm backend listens on
// every interface unless --bind says otherwise: workers on other nodes connect.
Status ResolveBackend(RunFlags& f, const CLI::App& sub) {
  f.job = SlurmJob::FromEnvironment();
  if (f.backend == "auto") f.backend = f.job ? "slurm" : "local";
  if (f.backend != "slurm") return Status::Ok();
  if (!f.job) {
    return Status::InvalidArgument(
        "--backend slurm: SLURM_JOB_ID is not set, so there is no allocation to start "
        "workers in; run inside a job (sbatch job.sbatch, as `goldminer plan --sbatch` "
        "writes it), or use --backend local");
  }
  if (sub.count("--bind") == 0) f.bind = "0.0.0.0";
  return Status::Ok();
}

// A run refused before it starts (e.g. --backend slurm outside a job) is still
// recorded, as failed with the reason, so the record shows the attempt; returns
// `why` for the caller to report.
Status RecordRefused(const RunFlags& f, const Status& why) {
  if (f.no_db) return why;
  Result<std::unique_ptr<SqliteRunStore>> store = SqliteRunStore::Open(f.db);
  if (!store.ok()) return why;
  RunRecord run;
  run.id = !f.name.empty() ? f.name : NewRunId();
  run.backend = f.backend;
  run.pipeline_path = f.spec.pipeline;
  run.plan_path = f.plan;
  run.command = f.spec.command;
  run.world_size = f.spec.world_size;
  run.host = HostName();
  run.pid = ::getpid();
  if (f.job) run.job_id = f.job->job_id;
  if ((*store)->BeginRun(run).ok()) {
    EventRecord e;
    e.run_id = run.id;
    e.kind = "run";
    e.message = "run refused: " + why.message();
    (void)(*store)->AddEvent(e);
    (void)(*store)->EndRun(run.id, "failed", kExitFailure);
  }
  return why;
}

// Takes the pipeline, workers, world size and (when none is given after --) the
// trainer command from plan.json (launcher/run_plan.h). Flags given explicitly win.
Status ApplyPlan(RunFlags& f, const CLI::App& sub) {
  GM_ASSIGN_OR_RETURN(Plan plan, LoadPlan(f.plan));
  f.plan_doc = plan;
  PlanFlagsGiven given;
  given.pipeline = sub.count("--pipeline") > 0;
  given.workers = sub.count("--workers") > 0;
  given.threads_per_worker = sub.count("--threads-per-worker") > 0;
  given.world_size = sub.count("--world-size") > 0;
  given.offload = sub.count("--offload") > 0;
  given.trainer_cpus = sub.count("--trainer-cpus") > 0;
  const bool local = f.backend == "local";
  std::vector<int> allowed;
  if (local && !given.trainer_cpus) {
    GM_ASSIGN_OR_RETURN(allowed, AllowedCpus());
  }
  RunFromPlan run{f.spec, f.offload, f.dataloader_workers, f.trainer_cpus};
  GM_ASSIGN_OR_RETURN(PlanNotes notes, ApplyRunPlan(plan, f.plan, given, local, allowed, run));
  f.spec = std::move(run.spec);
  f.offload = std::move(run.offload);
  f.dataloader_workers = run.dataloader_workers;
  f.trainer_cpus = std::move(run.trainer_cpus);
  for (const std::string& w : notes.warnings) LogWarning(w);
  for (const std::string& line : notes.info) LogInfo(line);
  return Status::Ok();
}

// A trainer command that is srun starts the ranks itself (its tasks): the run starts
// it once, sets no RANK for it, and counts its tasks as the world size unless
// --world-size says otherwise.
Status ApplySrunTrainer(RunFlags& f, const CLI::App& sub) {
  GM_ASSIGN_OR_RETURN(std::optional<int> tasks, SrunTaskCount(f.spec.command));
  if (!tasks) return Status::Ok();
  f.spec.command_starts_ranks = true;
  if (sub.count("--world-size") == 0 && f.plan.empty()) f.spec.world_size = *tasks;
  LogInfo("run: the trainer command is srun: its " + std::to_string(f.spec.world_size) +
          " task(s) are the trainer's ranks (each reads SLURM_PROCID; --world-size N says how "
          "many it starts)");
  return Status::Ok();
}

// The trainer's program exists: a path that is an executable file, or a name found
// in PATH. Checked before anything starts, so a typo costs no worker step.
Status CheckTrainerCommand(const std::vector<std::string>& command) {
  if (command.empty()) return Status::Ok();  // reported with the usage
  const std::string& program = command[0];
  const auto runnable = [](const std::string& path) {
    std::error_code ec;
    return ::access(path.c_str(), X_OK) == 0 && !std::filesystem::is_directory(path, ec);
  };
  if (program.find('/') != std::string::npos) {
    if (runnable(program)) return Status::Ok();
  } else if (const char* path = std::getenv("PATH")) {
    std::string dirs = path;
    for (size_t start = 0; start <= dirs.size();) {
      const size_t end = std::min(dirs.find(':', start), dirs.size());
      const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
      if (runnable(dir + "/" + program)) return Status::Ok();
      start = end + 1;
    }
  }
  return Status::NotFound("the trainer command '" + program + "' " +
                          (program.find('/') != std::string::npos ? "is not an executable file"
                                                                  : "was not found in PATH") +
                          "; give the program after --, e.g. -- python3 train.py");
}

// The row of the plan a run runs, by its digest: the newest recorded with the same
// content, or a new one (a plan made elsewhere, or with --no-db), linked to its
// profile when that is recorded here. The run's record points at it, so the report
// needs no plan.json.
Result<int64_t> PlanRow(RunStore& store, const Plan& plan, const std::string& path) {
  GM_ASSIGN_OR_RETURN(std::optional<int64_t> found, store.FindPlan(PlanDigest(plan)));
  if (found) return *found;
  GM_ASSIGN_OR_RETURN(std::optional<int64_t> profile_id, FindPlanProfile(store, plan));
  GM_ASSIGN_OR_RETURN(int64_t id, store.AddPlan(plan, profile_id));
  LogInfo("run: " + path + " was not recorded in runs.db: recorded it as plan " +
          std::to_string(id));
  return id;
}

// --autoscale on's options from the flags, checked; under Slurm --max-workers is
// lowered to what fits in the allocation (a step beyond it would wait forever).
// `elastic_from`: with --elastic-partition, the allocation's own workers at most
// (workers beyond it are jobs of their own), else -1.
Result<AutoscalerOptions> AutoscaleOptions(const RunFlags& f, int* elastic_from) {
  *elastic_from = -1;
  AutoscalerOptions a;
  a.min_workers = f.min_workers;
  a.max_workers =
      f.max_workers > 0
          ? f.max_workers
          : std::max(f.spec.workers, static_cast<int>(std::thread::hardware_concurrency()));
  a.period_s = f.scale_period_s;
  if (a.min_workers > a.max_workers || f.spec.workers < a.min_workers ||
      f.spec.workers > a.max_workers) {
    return Status::InvalidArgument("--autoscale on: need --min-workers (" +
                                   std::to_string(a.min_workers) + ") <= --workers (" +
                                   std::to_string(f.spec.workers) + ") <= --max-workers (" +
                                   std::to_string(a.max_workers) + ")");
  }
  if (f.backend == "slurm" && !f.job->CheckWorkersFit(f.spec, a.max_workers).ok()) {
    // Never more workers than the allocation holds: a step beyond it would wait.
    int fit = f.spec.workers;
    while (fit < a.max_workers && f.job->CheckWorkersFit(f.spec, fit + 1).ok()) ++fit;
    LogInfo("run: --autoscale: at most " + std::to_string(fit) +
            " worker(s) fit in the "
            "allocation (--max-workers " +
            std::to_string(a.max_workers) + ")");
    a.max_workers = fit;
  }
  if (!f.elastic_partition.empty()) {
    // The allocation's own workers first, then up to --elastic-max jobs of their own.
    *elastic_from = a.max_workers;
    a.max_workers += f.elastic_max;
    LogInfo("run: --elastic-partition " + f.elastic_partition + ": up to " +
            std::to_string(f.elastic_max) + " worker job(s) beyond the allocation's " +
            std::to_string(*elastic_from));
  }
  return a;
}

// What each worker asks of Slurm's memory: --worker-mem for every worker, else the
// plan's figure, else a share of its component's memory (SlurmJob::ShareWorkerMemory,
// said in one line). Under Slurm only: local workers ask for nothing.
Status ApplyWorkerMemory(RunFlags& f) {
  if (!f.worker_mem.empty()) {
    GM_ASSIGN_OR_RETURN(uint64_t mb, ParseMemoryMb(f.worker_mem, "--worker-mem"));
    f.spec.worker_memory_bytes = mb << 20;
    for (WorkerSlot& slot : f.spec.slots) slot.memory_bytes = mb << 20;
    return Status::Ok();
  }
  if (f.backend != "slurm") return Status::Ok();
  const std::string said = f.job->ShareWorkerMemory(f.spec, f.spec.workers);
  if (!said.empty()) LogInfo("run: " + said);
  return Status::Ok();
}

// An elastic worker job's --mem: --worker-mem, else the run's own job's memory per
// CPU times its CPUs, else 0 (ElasticSrunArgv's default per CPU).
uint64_t ElasticMemoryMb(const RunFlags& f, int cpus) {
  if (!f.worker_mem.empty()) return f.spec.worker_memory_bytes >> 20;
  const uint64_t per_cpu = f.job->MemoryPerCpuMb();
  return per_cpu > 0 ? std::max(kMinWorkerMemoryMb, per_cpu * static_cast<uint64_t>(cpus)) : 0;
}

// --elastic-partition's conditions: Slurm, and the autoscaler that asks for them.
Status CheckElasticFlags(const RunFlags& f) {
  if (f.elastic_partition.empty()) return Status::Ok();
  if (f.backend != "slurm") {
    return Status::InvalidArgument(
        "--elastic-partition " + f.elastic_partition +
        " submits workers as Slurm jobs of their own, and this run is on the " + f.backend +
        " backend: run it inside a Slurm job (sbatch), or drop --elastic-partition");
  }
  if (f.autoscale != "on") {
    return Status::InvalidArgument(
        "--elastic-partition adds workers when the autoscaler asks for more than the "
        "allocation holds: add --autoscale on");
  }
  return Status::Ok();
}

// --pool's conditions: the workers it grants are elastic ones.
Status CheckPoolFlags(const RunFlags& f) {
  if (f.pool.empty()) return Status::Ok();
  if (f.elastic_partition.empty()) {
    return Status::InvalidArgument(
        "--pool " + f.pool +
        " grants workers beyond the allocation, which need --elastic-partition (and "
        "--autoscale on, under Slurm)");
  }
  return Status::Ok();
}

// What the flags set in the trainer: the stall timeout, the offload of its
// DataLoaders and their worker count.
Status ApplyTrainerFlags(const RunFlags& f, RunConfig& c) {
  if (f.stall_timeout_s) {
    c.trainer_env.push_back(std::string(kStallTimeoutEnv) + "=" +
                            std::to_string(*f.stall_timeout_s));
  }
  // An srun trainer's step shares the allocation's CPUs, memory and GPUs with the
  // worker steps, as a trainer in the batch step does: without --overlap its step
  // asks for all of the job's CPUs and memory and waits for the workers to end.
  if (f.backend == "slurm" && f.spec.command_starts_ranks) {
    c.trainer_env.emplace_back("SLURM_OVERLAP=1");
  }
  c.offload_dataloaders = f.offload != "off";
  if (f.offload == "elastic" || f.offload == "native") {
    c.trainer_env.push_back("GOLDMINER_OFFLOAD_MODE=" + f.offload);
  }
  if (c.offload_dataloaders) c.trainer_env.push_back("GOLDMINER_OFFLOAD_CUT=" + f.offload_cut);
  if (f.dataloader_workers) {
    if (!c.offload_dataloaders) {
      return Status::InvalidArgument(
          "--dataloader-workers sets how many virtual workers each offloaded DataLoader has, "
          "and --offload off offloads none: drop one of them");
    }
    c.trainer_env.push_back("GOLDMINER_DATALOADER_WORKERS=" +
                            std::to_string(*f.dataloader_workers));
  }
  return Status::Ok();
}

// The run's last line: how it ended and what the coordinator counted; `db`,
// when not empty, where it is recorded. When the trainer failed or was stopped,
// its own output stays the last thing the user reads (the exit status says the
// rest): the line is debug, and so is no hint about what the trainer did not do.
void LogRunEnd(const RunResult& r, const std::string& db) {
  const CoordinatorSummary& s = r.summary;
  const auto say = [&r](std::string_view m) {
    Log(r.exit_code == 0 ? LogLevel::kInfo : LogLevel::kDebug, m);
  };
  const std::string head =
      "run " + r.run_id + " " + r.status + (db.empty() ? "" : " (recorded in " + db + ")") + ": ";
  const uint64_t dataloaders =
      s.dataloaders_served + s.dataloaders_stock + s.dataloaders_in_process;
  const std::string ran = r.workers_ran < r.workers_started
                              ? ", " + std::to_string(r.workers_ran) + " of " +
                                    std::to_string(r.workers_started) + " workers ran"
                              : std::string();
  std::string channels =
      std::to_string(s.dataloaders_served) + " DataLoader(s) on virtual workers" +
      (s.dataloaders_native > 0 ? " (" + std::to_string(s.dataloaders_native) + " native)"
                                : std::string()) +
      ", " + std::to_string(s.dataloaders_stock) + " on stock local workers";
  if (s.dataloaders_in_process > 0) {
    channels += ", " + std::to_string(s.dataloaders_in_process) +
                " in the trainer's process (num_workers=0; --dataloader-workers M offloads "
                "them)";
  }
  if (s.offload_only) {
    say(head + "no pipeline; the trainer's DataLoaders were served by the data workers: " +
        channels + ", " + std::to_string(s.workers_registered) + " worker registrations" + ran);
    if (r.exit_code != 0) {
      // The trainer's own error says what went wrong.
    } else if (s.dataloaders_served == 0 && s.dataloaders_in_process > 0) {
      LogWarning(
          "run: the trainer's DataLoaders have num_workers=0, so they ran in its own process "
          "and the data workers did nothing; --dataloader-workers M offloads them to M virtual "
          "workers (the batches of num_workers=M)");
    } else if (s.dataloaders_served == 0) {
      LogWarning(
          "run: the trainer started no DataLoader with num_workers > 0 (or each fell back to "
          "stock workers: see the lines above), so the data workers did nothing; give the "
          "DataLoader num_workers, or a --pipeline for goldminer.Loader");
    }
    return;
  }
  say(head + (dataloaders > 0 ? channels + ", " : std::string()) + std::to_string(s.epochs_done) +
      " epoch(s) delivered, " + std::to_string(s.state.acks) + " batches acknowledged, " +
      std::to_string(s.workers_registered) + " worker registrations" + ran + ", " +
      std::to_string(s.state.reassignments) + " splits reassigned, " +
      std::to_string(s.state.duplicate_acks) + " duplicate acks" +
      (s.state.samples_skipped > 0
           ? ", " + std::to_string(s.state.samples_skipped) + " samples skipped (on_error)"
           : std::string()) +
      (s.workers_faulted > 0
           ? ", " + std::to_string(s.workers_faulted) + " workers dropped at a trainer's word"
           : std::string()));
}

// The autoscaler, the pool and the launcher the flags ask for, set in `c`: under
// Slurm, worker steps (and with --elastic-partition, worker jobs of their own);
// else children here.
Result<std::unique_ptr<ProcessLauncher>> ScalingAndLauncher(const RunFlags& f, RunConfig& c) {
  GM_RETURN_IF_ERROR(CheckElasticFlags(f));
  GM_RETURN_IF_ERROR(CheckPoolFlags(f));
  if (!f.pool.empty()) {
    std::string key_file = f.pool_key_file;
    if (key_file.empty()) {
      if (const char* env = std::getenv("GOLDMINER_POOL_KEY_FILE")) key_file = env;
    }
    if (key_file.empty()) {
      return Status::InvalidArgument("--pool " + f.pool +
                                     " needs the pool key: --pool-key-file FILE (or "
                                     "GOLDMINER_POOL_KEY_FILE), as the pool's admin gave it");
    }
    GM_ASSIGN_OR_RETURN(std::string secret, ReadSecretFile(key_file));
    auto pool = std::make_shared<PoolClient>(f.pool, secret);
    c.pool = [pool](const PoolReportMsg& report) { return pool->Report(report); };
  }
  int elastic_from = -1;
  if (f.autoscale == "on") {
    GM_ASSIGN_OR_RETURN(c.autoscale, AutoscaleOptions(f, &elastic_from));
  }
  if (f.backend != "slurm") return MakeChildLauncher();
  std::optional<ElasticWorkers> elastic;
  if (!f.elastic_partition.empty()) {
    const int cpus = f.elastic_cpus > 0 ? f.elastic_cpus : f.spec.ThreadsOf(0);
    elastic = ElasticWorkers{f.elastic_partition, cpus, ElasticMemoryMb(f, cpus),
                             f.job->job_id + "." + std::to_string(::getpid())};
    c.elastic_from = elastic_from;
    c.elastic_cpus = elastic->cpus;
    c.elastic_job_end = [](const std::string& step) {
      return AskJobEnd(step.substr(0, step.find('.')));
    };
  }
  c.stop_cause = [job = *f.job] { return AskStopCause(job); };
  c.why_waiting = [job = *f.job, name = elastic ? elastic->JobName() : std::string()](
                      bool is_elastic) { return AskWhyWaiting(job, is_elastic ? name : ""); };
  c.job_id = f.job->job_id;
  return MakeSlurmStepLauncher(*f.job, elastic);
}

Result<int> RunWithFlags(const RunFlags& f) {
  // Before any thread starts: a SIGTERM or SIGINT from now on stays pending until
  // the run loop takes it and stops the trainer and workers.
  StopOnSignal signals;
  if (f.spec.pipeline.empty() && f.offload == "off") {  // a usage error: exit 2
    LogError(
        "run needs --pipeline FILE or --plan plan.json, e.g. goldminer run --pipeline "
        "p.json -- python3 train.py (without one, the workers serve the trainer's torch "
        "DataLoaders, which --offload off turns off)");
    return kExitUsage;
  }
  if (f.spec.command.empty()) {
    return Status::InvalidArgument(
        "run needs a trainer command after --, e.g. "
        "goldminer run --pipeline p.json -- python3 train.py");
  }
  GM_RETURN_IF_ERROR(f.spec.Validate());
  RunConfig c;
  c.spec = f.spec;
  c.bind = f.bind;
  c.port = f.port;
  c.liveness_timeout_s = f.liveness_timeout_s;
  c.max_restarts = f.max_restarts;
  GM_RETURN_IF_ERROR(ApplyTrainerFlags(f, c));
  if (!f.plan.empty()) {
    std::error_code ec;
    c.plan_path = std::filesystem::absolute(f.plan, ec).string();
    if (ec) return Status::IoError(f.plan + ": " + ec.message());
  }
  c.run_name = f.name;
  c.sample_interval_s = f.sample_interval_s;
  c.drain_grace_s = f.drain_grace_s;
  if (!f.no_progress) c.on_rates = ShowRates();
  GM_RETURN_IF_ERROR(ApplyTrainerCpus(f, c));
  GM_ASSIGN_OR_RETURN(std::unique_ptr<ProcessLauncher> launcher, ScalingAndLauncher(f, c));
  c.launcher = launcher.get();
  std::unique_ptr<SqliteRunStore> store;
  if (!f.no_db) {
    GM_RETURN_IF_ERROR(CheckWritable(f.db, "--db"));
    GM_ASSIGN_OR_RETURN(store, SqliteRunStore::Open(f.db));
    c.store = store.get();
    if (f.plan_doc) {
      GM_ASSIGN_OR_RETURN(c.plan_id, PlanRow(*store, *f.plan_doc, f.plan));
    }
  }
  c.take_signal = [&signals] { return signals.TakePending(); };
  c.signal_reached_trainer = [&signals] { return signals.LastFromTerminal(); };
  GM_ASSIGN_OR_RETURN(RunResult r, RunTraining(c));
  ClearStatusLine();  // the trainer's last words (a traceback) stay the last lines
  LogRunEnd(r, store ? f.db : std::string());
  return r.exit_code;
}

// --autoscale and the bounds it works within.
void AddAutoscaleFlags(CLI::App& sub, RunFlags& f) {
  sub.add_option("--autoscale", f.autoscale,
                 "Add workers while the trainer waits for data and the last addition "
                 "paid off; drain one when that costs nothing (see goldminer-run(1))")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  sub.add_option("--min-workers", f.min_workers, "With --autoscale on: fewest workers")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  sub.add_option("--max-workers", f.max_workers,
                 "With --autoscale on: most workers (default: --workers or this "
                 "machine's CPUs, whichever is more)")
      ->check(CLI::Range(1, 1024));
  sub.add_option("--scale-period", f.scale_period_s,
                 "With --autoscale on: seconds of figures behind each decision")
      ->capture_default_str()
      ->check(CLI::Range(0.5, 3600.0));
  sub.add_option("--elastic-partition", f.elastic_partition,
                 "Under Slurm with --autoscale on: once the allocation's CPUs are used, "
                 "add workers as jobs of their own in this partition (a scavenger "
                 "partition Slurm may preempt; see goldminer-run(1), ELASTIC WORKERS)");
  sub.add_option("--elastic-max", f.elastic_max,
                 "With --elastic-partition: worker jobs beyond the allocation at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  sub.add_option("--elastic-cpus", f.elastic_cpus,
                 "With --elastic-partition: CPUs of each worker job (default: the run's "
                 "largest worker)")
      ->check(CLI::Range(1, 4096));
  sub.add_option("--worker-mem", f.worker_mem,
                 "Under Slurm: the memory each worker step and worker job asks (srun "
                 "--mem: 500M, 2G; default: the plan's figure, else the worker's CPUs' "
                 "share of the job's memory, the workers at most half of the trainer's "
                 "node; see goldminer-run(1), SLURM)");
  sub.add_option("--pool", f.pool,
                 "With --elastic-partition: HOST:PORT of a goldminer pool; the run reports "
                 "to it and holds at most the elastic workers it grants (goldminer-pool(1))");
  sub.add_option("--pool-key-file", f.pool_key_file,
                 "The pool key (default: $GOLDMINER_POOL_KEY_FILE)");
  sub.add_option("--drain-grace", f.drain_grace_s,
                 "Seconds a drained worker (SIGTERM: the autoscaler, scancel, Slurm's "
                 "preemption) has to finish its split and see it acknowledged; 0: it "
                 "stops at once and its split is made again elsewhere")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
}

}  // namespace

// The flags of what reaches the trainer: its stall timeout and its DataLoaders.
void AddTrainerFlags(CLI::App& sub, RunFlags& f) {
  sub.add_option("--stall-timeout", f.stall_timeout_s,
                 "Seconds a worker may hold the batch a trainer waits for without "
                 "sending it; then the trainer reports it, the coordinator drops it and "
                 "others make its splits (default 60, or the trainer's "
                 "GOLDMINER_STALL_TIMEOUT_S)")
      ->check(CLI::Range(1, 86400));
  sub.add_option("--offload", f.offload,
                 "The trainer's PyTorch DataLoaders with num_workers > 0: exact (their "
                 "workers run on the data workers, the batches stock PyTorch gives, bit "
                 "for bit), elastic (each batch seeded on its own: the same batches "
                 "whatever the number of virtual workers, which follows the data workers "
                 "the autoscaler adds and drains; not stock's batches), native (an "
                 "ImageFolder whose transform goldminer recognises is made by its own "
                 "engine, several times the images per CPU; its random draws are "
                 "goldminer's, so not stock's batches; any other runs exact, saying why) "
                 "or off (they run stock, in the trainer's host)")
      ->check(CLI::IsMember({"exact", "elastic", "native", "off"}))
      ->capture_default_str();
  sub.add_option("--offload-cut", f.offload_cut,
                 "auto: an offloaded ImageFolder whose transform ends in ToTensor (and "
                 "Normalize) comes from data workers on other hosts as uint8, a quarter "
                 "of the bytes, and the trainer applies those steps (the same batches); "
                 "off: the batches come as the collate_fn made them; on: cut on this "
                 "host too (benchmarks, tests)")
      ->check(CLI::IsMember({"auto", "off", "on"}))
      ->capture_default_str();
  sub.add_option("--dataloader-workers", f.dataloader_workers,
                 "Each offloaded DataLoader gets M virtual workers, whatever num_workers "
                 "the script set: the batches DataLoader(num_workers=M) would give, bit "
                 "for bit (M may exceed this host's cores: they run on the data workers); "
                 "with --offload elastic, M to start with, ceil(M / data workers) on each; "
                 "a DataLoader with num_workers=0 is offloaded too")
      ->check(CLI::Range(1, 1024));
}

Verb RunVerb() {
  return Verb{
      "run", "Run data workers beside the trainer command (on this machine, or as Slurm job steps)",
      [](CLI::App& sub) {
        auto f = std::make_shared<RunFlags>();
        CLI::App* app = &sub;
        sub.add_option("--backend", f->backend,
                       "Where workers run: local (child processes on this machine), slurm "
                       "(each worker a job step of the allocation run is in), auto (slurm "
                       "when SLURM_JOB_ID is set)")
            ->capture_default_str()
            ->check(CLI::IsMember({"auto", "local", "slurm"}));
        sub.add_option("--plan", f->plan,
                       "plan.json from `goldminer plan`: pipeline, workers, their threads, "
                       "world size and trainer command (flags given here win)")
            ->check(CLI::ExistingFile);
        RunSpecHelp help;
        help.pipeline =
            "pipeline.json the workers run; none: they serve only the trainer's torch "
            "DataLoaders (see --offload)";
        AddRunSpecFlags(sub, f->spec, help);
        sub.add_option("--bind", f->bind,
                       "Address the coordinator and the workers' data ports listen on: "
                       "127.0.0.1 (this machine only), a node's address, or 0.0.0.0 (every "
                       "interface; peers connect by this machine's host name)")
            ->capture_default_str();
        sub.add_option("--port", f->port, "Coordinator TCP port (0: any free port)")
            ->check(CLI::Range(0, 65535));
        sub.add_option("--liveness-timeout", f->liveness_timeout_s,
                       "Seconds of silence after which a worker is declared lost")
            ->check(CLI::Range(0.1, 3600.0));
        AddTrainerFlags(sub, *f);
        sub.add_option("--max-restarts", f->max_restarts,
                       "Crashed workers replaced at most this many times")
            ->check(CLI::Range(0, 1000000));
        sub.add_option("--db", f->db,
                       "runs.db to record the run in (SQLite): the run, its workers, a time "
                       "series and events, readable while it runs")
            ->capture_default_str();
        sub.add_flag("--no-db", f->no_db, "Do not record the run");
        sub.add_option("--name", f->name,
                       "The run's id in runs.db (unique; default: run-<time>-<pid>)");
        sub.add_option("--sample-interval", f->sample_interval_s,
                       "Seconds between points of the run's time series in runs.db")
            ->capture_default_str()
            ->check(CLI::Range(0.1, 3600.0));
        sub.add_flag("--no-progress", f->no_progress,
                     "No status line (rate, data wait, workers, epoch; on a terminal it is "
                     "rewritten in place, else logged every 30 s)");
        AddAutoscaleFlags(sub, *f);
        sub.add_option("--trainer-cpus", f->trainer_cpus,
                       "Run the trainer on these CPUs (a list as taskset writes it: 0-3) and "
                       "the workers on the others, so they do not compete; "
                       "$GOLDMINER_WORKER_CPUS, when set, places the workers instead "
                       "(--backend local only; default with --plan: the first CPUs, as many "
                       "as the plan keeps for the trainer; none: no pinning)");
        return std::function<Result<int>()>([f, app]() -> Result<int> {
          if (Status st = ResolveBackend(*f, *app); !st.ok()) return RecordRefused(*f, st);
          if (!f->plan.empty()) GM_RETURN_IF_ERROR(ApplyPlan(*f, *app));
          if (Status st = CheckTrainerCommand(f->spec.command); !st.ok())
            return RecordRefused(*f, st);
          if (Status st = ApplySrunTrainer(*f, *app); !st.ok()) return RecordRefused(*f, st);
          if (Status st = ApplyWorkerMemory(*f); !st.ok()) return RecordRefused(*f, st);
          if (f->backend == "slurm") {
            Status st = f->job->CheckWorkersFit(f->spec, f->spec.workers);
            if (!st.ok()) return RecordRefused(*f, st);
          }
          return RunWithFlags(*f);
        });
      }};
}

}  // namespace gm::cli
