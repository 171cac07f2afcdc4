#include "launcher/slurm_job.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "core/log.h"
#include "core/scontrol.h"
#include "launcher/process.h"

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
    case 1:
      secs = parts[0] * 60;
      break;  // MM
    case 2:
      secs = parts[0] * 60 + parts[1];
      break;  // MM:SS
    case 3:
      secs = parts[0] * 3600 + parts[1] * 60 + parts[2];
      break;  // HH:MM:SS
    default:
      return -1;
  }
  return days * 86400 + secs;
}

}  // namespace

Result<std::vector<int>> ParseCpusPerNode(std::string_view text) {
  const std::string bad =
      "SLURM_JOB_CPUS_PER_NODE '" + std::string(text) + "' is not a list like 8(x2),4";
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
                       const std::string& what, const std::vector<uint64_t>& worker_mem_mb,
                       const std::vector<uint64_t>& node_mem_mb) {
  if (worker_cpus.empty()) return Status::Ok();
  const bool memory = !node_mem_mb.empty() && node_mem_mb.size() == node_cpus.size() &&
                      worker_mem_mb.size() == worker_cpus.size();
  const long long need = std::accumulate(worker_cpus.begin(), worker_cpus.end(), 0LL);
  const long long have = std::accumulate(node_cpus.begin(), node_cpus.end(), 0LL);
  const int widest = *std::max_element(worker_cpus.begin(), worker_cpus.end());
  const int largest = node_cpus.empty() ? 0 : *std::max_element(node_cpus.begin(), node_cpus.end());
  const std::string workers =
      std::to_string(worker_cpus.size()) + " worker(s) of " + std::to_string(need) + " CPUs in all";
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
  if (memory) {
    const uint64_t asked = std::accumulate(worker_mem_mb.begin(), worker_mem_mb.end(), uint64_t{0});
    const uint64_t held = std::accumulate(node_mem_mb.begin(), node_mem_mb.end(), uint64_t{0});
    if (asked > held) {
      return Status::InvalidArgument(
          std::to_string(worker_cpus.size()) + " worker(s) asking " + std::to_string(need) +
          " CPUs and " + std::to_string(asked) + " MB in all do not fit in " + what +
          ", which holds " + std::to_string(have) + " CPUs and " + std::to_string(held) +
          " MB: each step would wait for memory that never comes free; give --worker-mem "
          "SIZE (at most " +
          std::to_string(held / worker_cpus.size()) + "M each), fewer --workers, or ask the job " +
          "for more --mem");
    }
  }
  // Whole workers per node: first fit, largest first (a worker is one task on one
  // node, with its CPUs and its memory).
  std::vector<size_t> order(worker_cpus.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return worker_cpus[a] > worker_cpus[b]; });
  std::vector<int> free = node_cpus;
  std::vector<uint64_t> free_mem = memory ? node_mem_mb : std::vector<uint64_t>(free.size(), 0);
  for (size_t w : order) {
    const uint64_t mem = memory ? worker_mem_mb[w] : 0;
    size_t n = 0;
    while (n < free.size() && (free[n] < worker_cpus[w] || free_mem[n] < mem)) ++n;
    if (n == free.size()) {
      return Status::InvalidArgument(
          workers +
          (memory ? " and " +
                        std::to_string(std::accumulate(worker_mem_mb.begin(), worker_mem_mb.end(),
                                                       uint64_t{0})) +
                        " MB"
                  : std::string()) +
          " cannot be placed whole on the nodes of " + what +
          " (a worker's CPUs and memory must be on one node); use fewer --workers, smaller "
          "ones" +
          (memory ? " or a smaller --worker-mem" : ""));
    }
    free[n] -= worker_cpus[w];
    free_mem[n] -= mem;
  }
  return Status::Ok();
}

uint64_t SlurmComponent::NodeMemoryMb(int cpus) const {
  if (mem_per_node_mb > 0) return mem_per_node_mb;
  return mem_per_cpu_mb * static_cast<uint64_t>(std::max(cpus, 0));
}

