#include "launcher/slurm_job.h"

#include <algorithm>
#include <charconv>
#include <numeric>

#include "core/scontrol.h"

namespace gm {
namespace {

bool ParseInt(std::string_view s, long long* out) {
  const char* end = s.data() + s.size();
  auto r = std::from_chars(s.data(), end, *out);
  return r.ec == std::errc() && r.ptr == end;
}

// Slurm's [D-]HH:MM:SS, MM:SS or MM (minutes) as seconds; -1 for UNLIMITED or junk.
long long SlurmSeconds(std::string_view s) {
  long long days = 0;
  if (auto dash = s.find('-'); dash != std::string_view::npos) {
    if (!ParseInt(s.substr(0, dash), &days)) return -1;
    s.remove_prefix(dash + 1);
  }
  std::vector<long long> parts;
  while (!s.empty()) {
    const size_t colon = std::min(s.find(':'), s.size());
    long long v = 0;
    if (!ParseInt(s.substr(0, colon), &v) || v < 0) return -1;
    parts.push_back(v);
    s.remove_prefix(std::min(colon + 1, s.size()));
  }
  long long secs = 0;
  switch (parts.size()) {
    case 1: secs = parts[0] * 60; break;                                  // MM
    case 2: secs = parts[0] * 60 + parts[1]; break;                       // MM:SS
    case 3: secs = parts[0] * 3600 + parts[1] * 60 + parts[2]; break;     // HH:MM:SS
    default: return -1;
  }
  return days * 86400 + secs;
}

}  // namespace

Result<std::vector<int>> ParseCpusPerNode(std::string_view text) {
  const std::string bad = "SLURM_JOB_CPUS_PER_NODE '" + std::string(text) +
                          "' is not a list like 8(x2),4";
  std::vector<int> out;
  bool more = !text.empty();
  while (more) {
    const size_t comma = std::min(text.find(','), text.size());
    std::string_view item = text.substr(0, comma);
    more = comma < text.size();  // a trailing comma leaves an empty item: refused below
    text.remove_prefix(std::min(comma + 1, text.size()));
    if (item.empty()) return Status::InvalidArgument(bad);
    long long cpus = 0, repeat = 1;
    if (auto paren = item.find("(x"); paren != std::string_view::npos) {
      if (item.back() != ')' ||
          !ParseInt(item.substr(paren + 2, item.size() - paren - 3), &repeat)) {
        return Status::InvalidArgument(bad);
      }
      item = item.substr(0, paren);
    }
    if (!ParseInt(item, &cpus) || cpus < 0 || cpus > 1 << 20 || repeat < 1 || repeat > 1 << 16 ||
        out.size() + static_cast<size_t>(repeat) > (1 << 16)) {
      return Status::InvalidArgument(bad);
    }
    out.insert(out.end(), static_cast<size_t>(repeat), static_cast<int>(cpus));
  }
  if (out.empty()) return Status::InvalidArgument(bad);
  return out;
}

Status CheckWorkersFit(const std::vector<int>& worker_cpus, const std::vector<int>& node_cpus,
                       const std::string& what) {
  if (worker_cpus.empty()) return Status::Ok();
  const long long need = std::accumulate(worker_cpus.begin(), worker_cpus.end(), 0LL);
  const long long have = std::accumulate(node_cpus.begin(), node_cpus.end(), 0LL);
  const int widest = *std::max_element(worker_cpus.begin(), worker_cpus.end());
  const int largest = node_cpus.empty() ? 0 : *std::max_element(node_cpus.begin(), node_cpus.end());
  const std::string workers = std::to_string(worker_cpus.size()) + " worker(s) of " +
                              std::to_string(need) + " CPUs in all";
  if (need > have) {
    return Status::InvalidArgument(
        workers + " do not fit in " + what + ", which holds " + std::to_string(have) +
        " CPUs: each step would wait for CPUs that never come free; submit the job that "
        "`goldminer plan --sbatch` wrote for this plan, or ask for fewer --workers");
  }
  if (widest > largest) {
    return Status::InvalidArgument(
        "a worker of " + std::to_string(widest) + " CPUs does not fit on one node of " + what +
        " (the largest has " + std::to_string(largest) + "); use fewer --threads-per-worker");
  }
  // Whole workers per node: first fit, largest first (a worker is one task on one node).
  std::vector<int> sorted = worker_cpus;
  std::sort(sorted.rbegin(), sorted.rend());
  std::vector<int> free = node_cpus;
  for (int w : sorted) {
    auto it = std::find_if(free.begin(), free.end(), [w](int f) { return f >= w; });
    if (it == free.end()) {
      return Status::InvalidArgument(
          workers + " cannot be placed whole on the nodes of " + what +
          " (a worker's CPUs must be on one node); use fewer --workers or smaller ones");
    }
    *it -= w;
  }
  return Status::Ok();
}

std::string SlurmStopCause(const std::string& scontrol_job, int restart_count) {
  std::string state, restarts, run_time, time_limit;
  for (const auto& [key, value] : ScontrolFields(scontrol_job)) {
    if (key == "JobState") state = value;
    if (key == "Restarts") restarts = value;
    if (key == "RunTime") run_time = value;
    if (key == "TimeLimit") time_limit = value;
  }
  long long n = 0;
  if (ParseInt(restarts, &n) && n > restart_count) return "requeued";
  if (state == "TIMEOUT") return "time limit";
  if (state == "PREEMPTED") return "preempted";
  if (state == "DEADLINE") return "deadline";
  const long long limit = SlurmSeconds(time_limit);
  const long long ran = SlurmSeconds(run_time);
  if (limit > 0 && ran >= limit) return "time limit";
  return "";
}

}  // namespace gm
