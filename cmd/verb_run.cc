// `goldminer run`: a training run with its data workers. The local backend runs
// the coordinator here, starts N `goldminer worker --coordinator` processes and
// the trainer command (one process per rank), restarts workers that crash, and
// exits with the trainer's exit status.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "cmd/cli.h"
#include "core/clock.h"
#include "core/file_util.h"
#include "core/json.h"
#include "core/log.h"
#include "core/paths.h"
#include "launcher/coordinator_server.h"
#include "launcher/process.h"
#include "worker/auth.h"

namespace gm::cli {
namespace {

std::atomic<int> g_signal{0};  // the last SIGTERM/SIGINT received by `run`
extern "C" void OnRunSignal(int sig) { g_signal.store(sig); }

struct RunFlags {
  std::string backend = "local";
  std::string pipeline;
  int workers = 2;
  int threads_per_worker = 1;
  int epochs = 1;
  int world_size = 1;
  int port = 0;
  double liveness_timeout_s = 10;
  int max_restarts = 3;
  size_t samples_per_split = 256;
  std::vector<std::string> command;
};

// The run's private directory: the secret file (0600) and the list of worker PIDs.
struct RunDir {
  std::string path;
  ~RunDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

std::string SelfExe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "goldminer" : p.string();
}

class LocalRun {
 public:
  LocalRun(const RunFlags& f, CoordinatorServer& coordinator, std::string run_id, RunDir& dir)
      : f_(f), coordinator_(coordinator), run_id_(std::move(run_id)), dir_(dir) {}

  Result<int> Execute() {
    for (int i = 0; i < f_.workers; ++i) GM_RETURN_IF_ERROR(StartWorker());
    for (int rank = 0; rank < f_.world_size; ++rank) GM_RETURN_IF_ERROR(StartTrainer(rank));
    int exit_code = 0;
    while (!trainers_.empty()) {
      if (int sig = g_signal.exchange(0)) {
        LogWarning("run: signal " + std::to_string(sig) + ": stopping the trainer and workers");
        for (pid_t t : trainers_) group_.Signal(t, SIGTERM);
      }
      std::optional<ChildExit> e = group_.WaitAny(0.2);
      if (!e) continue;
      if (trainers_.erase(e->pid)) {
        if (e->exit_code() != 0) {
          LogWarning("run: trainer (pid " + std::to_string(e->pid) + ") " + e->describe);
          if (exit_code == 0) exit_code = e->exit_code();
        }
      } else if (workers_.erase(e->pid)) {
        GM_RETURN_IF_ERROR(OnWorkerExit(*e));
      }
    }
    for (const ChildExit& e : group_.TerminateAll(10)) {
      if (e.exit_code() != 0 && e.exit_code() != 128 + SIGTERM) {
        LogDebug("run: worker " + std::to_string(e.pid) + " " + e.describe);
      }
    }
    return exit_code;
  }

 private:
  Status StartWorker() {
    GM_ASSIGN_OR_RETURN(
        pid_t pid,
        group_.Spawn({SelfExe(), "worker", "--coordinator", coordinator_.address(), "--threads",
                      std::to_string(f_.threads_per_worker)},
                     {"GOLDMINER_SECRET_FILE=" + dir_.path + "/secret",
                      "GOLDMINER_RUN_ID=" + run_id_}));
    workers_.insert(pid);
    return WritePids();
  }

  Status StartTrainer(int rank) {
    const char* old = std::getenv("PYTHONPATH");
    std::string pythonpath = PythonPackageDir() + (old && *old ? ":" + std::string(old) : "");
    GM_ASSIGN_OR_RETURN(
        pid_t pid, group_.Spawn(f_.command, {"GOLDMINER_ADDR=" + coordinator_.address(),
                                             "GOLDMINER_SECRET_FILE=" + dir_.path + "/secret",
                                             "GOLDMINER_RUN_ID=" + run_id_,
                                             "GOLDMINER_RUN_DIR=" + dir_.path,
                                             "PYTHONPATH=" + pythonpath,
                                             "GOLDMINER_CLIENT_LIB=" + ClientLibraryPath(),
                                             "RANK=" + std::to_string(rank),
                                             "LOCAL_RANK=" + std::to_string(rank),
                                             "WORLD_SIZE=" + std::to_string(f_.world_size)}));
    trainers_.insert(pid);
    return Status::Ok();
  }

  // A worker that crashed is replaced (up to --max-restarts); its splits are
  // re-made by the others meanwhile. A clean exit (drained) is not replaced.
  Status OnWorkerExit(const ChildExit& e) {
    if (e.exit_code() == 0) return WritePids();
    if (restarts_ >= f_.max_restarts) {
      LogWarning("run: worker " + std::to_string(e.pid) + " " + e.describe +
                 "; not replaced (--max-restarts " + std::to_string(f_.max_restarts) + " reached)");
      return WritePids();
    }
    ++restarts_;
    LogWarning("run: worker " + std::to_string(e.pid) + " " + e.describe + "; starting another");
    return StartWorker();
  }

