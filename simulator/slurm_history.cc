// A Slurm cluster's own history as a trace (simulator/trace.h): the jobcomp/filetxt
// file (one "Key=value ..." line per finished job) and `sacct --parsable2` output.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>

#include "simulator/text.h"
#include "simulator/trace.h"

namespace gm::sim {
namespace {

// Seconds since 1970 of "YYYY-MM-DDTHH:MM:SS" (taken as UTC: only differences
// count), or nullopt ("Unknown", "None", anything else).
std::optional<double> SlurmTime(std::string_view t) {
  int v[6] = {0, 0, 0, 0, 0, 0};
  const size_t starts[6] = {0, 5, 8, 11, 14, 17}, lengths[6] = {4, 2, 2, 2, 2, 2};
  if (t.size() != 19 || t[4] != '-' || t[7] != '-' || t[10] != 'T' || t[13] != ':' ||
      t[16] != ':') {
    return std::nullopt;
  }
  for (size_t i = 0; i < 6; ++i) {
    const char* b = t.data() + starts[i];
    const auto [end, ec] = std::from_chars(b, b + lengths[i], v[i]);
    if (ec != std::errc() || end != b + lengths[i]) return std::nullopt;
  }
  // Days from the civil date (Howard Hinnant's algorithm), proleptic Gregorian.
  const int y = v[0] - (v[1] <= 2 ? 1 : 0);
  const int era = (y >= 0 ? y : y - 399) / 400;
  const int yoe = y - era * 400;
  const int doy = (153 * (v[1] + (v[1] > 2 ? -3 : 9)) + 2) / 5 + v[2] - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const double days = era * 146097.0 + doe - 719468;
  return days * 86400 + v[3] * 3600 + v[4] * 60 + v[5];
}

// GPUs and memory (MiB) of a TRES list ("cpu=4,mem=2000M,node=1,gres/gpu=1").
void FromTres(std::string_view tres, double* gpus, uint64_t* memory_mib) {
  while (!tres.empty()) {
    const size_t comma = tres.find(',');
    std::string_view item = tres.substr(0, comma);
    tres.remove_prefix(comma == std::string_view::npos ? tres.size() : comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    double n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc()) continue;
    if (key == "gres/gpu") {  // typed counts ("gres/gpu:a100=2") repeat it: the total is this
      *gpus = n;
    } else if (key == "mem") {
      const char unit = end < value.data() + value.size() ? *end : 'M';
      const double scale = unit == 'K'   ? 1.0 / 1024
                           : unit == 'G' ? 1024
                           : unit == 'T' ? 1 << 20
                                         : 1;
      *memory_mib = static_cast<uint64_t>(n * scale);
    }
  }
}

// The value of `key` in a jobcomp line: from after "key=" to the next " Key=" of a
// known key (a job's name may hold spaces).
std::string_view Field(std::string_view line, std::string_view key) {
  static const char* const kKeys[] = {
      " UserId=",          " GroupId=",   " Name=",       " JobState=",
      " Partition=",       " TimeLimit=", " StartTime=",  " EndTime=",
      " NodeList=",        " NodeCnt=",   " ProcCnt=",    " WorkDir=",
      " ReservationName=", " Tres=",      " Account=",    " QOS=",
      " WcKey=",           " Cluster=",   " SubmitTime=", " EligibleTime=",
      " DerivedExitCode=", " ExitCode="};
  const std::string needle =
      (line.starts_with(std::string(key) + "=") ? "" : " ") + std::string(key) + "=";
  const size_t at = line.starts_with(needle) ? 0 : line.find(needle);
  if (at == std::string_view::npos) return {};
  const size_t begin = at + needle.size();
  size_t end = line.size();
  for (const char* k : kKeys) {
    const size_t next = line.find(k, begin);
    if (next != std::string_view::npos) end = std::min(end, next);
  }
  return line.substr(begin, end - begin);
}

// One finished job as its tasks: a job on N nodes is N tasks, one a node, each
// with its share of the CPUs and GPUs. False (nothing added) for a job that never
// ran; InvalidArgument for one that ends before it starts.
Result<bool> AddJob(const std::string& where, const std::string& name, double submit,
                    std::optional<double> start, std::optional<double> end, double cpus,
                    double gpus, uint64_t memory_mib, double nodes, size_t line, Trace& t) {
  if (!start || !end || cpus <= 0) return false;
  if (*end < *start) return Status::InvalidArgument(where + "it ends before it starts");
  if (*start < submit) return Status::InvalidArgument(where + "it starts before it was submitted");
  const int n = std::max(1, static_cast<int>(nodes));
  for (int k = 0; k < n; ++k) {
    SimTask task;
    task.name = n == 1 ? name : name + "." + std::to_string(k);
    task.line = line;
    task.submit_s = submit;
    task.duration_s = std::max(1.0, *end - *start);  // a job that ran for less than 1 s
    task.cpus = std::max(1, static_cast<int>(std::ceil(cpus / n - 1e-9)));
    task.gpu_milli = static_cast<int>(std::lround(gpus / n * 1000));
    task.memory_mib = memory_mib / static_cast<uint64_t>(n);
    t.tasks.push_back(std::move(task));
  }
  return true;
}

double NumberOr(std::string_view text, double fallback) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return ec == std::errc() && end == text.data() + text.size() ? v : fallback;
}

Result<Trace> ReadJobcomp(std::string_view text, const std::string& origin) {
  Trace t;
  t.origin = origin;
  GM_RETURN_IF_ERROR(ForEachLine(text, [&](std::string_view line, size_t number) -> Status {
    const std::string where = origin + ":" + std::to_string(number) + ": ";
    if (!line.starts_with("JobId=")) {
      return Status::InvalidArgument(where + "not a jobcomp/filetxt line (JobId=... first)");
    }
    const std::optional<double> submit = SlurmTime(Field(line, "SubmitTime"));
    if (!submit) return Status::InvalidArgument(where + "no SubmitTime");
    double gpus = 0;
    uint64_t memory = 0;
    FromTres(Field(line, "Tres"), &gpus, &memory);
    GM_ASSIGN_OR_RETURN(const bool ran, AddJob(where, "job-" + std::string(Field(line, "JobId")),
                                               *submit, SlurmTime(Field(line, "StartTime")),
                                               SlurmTime(Field(line, "EndTime")),
                                               NumberOr(Field(line, "ProcCnt"), 0), gpus, memory,
                                               NumberOr(Field(line, "NodeCnt"), 1), number, t));
    if (!ran) ++t.never_scheduled;
    return Status::Ok();
  }));
  return t;
}

Result<Trace> ReadSacct(std::string_view text, const std::string& origin) {
  Trace t;
  t.origin = origin;
  std::map<std::string, size_t, std::less<>> columns;
  const char* const kNeed[] = {"JobID",     "Submit",    "Start", "End",
                               "AllocCPUS", "AllocTRES", "NNodes"};
  GM_RETURN_IF_ERROR(ForEachLine(text, [&](std::string_view line, size_t number) -> Status {
    const std::vector<std::string_view> f = SplitFields(line, '|');
    if (columns.empty()) {
      for (size_t i = 0; i < f.size(); ++i) columns.emplace(std::string(f[i]), i);
      for (const char* c : kNeed) {
        if (!columns.contains(c)) {
          return Status::InvalidArgument(
              origin + ":1: no column " + c +
              " (give sacct --parsable2 --allocations "
              "--format=JobID,Submit,Start,End,AllocCPUS,AllocTRES,NNodes)");
        }
      }
      return Status::Ok();
    }
    const std::string where = origin + ":" + std::to_string(number) + ": ";
    auto get = [&](const char* c) {
      const size_t i = columns.find(c)->second;
      return i < f.size() ? f[i] : std::string_view();
    };
    const std::optional<double> submit = SlurmTime(get("Submit"));
    if (!submit) return Status::InvalidArgument(where + "Submit is not a time");
    double gpus = 0;
    uint64_t memory = 0;
    FromTres(get("AllocTRES"), &gpus, &memory);
    GM_ASSIGN_OR_RETURN(const bool ran, AddJob(where, "job-" + std::string(get("JobID")), *submit,
                                               SlurmTime(get("Start")), SlurmTime(get("End")),
                                               NumberOr(get("AllocCPUS"), 0), gpus, memory,
                                               NumberOr(get("NNodes"), 1), number, t));
    if (!ran) ++t.never_scheduled;
    return Status::Ok();
  }));
  if (columns.empty()) return Status::InvalidArgument(origin + ": empty (no header line)");
  return t;
}

}  // namespace

Result<Trace> ParseSlurmHistory(std::string_view text, const std::string& origin) {
  return text.starts_with("JobId=") ? ReadJobcomp(text, origin) : ReadSacct(text, origin);
}

bool IsSlurmHistory(std::string_view text) {
  const std::string_view first = text.substr(0, text.find('\n'));
  return first.starts_with("JobId=") || (first.find('|') != std::string_view::npos &&
                                         first.find("Submit") != std::string_view::npos);
}

}  // namespace gm::sim