uint64_t DefaultWorkerMemoryMb(const SlurmComponent& c, int node_cpus, int threads,
                               bool trainer_node, int node_worker_cpus) {
  const uint64_t t = static_cast<uint64_t>(std::max(threads, 1));
  uint64_t share = 0;
  if (c.mem_per_cpu_mb > 0) {
    share = c.mem_per_cpu_mb * t;
  } else if (c.mem_per_node_mb > 0) {
    share = c.mem_per_node_mb * t / static_cast<uint64_t>(std::max(node_cpus, 1));
    if (trainer_node) {
      const uint64_t users = static_cast<uint64_t>(std::max(node_worker_cpus, threads));
      share = std::min(share, c.mem_per_node_mb / 2 * t / users);
    }
  } else {
    return 0;
  }
  return std::max(share, kMinWorkerMemoryMb);
}

Result<uint64_t> ParseMemoryMb(std::string_view text, const std::string& flag) {
  const std::string bad = flag + " '" + std::string(text) +
                          "' is not a memory size: give MB, or a number with K, M, G or T "
                          "(e.g. 500M, 2G), as srun --mem takes it";
  if (text.empty()) return Status::InvalidArgument(bad);
  int shift = 0;  // of MB, in powers of 1024: K -1, M 0, G 1, T 2
  switch (std::toupper(static_cast<unsigned char>(text.back()))) {
    case 'K':
      shift = -1;
      break;
    case 'M':
      shift = 0;
      break;
    case 'G':
      shift = 1;
      break;
    case 'T':
      shift = 2;
      break;
    default:
      shift = 9;
      break;  // no suffix
  }
  if (shift != 9) text.remove_suffix(1);
  long long n = 0;
  if (!ParseInt(text, &n) || n <= 0 || n > (1LL << 40)) return Status::InvalidArgument(bad);
  uint64_t mb = static_cast<uint64_t>(n);
  if (shift == -1) mb = (mb + 1023) / 1024;
  if (shift > 0 && shift != 9) mb <<= 10 * shift;
  if (mb > (uint64_t{1} << 40)) return Status::InvalidArgument(bad);
  return mb;
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

std::optional<SlurmJob> SlurmJob::FromEnvironment(
    const std::function<const char*(const char*)>& getenv) {
  const auto var = [&getenv](const std::string& name) {
    const char* v = getenv(name.c_str());
    return std::string(v != nullptr ? v : "");
  };
  SlurmJob job;
  job.job_id = var("SLURM_JOB_ID");
  if (job.job_id.empty()) return std::nullopt;
  long long restarts = 0;
  if (ParseInt(var("SLURM_RESTART_COUNT"), &restarts) && restarts >= 0 && restarts < 1 << 30) {
    job.restart_count = static_cast<int>(restarts);
  }
  // The component's memory from SLURM_MEM_PER_NODE or SLURM_MEM_PER_CPU (+ suffix).
  const auto memory = [&var](SlurmComponent& c, const std::string& suffix) {
    long long mb = 0;
    for (const char* name : {"SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU"}) {
      const std::string full = name + suffix;
      const std::string text = var(full);
      if (!ParseInt(text, &mb) || mb <= 0 || mb > (1LL << 40)) continue;
      (full.find("PER_NODE") != std::string::npos ? c.mem_per_node_mb : c.mem_per_cpu_mb) =
          static_cast<uint64_t>(mb);
      c.mem_var = full + "=" + text;
      return;
    }
  };
  long long het_size = 0;
  if (!ParseInt(var("SLURM_HET_SIZE"), &het_size) || het_size < 2 || het_size > 64) {
    SlurmComponent c;
    c.job_id = job.job_id;
    c.cpus_var = "SLURM_JOB_CPUS_PER_NODE";
    c.cpus_text = var(c.cpus_var);
    memory(c, "");
    job.components.push_back(std::move(c));
    return job;
  }
  for (int g = 0; g < het_size; ++g) {
    const std::string n = std::to_string(g);
    std::string id = var("SLURM_JOB_ID_HET_GROUP_" + n);
    if (id.empty()) id = job.job_id;
    const std::string cpus = "SLURM_JOB_CPUS_PER_NODE_HET_GROUP_" + n;
    SlurmComponent c;
    c.group = g;
    c.job_id = id;
    c.cpus_var = cpus;
    c.cpus_text = var(cpus);
    memory(c, "_HET_GROUP_" + n);
    job.components.push_back(std::move(c));
  }
  return job;
}

std::optional<SlurmJob> SlurmJob::FromEnvironment() {
  return FromEnvironment([](const char* name) { return std::getenv(name); });
}

int SlurmJob::GroupOf(bool off_trainer_node) const {
  return heterogeneous() && off_trainer_node ? 1 : 0;
}

Status SlurmJob::CheckWorkersFit(const RunSpec& spec, int workers) const {
  std::map<int, std::vector<int>> by_group;           // het group -> its workers' CPUs
  std::map<int, std::vector<uint64_t>> mem_by_group;  // and their memory, MB
  for (int slot = 0; slot < workers; ++slot) {
    const int group = GroupOf(spec.RemoteOf(slot));
    by_group[group].push_back(spec.ThreadsOf(slot));
    mem_by_group[group].push_back((spec.MemoryOf(slot) + (1 << 20) - 1) >> 20);
  }
  for (const auto& [group, cpus] : by_group) {
    if (static_cast<size_t>(group) >= components.size()) continue;
    const SlurmComponent& c = components[static_cast<size_t>(group)];
    if (c.cpus_text.empty()) continue;
    GM_ASSIGN_OR_RETURN(std::vector<int> nodes, ParseCpusPerNode(c.cpus_text));
    std::vector<uint64_t> node_mem;
    if (!c.mem_var.empty()) {
      for (int n : nodes) node_mem.push_back(c.NodeMemoryMb(n));
    }
    const std::string what =
        (heterogeneous() ? "component " + std::to_string(group) + " of job " : "job ") + job_id +
        " (" + c.cpus_var + "=" + c.cpus_text + (c.mem_var.empty() ? "" : ", " + c.mem_var) + ")";
    GM_RETURN_IF_ERROR(gm::CheckWorkersFit(cpus, nodes, what, mem_by_group[group], node_mem));
  }
  return Status::Ok();
}

std::string SlurmJob::ShareWorkerMemory(RunSpec& spec, int workers) const {
  std::map<int, int> group_cpus;  // het group -> its workers' CPUs in all
  for (int slot = 0; slot < workers; ++slot) {
    group_cpus[GroupOf(spec.RemoteOf(slot))] += spec.ThreadsOf(slot);
  }
  // A worker of `threads` CPUs in `group`: its share, MB (0: not said).
  const auto share = [&](int group, int threads) -> uint64_t {
    if (static_cast<size_t>(group) >= components.size()) return 0;
    const SlurmComponent& c = components[static_cast<size_t>(group)];
    Result<std::vector<int>> nodes = ParseCpusPerNode(c.cpus_text);
    const int node_cpus = nodes.ok() ? (*nodes)[0] : threads;
    const int node_count = nodes.ok() ? static_cast<int>(nodes->size()) : 1;
    const int per_node = (group_cpus[group] + node_count - 1) / node_count;
    return DefaultWorkerMemoryMb(c, node_cpus, threads, group == 0, per_node);
  };
  for (size_t i = 0; i < spec.slots.size(); ++i) {
    WorkerSlot& slot = spec.slots[i];
    if (slot.memory_bytes > 0) continue;  // the plan's figure
    const int group = GroupOf(slot.remote);
    slot.memory_bytes = share(group, slot.threads) << 20;
  }
  const int added_group = GroupOf(spec.RemoteOf(static_cast<int>(spec.slots.size())));
  const uint64_t added = share(added_group, spec.threads_per_worker);
  spec.worker_memory_bytes = added << 20;
  if (added == 0 || static_cast<size_t>(added_group) >= components.size()) return "";
  const SlurmComponent& c = components[static_cast<size_t>(added_group)];
  return "each worker step of " + std::to_string(spec.threads_per_worker) +
         " CPU(s) asks --mem=" + std::to_string(added) + "M (" +
         (c.mem_per_cpu_mb > 0
              ? "its CPUs' share of " + c.mem_var + " MB per CPU"
              : std::string(added_group == 0 ? "its CPUs' share of the node's memory, the "
                                               "workers at most half of it, "
                                             : "its CPUs' share of the node's memory, ") +
                    c.mem_var) +
         "; --worker-mem SIZE sets it)";
}

uint64_t SlurmJob::MemoryPerCpuMb() const {
  if (components.empty()) return 0;
  const SlurmComponent& c = components[0];
  if (c.mem_per_cpu_mb > 0) return c.mem_per_cpu_mb;
  Result<std::vector<int>> nodes = ParseCpusPerNode(c.cpus_text);
  if (c.mem_per_node_mb == 0 || !nodes.ok() || (*nodes)[0] <= 0) return 0;
  return c.mem_per_node_mb / static_cast<uint64_t>((*nodes)[0]);
}

std::vector<std::string> SrunArgv(const SlurmJob& job, const LaunchRequest& r) {
  std::vector<std::string> a = {"srun",
                                "--exact",
                                "--nodes=1",
                                "--ntasks=1",
                                "--cpus-per-task=" + std::to_string(r.threads),
                                "--job-name=goldminer-worker",
                                "--gres=none",
                                "--quiet"};
  const int group = job.GroupOf(r.off_trainer_node);
  if (job.heterogeneous()) a.push_back("--het-group=" + std::to_string(group));
  if (r.memory_bytes > 0) {
    a.push_back("--mem=" + std::to_string((r.memory_bytes + (1 << 20) - 1) >> 20) + "M");
  }
  // Inside the step, the shell names it as squeue -s and scancel do (a het
  // component's own job id) and execs the worker with that name: the step's task
  // is the worker itself, and the worker reads no Slurm variable.
  const std::string id =
      job.heterogeneous() ? "${SLURM_JOB_ID_HET_GROUP_" + std::to_string(group) + ":-$SLURM_JOB_ID}"
                          : std::string("$SLURM_JOB_ID");
  a.insert(a.end(),
           {"/bin/sh", "-c", "exec \"$@\" --step-name \"" + id + ".$SLURM_STEP_ID\"", "sh"});
  a.insert(a.end(), r.argv.begin(), r.argv.end());
  return a;
}

std::string ElasticWorkers::JobName() const { return "goldminer-worker." + run_id; }

std::vector<std::string> ElasticSrunArgv(const SlurmJob& job, const ElasticWorkers& elastic,
                                         const std::vector<std::string>& inherited,
                                         const LaunchRequest& r) {
  std::vector<std::string> a = {"env"};
  for (const std::string& name : inherited) {
    if (name.rfind("SLURM_", 0) == 0 && name != "SLURM_CONF") a.insert(a.end(), {"-u", name});
  }
  a.insert(a.end(),
           {"srun", "--partition=" + elastic.partition, "--nodes=1", "--ntasks=1",
            "--cpus-per-task=" + std::to_string(elastic.cpus), "--job-name=" + elastic.JobName(),
            "--dependency=after:" + job.job_id, "--gres=none", "--quiet"});
  // Without a memory request, a job may be given all of its node's memory, which
  // would keep every other job off the node: a worker asks for what it was given.
  const uint64_t mb = elastic.memory_mb > 0 ? elastic.memory_mb
                      : r.memory_bytes > 0
                          ? (r.memory_bytes + (1 << 20) - 1) >> 20
                          : kElasticMemoryPerCpuMb * static_cast<uint64_t>(elastic.cpus);
  a.push_back("--mem=" + std::to_string(mb) + "M");
  a.insert(a.end(),
           {"/bin/sh", "-c", "exec \"$@\" --step-name \"$SLURM_JOB_ID.$SLURM_STEP_ID\"", "sh"});
  a.insert(a.end(), r.argv.begin(), r.argv.end());
  return a;
}

namespace {

// The names of this process's environment variables.
std::vector<std::string> EnvironmentNames() {
  std::vector<std::string> names;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    names.emplace_back(entry.substr(0, entry.find('=')));
  }
  return names;
}

// Workers as srun steps (or, marked elastic, srun jobs of their own); trainers (and
// anything else) as plain children. The processes are the child launcher's (the
// srun of a step is a child too): this one only rewrites a worker's request.
class SlurmStepLauncher : public ProcessLauncher {
 public:
  SlurmStepLauncher(SlurmJob job, std::optional<ElasticWorkers> elastic)
      : job_(std::move(job)), elastic_(std::move(elastic)) {}
  Result<pid_t> Start(const LaunchRequest& r) override {
    if (r.role != ProcessRole::kWorker) return children_->Start(r);
    LaunchRequest step = r;
    if (r.elastic) {
      if (!elastic_) {
        return Status::InvalidArgument("a worker beyond the allocation needs --elastic-partition");
      }
      step.argv = ElasticSrunArgv(job_, *elastic_, EnvironmentNames(), r);
      if (!elastic_accepted_) {
        GM_RETURN_IF_ERROR(TestElastic(step.argv));
        elastic_accepted_ = true;
      }
      started_elastic_ = true;
    } else {
      step.argv = SrunArgv(job_, r);
    }
    step.cpus.clear();  // the step gets its CPUs from Slurm (--exact)
    return children_->Start(step);
  }
  void Signal(pid_t pid, int sig) override { children_->Signal(pid, sig); }
  // A registered worker's step gets SIGUSR2 (the worker's drain, as SIGTERM from
  // Slurm's own GraceTime is) through slurmctld; srun then returns the worker's
  // exit. Before it registered (a job still pending), SIGTERM to srun withdraws
  // the job.
  void Drain(pid_t pid, const std::string& step) override {
    if (!step.empty()) {
      // SIGUSR2, which the worker takes as SIGTERM's drain: slurmstepd answers a
      // SIGTERM sent this way with "*** STEP ... CANCELLED ***" in the job's
      // output, for a drain that ends well (cmd/stop_signals.h).
      Result<CommandOutput> out = CaptureOutput({"scancel", "--signal=USR2", step}, 10, 1 << 16);
      // 225 "Invalid job id specified" for a step of a multi-node allocation that
      // does not span every node: the signal was delivered (notes on Slurm 22.05).
      if (out.ok() && (out->exit.exit_code() == 0 || out->exit.exit_code() == 225)) return;
      LogWarning("run: scancel --signal=USR2 " + step + " failed (" +
                 (out.ok() ? out->exit.describe + ": " + out->err : out.status().message()) +
                 "); SIGTERM to its srun instead, which ends it without a drain");
    }
    children_->Signal(pid, SIGTERM);
  }
  std::optional<ChildExit> Wait(double timeout_s) override { return children_->Wait(timeout_s); }
  std::vector<ChildExit> KillAll() override {
    std::vector<ChildExit> out = children_->KillAll();
    // An srun killed while its job was pending, or one that could not pass the
    // kill on, may leave its job behind: none of the run's worker jobs outlives it.
    if (started_elastic_) {
      Result<CommandOutput> cancel =
          CaptureOutput({"scancel", "--name=" + elastic_->JobName()}, 10, 1 << 16);
      if (!cancel.ok() || cancel->exit.exit_code() != 0) {
        LogWarning("run: scancel --name=" + elastic_->JobName() +
                   " failed: " + (cancel.ok() ? cancel->err : cancel.status().message()) +
                   "; check squeue --name=" + elastic_->JobName());
      }
    }
    return out;
  }
  std::string name() const override { return "slurm"; }

 private:
  // Asks Slurm whether it would accept the worker job `argv` submits (srun
  // --test-only, the same request): InvalidArgument with Slurm's words when it
  // refuses. A test that cannot run at all says nothing: the job itself will.
  static Status TestElastic(std::vector<std::string> argv) {
    auto srun = std::find(argv.begin(), argv.end(), "srun");
    if (srun == argv.end()) return Status::Ok();
    argv.insert(srun + 1, "--test-only");
    Result<CommandOutput> out = CaptureOutput(argv, 30, 1 << 16);
    if (!out.ok() || out->exit.exit_code() == 0) return Status::Ok();
    std::string words;
    for (size_t at = 0; at < out->err.size();) {
      const size_t end = std::min(out->err.find('\n', at), out->err.size());
      std::string line = out->err.substr(at, end - at);
      at = end + 1;
      if (line.rfind("srun: error: ", 0) == 0) line.erase(0, 13);
      if (line.empty()) continue;
      words += (words.empty() ? "" : "; ") + line;
    }
    return Status::InvalidArgument("Slurm refuses a worker job (" +
                                   (words.empty() ? out->exit.describe : words) + ")");
  }

  const SlurmJob job_;
  const std::optional<ElasticWorkers> elastic_;
  bool started_elastic_ = false;
  bool elastic_accepted_ = false;  // srun --test-only accepted a worker job
  const std::unique_ptr<ProcessLauncher> children_ = MakeChildLauncher();
};

}  // namespace

