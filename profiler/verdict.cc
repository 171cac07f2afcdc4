#include "profiler/verdict.h"

namespace gm {

VerdictResult ClassifyProfile(const Profile& p) {
  VerdictResult r;
  if (!p.trainer || p.trainer->steps == 0) return r;
  const TrainerProfile& t = *p.trainer;
  r.input_bound_fraction = t.gpu.available ? t.gpu.stall_fraction : t.stall_fraction;
  r.verdict =
      r.input_bound_fraction > kInputBoundThreshold ? Verdict::kInputBound : Verdict::kComputeBound;
  return r;
}

std::string VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kInputBound:
      return "input-bound";
    case Verdict::kComputeBound:
      return "compute-bound";
    case Verdict::kUnknown:
      break;
  }
  return "unknown";
}

void SetVerdict(Profile& p) {
  const VerdictResult r = ClassifyProfile(p);
  p.verdict = VerdictName(r.verdict);
  p.input_bound_fraction = r.input_bound_fraction;
}

}  // namespace gm
