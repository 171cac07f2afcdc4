#include "core/step_log.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/log.h"
#include "core/os/file_util.h"

namespace gm {
namespace {

constexpr std::string_view kHeaderPrefix = "# goldminer step log ";
constexpr int kStepLogVersion = 1;

// Appends `value` in decimal to `buf` at `*at`; the caller sized `buf`.
void AppendNumber(char* buf, size_t size, size_t* at, uint64_t value) {
  auto [end, ec] = std::to_chars(buf + *at, buf + size, value);
  (void)ec;  // 20 digits always fit: callers leave room for them
  *at = static_cast<size_t>(end - buf);
}

// Writes all of `line` with one write(2) (retried only when interrupted before
// writing anything). False on an error or a short write.
bool WriteLine(int fd, std::string_view line) {
  while (true) {
    ssize_t n = ::write(fd, line.data(), line.size());
    if (n < 0 && errno == EINTR) continue;
    return n == static_cast<ssize_t>(line.size());
  }
}

// Parses all of `text` as a number; false when anything is left over or it overflows.
template <typename T>
bool ParseNumber(std::string_view text, T* out) {
  if (text.empty() || text.front() == '-' || text.front() == '+') return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

// Splits `text` at single spaces.
std::vector<std::string_view> Fields(std::string_view text) {
  std::vector<std::string_view> out;
  while (true) {
    size_t space = text.find(' ');
    out.push_back(text.substr(0, space));
    if (space == std::string_view::npos) return out;
    text.remove_prefix(space + 1);
  }
}

// Parses "# goldminer step log 1 pid=<pid> source=<source>" into `log`.
Status ParseHeader(std::string_view line, StepLog* log) {
  if (!line.starts_with(kHeaderPrefix)) {
    return Status::Corrupt("not a goldminer step log: the first line is not \"" +
                           std::string(kHeaderPrefix) + "1 pid=PID source=SOURCE\"");
  }
  std::vector<std::string_view> fields = Fields(line.substr(kHeaderPrefix.size()));
  int version = 0;
  if (!ParseNumber(fields[0], &version)) return Status::Corrupt("bad step log version");
  if (version != kStepLogVersion) {
    return Status::Corrupt("step log version " + std::to_string(version) +
                           ", this goldminer reads " + std::to_string(kStepLogVersion) +
                           " (profile with the goldminer that wrote it)");
  }
  if (fields.size() != 3 || !fields[1].starts_with("pid=") || !fields[2].starts_with("source=") ||
      !ParseNumber(fields[1].substr(4), &log->pid) || log->pid <= 0 || fields[2].size() == 7) {
    return Status::Corrupt("malformed header, expected \"" + std::string(kHeaderPrefix) +
                           "1 pid=PID source=SOURCE\"");
  }
  log->source = std::string(fields[2].substr(7));
  return Status::Ok();
}

using LineFields = std::vector<std::string_view>;

// "S WAIT_BEGIN_NS WAIT_END_NS SAMPLES [PREVIOUS_COST_NS]"
Status ParseStep(const LineFields& fields, StepLog* log) {
  StepRecord step;
  uint64_t previous_cost_ns = 0;
  if ((fields.size() != 4 && fields.size() != 5) || !ParseNumber(fields[1], &step.wait_begin_ns) ||
      !ParseNumber(fields[2], &step.wait_end_ns) || !ParseNumber(fields[3], &step.samples) ||
      (fields.size() == 5 && !ParseNumber(fields[4], &previous_cost_ns))) {
    return Status::Corrupt(
        "malformed step, expected \"S WAIT_BEGIN_NS WAIT_END_NS SAMPLES [PREVIOUS_COST_NS]\"");
  }
  if (fields.size() == 5) {
    log->inline_overhead_ns += previous_cost_ns;
    ++log->inline_overhead_lines;
  }
  if (step.wait_end_ns < step.wait_begin_ns) {
    return Status::Corrupt("the wait ends (" + std::to_string(step.wait_end_ns) +
                           " ns) before it begins (" + std::to_string(step.wait_begin_ns) + " ns)");
  }
  log->steps.push_back(step);
  return Status::Ok();
}

// "D WORKERS CPU_NS BYTES", of the step line before it.
Status ParseLoader(const LineFields& fields, StepLog* log) {
  LoaderRecord loader;
  if (fields.size() != 4 || !ParseNumber(fields[1], &loader.workers) || loader.workers == 0 ||
      !ParseNumber(fields[2], &loader.cpu_ns) || !ParseNumber(fields[3], &loader.bytes)) {
    return Status::Corrupt(
        "malformed DataLoader line, expected \"D WORKERS CPU_NS BYTES\" (WORKERS >= 1)");
  }
  if (log->steps.empty() || log->steps.back().loader) {
    return Status::Corrupt("a DataLoader line (D) that follows no step line (S) of its own");
  }
  log->steps.back().loader = loader;
  return Status::Ok();
}

// "N SAMPLES CPU_NS BYTES CUT_CPU_NS CUT_BYTES"
Status ParseNative(const LineFields& fields, StepLog* log) {
  NativeRecord n;
  if (fields.size() != 6 || !ParseNumber(fields[1], &n.samples) || n.samples == 0 ||
      !ParseNumber(fields[2], &n.cpu_ns) || !ParseNumber(fields[3], &n.bytes) ||
      !ParseNumber(fields[4], &n.cut_cpu_ns) || !ParseNumber(fields[5], &n.cut_bytes)) {
    return Status::Corrupt(
        "malformed native engine line, expected \"N SAMPLES CPU_NS BYTES CUT_CPU_NS "
        "CUT_BYTES\" (SAMPLES >= 1)");
  }
  log->native.push_back(n);
  return Status::Ok();
}

// "O SECONDS RECORDS"
Status ParseOverhead(const LineFields& fields, StepLog* log) {
  double seconds = 0;
  uint64_t records = 0;
  if (fields.size() != 3 || !ParseNumber(fields[1], &seconds) || !std::isfinite(seconds) ||
      !ParseNumber(fields[2], &records)) {
    return Status::Corrupt("malformed overhead, expected \"O SECONDS RECORDS\"");
  }
  log->overhead_s += seconds;
  log->overhead_records += records;
  return Status::Ok();
}

// Parses one line after the header into `log`.
Status ParseLine(std::string_view line, StepLog* log) {
  if (line.starts_with(kHeaderPrefix)) {
    // Another writer of the same process: same pid, nothing else to record.
    StepLog again;
    GM_RETURN_IF_ERROR(ParseHeader(line, &again));
    if (again.pid != log->pid) {
      return Status::Corrupt("header of pid " + std::to_string(again.pid) + " in the log of pid " +
                             std::to_string(log->pid));
    }
    return Status::Ok();
  }
  if (line.starts_with('#')) return Status::Ok();
  // Free text after the letter: an error the writer met, a DataLoader not native.
  for (auto [letter, texts] : {std::pair{'E', &log->errors}, std::pair{'X', &log->not_native}}) {
    if (line.size() >= 1 && line[0] == letter && (line.size() == 1 || line[1] == ' ')) {
      texts->emplace_back(line.substr(std::min<size_t>(2, line.size())));
      return Status::Ok();
    }
  }
  const LineFields fields = Fields(line);
  if (fields[0] == "S") return ParseStep(fields, log);
  if (fields[0] == "D") return ParseLoader(fields, log);
  if (fields[0] == "N") return ParseNative(fields, log);
  if (fields[0] == "O") return ParseOverhead(fields, log);
  return Status::Corrupt("unknown line \"" + std::string(line.substr(0, 40)) +
                         "\" (expected a line starting with S, D, N, X, O, E or #)");
}

// Whether a directory entry is named like a step log, "steps.<pid>.log".
bool IsStepLogName(const std::string& name) {
  return name.size() > 10 && name.starts_with("steps.") && name.ends_with(".log");
}

}  // namespace

uint64_t MonotonicNanos() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

Result<std::unique_ptr<StepLogWriter>> StepLogWriter::Open(const std::string& dir,
                                                           std::string_view source) {
  if (source.empty() || source.find_first_of(" \t\r\n") != std::string_view::npos) {
    return Status::InvalidArgument("step log source \"" + std::string(source) +
                                   "\" must be one word, like \"goldminer\"");
  }
  const std::string pid = std::to_string(::getpid());
  const std::string path = dir + "/steps." + pid + ".log";
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    return Status::IoError(path + ": cannot open the step log: " + std::strerror(errno) + " (is $" +
                           std::string(kProfileDirEnv) + " a writable directory?)");
  }
  const std::string header = std::string(kHeaderPrefix) + std::to_string(kStepLogVersion) +
                             " pid=" + pid + " source=" + std::string(source) + "\n";
  errno = 0;
  if (!WriteLine(fd.get(), header)) {
    const int err = errno;
    return Status::IoError(path + ": cannot write the step log header: " +
                           (err != 0 ? std::strerror(err) : "short write (disk full?)"));
  }
  return std::unique_ptr<StepLogWriter>(new StepLogWriter(std::move(fd)));
}

std::unique_ptr<StepLogWriter> StepLogWriter::FromEnvironment(std::string_view source) {
  const char* dir = std::getenv(std::string(kProfileDirEnv).c_str());
  if (dir == nullptr || *dir == '\0') return nullptr;
  auto writer = Open(dir, source);
  if (!writer.ok()) {
    LogWarning("not recording data waits for `goldminer profile`: " + writer.status().message());
    return nullptr;
  }
  return std::move(*writer);
}

StepLogWriter::~StepLogWriter() {
  if (!fd_.valid()) return;
  char buf[96];
  // %.9f: nanosecond resolution, the clock's own.
  int n = std::snprintf(buf, sizeof buf, "O %.9f %llu\n", seconds_spent_,
                        static_cast<unsigned long long>(records_));
  if (n > 0) (void)WriteLine(fd_.get(), std::string_view(buf, static_cast<size_t>(n)));
  if (failures_ > 0) {
    (void)WriteLine(fd_.get(), "E " + std::to_string(failures_) + " of " +
                                   std::to_string(records_) +
                                   " step records could not be written\n");
  }
}

void StepLogWriter::Record(const StepRecord& step) {
  const uint64_t started = MonotonicNanos();
  char buf[100];  // "S " + 4 x 20 digits + 3 spaces + '\n' = 86
  size_t at = 0;
  buf[at++] = 'S';
  buf[at++] = ' ';
  AppendNumber(buf, sizeof buf, &at, step.wait_begin_ns);
  buf[at++] = ' ';
  AppendNumber(buf, sizeof buf, &at, step.wait_end_ns);
  buf[at++] = ' ';
  AppendNumber(buf, sizeof buf, &at, step.samples);
  buf[at++] = ' ';
  AppendNumber(buf, sizeof buf, &at, last_cost_ns_);
  buf[at++] = '\n';
  ++records_;
  if (!WriteLine(fd_.get(), std::string_view(buf, at))) ++failures_;
  last_cost_ns_ = MonotonicNanos() - started;
  seconds_spent_ += static_cast<double>(last_cost_ns_) * 1e-9;
}

Result<StepLog> ParseStepLog(std::string_view text, const std::string& origin) {
  StepLog log;
  size_t number = 0;
  // Only '\n'-terminated lines count: the text after the last '\n' was cut short.
  for (size_t end = text.find('\n'); end != std::string_view::npos; end = text.find('\n')) {
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end + 1);
    ++number;
    Status status = number == 1 ? ParseHeader(line, &log) : ParseLine(line, &log);
    if (!status.ok()) {
      return Status::Corrupt(origin + ":" + std::to_string(number) + ": " + status.message());
    }
  }
  if (number == 0) {
    return Status::Corrupt(origin +
                           ":1: empty: not a goldminer step log (no complete header line)");
  }
  // A writer that was killed wrote no "O" line; its "S" lines still carry the cost
  // of each record but the last.
  if (log.overhead_records == 0 && log.inline_overhead_lines > 1) {
    log.overhead_s = static_cast<double>(log.inline_overhead_ns) * 1e-9;
    log.overhead_records = log.inline_overhead_lines - 1;
  }
  return log;
}

