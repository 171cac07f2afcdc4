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
    if (r.role != ProcessRole::kWorker || !worker_prefix_) return group_.Spawn(r.argv, r.env);
    std::vector<std::string> argv = worker_prefix_(r.slot, r.threads);
    argv.insert(argv.end(), r.argv.begin(), r.argv.end());
    return group_.Spawn(argv, r.env);
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
