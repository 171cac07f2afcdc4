#include "core/store/run_records.h"

#include <cstdio>

#include "core/digest.h"
#include "core/json.h"

namespace gm {

Result<std::string> StoredProfileJson(const Profile& profile) {
  // Invalid UTF-8 (e.g. in a path) is replaced: dump() would throw on it.
  std::string text =
      ProfileToJson(profile).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Refuse now what GetProfile could not read back later.
  Result<nlohmann::json> doc = ParseJson(text, "profile");
  Result<Profile> back = doc.ok() ? ProfileFromJson(*doc, "profile") : doc.status();
  if (!back.ok()) {
    return Status::InvalidArgument("cannot record the profile: " + back.status().message());
  }
  return text;
}

std::string StoredPlanJson(const Plan& plan) {
  return PlanToJson(plan).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ProfileDigest(const Profile& profile) {
  Result<std::string> text = StoredProfileJson(profile);
  return text.ok() ? Sha256Hex(*text) : "";
}

std::string PlanDigest(const Plan& plan) { return Sha256Hex(StoredPlanJson(plan)); }

ProfileSummary SummarizeProfile(const Profile& p) {
  ProfileSummary s;
  s.created_utc = p.created_utc;
  s.host = p.host;
  s.verdict = p.verdict;
  s.input_bound_fraction = p.input_bound_fraction;
  if (p.pipeline) {
    s.pipeline_path = p.pipeline->path;
    s.pipeline_sha256 = p.pipeline->sha256;
    s.samples_per_s_per_core = p.pipeline->samples_per_s_per_core;
    const PipelineRun* most = nullptr;
    for (const PipelineRun& run : p.pipeline->runs) {
      if (run.threads == 1 && !s.samples_per_s_1_thread)
        s.samples_per_s_1_thread = run.samples_per_s;
      if (most == nullptr || run.threads > most->threads) most = &run;
    }
    if (most != nullptr) s.samples_per_s_all_cores = most->samples_per_s;
  }
  if (p.trainer) {
    s.demand_samples_per_s = p.trainer->demand_samples_per_s;
    s.stall_fraction = p.trainer->stall_fraction;
    s.gpu_available = p.trainer->gpu.available;
    if (p.trainer->gpu.available) s.gpu_busy_fraction = p.trainer->gpu.busy_fraction;
  }
  return s;
}

std::string PlanEventMessage(const Plan& plan) {
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.1f", plan.prediction.samples_per_s);
  return "plan recorded: " + std::to_string(plan.workers.size()) + " worker(s), " + rate +
         " samples/s predicted, limit: " + plan.prediction.limit;
}

}  // namespace gm
