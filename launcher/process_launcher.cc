#include "launcher/process_launcher.h"

namespace gm {
namespace {

class ChildLauncher : public ProcessLauncher {
 public:
  Result<pid_t> Start(const LaunchRequest& r) override {
    // Workers (and the srun of a worker step) out of the terminal's foreground
    // group: Ctrl-C is the trainer's to hear; the run ends the workers itself.
    return group_.Spawn(r.argv, r.env, r.cpus, r.role == ProcessRole::kWorker);
  }
  void Signal(pid_t pid, int sig) override { group_.Signal(pid, sig); }
  std::optional<ChildExit> Wait(double timeout_s) override { return group_.WaitAny(timeout_s); }
  std::vector<ChildExit> KillAll() override { return group_.TerminateAll(0); }
  std::string name() const override { return "local"; }

 private:
  ProcessGroup group_;
};

}  // namespace

std::unique_ptr<ProcessLauncher> MakeChildLauncher() { return std::make_unique<ChildLauncher>(); }

}  // namespace gm
