// Numbers as people read them in summaries, log lines and decisions.
#pragma once

#include <string>

namespace gm {

// `v` with `digits` decimals ("%.*f").
std::string Fixed(double v, int digits);
// A fraction as a whole percentage: 0.08 -> "8%".
std::string Percent(double fraction);
// "812 samples/s"; one decimal below 100 ("45.5 samples/s").
std::string SamplesPerS(double v);

}  // namespace gm
