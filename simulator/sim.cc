#include "simulator/sim.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "planner/model.h"
#include "simulator/replay.h"

namespace gm::sim {
namespace {

// splitmix64: the seeded draws (node order, sampling, the family mix), the same
// on every platform.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
double Unit(uint64_t seed, uint64_t what, uint64_t salt) {
  return static_cast<double>(Mix(Mix(seed ^ salt) ^ what) >> 11) * 0x1.0p-53;
}
uint64_t NameHash(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

}  // namespace

Result<Family> FamilyFromProfile(const Profile& p, const std::string& name,
                                 const std::string& origin) {
  Family f;
  f.name = name;
  f.share = 1;
  const double demand = p.trainer ? p.trainer->demand_samples_per_s : 0;
  if (!(demand > 0)) {
    return Status::InvalidArgument(origin +
                                   ": no trainer demand (profile the job with its trainer "
                                   "command: goldminer profile ... -- python3 train.py)");
  }
  double cpu_per_sample = 0;
  if (p.pipeline && p.pipeline->cpu_s_per_sample > 0) {
    // The plan's price of a sample (planner/model.h: a 1-CPU run's, where the
    // profile has one), so that simulate and plan count the same CPUs.
    Result<planner::CpuRate> rate = planner::MeasuredCpuRate(p, origin);
    cpu_per_sample = rate.ok() ? rate->cpu_s_per_sample : p.pipeline->cpu_s_per_sample;
    if (!p.pipeline->stages.empty())
      f.bytes_per_sample = p.pipeline->stages.back().bytes_out_per_sample;
  } else if (p.trainer->dataloader && p.trainer->dataloader->cpu_s_per_sample > 0) {
    cpu_per_sample = p.trainer->dataloader->cpu_s_per_sample;
    f.bytes_per_sample = p.trainer->dataloader->bytes_per_sample;
  } else {
    return Status::InvalidArgument(origin +
                                   ": no CPU per sample (neither a pipeline nor a DataLoader's "
                                   "worker processes were measured)");
  }
  f.samples_per_s_per_gpu = demand;
  f.cpus_per_gpu = demand * cpu_per_sample;
  return f;
}

std::vector<Family> DefaultFamilies() {
  return {{"vision", 12, 1000, 150e3, 0.4},
          {"moderate", 6, 2000, 50e3, 0.4},
          {"text", 1.5, 5000, 2e3, 0.2}};
}

namespace {

Status CheckOptions(const SimOptions& o) {
  if (o.policies.empty()) return Status::InvalidArgument("--policy: no policy");
  for (const std::string& p : o.policies) {
    if (p != "static" && p != "job" && p != "cluster") {
      return Status::InvalidArgument("--policy: \"" + p + "\" is not one of static, job, cluster");
    }
  }
  if (!(o.load > 0) || !std::isfinite(o.load)) {
    return Status::InvalidArgument("--load must be a positive number");
  }
  if (o.gpus < 0) return Status::InvalidArgument("--gpus must be 0 (all) or more");
  if (!(o.trainer_cpus_per_gpu >= 0) || !(o.nic_gbps > 0)) {
    return Status::InvalidArgument("trainer CPUs per GPU must be >= 0 and the NIC speed > 0");
  }
  if (!(o.task_start_s >= 0) || !(o.worker_delay_s >= 0) || !std::isfinite(o.task_start_s) ||
      !std::isfinite(o.worker_delay_s)) {
    return Status::InvalidArgument("--task-start and --worker-delay must be 0 or more seconds");
  }
  if (!(o.node_cpus_per_gpu >= 0) || !(o.node_cpus_per_gpu <= 1024)) {
    return Status::InvalidArgument("--node-cpus-per-gpu must be 0 (as listed) to 1024");
  }
  double shares = 0;
  for (const Family& f : o.families) {
    if (!(f.cpus_per_gpu > 0) || !(f.samples_per_s_per_gpu > 0) || !(f.bytes_per_sample >= 0) ||
        !(f.share >= 0)) {
      return Status::InvalidArgument("family " + f.name + ": figures out of range");
    }
    shares += f.share;
  }
  if (!(shares > 0)) return Status::InvalidArgument("the families' shares add up to 0");
  return Status::Ok();
}

// The nodes drawn for --gpus N (every node for 0): GPU nodes in a seeded order
// until N GPUs, and as large a share of the nodes without a GPU.
std::vector<SimNode> DrawNodes(const std::vector<SimNode>& nodes, const SimOptions& o) {
  if (o.gpus == 0) return nodes;
  int total = 0;
  std::vector<size_t> gpu, cpu;
  for (size_t i = 0; i < nodes.size(); ++i) {
    (nodes[i].gpus > 0 ? gpu : cpu).push_back(i);
    total += nodes[i].gpus;
  }
  auto shuffle = [&o](std::vector<size_t>& v, uint64_t salt) {  // Fisher-Yates, splitmix
    for (size_t i = v.size(); i > 1; --i) {
      std::swap(v[i - 1], v[Mix(o.seed ^ Mix(salt + i)) % i]);
    }
  };
  shuffle(gpu, 1);
  shuffle(cpu, 2);
  std::vector<size_t> chosen;
  int gpus = 0;
  for (size_t i : gpu) {
    if (gpus >= o.gpus) break;
    chosen.push_back(i);
    gpus += nodes[i].gpus;
  }
  const double fraction = static_cast<double>(gpus) / total;
  const auto cpu_nodes = static_cast<size_t>(std::lround(fraction * cpu.size()));
  chosen.insert(chosen.end(), cpu.begin(), cpu.begin() + static_cast<long>(cpu_nodes));
  std::sort(chosen.begin(), chosen.end());  // the file's order
  std::vector<SimNode> out;
  for (size_t i : chosen) out.push_back(nodes[i]);
  return out;
}

const Family* FamilyOf(const SimTask& t, const SimOptions& o, Status* error) {
  if (t.gpu_milli == 0) return nullptr;
  if (!t.job_class.empty()) {
    for (const Family& f : o.families) {
      if (f.name == t.job_class) return &f;
    }
    *error = Status::InvalidArgument("line " + std::to_string(t.line) + ": class \"" + t.job_class +
                                     "\" is no curve family");
    return nullptr;
  }
  double shares = 0;
  for (const Family& f : o.families) shares += f.share;
  double u = Unit(o.seed, NameHash(t.name), 3) * shares;
  for (const Family& f : o.families) {
    if (u < f.share) return &f;
    u -= f.share;
  }
  return &o.families.back();
}

bool FitsEmpty(const SimTask& t, const SimNode& n) {
  return n.gpus * 1000 >= t.gpu_milli && n.cpus >= t.cpus && n.memory_mib >= t.memory_mib;
}

std::vector<std::string> Assumptions(const SimOptions& o) {
  std::vector<std::string> a = {
      "a GPU task's speed is min(1, CPUs feeding it / (kappa x its GPUs)), kappa its family's "
      "CPUs per GPU; its work is its trace duration at the speed its asked CPUs gave (static "
      "replays the trace's durations)",
      "families (kappa, share of the tasks without a class):",
      "GPU-sharing pods hold gpu_milli thousandths of a GPU (a node's GPUs are one pool of "
      "thousandths); pods never scheduled are left out; CPU-only tasks hold their CPUs at full "
      "speed under every policy",
      "static: CPUs as asked, on the GPU's node; job: the trainer's CPUs (" +
          std::to_string(o.trainer_cpus_per_gpu) +
          " per GPU, at least 1) on the GPU's node and the worker CPUs that saturate its GPUs on "
          "any nodes, all or nothing, for its life; cluster: the trainer's CPUs, and worker CPUs "
          "from the pool of every CPU no task holds, divided by marginal GPU-weighted speed at "
          "every arrival and end (planner/pool.h; min gain " +
          std::to_string(o.pool.min_gain) + ", min worker lifetime " +
          std::to_string(o.pool.min_lifetime_s) +
          " s), first each task's baseline (what it asked for, less its trainer's); those "
          "beyond a baseline are taken back from a node when a task is admitted there",
      "workers off a task's node count only up to what its node's NIC (" +
          std::to_string(o.nic_gbps) +
          " Gb/s) carries at its family's samples/s and bytes per sample",
      "tasks start in submit order, each that fits (first fit over the nodes) at once; one that "
      "does not waits without blocking those behind it; under cluster, a node where it takes no "
      "worker's CPU first, as Slurm tries before it preempts"};
  if (o.task_start_s > 0) {
    a.push_back("a GPU task makes no progress in its first " + std::to_string(o.task_start_s) +
                " s (its processes start), under every policy");
  }
  if (o.worker_delay_s > 0) {
    a.push_back("cluster: worker CPUs granted to a task beyond its baseline feed it " +
                std::to_string(o.worker_delay_s) +
                " s after the grant (a worker job starts, registers, and the run's autoscaler "
                "decides to use it)");
  }
  if (!(o.trainer_cpus_per_gpu > 0)) {
    a.push_back("trainers hold no CPU: the trace's CPUs are its data workers' only");
  }
  if (o.node_cpus_per_gpu > 0) {
    a.push_back("what if GPU nodes were short of CPUs: each GPU node has " +
                std::to_string(o.node_cpus_per_gpu) +
                " CPUs per GPU, and a GPU task asks at most that many per GPU (its work is still "
                "that of the CPUs it asked in the trace)");
  }
  for (const Family& f : o.families) {
    a[1] +=
        " " + f.name + " (" + std::to_string(f.cpus_per_gpu) + ", " + std::to_string(f.share) + ")";
  }
  return a;
}

}  // namespace

Result<SimResult> Simulate(const Trace& trace, const std::vector<SimNode>& all_nodes,
                           const SimOptions& o, const SimInvariants* checks) {
  GM_RETURN_IF_ERROR(CheckOptions(o));
  SimResult r;
  r.trace_origin = trace.origin;
  r.trace_tasks = trace.tasks.size();
  r.never_scheduled = trace.never_scheduled;
  r.options = o;
  r.assumptions = Assumptions(o);
  std::vector<SimNode> nodes = DrawNodes(all_nodes, o);
  // The what-if's shape: GPU nodes' CPUs, and what GPU tasks ask (the replays
  // point into `asked`, which outlives them).
  std::vector<SimTask> asked = trace.tasks;
  if (o.node_cpus_per_gpu > 0) {
    for (SimNode& n : nodes) {
      if (n.gpus > 0)
        n.cpus = std::max(1, static_cast<int>(std::lround(o.node_cpus_per_gpu * n.gpus)));
    }
    for (SimTask& s : asked) {
      const int most =
          static_cast<int>(std::ceil(o.node_cpus_per_gpu * s.gpu_milli / 1000.0 - 1e-9));
      if (s.gpu_milli > 0) s.cpus = std::clamp(most, 1, std::max(1, s.cpus));
    }
  }
  r.nodes = nodes.size();
  for (const SimNode& n : nodes) r.gpus += n.gpus, r.cpus += n.cpus;
  std::vector<ReplayTask> tasks;
  for (size_t i = 0; i < asked.size(); ++i) {
    const SimTask& s = asked[i];
    if (std::none_of(nodes.begin(), nodes.end(),
                     [&](const SimNode& n) { return FitsEmpty(s, n); })) {
      if (o.gpus > 0) {
        ++r.dropped;
        continue;
      }
      return Status::InvalidArgument(
          trace.origin + ":" + std::to_string(s.line) + ": " + s.name + " (" +
          std::to_string(s.gpu_milli / 1000.0) + " GPUs, " + std::to_string(s.cpus) + " CPUs, " +
          std::to_string(s.memory_mib) + " MiB) fits no node of the cluster");
    }
    Status error;
    ReplayTask t;
    t.src = &s;
    t.family = FamilyOf(s, o, &error);
    GM_RETURN_IF_ERROR(error.WithContext(trace.origin));
    t.submit = s.submit_s / o.load;
    const double g = s.gpu_milli / 1000.0;
    const int trace_cpus = trace.tasks[i].cpus;  // its work: what it did with those
    const double speed = t.family ? std::min(1.0, trace_cpus / (t.family->cpus_per_gpu * g)) : 1;
    // A task given by its samples: their time at its family's rate, at full speed.
    t.work = s.samples > 0 && t.family ? s.samples / (t.family->samples_per_s_per_gpu * g)
                                       : s.duration_s * speed;
    tasks.push_back(std::move(t));
  }
  r.tasks = tasks.size();
  if (tasks.empty()) {
    return Status::InvalidArgument(trace.origin + ": no task left to replay on the " +
                                   std::to_string(r.gpus) + " GPUs drawn");
  }
  for (const std::string& policy : o.policies) {
    GM_ASSIGN_OR_RETURN(PolicyResult p, ReplayPolicy(policy, tasks, nodes, o, checks));
    r.policies.push_back(std::move(p));
  }
  return r;
}

namespace {

nlohmann::json ToJson(const PolicyResult& p) {
  nlohmann::json series = nlohmann::json::array();
  for (const SimPoint& s : p.series) {
    series.push_back({{"t_s", s.t_s},
                      {"queued", s.queued},
                      {"gpu_allocated", s.gpu_allocated},
                      {"gpu_effective", s.gpu_effective}});
  }
  return {{"policy", p.policy},
          {"gpu_tasks", p.gpu_tasks},
          {"cpu_tasks", p.cpu_tasks},
          {"jct_mean_s", p.jct_mean_s},
          {"jct_p50_s", p.jct_p50_s},
          {"jct_p95_s", p.jct_p95_s},
          {"jct_p99_s", p.jct_p99_s},
          {"queue_mean_s", p.queue_mean_s},
          {"queue_p50_s", p.queue_p50_s},
          {"queue_p95_s", p.queue_p95_s},
          {"makespan_s", p.makespan_s},
          {"gpu_util_allocated", p.gpu_util_allocated},
          {"gpu_util_effective", p.gpu_util_effective},
          {"cpu_util", p.cpu_util},
          {"window_s", p.window_s},
          {"gpu_util_allocated_window", p.gpu_util_allocated_window},
          {"gpu_util_effective_window", p.gpu_util_effective_window},
          {"worker_cpus_started", p.worker_cpus_started},
          {"worker_cpus_preempted", p.worker_cpus_preempted},
          {"events", p.events},
          {"series", series}};
}

const PolicyResult* Find(const SimResult& r, const std::string& policy) {
  for (const PolicyResult& p : r.policies) {
    if (p.policy == policy) return &p;
  }
  return nullptr;
}

}  // namespace

nlohmann::json SimToJson(const SimResult& r) {
  nlohmann::json families = nlohmann::json::array();
  for (const Family& f : r.options.families) {
    families.push_back({{"name", f.name},
                        {"cpus_per_gpu", f.cpus_per_gpu},
                        {"samples_per_s_per_gpu", f.samples_per_s_per_gpu},
                        {"bytes_per_sample", f.bytes_per_sample},
                        {"share", f.share}});
  }
  nlohmann::json policies = nlohmann::json::array();
  for (const PolicyResult& p : r.policies) policies.push_back(ToJson(p));
  nlohmann::json ratios = nlohmann::json::object();
  const PolicyResult* s = Find(r, "static");
  for (const char* other : {"job", "cluster"}) {
    const PolicyResult* p = Find(r, other);
    if (!s || !p || !(p->jct_mean_s > 0) || !(s->gpu_util_effective > 0)) continue;
    ratios[std::string("jct_static_over_") + other] = s->jct_mean_s / p->jct_mean_s;
    ratios[std::string("gpu_util_effective_") + other + "_over_static"] =
        p->gpu_util_effective / s->gpu_util_effective;
    if (s->gpu_util_effective_window > 0) {
      ratios[std::string("gpu_util_effective_window_") + other + "_over_static"] =
          p->gpu_util_effective_window / s->gpu_util_effective_window;
    }
  }
  return {{"schema", kSimSchema},
          {"version", kSimVersion},
          {"inputs",
           {{"trace", r.trace_origin},
            {"nodes", r.nodes_origin},
            {"trace_tasks", r.trace_tasks},
            {"never_scheduled", r.never_scheduled},
            {"tasks", r.tasks},
            {"dropped", r.dropped},
            {"node_count", r.nodes},
            {"gpus", r.gpus},
            {"cpus", r.cpus}}},
          {"options",
           {{"policies", r.options.policies},
            {"gpus", r.options.gpus},
            {"load", r.options.load},
            {"seed", r.options.seed},
            {"trainer_cpus_per_gpu", r.options.trainer_cpus_per_gpu},
            {"nic_gbps", r.options.nic_gbps},
            {"node_cpus_per_gpu", r.options.node_cpus_per_gpu},
            {"pool_min_gain", r.options.pool.min_gain},
            {"pool_min_lifetime_s", r.options.pool.min_lifetime_s},
            {"task_start_s", r.options.task_start_s},
            {"worker_delay_s", r.options.worker_delay_s},
            {"families", families}}},
          {"assumptions", r.assumptions},
          {"policies", policies},
          {"ratios", ratios}};
}

std::string TasksCsv(const SimResult& result) {
  std::string out = "policy,line,family,submit_s,start_s,end_s,jct_s\n";
  char row[160];
  for (const PolicyResult& p : result.policies) {
    for (const TaskTimes& t : p.tasks) {
      std::snprintf(row, sizeof(row), ",%zu,", t.line);
      out += p.policy + row + t.family;
      std::snprintf(row, sizeof(row), ",%.3f,%.3f,%.3f,%.3f\n", t.submit_s, t.start_s, t.end_s,
                    t.end_s - t.submit_s);
      out += row;
    }
  }
  return out;
}

}  // namespace gm::sim