std::unique_ptr<ProcessLauncher> MakeSlurmStepLauncher(SlurmJob job,
                                                       std::optional<ElasticWorkers> elastic) {
  return std::make_unique<SlurmStepLauncher>(std::move(job), std::move(elastic));
}

namespace {

// srun's short options that take a value (srun(1), Slurm 22.05).
constexpr std::string_view kSrunShortValues = "AbBcCdDeGiJLmMnNopqrStTwWxZ";
// Its long options whose value is required, so may be the next argument, each
// between spaces (those with an optional value, --nice[=N], take it after '=' only).
constexpr std::string_view kSrunLongValues =
    " account acctg-freq begin chdir comment constraint container core-spec cores-per-socket "
    "cpu-bind cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot dependency distribution "
    "epilog error exclude export gpu-bind gpu-freq gpus gpus-per-node gpus-per-socket "
    "gpus-per-task gres gres-flags hint input job-name jobid licenses mail-type mail-user "
    "mcs-label mem mem-bind mem-per-cpu mem-per-gpu mincpus mpi network nodefile nodelist nodes "
    "ntasks ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket output partition "
    "power prolog qos reservation signal slurmd-debug sockets-per-node task-epilog task-prolog "
    "thread-spec threads-per-core time time-min tmp uid gid wait wckey het-group "
    "cluster-constraint clusters extra-node-info switches ";

bool SrunLongTakesValue(std::string_view name) {
  return kSrunLongValues.find(" " + std::string(name) + " ") != std::string_view::npos;
}

Result<int> PositiveCount(std::string_view option, std::string_view value) {
  int n = 0;
  // --nodes takes a range ("2-4"): its lower bound.
  const std::string_view digits = value.substr(0, std::min(value.find('-'), value.size()));
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size() || n < 1) {
    return Status::InvalidArgument("the trainer command's srun option " + std::string(option) +
                                   " " + std::string(value) +
                                   ": not a positive count (give goldminer run --world-size N)");
  }
  return n;
}

}  // namespace

