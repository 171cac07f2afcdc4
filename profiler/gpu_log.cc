#include "profiler/gpu_log.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <system_error>
#include <utility>

#include "core/os/file_util.h"

namespace gm {
namespace {

constexpr std::string_view kHeaderPrefix = "# goldminer gpu log ";
constexpr std::string_view kClockPrefix = "# clock=";
constexpr size_t kExcerptChars = 80;

// One "C" line: the same instant on CUPTI's clock and on CLOCK_MONOTONIC.
struct ClockPair {
  uint64_t cupti_ns = 0;
  uint64_t monotonic_ns = 0;
};

struct ParseState {
  GpuLog log;
  bool cupti_clock = false;  // "# clock=cupti": activity times need converting
  std::vector<ClockPair> pairs;
};

// The whole of `s` as an unsigned decimal number (no sign, no spaces).
template <typename T>
bool ParseUnsigned(std::string_view s, T& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// Splits the next field off `rest` at the first space; false when `rest` is empty.
bool NextField(std::string_view& rest, std::string_view& field) {
  if (rest.empty()) return false;
  size_t space = rest.find(' ');
  field = rest.substr(0, space);
  rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
  return true;
}

// Reads `fields.size()` numeric fields off `rest` (each must be present and valid).
bool NextNumbers(std::string_view& rest, std::initializer_list<uint64_t*> fields) {
  std::string_view field;
  for (uint64_t* out : fields) {
    if (!NextField(rest, field) || !ParseUnsigned(field, *out)) return false;
  }
  return true;
}

std::string Excerpt(std::string_view line) {
  if (line.size() <= kExcerptChars) return std::string(line);
  return std::string(line.substr(0, kExcerptChars)) + "...";
}

Status LineError(const std::string& origin, size_t line_no, std::string_view line,
                 std::string_view what) {
  return Status::Corrupt(origin + ":" + std::to_string(line_no) + ": " + std::string(what) +
                         ", got '" + Excerpt(line) +
                         "' (not a goldminer GPU log written by "
                         "libgoldminer_cupti.so, or a damaged one)");
}

// "# goldminer gpu log 1 pid=123 [key=value ...]".
bool ParseHeader(std::string_view line, GpuLog& log) {
  if (!line.starts_with(kHeaderPrefix)) return false;
  std::string_view rest = line.substr(kHeaderPrefix.size());
  std::string_view field;
  if (!NextField(rest, field) || field != "1") return false;
  bool have_pid = false;
  while (NextField(rest, field)) {
    if (!field.starts_with("pid=")) continue;  // later keys are allowed and ignored
    uint32_t pid = 0;
    if (!ParseUnsigned(field.substr(4), pid) ||
        pid > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
      return false;
    }
    log.pid = static_cast<int>(pid);
    have_pid = true;
  }
  return have_pid;
}

// Start, end, device and stream: the fields every activity line begins with.
bool ParseActivityTimes(std::string_view& rest, GpuActivity& a) {
  uint64_t device = 0;
  uint64_t stream = 0;
  if (!NextNumbers(rest, {&a.start_ns, &a.end_ns, &device, &stream})) return false;
  if (device > std::numeric_limits<uint32_t>::max() ||
      stream > std::numeric_limits<uint32_t>::max()) {
    return false;
  }
  a.device = static_cast<uint32_t>(device);
  a.stream = static_cast<uint32_t>(stream);
  return true;
}

// One "K", "M" or "S" line without its tag; an empty string when it parsed.
std::string ParseActivity(char tag, std::string_view rest, GpuActivity& a) {
  uint64_t correlation = 0;
  switch (tag) {
    case 'K':
      a.kind = GpuActivityKind::kKernel;
      if (!ParseActivityTimes(rest, a) || !NextNumbers(rest, {&correlation}) || rest.empty()) {
        return "expected 'K START_NS END_NS DEVICE STREAM CORRELATION NAME'";
      }
      a.name = std::string(rest);
      break;
    case 'M':
      a.kind = GpuActivityKind::kMemcpy;
      if (!ParseActivityTimes(rest, a) || !NextNumbers(rest, {&a.bytes}) || rest.empty()) {
        return "expected 'M START_NS END_NS DEVICE STREAM BYTES COPY_KIND'";
      }
      a.name = std::string(rest);
      break;
    default:
      a.kind = GpuActivityKind::kMemset;
      if (!ParseActivityTimes(rest, a) || !NextNumbers(rest, {&a.bytes}) || !rest.empty()) {
        return "expected 'S START_NS END_NS DEVICE STREAM BYTES'";
      }
      break;
  }
  if (a.end_ns < a.start_ns) return "activity ends before it starts";
  return "";
}

// One line after the header; an empty string when it parsed, else what is wrong.
std::string ParseBodyLine(std::string_view line, ParseState& state) {
  if (line.starts_with('#')) {
    if (!line.starts_with(kClockPrefix)) return "";  // a comment
    std::string_view clock = line.substr(kClockPrefix.size());
    if (clock != "monotonic" && clock != "cupti") return "expected '# clock=monotonic|cupti'";
    state.cupti_clock = clock == "cupti";
    return "";
  }
  if (line.size() < 2 || line[1] != ' ') {
    if (line == "E") {  // an error without text
      state.log.errors.emplace_back();
      return "";
    }
    return "expected a line 'TAG FIELDS...' with TAG one of K M S C D E";
  }
  std::string_view rest = line.substr(2);
  switch (line[0]) {
    case 'K':
    case 'M':
    case 'S': {
      GpuActivity a;
      std::string error = ParseActivity(line[0], rest, a);
      if (error.empty()) state.log.activities.push_back(std::move(a));
      return error;
    }
    case 'C': {
      ClockPair pair;
      if (!NextNumbers(rest, {&pair.cupti_ns, &pair.monotonic_ns}) || !rest.empty()) {
        return "expected 'C CUPTI_NS MONOTONIC_NS'";
      }
      state.pairs.push_back(pair);
      return "";
    }
    case 'D': {
      uint64_t dropped = 0;
      if (!ParseUnsigned(rest, dropped)) return "expected 'D DROPPED_RECORDS'";
      uint64_t max = std::numeric_limits<uint64_t>::max();
      state.log.dropped_records =
          dropped > max - state.log.dropped_records ? max : state.log.dropped_records + dropped;
      return "";
    }
    case 'E':
      state.log.errors.emplace_back(rest);
      return "";
    default:
      return "unknown line tag '" + std::string(1, line[0]) + "' (expected K M S C D E or #)";
  }
}

// mono = m0 + intercept + slope * (cupti - c0): the least-squares line through the
// clock pairs, taken relative to the first pair so that long double keeps every
// nanosecond.
struct ClockFit {
  uint64_t c0 = 0;
  uint64_t m0 = 0;
  long double slope = 1;
  long double intercept = 0;
};

long double Relative(uint64_t value, uint64_t origin) {
  return static_cast<long double>(value) - static_cast<long double>(origin);
}

Result<ClockFit> FitClocks(const std::vector<ClockPair>& pairs, const std::string& origin) {
  if (pairs.empty()) {
    return Status::Corrupt(origin +
                           ": the log says '# clock=cupti' but has no 'C' clock pair, "
                           "so its CUPTI times cannot be put on CLOCK_MONOTONIC");
  }
  ClockFit fit{pairs[0].cupti_ns, pairs[0].monotonic_ns, 1, 0};
  long double n = static_cast<long double>(pairs.size());
  long double mean_x = 0;
  long double mean_y = 0;
  for (const ClockPair& p : pairs) {
    mean_x += Relative(p.cupti_ns, fit.c0) / n;
    mean_y += Relative(p.monotonic_ns, fit.m0) / n;
  }
  long double var = 0;
  long double cov = 0;
  for (const ClockPair& p : pairs) {
    long double dx = Relative(p.cupti_ns, fit.c0) - mean_x;
    var += dx * dx;
    cov += dx * (Relative(p.monotonic_ns, fit.m0) - mean_y);
  }
  if (var > 0) fit.slope = cov / var;
  // Both clocks count nanoseconds; only NTP slewing (< 0.1%) may tilt the line.
  if (!(fit.slope > 0.5L && fit.slope < 2.0L)) {
    return Status::Corrupt(origin +
                           ": the 'C' clock pairs do not describe two nanosecond "
                           "clocks (slope " +
                           std::to_string(static_cast<double>(fit.slope)) +
                           "); the log is damaged");
  }
  fit.intercept = mean_y - fit.slope * mean_x;
  return fit;
}

uint64_t ToMonotonic(uint64_t cupti_ns, const ClockFit& fit) {
  long double mono =
      static_cast<long double>(fit.m0) + fit.intercept + fit.slope * Relative(cupti_ns, fit.c0);
  if (!(mono > 0)) return 0;
  constexpr long double kMax = static_cast<long double>(std::numeric_limits<uint64_t>::max());
  if (mono >= kMax) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(mono + 0.5L);
}

Status ConvertTimes(ParseState& state, const std::string& origin) {
  if (!state.cupti_clock || state.log.activities.empty()) return Status::Ok();
  GM_ASSIGN_OR_RETURN(ClockFit fit, FitClocks(state.pairs, origin));
  for (GpuActivity& a : state.log.activities) {
    a.start_ns = ToMonotonic(a.start_ns, fit);
    a.end_ns = std::max(a.start_ns, ToMonotonic(a.end_ns, fit));
  }
  return Status::Ok();
}

// "gpu.<pid>.log" -> pid; 0 for another name.
int PidFromFileName(const std::string& name) {
  constexpr std::string_view kPrefix = "gpu.";
  constexpr std::string_view kSuffix = ".log";
  std::string_view s = name;
  if (!s.starts_with(kPrefix) || !s.ends_with(kSuffix)) return 0;
  s = s.substr(kPrefix.size(), s.size() - kPrefix.size() - kSuffix.size());
  uint32_t pid = 0;
  if (!ParseUnsigned(s, pid) || pid == 0 ||
      pid > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
    return 0;
  }
  return static_cast<int>(pid);
}

}  // namespace

Result<GpuLog> ParseGpuLog(std::string_view text, const std::string& origin) {
  ParseState state;
  size_t line_no = 0;
  size_t pos = 0;
  while (true) {
    size_t newline = text.find('\n', pos);
    if (newline == std::string_view::npos) break;  // no line, or one cut short: ignored
    std::string_view line = text.substr(pos, newline - pos);
    pos = newline + 1;
    ++line_no;
    if (line_no == 1) {
      if (!ParseHeader(line, state.log)) {
        return LineError(origin, line_no, line,
                         "expected the header '# goldminer gpu log 1 pid=PID'");
      }
      continue;
    }
    std::string error = ParseBodyLine(line, state);
    if (!error.empty()) return LineError(origin, line_no, line, error);
  }
  GM_RETURN_IF_ERROR(ConvertTimes(state, origin));
  return std::move(state.log);
}

Result<std::vector<GpuLog>> ReadGpuLogs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) {
    return Status(ec == std::errc::no_such_file_or_directory ? Code::kNotFound : Code::kIoError,
                  "cannot list the GPU logs in " + dir + ": " + ec.message());
  }
  std::vector<GpuLog> logs;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    int pid = PidFromFileName(name);
    if (pid == 0) continue;
    std::string path = it->path().string();
    GM_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    GM_ASSIGN_OR_RETURN(GpuLog log, ParseGpuLog(text, path));
    if (log.pid == 0) log.pid = pid;  // nothing but a partial header was written
    logs.push_back(std::move(log));
  }
  if (ec) return Status::IoError("cannot list the GPU logs in " + dir + ": " + ec.message());
  std::sort(logs.begin(), logs.end(),
            [](const GpuLog& a, const GpuLog& b) { return a.pid < b.pid; });
  return logs;
}

}  // namespace gm
