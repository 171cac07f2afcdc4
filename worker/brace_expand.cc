#include "worker/brace_expand.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>

namespace gm {
namespace {

constexpr size_t kMaxExpansions = 1'000'000;

// Position of the '}' matching the '{' at `open`, or npos.
size_t MatchingBrace(std::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) return i;
  }
  return std::string_view::npos;
}

// Splits the inside of a brace group on its top-level commas.
std::vector<std::string_view> SplitAlternatives(std::string_view inner) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < inner.size(); ++i) {
    if (inner[i] == '{') ++depth;
    if (inner[i] == '}') --depth;
    if (inner[i] == ',' && depth == 0) {
      parts.push_back(inner.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(inner.substr(start));
  return parts;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

bool HasLeadingZero(std::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  return s.size() > 1 && s[0] == '0';
}

// "N..M" -> the numbers from N to M, zero-padded like the bounds; nullopt if `inner`
// is not a range; an empty vector if the range is too long to expand.
std::optional<std::vector<std::string>> ExpandRange(std::string_view inner) {
  size_t dots = inner.find("..");
  if (dots == std::string_view::npos) return std::nullopt;
  std::string_view lo_text = inner.substr(0, dots), hi_text = inner.substr(dots + 2);
  auto lo = ParseInt(lo_text), hi = ParseInt(hi_text);
  if (!lo || !hi) return std::nullopt;
  size_t width = 0;
  if (HasLeadingZero(lo_text) || HasLeadingZero(hi_text)) {
    width = std::max(lo_text.size(), hi_text.size());
  }
  uint64_t n = static_cast<uint64_t>(*hi > *lo ? *hi - *lo : *lo - *hi) + 1;
  if (n > kMaxExpansions) return std::vector<std::string>();
  std::vector<std::string> out;
  out.reserve(n);
  int64_t step = *hi >= *lo ? 1 : -1;
  for (int64_t v = *lo;; v += step) {
    std::string digits = std::to_string(v < 0 ? -v : v);
    size_t digits_width = width > 0 && v < 0 ? width - 1 : width;
    if (digits.size() < digits_width) digits.insert(0, digits_width - digits.size(), '0');
    out.push_back((v < 0 ? "-" : "") + digits);
    if (v == *hi) break;
  }
  return out;
}

Status ExpandInto(std::string_view pattern, std::string_view whole, std::vector<std::string>* out) {
  size_t open = pattern.find('{');
  if (open == std::string_view::npos) {
    if (out->size() >= kMaxExpansions) {
      return Status::InvalidArgument(std::string(whole) + ": brace expansion gives too many names");
    }
    out->emplace_back(pattern);
    return Status::Ok();
  }
  size_t close = MatchingBrace(pattern, open);
  if (close == std::string_view::npos) {
    return Status::InvalidArgument(std::string(whole) + ": unbalanced '{'");
  }
  std::string prefix(pattern.substr(0, open));
  std::string_view inner = pattern.substr(open + 1, close - open - 1);
  std::string_view suffix = pattern.substr(close + 1);
  std::vector<std::string> alternatives;
  auto parts = SplitAlternatives(inner);
  if (parts.size() > 1) {
    alternatives.assign(parts.begin(), parts.end());
  } else if (auto range = ExpandRange(inner)) {
    if (range->empty()) {
      return Status::InvalidArgument(std::string(whole) + ": brace expansion gives too many names");
    }
    alternatives = std::move(*range);
  } else {
    // A group with neither a comma nor a range is literal text, as in the shell.
    std::vector<std::string> rest;
    GM_RETURN_IF_ERROR(ExpandInto(pattern.substr(open + 1), whole, &rest));
    for (auto& r : rest) out->push_back(prefix + "{" + r);
    return Status::Ok();
  }
  for (const auto& alt : alternatives) {
    GM_RETURN_IF_ERROR(ExpandInto(prefix + alt + std::string(suffix), whole, out));
  }
  return Status::Ok();
}

// Matches one "[...]" set at p[0] against c; advances *len to the set's length.
// Returns nullopt when the '[' does not open a well-formed set.
std::optional<bool> MatchSet(std::string_view p, char c, size_t* len) {
  size_t i = 1;
  bool negate = i < p.size() && (p[i] == '!' || p[i] == '^');
  if (negate) ++i;
  bool matched = false;
  bool first = true;
  for (; i < p.size() && (first || p[i] != ']'); ++i, first = false) {
    char lo = p[i], hi = p[i];
    if (i + 2 < p.size() && p[i + 1] == '-' && p[i + 2] != ']') {
      hi = p[i + 2];
      i += 2;
    }
    if (lo <= c && c <= hi) matched = true;
  }
  if (i >= p.size()) return std::nullopt;
  *len = i + 1;
  return matched != negate;
}

// Glob match of one path component: '*', '?', '[...]'; iterative with one
// backtracking point, so it runs in O(|p| * |s|) at worst.
bool MatchComponent(std::string_view p, std::string_view s) {
  size_t pi = 0, si = 0, star_p = std::string_view::npos, star_s = 0;
  while (si < s.size()) {
    size_t len = 1;
    bool step = false;
    if (pi < p.size() && p[pi] == '*') {
      star_p = pi++;
      star_s = si;
      continue;
    }
    if (pi < p.size() && p[pi] == '?') {
      step = true;
    } else if (pi < p.size() && p[pi] == '[') {
      auto set = MatchSet(p.substr(pi), s[si], &len);
      step = set ? *set : s[si] == '[';
      if (!set) len = 1;
    } else if (pi < p.size()) {
      step = p[pi] == s[si];
    }
    if (step) {
      pi += len;
      ++si;
    } else if (star_p != std::string_view::npos) {
      pi = star_p + 1;
      si = ++star_s;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::vector<std::string_view> SplitPath(std::string_view s) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    size_t slash = s.find('/', start);
    parts.push_back(s.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) return parts;
    start = slash + 1;
  }
}

bool MatchParts(const std::vector<std::string_view>& pat, size_t pi,
                const std::vector<std::string_view>& path, size_t si) {
  for (; pi < pat.size(); ++pi, ++si) {
    if (pat[pi] == "**") {
      for (size_t k = si; k <= path.size(); ++k) {
        if (MatchParts(pat, pi + 1, path, k)) return true;
      }
      return false;
    }
    if (si >= path.size() || !MatchComponent(pat[pi], path[si])) return false;
  }
  return si == path.size();
}

}  // namespace

Result<std::vector<std::string>> ExpandBraces(std::string_view pattern) {
  std::vector<std::string> out;
  GM_RETURN_IF_ERROR(ExpandInto(pattern, pattern, &out));
  return out;
}

bool GlobMatch(std::string_view pattern, std::string_view path) {
  return MatchParts(SplitPath(pattern), 0, SplitPath(path), 0);
}

}  // namespace gm
