#include "launcher/process_launcher.h"

#include <utility>

namespace gm {
namespace {

class LocalLauncher : public ProcessLauncher {
 public:
  explicit LocalLauncher(std::function<std::vector<std::string>(int, int)> worker_prefix = {},
                         std::string name = "local")
      : worker_prefix_(std::move(worker_prefix)), name_(std::move(name)) {}

  Result<pid_t> Start(const LaunchRequest& r) override {
    if (r.role != ProcessRole::kWorker || !worker_prefix_) {
      return group_.Spawn(r.argv, r.env, r.cpus);
    }
    std::vector<std::string> argv = worker_prefix_(r.slot, r.threads);
    std::vector<std::string> env = r.env;
    // A step does not learn its heterogeneous job component from Slurm; the worker
    // needs it to name its step as squeue and scancel do (component's job id.step).
    const std::string het = "--het-group=";
    for (const std::string& a : argv) {
      if (a.rfind(het, 0) == 0) env.push_back("GOLDMINER_HET_GROUP=" + a.substr(het.size()));
    }
    argv.insert(argv.end(), r.argv.begin(), r.argv.end());
    return group_.Spawn(argv, env);
  }
  void Signal(pid_t pid, int sig) override { group_.Signal(pid, sig); }
  std::optional<ChildExit> Wait(double timeout_s) override { return group_.WaitAny(timeout_s); }
  std::vector<ChildExit> KillAll() override { return group_.TerminateAll(0); }
  std::string name() const override { return name_; }

 private:
  ProcessGroup group_;
  std::function<std::vector<std::string>(int, int)> worker_prefix_;
  std::string name_;
};

}  // namespace

std::unique_ptr<ProcessLauncher> MakeLocalLauncher() { return std::make_unique<LocalLauncher>(); }

std::unique_ptr<ProcessLauncher> MakeSlurmLauncher(
    std::function<std::vector<std::string>(int slot, int threads)> srun_prefix) {
  return std::make_unique<LocalLauncher>(std::move(srun_prefix), "slurm");
}

}  // namespace gm
