#include "profiler/trainer_profile.h"

#include <signal.h>

#include <algorithm>
#include <filesystem>

#include "core/clock.h"
#include "core/log.h"
#include "core/os/file_util.h"
#include "core/os/paths.h"
#include "launcher/process.h"
#include "launcher/process_launcher.h"
#include "launcher/supervisor.h"
#include "launcher/training_run.h"
#include "profiler/step_analysis.h"

namespace gm {
namespace {

constexpr double kStopGraceS = 5;

std::string Plural(uint64_t n, const std::string& what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

std::string FormatSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f s", s);
  return buf;
}

// Decides, from the step logs written so far, when to stop the trainer.
class StopRule {
 public:
  explicit StopRule(const TrainerRunOptions& o)
      : o_(o), counter_(o.work_dir), start_(MonotonicSeconds()) {
    last_progress_ = start_;
  }

  // True once the trainer should be stopped; reason() says why.
  bool ShouldStop() {
    if (!Decide()) return false;
    if (o_.progress) {
      // Only a trainer fed by our workers has a data plane to notice the stop (an
      // unmodified PyTorch program, with no pipeline, has its own DataLoader).
      o_.progress("stopping the trainer (" + reason_ + ")" +
                  (o_.spec.pipeline.empty() ? std::string()
                                            : "; the data plane may warn that it went away"));
    }
    return true;
  }

  const std::string& reason() const { return reason_; }
  bool timeout() const { return timeout_; }

 private:
  bool Decide() {
    const double now = MonotonicSeconds();
    uint64_t fewest = 0, total = 0;
    const std::vector<uint64_t> counts = counter_.Update();
    // Every rank must have made its steps (a rank's log appears when it connects).
    const size_t ranks = o_.spec.pipeline.empty() ? 1 : static_cast<size_t>(o_.spec.world_size);
    if (counts.size() >= ranks) {
      fewest = *std::min_element(counts.begin(), counts.end());
      for (uint64_t n : counts) total += n;
    }
    if (total != last_total_) {
      if (last_total_ == 0 && o_.progress) o_.progress("trainer: first step recorded");
      last_total_ = total;
      last_progress_ = now;
    }
    // warm-up + steps closed steps need one more batch request.
    if (o_.steps > 0 && fewest >= o_.warmup_steps + o_.steps + 1) {
      reason_ = Plural(o_.steps, "step") + " measured";
      return true;
    }
    if (o_.seconds > 0 && now - start_ >= o_.seconds) {
      reason_ = FormatSeconds(o_.seconds) + " of trainer time reached (--seconds)";
      return true;
    }
    if (now - last_progress_ >= o_.step_timeout_s) {
      timeout_ = true;
      reason_ = "no step for " + FormatSeconds(o_.step_timeout_s) + " (--step-timeout)";
      return true;
    }
    return false;
  }

