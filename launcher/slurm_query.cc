#include "launcher/slurm_query.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/log.h"
#include "core/scontrol.h"
#include "launcher/process.h"

namespace gm {
namespace {

// `text` cut at '\n': each line without its spaces at either end and its '\r';
// empty ones left out.
std::vector<std::string_view> TrimmedLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

}  // namespace

Result<int> ParseSinfoIdleCpus(std::string_view text) {
  long long idle = 0;
  bool any = false;
  for (std::string_view line : TrimmedLines(text)) {
    long long parts[4] = {0, 0, 0, 0};
    size_t at = 0;
    for (int i = 0; i < 4; ++i) {
      const size_t slash = i < 3 ? line.find('/', at) : line.size();
      if (slash == std::string_view::npos) at = line.size() + 1;
      const std::string_view field =
          at <= line.size() ? line.substr(at, slash - at) : std::string_view();
      auto [stop, ec] = std::from_chars(field.data(), field.data() + field.size(), parts[i]);
      if (field.empty() || ec != std::errc() || stop != field.data() + field.size() ||
          parts[i] < 0) {
        return Status::InvalidArgument("sinfo -o %C: \"" + std::string(line) +
                                       "\" is not allocated/idle/other/total");
      }
      at = slash + 1;
    }
    idle += parts[1];
    any = true;
  }
  if (!any) return Status::InvalidArgument("sinfo -o %C said nothing (no such partition?)");
  return static_cast<int>(std::min<long long>(idle, 1 << 30));
}

Result<int> AskIdleCpus(const std::string& partition) {
  Result<CommandOutput> out =
      CaptureOutput({"sinfo", "-h", "-p", partition, "-o", "%C"}, 10, 1 << 16);
  if (!out.ok()) return out.status().WithContext("sinfo -p " + partition);
  if (out->exit.exit_code() != 0) {
    return Status::Unavailable("sinfo -p " + partition + " " + out->exit.describe + ": " +
                               out->err);
  }
  Result<int> idle = ParseSinfoIdleCpus(out->out);
  if (!idle.ok()) return idle.status().WithContext("partition " + partition);
  return idle;
}

namespace {

// The GPUs in a GRES list ("gpu:1", "gpu:a100:2(IDX:0-1),shard:4"): the counts of
// its "gpu" entries. InvalidArgument naming the entry whose count is no number.
Result<double> GresGpus(std::string_view list, const std::string& job) {
  // "(IDX:0-1)" and "(S:0,1)" hold commas too: they go first.
  std::string plain;
  int depth = 0;
  for (char c : list) {
    if (c == '(') ++depth;
    if (depth == 0) plain += c;
    if (c == ')' && depth > 0) --depth;
  }
  double gpus = 0;
  size_t start = 0;
  while (start < plain.size()) {
    size_t end = plain.find(',', start);
    if (end == std::string::npos) end = plain.size();
    const std::string item = plain.substr(start, end - start);
    start = end + 1;
    if (item.rfind("gpu:", 0) != 0) continue;
    const std::string count = item.substr(item.rfind(':') + 1);
    char* stop = nullptr;
    const double n = std::strtod(count.c_str(), &stop);
    if (count.empty() || stop != count.c_str() + count.size() || !(n >= 0)) {
      return Status::InvalidArgument("scontrol show job " + job + ": GRES \"" + item +
                                     "\" has no GPU count");
    }
    gpus += n;
  }
  return gpus;
}

}  // namespace

Result<double> ParseJobGpus(const std::string& scontrol_job, const std::string& job) {
  std::string state, job_gres, tres;
  std::vector<std::string> node_gres;
  for (const auto& [key, value] : ScontrolFields(scontrol_job)) {
    if (key == "JobState") state = value;
    if (key == "JOB_GRES") job_gres = value;
    if (key == "GRES") node_gres.push_back(value);
    if (key == "TRES" || key == "AllocTRES") tres = value;
  }
  if (state.empty()) return Status::NotFound("Slurm job " + job + " is not known to Slurm");
  if (state != "RUNNING") {
    return Status::NotFound("Slurm job " + job + " is not running (JobState=" + state + ")");
  }
  if (!job_gres.empty() && job_gres != "(null)") return GresGpus(job_gres, job);
  if (!node_gres.empty()) {
    double gpus = 0;
    for (const std::string& g : node_gres) {
      GM_ASSIGN_OR_RETURN(double n, GresGpus(g, job));
      gpus += n;
    }
    return gpus;
  }
  // Without the detail lines: TRES's gres/gpu=N (where accounting tracks GPUs).
  for (size_t at = tres.find("gres/gpu="); at != std::string::npos;
       at = tres.find("gres/gpu=", at + 1)) {
    if (at > 0 && tres[at - 1] != ',') continue;
    const std::string count = tres.substr(at + 9, tres.find(',', at) - at - 9);
    return GresGpus("gpu:" + count, job);
  }
  return 0.0;
}

Result<double> AskJobGpus(const std::string& job) {
  Result<CommandOutput> out =
      CaptureOutput({"scontrol", "-d", "show", "job", "--oneliner", job}, 10, 1 << 20);
  if (!out.ok()) return out.status().WithContext("scontrol show job " + job);
  if (out->exit.exit_code() != 0) {
    // scontrol says "Invalid job id specified" for a job it does not know (any more).
    if (out->err.find("Invalid job id") != std::string::npos) {
      return Status::NotFound("Slurm job " + job + " is not known to Slurm");
    }
    return Status::Unavailable("scontrol show job " + job + " " + out->exit.describe + ": " +
                               out->err);
  }
  return ParseJobGpus(out->out, job);
}

namespace {

// `text` cut at '|' into exactly `fields` a line (TrimmedLines; the last keeps any
// further '|').
Result<std::vector<std::vector<std::string>>> Table(std::string_view text, size_t fields,
                                                    const std::string& what) {
  std::vector<std::vector<std::string>> rows;
  for (std::string_view line : TrimmedLines(text)) {
    std::vector<std::string> row;
    size_t at = 0;
    while (row.size() + 1 < fields) {
      const size_t bar = line.find('|', at);
      if (bar == std::string_view::npos) break;
      row.emplace_back(line.substr(at, bar - at));
      at = bar + 1;
    }
    row.emplace_back(line.substr(at));
    if (row.size() != fields) {
      return Status::InvalidArgument(what + ": \"" + std::string(line) + "\" has not " +
                                     std::to_string(fields) + " fields");
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

Result<int> ParsePendingCpus(std::string_view squeue, std::string_view sinfo_nodes,
                             const std::string& partition) {
  GM_ASSIGN_OR_RETURN(auto pairs, Table(sinfo_nodes, 2, "sinfo -N -o %N|%R"));
  std::map<std::string, std::set<std::string>> nodes_of;
  for (const auto& row : pairs) nodes_of[row[1]].insert(row[0]);
  const std::set<std::string>& mine = nodes_of[partition];
  if (mine.empty()) {
    return Status::InvalidArgument("sinfo: no node is in partition " + partition);
  }
  auto shares_a_node = [&](const std::string& partitions) {
    size_t at = 0;
    while (at <= partitions.size()) {
      size_t comma = partitions.find(',', at);
      if (comma == std::string::npos) comma = partitions.size();
      for (const std::string& node : nodes_of[partitions.substr(at, comma - at)]) {
        if (mine.count(node)) return true;
      }
      at = comma + 1;
    }
    return false;
  };
  GM_ASSIGN_OR_RETURN(auto jobs, Table(squeue, 5, "squeue -o %C|%r|%b|%P|%j"));
  long long pending = 0;
  for (const auto& job : jobs) {
    long long cpus = 0;
    auto [stop, ec] = std::from_chars(job[0].data(), job[0].data() + job[0].size(), cpus);
    if (job[0].empty() || ec != std::errc() || stop != job[0].data() + job[0].size() || cpus < 0) {
      return Status::InvalidArgument("squeue -o %C: \"" + job[0] + "\" is not a CPU count");
    }
    if (job[1] != "Resources" || job[2].find("gpu") != std::string::npos ||
        job[4].rfind("goldminer-worker.", 0) == 0 || !shares_a_node(job[3])) {
      continue;
    }
    pending += cpus;
  }
  return static_cast<int>(std::min<long long>(pending, 1 << 30));
}

Result<int> AskPendingCpus(const std::string& partition) {
  Result<CommandOutput> jobs =
      CaptureOutput({"squeue", "-h", "-t", "PD", "-o", "%C|%r|%b|%P|%j"}, 10, 1 << 20);
  if (!jobs.ok()) return jobs.status().WithContext("squeue");
  if (jobs->exit.exit_code() != 0) {
    return Status::Unavailable("squeue " + jobs->exit.describe + ": " + jobs->err);
  }
  Result<CommandOutput> nodes = CaptureOutput({"sinfo", "-h", "-N", "-o", "%N|%R"}, 10, 1 << 20);
  if (!nodes.ok()) return nodes.status().WithContext("sinfo -N");
  if (nodes->exit.exit_code() != 0) {
    return Status::Unavailable("sinfo -N " + nodes->exit.describe + ": " + nodes->err);
  }
  return ParsePendingCpus(jobs->out, nodes->out, partition);
}

std::string SlurmJobEnd(const std::string& scontrol_job) {
  std::string state, preempt_time;
  for (const auto& [key, value] : ScontrolFields(scontrol_job)) {
    if (key == "JobState") state = value;
    if (key == "PreemptTime") preempt_time = value;
  }
  if (state == "PREEMPTED" || (!preempt_time.empty() && preempt_time != "None")) {
    return "preempted";
  }
  if (state == "CANCELLED") return "cancelled";
  if (state == "TIMEOUT") return "time limit";
  if (state == "NODE_FAIL") return "node failure";
  return "";
}

namespace {

// What a Slurm query command printed; errors say which command and why.
Result<std::string> SlurmQuery(const std::vector<std::string>& argv) {
  std::string shown;
  for (const std::string& a : argv) shown += (shown.empty() ? "" : " ") + a;
  Result<CommandOutput> r = CaptureOutput(argv, 60);
  if (!r.ok()) {
    if (r.status().code() == Code::kNotFound) {
      return Status::NotFound(argv[0] +
                              " is not on PATH; run where Slurm's commands work (a login "
                              "node), or describe the cluster in a cluster.json");
    }
    return Status(r.status().code(), shown + ": " + r.status().message());
  }
  if (r->exit.exit_code() != 0) {
    std::string err = r->err.substr(0, 400);
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    return Status::Unavailable("`" + shown + "` " + r->exit.describe + ": " + err);
  }
  return r->out;
}

}  // namespace

Result<planner::Cluster> AskCluster() {
  GM_ASSIGN_OR_RETURN(std::string nodes, SlurmQuery({"scontrol", "show", "node", "--oneliner"}));
  GM_ASSIGN_OR_RETURN(std::string partitions,
                      SlurmQuery({"scontrol", "show", "partition", "--oneliner"}));
  GM_ASSIGN_OR_RETURN(std::string gres_used,
                      SlurmQuery({"sinfo", "-h", "-N", "-O", "NodeList:|,GresUsed:|"}));
  return planner::ClusterFromScontrol(nodes, partitions, gres_used, "scontrol");
}

std::string AskWhyWaiting(const SlurmJob& job, const std::string& elastic_name) {
  const auto trim = [](std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    for (char& c : s) c = c == '\n' ? ',' : c;
    return s.substr(0, 400);
  };
  if (!elastic_name.empty()) {
    Result<CommandOutput> out = CaptureOutput(
        {"squeue", "-h", "-t", "PD", "--name=" + elastic_name, "-o", "%i %r"}, 10, 1 << 16);
    if (!out.ok() || out->exit.exit_code() != 0) return "";
    const std::string pending = trim(out->out);
    return pending.empty() ? "its srun has not been given a job yet"
                           : "Slurm keeps its job pending (squeue: job and reason " + pending + ")";
  }
  Result<CommandOutput> out =
      CaptureOutput({"squeue", "-h", "-s", "-j", job.job_id, "-o", "%i %j"}, 10, 1 << 16);
  if (!out.ok() || out->exit.exit_code() != 0) return "";
  return "its step waits for CPUs, memory or GPUs that the job's running steps hold (squeue -s: " +
         trim(out->out) +
         "); check the job's --mem and --gres, and goldminer-run(1), SLURM, for what each "
         "worker step asks";
}

std::string AskJobEnd(const std::string& job_id) {
  Result<CommandOutput> out =
      CaptureOutput({"scontrol", "show", "job", "--oneliner", job_id}, 5, 1 << 20);
  if (!out.ok() || out->exit.exit_code() != 0) return "";
  return SlurmJobEnd(out->out);
}

std::string AskStopCause(const SlurmJob& job) {
  Result<CommandOutput> out =
      CaptureOutput({"scontrol", "show", "job", "--oneliner", job.job_id}, 5, 1 << 20);
  if (!out.ok() || out->exit.exit_code() != 0) return "";
  return SlurmStopCause(out->out, job.restart_count);
}
}  // namespace gm