Result<std::optional<int>> SrunTaskCount(const std::vector<std::string>& argv) {
  if (argv.empty()) return std::optional<int>();
  const std::string& program = argv[0];
  if (program.substr(program.rfind('/') + 1) != "srun") return std::optional<int>();
  std::optional<int> ntasks, nodes, per_node;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--" || a.size() < 2 || a[0] != '-') break;  // the program
    std::string name, value;
    bool has_value = false;
    if (a[1] == '-') {
      const size_t eq = a.find('=');
      name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
        has_value = true;
      } else if (SrunLongTakesValue(name) && i + 1 < argv.size()) {
        value = argv[++i];
        has_value = true;
      }
    } else if (kSrunShortValues.find(a[1]) != std::string_view::npos) {
      name = a.substr(1, 1);
      value = a.size() > 2 ? a.substr(2) : (i + 1 < argv.size() ? argv[++i] : "");
      has_value = true;
    }
    if (!has_value) continue;
    const std::string option = (name.size() == 1 ? "-" : "--") + name;
    if (name == "n" || name == "ntasks") {
      GM_ASSIGN_OR_RETURN(ntasks, PositiveCount(option, value));
    } else if (name == "N" || name == "nodes") {
      GM_ASSIGN_OR_RETURN(nodes, PositiveCount(option, value));
    } else if (name == "ntasks-per-node") {
      GM_ASSIGN_OR_RETURN(per_node, PositiveCount(option, value));
    }
  }
  if (ntasks) return ntasks;
  return std::optional<int>(nodes.value_or(1) * per_node.value_or(1));
}

}  // namespace gm