Result<std::vector<StepLog>> ReadStepLogs(const std::string& dir) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (IsStepLogName(name)) paths.push_back(it->path().string());
  }
  if (ec == std::errc::no_such_file_or_directory) {
    return Status::NotFound(dir +
                            ": no such directory (expected the step logs of a profiled "
                            "trainer: steps.PID.log)");
  }
  if (ec) return Status::IoError(dir + ": cannot list the step logs: " + ec.message());
  std::sort(paths.begin(), paths.end());
  std::vector<StepLog> logs;
  for (const std::string& path : paths) {
    GM_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    // A process killed between creating its log and finishing the header line
    // left nothing to read.
    if (text.find('\n') == std::string::npos) continue;
    GM_ASSIGN_OR_RETURN(StepLog log, ParseStepLog(text, path));
    logs.push_back(std::move(log));
  }
  std::stable_sort(logs.begin(), logs.end(),
                   [](const StepLog& a, const StepLog& b) { return a.pid < b.pid; });
  return logs;
}

std::vector<uint64_t> StepCounter::Update() {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!IsStepLogName(name)) continue;
    const UniqueFd fd(::open(it->path().c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) continue;
    File& f = files_[name];
    // Reads from the start of the first line not yet complete; a line is counted
    // when its '\n' is read, so an unfinished one is read again next time.
    char buf[1 << 16];
    uint64_t at = f.offset;
    std::string line;  // the "S" line being read (other lines are skipped)
    bool line_start = true, step_line = false;
    for (ssize_t n; (n = ::pread(fd.get(), buf, sizeof buf, static_cast<off_t>(at))) > 0;) {
      for (ssize_t i = 0; i < n; ++i) {
        if (line_start) {
          step_line = buf[i] == 'S';
          line.clear();
        }
        line_start = buf[i] == '\n';
        if (!line_start) {
          if (step_line && line.size() < 256) line += buf[i];
          continue;
        }
        if (step_line) {
          ++f.steps;
          unsigned long long wait_begin = 0, wait_end = 0, samples = 0;
          if (std::sscanf(line.c_str(), "S %llu %llu %llu", &wait_begin, &wait_end, &samples) ==
                  3 &&
              wait_end >= wait_begin) {
            f.samples += samples;
            f.wait_ns += wait_end - wait_begin;
          }
        }
        f.offset = at + static_cast<uint64_t>(i) + 1;
      }
      at += static_cast<uint64_t>(n);
    }
  }
  std::vector<uint64_t> counts;
  for (const auto& [name, f] : files_) counts.push_back(f.steps);
  return counts;
}

StepCounter::Totals StepCounter::totals() const {
  Totals t;
  for (const auto& [name, f] : files_) {
    t.steps += f.steps;
    t.samples += f.samples;
    t.wait_ns += f.wait_ns;
  }
  return t;
}

}  // namespace gm
