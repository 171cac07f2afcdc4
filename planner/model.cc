#include "planner/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "core/run_records.h"
#include "core/text_format.h"

namespace gm::planner {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string Num(double v, int digits = 1) { return Fixed(v, digits); }
std::string Rate(double v) { return SamplesPerS(v); }

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "(none)" : out;
}

std::string PartitionNames(const Cluster& c) {
  std::vector<std::string> names;
  for (const ClusterPartition& p : c.partitions) names.push_back(p.name);
  return Joined(names);
}

// A node's state of use while the plan places work on it.
struct NodeUse {
  const ClusterNode* node = nullptr;
  int free_cpus = 0;
  double free_memory_bytes = 0;  // infinity when the node's memory is unknown
  double nic_bytes_per_s = 0;
  double nic_used = 0;
  int ranks = 0;  // trainer processes on it
  int gpus = 0;   // GPUs the trainer uses on it
};

struct Placement {
  std::vector<PlanTrainerNode> trainer_nodes;  // with the CPUs kept for trainer and tail
  std::vector<PlanWorker> workers;
  double samples_per_s = 0;
  double network_bytes_per_s = 0;
  std::string limit = "none";
  std::string detail;
  double cpus_needed = 0;
  double worker_cpu_s_per_sample = 0;
  double per_cpu = 0;
};

struct Setup {
  const Profile* profile = nullptr;
  const PlanOptions* options = nullptr;
  CpuRate rate;
  double target = 0;
  std::optional<double> demand;  // all ranks
  std::string gpu_partition;
  std::string partition;
  int world_size = 1;
  std::vector<NodeUse> trainer;  // trainer nodes, with their ranks
  std::vector<NodeUse> others;   // CPU nodes for workers, best first
  uint64_t memory_per_worker = 0;
};

// Places the client's tail stages and workers for `rate` samples/s at one cut:
// the tail and the trainer processes on the trainer's node(s), workers on their
// spare CPUs first, then whole workers on CPU nodes. See goldminer-plan(1), MODEL.
struct Attempt {
  Placement p;
  double delivered = 0;
  bool tail_short = false, hit_max = false, memory_blocked = false, network_blocked = false;
  int spare_total = 0;
};

// CPU seconds per sample the client's stages after `cut` take on the trainer's
// node(s): none when they could all run on the device and the trainer has GPUs
// (goldminer.torch.DeviceLoader applies them there), else what the profile measured.
double ClientCpuPerSample(const Setup& s, const CutPoint& cut) {
  const bool gpus =
      std::any_of(s.trainer.begin(), s.trainer.end(), [](const NodeUse& n) { return n.gpus > 0; });
  return cut.device_tail && gpus ? 0.0 : std::max(0.0, cut.local_cpu_s_per_sample);
}

// Samples/s of a worker of `cpus` CPUs at a cut whose worker CPU per sample is c_w.
double WorkerRate(const Setup& s, int cpus, double c_w) {
  return cpus * s.rate.efficiency(cpus) / c_w;
}

