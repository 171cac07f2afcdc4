#include "core/store/run_store.h"

namespace gm {

Result<std::optional<int64_t>> FindPlanProfile(RunStore& store, const Plan& plan) {
  if (plan.sources.profile_sha256.empty()) return std::optional<int64_t>();
  return store.FindProfile(plan.sources.profile_sha256);
}

}  // namespace gm
