#include "core/text_format.h"

#include <cstdio>

namespace gm {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Percent(double fraction) { return Fixed(100 * fraction, 0) + "%"; }

std::string SamplesPerS(double v) { return Fixed(v, v < 100 ? 1 : 0) + " samples/s"; }

}  // namespace gm
