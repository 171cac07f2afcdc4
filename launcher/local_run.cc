#include "launcher/local_run.h"

#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

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
#include "launcher/process.h"
#include "dataplane/auth.h"

namespace gm {
namespace {

class LocalRun {
 public:
  LocalRun(const LocalRunConfig& c, CoordinatorServer& coordinator, std::string run_id,
           TempDir& dir)
      : c_(c), coordinator_(coordinator), run_id_(std::move(run_id)), dir_(dir) {}

  Result<LocalRunResult> Execute() {
    LocalRunResult result;
    result.run_id = run_id_;
    result.exit = "exited with status 0";
    for (int i = 0; i < c_.workers; ++i) GM_RETURN_IF_ERROR(StartWorker(i));
    for (int rank = 0; rank < c_.world_size; ++rank) GM_RETURN_IF_ERROR(StartTrainer(rank));
    double stop_deadline = 0;
    while (!trainers_.empty()) {
      if (!result.stopped && StopRequested()) {
        result.stopped = true;
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
        last_exit_slot_ = w->second;
        workers_.erase(w);
        GM_RETURN_IF_ERROR(OnWorkerExit(*e));
      }
    }
    for (const ChildExit& e : group_.TerminateAll(10)) {
      if (e.exit_code() != 0 && e.exit_code() != 128 + SIGTERM) {
        LogDebug("run: worker " + std::to_string(e.pid) + " " + e.describe);
      }
    }
    return result;
  }

 private:
  bool StopRequested() {
    if (c_.signal != nullptr) {
      if (int sig = c_.signal->exchange(0)) {
        LogWarning("run: signal " + std::to_string(sig) + ": stopping the trainer and workers");
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
    GM_ASSIGN_OR_RETURN(pid_t pid,
                        group_.Spawn({exe, "worker", "--coordinator", coordinator_.address(),
                                      "--threads", std::to_string(threads),
                                      "--listen", JoinHostPort(c_.bind, 0)},
                                     {"GOLDMINER_SECRET_FILE=" + dir_.path() + "/worker.key",
                                      "GOLDMINER_RUN_ID=" + run_id_}));
    workers_[pid] = slot;
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
    GM_ASSIGN_OR_RETURN(pid_t pid, group_.Spawn(c_.command, env));
    trainers_.insert(pid);
    return Status::Ok();
  }

  // A worker that crashed is replaced (up to max_restarts); its splits are re-made
  // by the others meanwhile. A clean exit (drained) is not replaced.
  Status OnWorkerExit(const ChildExit& e) {
    if (e.exit_code() == 0) return WritePids();
    if (restarts_ >= c_.max_restarts) {
      LogWarning("run: worker " + std::to_string(e.pid) + " " + e.describe +
                 "; not replaced (--max-restarts " + std::to_string(c_.max_restarts) + " reached)");
      return WritePids();
    }
    ++restarts_;
    LogWarning("run: worker " + std::to_string(e.pid) + " " + e.describe + "; starting another");
    return StartWorker(last_exit_slot_);
  }

  Status WritePids() {
    std::string text;
    for (const auto& [p, slot] : workers_) text += std::to_string(p) + "\n";
    return WriteFileAtomic(dir_.path() + "/workers", text);
  }

  const LocalRunConfig& c_;
  CoordinatorServer& coordinator_;
  const std::string run_id_;
  TempDir& dir_;  // the run's private directory: the role keys (0600), the worker PIDs
  ProcessGroup group_;
  std::map<pid_t, int> workers_;  // running workers -> their slot
  int last_exit_slot_ = 0;        // the slot of the worker OnWorkerExit is about
  std::set<pid_t> trainers_;
  int restarts_ = 0;
};

}  // namespace

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
      "run-" + std::to_string(::time(nullptr)) + "-" + std::to_string(::getpid());

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
  LocalRun run(c, *coordinator, run_id, dir);
  Result<LocalRunResult> result = run.Execute();
  coordinator->Stop();
  if (!result.ok()) return result.status();
  result->summary = coordinator->Summary();
  return result;
}

}  // namespace gm
