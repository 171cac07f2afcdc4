// The terminal view of a Profile (core/profile.h): a per-stage table, the trainer's
// figures and the verdict, for people. profile.json is the view for programs.
#pragma once

#include <string>

#include "core/profile.h"

namespace gm::cli {

// Text ending with a newline; sections for the parts the profile has.
std::string ProfileText(const Profile& profile);

// "input-bound" / "compute-bound" / "unknown" and the fraction of step time lost to
// waiting for data (GPU stall when the GPU was seen, else data wait). Pure.
void SetVerdict(Profile& profile);

}  // namespace gm::cli
