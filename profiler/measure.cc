#include "profiler/measure.h"

#include <utility>

#include "core/host.h"
#include "core/log.h"
#include "core/os/file_util.h"
#include "core/store/run_store.h"
#include "profiler/pipeline_profile.h"
#include "profiler/trainer_profile.h"
#include "profiler/verdict.h"
#include "worker/pipeline.h"

namespace gm {
namespace {

Result<std::vector<std::string>> StageNames(const std::string& pipeline) {
  GM_ASSIGN_OR_RETURN(Pipeline p, Pipeline::Load(pipeline));
  std::vector<std::string> names;
  for (const auto& op : p.stages()) names.push_back(op->name());
  return names;
}

}  // namespace

Result<Measurement> MeasureProfile(const MeasureOptions& o) {
  Measurement m;
  Profile& profile = m.profile;
  profile.created_utc = SystemUtcNow();
  profile.host = HostName();
  profile.cores = UsableCores();
  profile.goldminer_version = o.goldminer_version;
  SpanRecorder spans(2000);
  if (!o.spec.pipeline.empty()) {
    PipelineProfileOptions po;
    po.path = o.spec.pipeline;
    po.samples = o.samples;
    po.warmup = o.warmup;
    po.spans = o.trace ? &spans : nullptr;
    po.progress = o.progress;
    GM_ASSIGN_OR_RETURN(profile.pipeline, ProfilePipeline(po));
    m.trace.spans = spans.Take();
    if (o.trace) {
      GM_ASSIGN_OR_RETURN(m.trace.stage_names, StageNames(o.spec.pipeline));
    }
  }
  if (!o.spec.command.empty()) {
    GM_ASSIGN_OR_RETURN(TempDir dir, TempDir::Make("goldminer-profile-"));
    TrainerRunOptions to;
    to.spec = o.spec;
    to.warmup_steps = o.warmup_steps;
    to.steps = o.steps;
    to.seconds = o.seconds;
    to.step_timeout_s = o.step_timeout_s;
    to.inject_cupti = o.inject_cupti;
    to.price_native = o.price_native;
    to.work_dir = dir.path();
    to.progress = o.progress;
    Result<TrainerMeasurement> t = ProfileTrainer(to);
    if (t.ok()) {
      profile.trainer = std::move(t->profile);
      m.trace.steps = std::move(t->outcome.steps);
      m.trace.gpu = std::move(t->outcome.gpu);
      m.trainer_problem = t->problem;
    } else {
      m.trainer_problem = t.status();  // the pipeline part is still kept
    }
    m.trainer_failed =
        profile.trainer && !profile.trainer->stopped_by_profile && profile.trainer->exit_code != 0;
  }
  SetVerdict(profile);
  return m;
}

}  // namespace gm
