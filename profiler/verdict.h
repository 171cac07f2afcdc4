// The profile's verdict: is the job input-bound, and by how much. Pure.
#pragma once

#include <string>

#include "core/profile.h"

namespace gm {

// Above this share of step time lost to waiting for data, a job is input-bound.
inline constexpr double kInputBoundThreshold = 0.05;

enum class Verdict { kUnknown, kInputBound, kComputeBound };

struct VerdictResult {
  Verdict verdict = Verdict::kUnknown;
  // The share of step time lost to waiting for data: the GPU's input stall when
  // the GPU was seen, else the trainer's data wait; 0 when unknown.
  double input_bound_fraction = 0;
};

// unknown without a measured trainer step; input-bound above kInputBoundThreshold.
VerdictResult ClassifyProfile(const Profile& profile);
// "unknown", "input-bound", "compute-bound" (profile.json's words).
std::string VerdictName(Verdict verdict);
// Sets profile.verdict and profile.input_bound_fraction from ClassifyProfile.
void SetVerdict(Profile& profile);

}  // namespace gm