Attempt PlaceAt(const Setup& s, const CutPoint& cut, double rate, double c_w) {
  const PlanOptions& o = *s.options;
  Attempt a;
  Placement& p = a.p;
  const double e = s.rate.efficiency(1);  // the client's stages run on one thread
  const double local = ClientCpuPerSample(s, cut);
  std::vector<NodeUse> trainer = s.trainer;
  for (NodeUse& n : trainer) {
    n.free_cpus = std::max(0, n.free_cpus - o.trainer_cpus * n.ranks);
    a.spare_total += n.free_cpus;
  }
  const double tail_cpus = rate * local / e;
  if (tail_cpus > a.spare_total + 1e-9) a.tail_short = true;
  for (NodeUse& n : trainer) {
    const double share = n.ranks / double(s.world_size);
    const int take = std::min(n.free_cpus, static_cast<int>(std::ceil(tail_cpus * share - 1e-9)));
    n.free_cpus -= take;
  }
  for (const NodeUse& n : trainer) {
    PlanTrainerNode t;
    t.name = n.node->name;
    t.gpus = n.gpus;
    t.cpus = n.node->free_cpus() - n.free_cpus;
    p.trainer_nodes.push_back(t);
  }
  double remaining = a.tail_short ? 0 : rate;
  double ingress_cap = 0;
  for (const NodeUse& n : trainer) ingress_cap += n.nic_bytes_per_s;
  double ingress_used = 0;
  const double bytes = std::max(0.0, cut.bytes_per_sample);
  // A worker on the trainer's node also holds the shared-memory segments it
  // lends its clients (dataplane/shm.h): one batch each at this cut's bytes.
  const double segments = s.memory_per_worker > 0 && s.profile->pipeline
                              ? double(kSameHostSegmentsPerWorker) *
                                    std::max(0, s.profile->pipeline->batch_size) * bytes
                              : 0;
  std::vector<NodeUse> others = s.others;
  auto place_on = [&](NodeUse& n, bool on_trainer, const std::string& partition) {
    while (remaining > 1e-9 * std::max(1.0, rate)) {
      if (static_cast<int>(p.workers.size()) >= o.max_workers) {
        a.hit_max = true;
        return;
      }
      int size = 0;
      if (on_trainer) {  // the smallest worker that covers what remains, else the largest
        const int most = std::min(o.cpus_per_worker, n.free_cpus);
        for (size = 1; size < most && WorkerRate(s, size, c_w) < remaining; ++size) {
        }
        size = std::min(size, most);
      } else {
        size = n.free_cpus >= o.cpus_per_worker ? o.cpus_per_worker : 0;
      }
      if (size < 1) return;
      const double memory = double(s.memory_per_worker) + (on_trainer ? segments : 0);
      if (s.memory_per_worker > 0 && n.free_memory_bytes < memory) {
        a.memory_blocked = true;
        return;
      }
      double worker_rate = WorkerRate(s, size, c_w);
      if (!on_trainer && bytes > 0) {
        const double cap =
            std::min(n.nic_bytes_per_s - n.nic_used, ingress_cap - ingress_used) / bytes;
        if (cap <= 1e-9) {
          a.network_blocked = true;
          return;
        }
        if (cap < std::min(worker_rate, remaining)) a.network_blocked = true;
        worker_rate = std::min(worker_rate, cap);
      }
      const double delivered = std::min(worker_rate, remaining);
      PlanWorker w;
      w.node = n.node->name;
      w.partition = partition;
      w.cpus = size;
      w.memory_bytes = static_cast<uint64_t>(memory);
      w.on_trainer_node = on_trainer;
      w.samples_per_s = delivered;
      p.workers.push_back(w);
      n.free_cpus -= size;
      n.free_memory_bytes -= memory;
      if (!on_trainer) {
        n.nic_used += delivered * bytes;
        ingress_used += delivered * bytes;
        p.network_bytes_per_s += delivered * bytes;
      }
      remaining -= delivered;
    }
  };
  for (NodeUse& n : trainer) {
    if (!a.hit_max && !a.tail_short) {
      place_on(n, true, s.gpu_partition.empty() ? s.partition : s.gpu_partition);
    }
  }
  for (NodeUse& n : others) {
    if (!a.hit_max && !a.tail_short) place_on(n, false, s.partition);
  }
  a.delivered = a.tail_short ? 0 : rate - std::max(0.0, remaining);
  return a;
}

bool Meets(const Attempt& a, double rate) { return a.delivered >= rate * (1 - 1e-9); }

