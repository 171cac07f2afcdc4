// `goldminer worker`: one data worker. With --coordinator it serves a run's
// trainer clients (worker/worker_service.h); with --local it runs a pipeline on
// this machine without a trainer and reports throughput and per-stage costs.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "cmd/cli.h"
#include "cmd/stop_signals.h"
#include "core/clock.h"
#include "core/host.h"
#include "core/log.h"
#include "core/os/cpus.h"
#include "core/thread_annotations.h"
#include "dataplane/auth.h"
#include "reports/run_stats.h"
#include "reports/status_line.h"
#include "worker/engine.h"
#include "worker/pipeline.h"
#include "worker/sinks.h"
#include "worker/worker_service.h"

namespace gm::cli {
namespace {

struct WorkerFlags {
  bool local = false;
  std::string pipeline;
  int threads = 0;
  int epochs = 1;
  int64_t limit = -1;
  bool json = false;
  bool digest = false;
  bool progress = true;
  std::string out;
  std::string coordinator;
  size_t samples_per_split = 256;
  std::string listen = "127.0.0.1:0";
  std::string advertise;
  std::string cpus;  // --cpus, else $GOLDMINER_WORKER_CPUS
  std::string step_name;
  size_t max_virtual_workers = 64;
  std::string warm_python;
  double drain_grace_s = 10;
};

// Pins the worker to --cpus (or $GOLDMINER_WORKER_CPUS, which `goldminer run`'s
// local workers inherit), before any thread starts; the default stage threads
// are then one per CPU of the list.
Status ApplyCpus(WorkerFlags& f) {
  if (f.cpus.empty()) {
    const char* env = std::getenv("GOLDMINER_WORKER_CPUS");
    if (env == nullptr || *env == '\0') return Status::Ok();
    f.cpus = env;
  }
  const std::string what = "worker --cpus";
  GM_ASSIGN_OR_RETURN(std::vector<int> cpus, ParseCpuList(f.cpus, what));
  GM_RETURN_IF_ERROR(PinToCpus(cpus, what));
  if (f.threads == 0) f.threads = static_cast<int>(cpus.size());
  return Status::Ok();
}

// Exit status of a worker whose coordinator went away (dataplane/messages_control.h).
constexpr int kExitCoordinatorGone = 3;

// Redraws one status line on stderr (core/log.h) while the engine runs, when stderr
// is a terminal.
class ProgressLine {
 public:
  ProgressLine(const EngineProgress& progress, uint64_t total_hint)
      : progress_(progress), total_(total_hint), t0_(MonotonicSeconds()) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~ProgressLine() {
    {
      MutexLock lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
    ClearStatusLine();
  }

 private:
  void Loop() {
    MutexLock lock(mu_);
    while (!lock.WaitFor(cv_, 0.25, [this]() REQUIRES(mu_) { return done_; })) {
      ShowStatusLine(reports::WorkerProgressLine(progress_.epoch.load(), progress_.samples.load(),
                                                 total_, MonotonicSeconds() - t0_,
                                                 progress_.skipped.load()));
    }
  }

  const EngineProgress& progress_;
  const uint64_t total_;
  const double t0_;
  Mutex mu_;
  std::condition_variable cv_;
  bool done_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

Result<int> RunLocal(const WorkerFlags& f) {
  const int threads = f.threads > 0
                          ? f.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  PipelineOptions popts;
  popts.threads = threads;
  popts.samples_per_split = f.samples_per_split;
  GM_ASSIGN_OR_RETURN(Pipeline pipeline, Pipeline::Load(f.pipeline, popts));
  if (const std::string notice = pipeline.OrderNotice(); !notice.empty()) {
    LogInfo("worker: " + notice);
  }

  EngineOptions eopts;
  eopts.threads = threads;
  eopts.epochs = f.epochs;
  eopts.limit = f.limit;

  FanOutSink sinks;
  DigestSink digest;
  if (f.digest) sinks.Add(&digest);
  std::unique_ptr<NpyDirSink> npy;
  if (!f.out.empty()) {
    GM_ASSIGN_OR_RETURN(npy, NpyDirSink::Open(f.out));
    sinks.Add(npy.get());
  }

  EngineProgress progress;
  Result<RunStats> stats = Status::Internal("not run");
  {
    std::optional<ProgressLine> line;
    uint64_t hint = pipeline.source().size_hint();
    if (f.limit >= 0) hint = std::min<uint64_t>(hint ? hint : f.limit, f.limit);
    if (f.progress && isatty(STDERR_FILENO)) line.emplace(progress, hint * f.epochs);
    stats = RunPipeline(pipeline, eopts, sinks, &progress);
  }
  if (!stats.ok()) return stats.status().WithContext(f.pipeline);
  std::string digest_hex = f.digest ? digest.FinishHex() : "";
  if (f.json) {
    std::cout << reports::RunStatsJson(*stats, digest_hex).dump() << std::endl;
  } else {
    std::cout << reports::RunStatsTable(*stats, digest_hex);
  }
  return kExitOk;
}

int DefaultThreads(int flag) {
  return flag > 0 ? flag : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

Result<int> RunWithCoordinator(const WorkerFlags& f) {
  Result<std::string> secret = LoadSecret();
  if (!secret.ok()) {
    return Status::InvalidArgument(
        "worker --coordinator needs the run's worker key: set " + std::string(kSecretFileEnv) +
        " to the worker.key file in the run's directory, or " + std::string(kSecretEnv) +
        " to its content (" + secret.status().message() + ")");
  }
  // No child of this worker (an exec stage, a virtual DataLoader worker) inherits
  // the key or its file's path, and the code they run cannot read either in this
  // process's /proc/PID/environ: both leave the environment, bytes and all.
  ForgetSecretEnvironment();
  WorkerServiceOptions options;
  options.coordinator = f.coordinator;
  options.listen = f.listen;
  options.advertise_host = f.advertise;
  options.threads = DefaultThreads(f.threads);
  options.secret = *secret;
  if (const char* tag = std::getenv("GOLDMINER_WORKER_TAG")) options.tag = tag;
  options.step_name = f.step_name;
  options.max_virtual_workers = f.max_virtual_workers;
  options.warm_python = f.warm_python;
  options.drain_grace_s = f.drain_grace_s;
  // Before Start(), so the service's threads inherit the mask: the first SIGTERM
  // and every SIGUSR2 drain the service, SIGINT or a second SIGTERM stops it.
  StopOnSignal signals(/*drain_signal=*/true);
  Result<std::unique_ptr<WorkerService>> service = WorkerService::Start(options);
  Status st = service.ok() ? Status::Ok() : service.status();
  if (service.ok()) {
    signals.Watch([raw = service->get(),
                   policy = WorkerSignals(f.drain_grace_s > 0, SystemClock())](int sig) mutable {
      if (policy.On(sig) == WorkerSignals::Action::kDrain) {
        raw->Drain();  // once draining, again changes nothing
        return;
      }
      LogInfo("worker: stopping on signal " + std::to_string(sig));
      raw->Stop();
    });
    st = (*service)->Run();
  }
  if (st.code() == Code::kUnavailable) {
    LogError(st.message());
    return kExitCoordinatorGone;
  }
  if (!st.ok()) return st;
  return kExitOk;
}

}  // namespace

// A CLI11 check: a value of at most `n` characters.
std::function<std::string(const std::string&)> AtMostChars(size_t n) {
  return [n](const std::string& s) {
    return s.size() <= n ? std::string() : "at most " + std::to_string(n) + " characters";
  };
}

// The flags of a worker of a run (--coordinator and what goes with it).
void AddCoordinatorFlags(CLI::App& sub, WorkerFlags& f) {
  sub.add_option("--coordinator", f.coordinator,
                 "HOST:PORT of a run's coordinator (served by `goldminer run`); "
                 "the run's worker key comes from GOLDMINER_SECRET_FILE (a file) or "
                 "GOLDMINER_SECRET (the key itself, as goldminer run's Slurm backend "
                 "passes it)");
  sub.add_option("--listen", f.listen,
                 "HOST:PORT of the data port trainer clients connect to (port 0: any)")
      ->capture_default_str();
  sub.add_option("--cpus", f.cpus,
                 "Run on these CPUs only (a list as taskset writes it: 0-3,8; default: "
                 "$GOLDMINER_WORKER_CPUS, else any); without --threads, one stage "
                 "thread per CPU of the list")
      ->type_name("LIST");
  sub.add_option("--advertise", f.advertise,
                 "Host name or address clients should use for the data port "
                 "(default: the --listen host, or this machine's name on 0.0.0.0)");
  sub.add_option("--step-name", f.step_name,
                 "The name this worker's launcher knows it by, recorded with the run "
                 "(`goldminer run` under Slurm gives each worker step's JOB.STEP)")
      ->check(AtMostChars(128));
  sub.add_option("--max-virtual-workers", f.max_virtual_workers,
                 "Virtual DataLoader workers this worker hosts at once for a "
                 "trainer's offloaded DataLoaders (a Python process each; 0: none); "
                 "the interpreter is $GOLDMINER_PYTHON, else the trainer's own path")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  sub.add_option("--warm-python", f.warm_python,
                 "With --coordinator: start the virtual-worker host of this Python "
                 "interpreter (it imports torch) at once rather than at the first "
                 "offloaded DataLoader (`goldminer run` without --pipeline passes the "
                 "trainer's)")
      ->check(AtMostChars(4096));
  sub.add_option("--drain-grace", f.drain_grace_s,
                 "With --coordinator: on SIGTERM, take no new split, finish the one "
                 "in hand and leave once the trainer acknowledged what this worker "
                 "made, within this many seconds (then stop as on SIGINT); 0: "
                 "SIGTERM stops at once. Under Slurm give the partition a GraceTime "
                 "of at least this plus 2 s")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
}

Verb WorkerVerb() {
  return Verb{
      "worker", "Run one data worker (--local: run a pipeline here and report its speed)",
      [](CLI::App& sub) {
        auto f = std::make_shared<WorkerFlags>();
        sub.add_flag("--local", f->local,
                     "Run the pipeline on this machine without a trainer and print "
                     "samples/s and a per-stage table");
        sub.add_option("--pipeline", f->pipeline,
                       "pipeline.json to run (see goldminer-pipeline(5))")
            ->check(CLI::ExistingFile);
        sub.add_option("--threads", f->threads, "Stage threads (default: all cores)")
            ->check(CLI::Range(1, 4096));
        sub.add_option("--epochs", f->epochs, "Epochs to run")->check(CLI::Range(1, 1000000));
        sub.add_option("--limit", f->limit, "Read at most N samples per epoch")
            ->check(CLI::NonNegativeNumber);
        sub.add_flag("--json", f->json, "Print one JSON object with the figures (last line)");
        sub.add_flag("--digest", f->digest,
                     "Add a SHA-256 over the batches' bytes in delivery order");
        sub.add_option("--out", f->out, "Write batches as .npy files (and keys.tsv) into DIR");
        sub.add_flag("!--no-progress", f->progress, "Do not draw a progress line on stderr");
        sub.add_option("--samples-per-split", f->samples_per_split,
                       "Samples per split of files/range sources (rounded up to whole "
                       "batches; the epoch order depends on it, as in `goldminer run`)")
            ->check(CLI::Range(1, 100000000));
        AddCoordinatorFlags(sub, *f);
        return std::function<Result<int>()>([f]() -> Result<int> {
          GM_RETURN_IF_ERROR(ApplyCpus(*f));
          if (!f->local) {
            if (f->coordinator.empty()) {
              LogError("worker needs --coordinator HOST:PORT (or --local --pipeline FILE)");
              return kExitUsage;
            }
            return RunWithCoordinator(*f);
          }
          if (f->pipeline.empty()) {
            return Status::InvalidArgument("worker --local needs --pipeline FILE");
          }
          return RunLocal(*f);
        });
      }};
}

}  // namespace gm::cli