  Status WritePids() {
    std::string text;
    for (pid_t p : workers_) text += std::to_string(p) + "\n";
    return WriteFileAtomic(dir_.path + "/workers", text);
  }

  const RunFlags& f_;
  CoordinatorServer& coordinator_;
  const std::string run_id_;
  RunDir& dir_;
  ProcessGroup group_;
  std::set<pid_t> workers_;
  std::set<pid_t> trainers_;
  int restarts_ = 0;
};

Result<int> RunLocalBackend(const RunFlags& f) {
  if (f.command.empty()) {
    return Status::InvalidArgument("run needs a trainer command after --, e.g. "
                                   "goldminer run --pipeline p.json -- python3 train.py");
  }
  GM_ASSIGN_OR_RETURN(nlohmann::json doc, LoadJsonFile(f.pipeline));
  std::string base = std::filesystem::absolute(f.pipeline).parent_path().string();
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/goldminer-run-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) return Status::IoError(templ + ": cannot create");
  RunDir dir{templ};
  GM_ASSIGN_OR_RETURN(std::string secret, NewSecret());
  GM_RETURN_IF_ERROR(WriteSecretFile(dir.path + "/secret", secret));
  const std::string run_id = "run-" + std::to_string(::time(nullptr)) + "-" +
                             std::to_string(::getpid());

  CoordinatorConfig cc;
  cc.port = f.port;
  cc.secret = secret;
  cc.pipeline_doc = doc;
  cc.pipeline_origin = std::filesystem::absolute(f.pipeline).string();
  cc.base_dir = base;
  cc.samples_per_split = f.samples_per_split;
  cc.world_size = f.world_size;
  cc.epochs = f.epochs;
  cc.liveness_timeout_s = f.liveness_timeout_s;
  cc.run_id = run_id;
  GM_ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorServer> coordinator, CoordinatorServer::Start(cc));
  LogInfo("run " + run_id + ": coordinator at " + coordinator->address() + ", " +
          std::to_string(f.workers) + " workers, " + std::to_string(f.world_size) +
          " trainer rank(s)");

  struct sigaction sa {};
  sa.sa_handler = OnRunSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  LocalRun run(f, *coordinator, run_id, dir);
  Result<int> rc = run.Execute();
  coordinator->Stop();
  CoordinatorSummary s = coordinator->Summary();
  LogInfo("run " + run_id + ": " + std::to_string(s.epochs_done) + " epoch(s) delivered, " +
          std::to_string(s.state.acks) + " batches acknowledged, " +
          std::to_string(s.workers_registered) + " worker registrations, " +
          std::to_string(s.state.reassignments) + " splits reassigned, " +
          std::to_string(s.state.duplicate_acks) + " duplicate acks");
  return rc;
}

}  // namespace

Verb RunVerb() {
  return Verb{
      "run", "Run data workers beside the trainer command (local backend)",
      [](CLI::App& sub) {
        auto f = std::make_shared<RunFlags>();
        sub.add_option("--backend", f->backend, "Where workers run: local (this machine)")
            ->check(CLI::IsMember({"local", "slurm"}));
        sub.add_option("--pipeline", f->pipeline, "pipeline.json the workers run")
            ->required()
            ->check(CLI::ExistingFile);
        sub.add_option("--workers", f->workers, "Data worker processes to start")
            ->check(CLI::Range(1, 1024));
        sub.add_option("--threads-per-worker", f->threads_per_worker, "Stage threads per worker")
            ->check(CLI::Range(1, 1024));
        sub.add_option("--epochs", f->epochs, "Epochs the run serves")->check(CLI::Range(1, 100000));
        sub.add_option("--world-size", f->world_size,
                       "Trainer ranks (one trainer process per rank, RANK/WORLD_SIZE set)")
            ->check(CLI::Range(1, 1024));
        sub.add_option("--port", f->port, "Coordinator TCP port on 127.0.0.1 (0: any free port)")
            ->check(CLI::Range(0, 65535));
        sub.add_option("--liveness-timeout", f->liveness_timeout_s,
                       "Seconds of silence after which a worker is declared lost")
            ->check(CLI::Range(0.1, 3600.0));
        sub.add_option("--max-restarts", f->max_restarts,
                       "Crashed workers replaced at most this many times")
            ->check(CLI::Range(0, 1000000));
        sub.add_option("--samples-per-split", f->samples_per_split,
                       "Samples per split of files/range sources (rounded up to whole "
                       "batches): the unit handed to a worker and re-made if it dies")
            ->check(CLI::Range(1, 100000000));
        sub.add_option("command", f->command, "Trainer command, after --");
        return std::function<Result<int>()>([f]() -> Result<int> {
          if (f->backend == "slurm") {
            return Status::Unimplemented("run: the Slurm backend is not built yet; use "
                                         "--backend local");
          }
          return RunLocalBackend(*f);
        });
      }};
}

}  // namespace gm::cli