// The plan for one cut: the target (or the trainer's demand, if lower) when it
// fits, else the highest rate that fits, with the limit that stopped the target.
Placement Evaluate(const Setup& s, const CutPoint& cut) {
  const PlanOptions& o = *s.options;
  const double e = s.rate.efficiency(1);  // the client's stages run on one thread
  const double local = std::max(0.0, cut.local_cpu_s_per_sample);
  const double c_w = std::max({s.rate.cpu_s_per_sample - local, cut.remote_cpu_s_per_sample, 1e-9});
  // One CPU of a worker of --cpus-per-worker CPUs: what the CPU need is counted in.
  const double per_cpu = s.rate.efficiency(o.cpus_per_worker) / c_w;
  const double T = s.target;
  const double goal = s.demand ? std::min(T, *s.demand) : T;

  Attempt at_goal = PlaceAt(s, cut, goal, c_w);
  Attempt best = at_goal;
  if (!Meets(at_goal, goal)) {
    // The highest rate that fits (what fits at a lower rate fits at a lower one).
    double lo = 0, hi = goal;
    best = PlaceAt(s, cut, 0, c_w);
    for (int i = 0; i < 200 && hi - lo > 1e-9 * goal; ++i) {
      const double mid = (lo + hi) / 2;
      Attempt a = PlaceAt(s, cut, mid, c_w);
      if (Meets(a, mid)) {
        lo = mid;
        best = std::move(a);
      } else {
        hi = mid;
      }
    }
  }
  Placement p = std::move(best.p);
  p.samples_per_s = best.delivered;
  p.worker_cpu_s_per_sample = c_w;
  p.per_cpu = per_cpu;
  p.cpus_needed = T / per_cpu;

  const double shortfall = T - p.samples_per_s;
  if (shortfall <= 1e-6 * std::max(1.0, T)) return p;
  int worker_cpus = 0;
  for (const PlanWorker& w : p.workers) worker_cpus += w.cpus;
  const double needed = p.cpus_needed;
  if (Meets(at_goal, goal)) {
    p.limit = "trainer";
    p.detail = "the trainer consumes at most " + Rate(s.demand.value_or(0)) +
               " (batch size / compute time per step, from the profile); the target of " + Rate(T) +
               " is " + Num(100 * (T / std::max(s.demand.value_or(0), 1e-9) - 1), 0) + "% above it";
  } else if (at_goal.tail_short) {
    p.limit = "trainer-node-cpus";
    p.detail = "the client's stages after stage " + std::to_string(cut.after_stage) + " need " +
               Num(goal * ClientCpuPerSample(s, cut) / e, 1) +
               " CPUs on the trainer's node(s) for " + Rate(goal) + "; they have " +
               std::to_string(at_goal.spare_total) + " spare";
  } else if (at_goal.hit_max) {
    p.limit = "max-workers";
    p.detail = "--max-workers " + std::to_string(o.max_workers) + " is reached; the target of " +
               Rate(T) + " needs about " +
               std::to_string(static_cast<int>(std::ceil(needed / o.cpus_per_worker))) +
               " workers of " + std::to_string(o.cpus_per_worker) + " CPUs";
  } else if (at_goal.network_blocked) {
    double ingress = 0;
    for (const NodeUse& n : s.trainer) ingress += n.nic_bytes_per_s;
    p.limit = "network";
    p.detail = "workers off the trainer's node(s) send " + Num(cut.bytes_per_sample / 1e3, 1) +
               " kB per sample at this cut; the NICs carry " +
               Num(p.network_bytes_per_s * 8 / 1e9, 2) + " Gb/s (" + Num(ingress * 8 / 1e9, 1) +
               " Gb/s into the trainer's node(s))";
  } else if (at_goal.memory_blocked) {
    p.limit = "memory";
    p.detail = "nodes with free CPUs lack the memory for another worker (" +
               Num(double(s.memory_per_worker) / kMiB, 0) +
               " MiB each, the profile's peak RSS, and on the trainer's node(s) " +
               std::to_string(kSameHostSegmentsPerWorker) + " batches of shared memory more); " +
               std::to_string(p.workers.size()) + " worker(s) fit";
  } else {
    p.limit = "cpus";
    p.detail = "the workers can have " + std::to_string(worker_cpus) +
               " CPUs (spare CPUs of the trainer's node(s), then whole " +
               std::to_string(o.cpus_per_worker) + "-CPU workers on nodes of partition " +
               (s.partition.empty() ? "(none)" : s.partition) + "); the target of " + Rate(T) +
               " needs " + Num(needed, 1) + " CPUs (" + Num(needed - worker_cpus, 1) + " more)";
  }
  p.detail += "; short by " + Rate(shortfall) + " (" + Num(100 * shortfall / T, 0) + "%)";
  return p;
}

