// Line and field splitting shared by the simulator's readers (simulator/trace.cc,
// simulator/slurm_history.cc). Pure. Thread-compatible.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gm::sim {

// Calls `each(line, number)` for every non-empty line of `text` (numbered from 1,
// a trailing '\r' dropped), until one returns an error, which it returns.
template <typename Each>
Status ForEachLine(std::string_view text, Each&& each) {
  size_t number = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    GM_RETURN_IF_ERROR(each(line, number));
  }
  return Status::Ok();
}

// The fields of `line` between `separator`s (no quoting).
inline std::vector<std::string_view> SplitFields(std::string_view line, char separator) {
  std::vector<std::string_view> out;
  for (size_t start = 0;;) {
    const size_t at = line.find(separator, start);
    out.push_back(line.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

}  // namespace gm::sim