  const TrainerRunOptions& o_;
  StepCounter counter_;
  const double start_;
  double last_progress_;
  uint64_t last_total_ = 0;
  std::string reason_;
  bool timeout_ = false;
};

std::vector<std::string> ProfileEnv(const TrainerRunOptions& o, TrainerRunOutcome& out) {
  std::vector<std::string> env = {std::string(kProfileDirEnv) + "=" + o.work_dir};
  if (o.price_native) env.emplace_back("GOLDMINER_PROFILE_NATIVE=1");
  const std::string cupti = CuptiLibraryPath();
  if (!o.inject_cupti) {
    out.gpu_unavailable_reason = "GPU activity not recorded (CUPTI injection turned off)";
  } else if (cupti.empty()) {
    out.gpu_unavailable_reason =
        "libgoldminer_cupti.so was not built (CUPTI was not found at build time)";
  } else {
    env.push_back("CUDA_INJECTION64_PATH=" + cupti);
  }
  return env;
}

// Runs the unchanged program with the torch import hook on its PYTHONPATH.
Status RunTorchProgram(const TrainerRunOptions& o, std::vector<std::string> env, StopRule& rule,
                       TrainerRunOutcome& out) {
  env.push_back(PythonPathPrepending(ProfileHookDir() + ":" + PythonPackageDir()));
  // The same supervisor as `run`'s: SIGTERM when the rule says stop, SIGKILL after
  // the grace period.
  std::unique_ptr<ProcessLauncher> launcher = MakeChildLauncher();
  SupervisorOptions options;
  options.stop_grace_s = kStopGraceS;
  Supervisor supervisor(*launcher, options);
  LaunchRequest request;
  request.role = ProcessRole::kTrainer;
  request.argv = o.spec.command;
  request.env = std::move(env);
  GM_ASSIGN_OR_RETURN(pid_t pid, supervisor.Start(request));
  for (;;) {
    if (!out.stopped_by_profile && rule.ShouldStop()) {
      out.stopped_by_profile = true;
      supervisor.Stop(pid);
    }
    std::optional<ProcessEnded> e = supervisor.Poll(0.2, nullptr);
    if (!e) continue;
    out.exit_code = e->exit.exit_code();
    out.exit = e->exit.describe;
    return Status::Ok();
  }
}

Status RunWithWorkers(const TrainerRunOptions& o, std::vector<std::string> env, StopRule& rule,
                      TrainerRunOutcome& out) {
  RunConfig c;
  c.spec = o.spec;
  c.trainer_env = std::move(env);
  c.stop_grace_s = kStopGraceS;
  c.order_notice = false;  // ProfilePipeline has said it
  c.should_stop = [&rule] { return rule.ShouldStop(); };
  GM_ASSIGN_OR_RETURN(RunResult r, RunTraining(c));
  out.stopped_by_profile = r.stopped;
  out.exit_code = r.exit_code;
  out.exit = r.exit;
  return Status::Ok();
}

// Why nothing could be measured, and what to do about it.
Status NothingMeasured(const TrainerRunOptions& o, const TrainerRunOutcome& out,
                       uint64_t recorded) {
  const std::string feed =
      o.spec.pipeline.empty()
          ? "iterate a torch.utils.data.DataLoader (the program runs unchanged)"
          : "read its batches through goldminer.Loader, goldminer.torch or the C client";
  std::string how = out.stopped_by_profile ? "was stopped: " + out.stop_reason : out.exit;
  return Status::InvalidArgument(
      "the trainer " + how + " after " + Plural(recorded, "batch request") +
      "; at least 2 are needed to measure a step. The trainer must " + feed +
      (out.step_timeout ? " (raise --step-timeout if its start-up is slow)" : ""));
}

}  // namespace

Result<TrainerRunOutcome> RunTrainer(const TrainerRunOptions& o) {
  if (o.spec.command.empty()) return Status::InvalidArgument("no trainer command given after --");
  TrainerRunOutcome out;
  std::vector<std::string> env = ProfileEnv(o, out);
  StopRule rule(o);
  const double t0 = MonotonicSeconds();
  if (o.spec.pipeline.empty()) {
    GM_RETURN_IF_ERROR(RunTorchProgram(o, std::move(env), rule, out));
  } else {
    GM_RETURN_IF_ERROR(RunWithWorkers(o, std::move(env), rule, out));
  }
  out.seconds = MonotonicSeconds() - t0;
  out.stop_reason = rule.reason();
  out.step_timeout = out.stopped_by_profile && rule.timeout();
  if (out.stopped_by_profile) out.exit = "stopped by profile: " + out.stop_reason;
  GM_ASSIGN_OR_RETURN(out.steps, ReadStepLogs(o.work_dir));
  GM_ASSIGN_OR_RETURN(out.gpu, ReadGpuLogs(o.work_dir));
  return out;
}

Result<TrainerMeasurement> ProfileTrainer(const TrainerRunOptions& o) {
  if (o.progress) {
    o.progress("trainer: running " + o.spec.command.front() +
               (o.spec.pipeline.empty()
                    ? " with its own DataLoader"
                    : " fed by " + Plural(static_cast<uint64_t>(o.spec.workers), "data worker")));
  }
  GM_ASSIGN_OR_RETURN(TrainerRunOutcome out, RunTrainer(o));
  TrainerMeasurement m;
  StepAnalysisOptions ao;
  ao.warmup_steps = o.warmup_steps;
  ao.max_steps = o.steps;
  ao.gpu_unavailable_reason = out.gpu_unavailable_reason;
  m.profile = AnalyzeSteps(out.steps, out.gpu, ao);
  TrainerProfile& t = m.profile;
  t.command = o.spec.command;
  t.source = o.spec.pipeline.empty() ? "torch" : "goldminer";
  t.workers = o.spec.pipeline.empty() ? 0 : o.spec.workers;
  t.exit_code = out.exit_code;
  t.exit = out.exit;
  t.stopped_by_profile = out.stopped_by_profile;
  if (t.steps == 0) {
    m.problem = NothingMeasured(o, out, t.steps_recorded);
  } else if (t.gpu.available) {
    // CUPTI's own cost: the same trainer without the injection library.
    TrainerRunOptions plain = o;
    plain.inject_cupti = false;
    plain.work_dir = o.work_dir + "/without-cupti";
    GM_RETURN_IF_ERROR(MakeDirs(plain.work_dir));
    if (o.progress) o.progress("trainer: again without CUPTI, to measure its overhead");
    GM_ASSIGN_OR_RETURN(TrainerRunOutcome again, RunTrainer(plain));
    TrainerProfile base = AnalyzeSteps(again.steps, {}, ao);
    if (base.steps > 0 && t.step_s_median > 0) {
      t.gpu.instrumentation_overhead = 1.0 - base.step_s_median / t.step_s_median;
    }
  }
  m.outcome = std::move(out);
  return m;
}

}  // namespace gm