// The cuts the model may choose from (allowed ones), with whether `run` executes
// them: `run` follows pipeline.json, so the runnable cut is the file's own: after
// the last worker stage when stages are "on": "device" (the trainer's client
// applies those), else after the last stage.
std::vector<std::pair<CutPoint, bool>> Candidates(const PipelineProfile& pipe) {
  std::vector<CutPoint> cuts = pipe.cuts;
  int last = -1;
  for (const StageProfile& st : pipe.stages) last = std::max(last, st.index);
  for (const CutPoint& c : cuts) last = std::max(last, c.after_stage);
  if (cuts.empty()) {  // a hand-written profile: everything on the workers
    CutPoint c;
    c.after_stage = last;
    c.bytes_per_sample = pipe.stages.empty() ? 0 : pipe.stages.back().bytes_out_per_sample;
    c.remote_cpu_s_per_sample = pipe.stage_cpu_s_per_sample;
    cuts.push_back(c);
  }
  std::vector<std::pair<CutPoint, bool>> out;
  const bool file_cut =
      std::any_of(cuts.begin(), cuts.end(), [](const CutPoint& c) { return c.pipeline_cut; });
  for (const CutPoint& c : cuts) {
    if (c.allowed) out.emplace_back(c, file_cut ? c.pipeline_cut : c.after_stage >= last);
  }
  return out;
}

}  // namespace

double CpuRate::efficiency(int cpus) const {
  if (cpus <= 1 || threads_n <= 1) return cpus <= 1 ? efficiency_1 : efficiency_n;
  if (cpus >= threads_n) return efficiency_n;
  return efficiency_1 + (efficiency_n - efficiency_1) * (cpus - 1) / double(threads_n - 1);
}

Result<CpuRate> MeasuredCpuRate(const Profile& profile, const std::string& origin) {
  if (!profile.pipeline) {
    return Status::InvalidArgument(
        origin +
        " has no pipeline part (it profiled a trainer alone), so the CPU cost per "
        "sample is unknown; profile the pipeline: goldminer profile --pipeline "
        "pipeline.json -o " +
        origin + " [-- trainer command]");
  }
  const PipelineProfile& pipe = *profile.pipeline;
  CpuRate r;
  // The process CPU leaves out an exec stage's child processes; the stages count
  // them, so the parts (reader, stages, batcher, hand-off) may add up to more.
  r.cpu_s_per_sample = std::max(pipe.cpu_s_per_sample,
                                pipe.reader_cpu_s_per_sample + pipe.stage_cpu_s_per_sample +
                                    pipe.batcher_cpu_s_per_sample + pipe.queue_cpu_s_per_sample);
  if (!(r.cpu_s_per_sample > 0) || !std::isfinite(r.cpu_s_per_sample)) {
    return Status::InvalidArgument(origin + ": $.pipeline.cpu_s_per_sample is " +
                                   Num(r.cpu_s_per_sample, 6) +
                                   "; a plan needs a positive CPU cost per sample");
  }
  const PipelineRun* one = nullptr;
  const PipelineRun* all = nullptr;
  for (const PipelineRun& run : pipe.runs) {
    if (run.threads < 1 || !(run.samples_per_s > 0) || !std::isfinite(run.samples_per_s)) continue;
    if (!one || run.threads < one->threads) one = &run;
    if (!all || run.threads > all->threads) all = &run;
  }
  auto clamp = [](double e) { return std::clamp(e, 1e-3, 1.0); };
  if (all) {
    r.threads_n = all->threads;
    r.efficiency_n = clamp(all->samples_per_s * r.cpu_s_per_sample / all->threads);
    r.efficiency_1 =
        one->threads == 1 ? clamp(one->samples_per_s * r.cpu_s_per_sample) : r.efficiency_n;
    r.efficiency_source =
        "the " + std::to_string(all->threads) + "-thread run delivered " +
        Rate(all->samples_per_s) + ", " + Num(100 * r.efficiency_n, 0) + "% of " +
        std::to_string(all->threads) + " CPUs at the 1-thread cost of " +
        Num(r.cpu_s_per_sample * 1e3, 3) + " ms CPU per sample" +
        (one->threads == 1 ? "; the 1-thread run " + Rate(one->samples_per_s) + ", " +
                                 Num(100 * r.efficiency_1, 0) + "% of 1 CPU"
                           : std::string());
  } else if (pipe.samples_per_s_per_core > 0) {
    r.efficiency_1 = r.efficiency_n = clamp(r.cpu_s_per_sample * pipe.samples_per_s_per_core);
    r.efficiency_source = "no pipeline runs in the profile: the CPU cost with all cores (" +
                          Num(pipe.samples_per_s_per_core, 0) +
                          " samples per CPU-second) against the 1-thread cost";
  } else {
    return Status::InvalidArgument(origin +
                                   ": $.pipeline has neither runs[] nor a positive "
                                   "samples_per_s_per_core; the scaling efficiency is unknown");
  }
  return r;
}

