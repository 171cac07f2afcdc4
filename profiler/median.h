// The median of a sample of values, for the profiler's figures. Pure.
#pragma once

#include <algorithm>
#include <vector>

namespace gm {

// The middle value (the mean of the two middle ones for an even count); 0 when empty.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace gm
