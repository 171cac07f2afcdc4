// The terminal view of a Profile (core/profile.h): a per-stage table, the trainer's
// figures and the verdict, for people. profile.json is the view for programs. Pure.
#pragma once

#include <string>

#include "core/profile.h"

namespace gm::reports {

// Text ending with a newline; sections for the parts the profile has.
std::string ProfileText(const Profile& profile);

}  // namespace gm::reports