Result<Plan> MakePlan(const Profile& profile, const Cluster& cluster, const PlanOptions& o) {
  const std::string& origin = o.profile_path.empty() ? "profile.json" : o.profile_path;
  GM_ASSIGN_OR_RETURN(CpuRate rate, MeasuredCpuRate(profile, origin));
  const PipelineProfile& pipe = *profile.pipeline;
  if (o.cpus_per_worker < 1 || o.max_workers < 1 || o.trainer_cpus < 0 || !(o.nic_gbps > 0)) {
    return Status::InvalidArgument(
        "plan options out of range (cpus per worker, max workers, "
        "trainer CPUs, NIC speed)");
  }
  if (cluster.nodes.empty()) {
    return Status::InvalidArgument("the cluster (" + cluster.source +
                                   ") has no nodes; nothing to place workers on");
  }
  Setup s;
  s.profile = &profile;
  s.options = &o;
  s.rate = rate;
  s.memory_per_worker = pipe.peak_rss_bytes;

  // Partitions.
  auto check_partition = [&](const std::string& name, const char* flag) -> Status {
    const ClusterPartition* p = cluster.partition(name);
    if (!p) {
      return Status::InvalidArgument(std::string(flag) + " " + name +
                                     ": no such partition in the cluster (" + cluster.source +
                                     "); it has: " + PartitionNames(cluster));
    }
    if (!p->up) {
      return Status::InvalidArgument(std::string(flag) + " " + name + ": the partition is not up");
    }
    return Status::Ok();
  };
  int cluster_gpus = 0;
  for (const ClusterNode& n : cluster.nodes) cluster_gpus += n.gpus;
  if (!o.gpu_partition.empty()) {
    GM_RETURN_IF_ERROR(check_partition(o.gpu_partition, "--gpu-partition"));
    s.gpu_partition = o.gpu_partition;
  } else if (cluster_gpus > 0) {
    std::map<std::string, int> free;
    for (const ClusterNode& n : cluster.nodes) {
      for (const std::string& part : n.partitions) {
        const ClusterPartition* p = cluster.partition(part);
        if (p && p->up && n.gpus > 0) free[part] += n.usable() ? n.free_gpus() : 0;
      }
    }
    int best = -1;
    for (const auto& [name, f] : free) {
      if (f > best) best = f, s.gpu_partition = name;
    }
  }
  if (!o.partition.empty()) {
    GM_RETURN_IF_ERROR(check_partition(o.partition, "--partition"));
    s.partition = o.partition;
  } else {
    for (const ClusterPartition& p : cluster.partitions) {
      if (p.is_default && p.up) s.partition = p.name;
    }
    for (const ClusterPartition& p : cluster.partitions) {
      if (s.partition.empty() && p.up && p.name != s.gpu_partition) s.partition = p.name;
    }
    if (s.partition.empty()) s.partition = s.gpu_partition;
  }

  // GPUs and the trainer's nodes.
  const int gpus = o.gpus >= 0 ? o.gpus : (cluster_gpus > 0 ? 1 : 0);
  s.world_size = std::max(1, gpus);
  auto use_of = [&](const ClusterNode& n) {
    NodeUse u;
    u.node = &n;
    u.free_cpus = n.free_cpus();
    u.free_memory_bytes = n.memory_mb > 0 ? double(n.free_memory_mb()) * kMiB : INFINITY;
    u.nic_bytes_per_s = (n.nic_gbps > 0 ? n.nic_gbps : o.nic_gbps) * 1e9 / 8;
    return u;
  };
  std::set<std::string> trainer_names;
  if (gpus > 0) {
    if (s.gpu_partition.empty()) {
      return Status::InvalidArgument("--gpus " + std::to_string(gpus) + ": the cluster (" +
                                     cluster.source +
                                     ") has no GPUs (give --gpus 0 to plan "
                                     "for a trainer without a GPU)");
    }
    std::vector<const ClusterNode*> cands;
    int free = 0, nodes_in = 0;
    for (const ClusterNode& n : cluster.nodes) {
      if (!n.in(s.gpu_partition)) continue;
      ++nodes_in;
      if (n.usable() && n.free_gpus() > 0 && n.free_cpus() >= o.trainer_cpus) {
        cands.push_back(&n);
        free += n.free_gpus();
      }
    }
    if (free < gpus) {
      return Status::InvalidArgument(
          "GPU partition " + s.gpu_partition + " has " + std::to_string(free) +
          " free GPU(s) on usable nodes with a free CPU (" + std::to_string(nodes_in) +
          " node(s) in it); the trainer needs " + std::to_string(gpus) +
          " (--gpus). Wait for GPUs to free up, plan for fewer, or name another "
          "--gpu-partition");
    }
    std::sort(cands.begin(), cands.end(), [](const ClusterNode* a, const ClusterNode* b) {
      if (a->free_gpus() != b->free_gpus()) return a->free_gpus() > b->free_gpus();
      if (a->free_cpus() != b->free_cpus()) return a->free_cpus() > b->free_cpus();
      return a->name < b->name;
    });
    int left = gpus;
    for (const ClusterNode* n : cands) {
      if (left == 0) break;
      NodeUse u = use_of(*n);
      u.ranks = std::min(left, n->free_gpus());
      u.gpus = u.ranks;
      left -= u.ranks;
      s.trainer.push_back(u);
      trainer_names.insert(n->name);
    }
  } else {
    const ClusterNode* best = nullptr;
    for (const ClusterNode& n : cluster.nodes) {
      if (n.usable() && (s.partition.empty() || n.in(s.partition)) &&
          (!best || n.free_cpus() > best->free_cpus())) {
        best = &n;
      }
    }
    if (!best) {
      return Status::InvalidArgument("partition " + s.partition + " of the cluster (" +
                                     cluster.source + ") has no usable node for the trainer");
    }
    NodeUse u = use_of(*best);
    u.ranks = 1;
    s.trainer.push_back(u);
    trainer_names.insert(best->name);
  }
  for (const ClusterNode& n : cluster.nodes) {
    if (n.usable() && n.in(s.partition) && !trainer_names.count(n.name))
      s.others.push_back(use_of(n));
  }
  std::sort(s.others.begin(), s.others.end(), [](const NodeUse& a, const NodeUse& b) {
    if (a.free_cpus != b.free_cpus) return a.free_cpus > b.free_cpus;
    return a.node->name < b.node->name;
  });

  // The target.
  std::string target_source;
  if (profile.trainer && profile.trainer->demand_samples_per_s > 0) {
    s.demand = profile.trainer->demand_samples_per_s * s.world_size;
  }
  if (o.target_samples_per_s) {
    if (!(*o.target_samples_per_s > 0) || !std::isfinite(*o.target_samples_per_s)) {
      return Status::InvalidArgument("--target-rate must be a positive number of samples/s");
    }
    s.target = *o.target_samples_per_s;
    target_source = "--target-rate";
  } else if (s.demand) {
    s.target = *s.demand;
    target_source = "trainer demand";
  } else {
    return Status::InvalidArgument(
        origin +
        " has no trainer part (or its demand is 0), so the rate the trainer "
        "needs is unknown: give --target-rate SAMPLES_PER_S, or profile with the "
        "trainer command (goldminer profile --pipeline P -- python3 train.py)");
  }

  // Each allowed cut, then the best: the highest rate, then the fewest bytes on the
  // wire, then the fewest worker CPUs.
  Plan plan;
  const auto candidates = Candidates(pipe);
  if (candidates.empty()) {
    return Status::InvalidArgument(origin + ": no stage of the pipeline may run on a worker (" +
                                   (pipe.cuts.empty() ? "no cuts" : pipe.cuts.front().reason) +
                                   ")");
  }
  int best = -1;
  std::vector<Placement> placements;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto& [cut, runnable] = candidates[i];
    placements.push_back(Evaluate(s, cut));
    const Placement& pl = placements.back();
    PlanCutOption opt;
    opt.after_stage = cut.after_stage;
    opt.bytes_per_sample = cut.bytes_per_sample;
    opt.samples_per_s = pl.samples_per_s;
    opt.limit = pl.limit;
    opt.runnable = runnable;
    plan.cuts.push_back(opt);
    if (!runnable && !o.all_cuts) continue;
    if (best < 0) {
      best = static_cast<int>(i);
      continue;
    }
    const Placement& b = placements[static_cast<size_t>(best)];
    const double tol = 0.005 * std::max(pl.samples_per_s, b.samples_per_s);
    int cpus_pl = 0, cpus_b = 0;
    for (const PlanWorker& w : pl.workers) cpus_pl += w.cpus;
    for (const PlanWorker& w : b.workers) cpus_b += w.cpus;
    const double bytes_b = candidates[static_cast<size_t>(best)].first.bytes_per_sample;
    if (pl.samples_per_s > b.samples_per_s + tol ||
        (pl.samples_per_s >= b.samples_per_s - tol &&
         (cut.bytes_per_sample < bytes_b ||
          (cut.bytes_per_sample == bytes_b && cpus_pl < cpus_b)))) {
      best = static_cast<int>(i);
    }
  }
  if (best < 0) {
    return Status::InvalidArgument(origin + ": no allowed cut is runnable by this goldminer");
  }
  plan.cuts[static_cast<size_t>(best)].chosen = true;
  const CutPoint& cut = candidates[static_cast<size_t>(best)].first;
  const Placement& pl = placements[static_cast<size_t>(best)];

  plan.created_utc = o.created_utc;
  plan.goldminer_version = o.goldminer_version;
  plan.sources.profile_path = o.profile_path;
  plan.sources.profile_created_utc = profile.created_utc;
  plan.sources.profile_sha256 = ProfileDigest(profile);
  plan.sources.profile_host = profile.host;
  plan.sources.pipeline_path = pipe.path;
  plan.sources.pipeline_sha256 = pipe.sha256;
  plan.sources.cluster = cluster.source;
  plan.sources.gpu_partition = s.gpu_partition;
  plan.sources.partition = s.partition;

  PlanModel& m = plan.model;
  m.target_samples_per_s = s.target;
  m.target_source = target_source;
  m.demand_samples_per_s = s.demand;
  m.gpus = gpus;
  m.cpu_s_per_sample = rate.cpu_s_per_sample;
  m.scaling_efficiency = rate.efficiency(o.cpus_per_worker);
  m.worker_cpu_s_per_sample = pl.worker_cpu_s_per_sample;
  m.samples_per_s_per_cpu = pl.per_cpu;
  m.cpus_needed = pl.cpus_needed;
  m.memory_per_worker_bytes = s.memory_per_worker;
  m.cpus_per_worker = o.cpus_per_worker;
  m.max_workers = o.max_workers;
  m.trainer_cpus = o.trainer_cpus;
  m.nic_gbps = o.nic_gbps;

  plan.cut.after_stage = cut.after_stage;
  plan.cut.bytes_per_sample = cut.bytes_per_sample;
  plan.cut.local_cpu_s_per_sample = cut.local_cpu_s_per_sample;
  plan.cut.runnable = candidates[static_cast<size_t>(best)].second;
  plan.trainer_nodes = pl.trainer_nodes;
  plan.workers = pl.workers;

  PlanPrediction& pr = plan.prediction;
  pr.samples_per_s = pl.samples_per_s;
  if (s.demand) pr.stall_fraction = std::max(0.0, 1.0 - pl.samples_per_s / *s.demand);
  for (const PlanWorker& w : pl.workers) pr.worker_cpus += w.cpus;
  pr.network_bytes_per_s = pl.network_bytes_per_s;
  if (pl.samples_per_s > 0) {
    pr.cpu_hours_per_million_samples = pr.worker_cpus * (1e6 / pl.samples_per_s) / 3600;
    if (o.epoch_samples) {
      pr.epoch_samples = o.epoch_samples;
      pr.cpu_hours_per_epoch =
          pr.worker_cpus * (double(*o.epoch_samples) / pl.samples_per_s) / 3600;
    }
  }
  pr.limit = pl.limit;
  pr.shortfall_samples_per_s = std::max(0.0, s.target - pl.samples_per_s);
  pr.limit_detail = pl.detail;

  plan.run.pipeline = pipe.path;
  plan.run.workers = static_cast<int>(pl.workers.size());
  for (const PlanWorker& w : pl.workers) {
    plan.run.threads_per_worker = std::max(plan.run.threads_per_worker, w.cpus);
    plan.run.worker_threads.push_back(w.cpus);
  }
  plan.run.world_size = s.world_size;
  plan.run.command = !o.command.empty() ? o.command
                     : profile.trainer  ? profile.trainer->command
                                        : std::vector<std::string>{};

  plan.notes.push_back("scaling efficiency " + Num(m.scaling_efficiency, 2) + " for " +
                       std::to_string(o.cpus_per_worker) +
                       "-CPU workers (linear between the "
                       "measured 1-thread and all-core runs): " +
                       rate.efficiency_source);
  plan.notes.push_back("one worker CPU delivers " + Rate(pl.per_cpu) + " = efficiency / " +
                       Num(pl.worker_cpu_s_per_sample * 1e3, 3) +
                       " ms worker CPU per sample at the cut after stage " +
                       std::to_string(cut.after_stage));
  if (s.memory_per_worker == 0) {
    plan.notes.push_back("the profile has no peak RSS: memory was not checked");
  }
  if (cut.device_tail && cut.local_cpu_s_per_sample > 0 && ClientCpuPerSample(s, cut) == 0) {
    plan.notes.push_back("the stages after stage " + std::to_string(cut.after_stage) +
                         " run on the trainer's GPU (goldminer.torch.DeviceLoader): no CPU of "
                         "its node is counted for them (" +
                         Num(cut.local_cpu_s_per_sample * 1e3, 3) + " ms per sample on a CPU)");
  }
  if (!plan.cut.runnable) {
    plan.notes.push_back("the chosen cut (after stage " + std::to_string(plan.cut.after_stage) +
                         ") is not the one pipeline.json makes, and run follows the file: mark "
                         "the stages after it \"on\": \"device\" (possible when they are "
                         "to_tensor and normalize) and profile again; until then this plan is "
                         "for comparison and run --plan refuses it");
  }
  if (plan.run.command.empty()) {
    plan.notes.push_back("no trainer command (the profile has none): give one after -- to run it");
  }
  return plan;
}

}  // namespace gm::planner
