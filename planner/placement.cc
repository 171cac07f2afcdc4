// Where the plan puts the trainer's tail and the workers at one cut, and what
// that delivers (goldminer-plan(1), MODEL); the cuts the model may choose from;
// the CPU rate a profile measured.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "core/same_host.h"
#include "planner/model_internal.h"

namespace gm::planner {
namespace {

// The most a run on N CPUs may deliver against N times a 1-CPU run's rate.
constexpr double kMaxEfficiency = 1.5;

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "(none)" : out;
}

// Places the client's tail stages and workers for `rate` samples/s at one cut:
// the tail and the trainer processes on the trainer's node(s), workers on their
// spare CPUs first, then whole workers on CPU nodes. See goldminer-plan(1), MODEL.
struct Attempt {
  Placement p;
  double delivered = 0;
  bool tail_short = false, hit_max = false, memory_blocked = false, network_blocked = false;
  int spare_total = 0;
};

// Samples/s of a worker of `cpus` CPUs at a cut whose worker CPU per sample is c_w.
double WorkerRate(const Setup& s, int cpus, double c_w) {
  return cpus * s.rate.efficiency(cpus) / c_w;
}

// What PlaceAt has left to place, and the network it has used, across nodes.
struct PlaceTotals {
  double rate = 0;         // samples/s asked for
  double remaining = 0;    // samples/s not placed yet
  WorkerCost c_w;          // worker CPU seconds per sample at the cut, made and sent
  double bytes = 0;        // bytes per sample on the wire at the cut
  double segments = 0;     // shared memory a worker on the trainer's node lends
  double ingress_cap = 0;  // bytes/s the trainer's NICs take in
  double ingress_used = 0;
};

// The CPUs of the next worker on `n`: on the trainer's node the smallest that covers
// what remains, else the largest; elsewhere whole --cpus-per-worker workers (0: none).
int NextWorkerSize(const Setup& s, const NodeUse& n, bool on_trainer, const PlaceTotals& t) {
  const int per_worker = s.options->cpus_per_worker;
  if (!on_trainer) return n.free_cpus >= per_worker ? per_worker : 0;
  const int most = std::min(per_worker, n.free_cpus);
  int size = 1;
  while (size < most && WorkerRate(s, size, t.c_w.on_trainer) < t.remaining) ++size;
  return std::min(size, most);
}

// Places workers on node `n` until the rate is covered or the node (its CPUs,
// memory or NIC) or --max-workers stops it; what stopped it is marked in `a`.
void PlaceWorkersOn(const Setup& s, NodeUse& n, bool on_trainer, const std::string& partition,
                    PlaceTotals& t, Attempt& a) {
  Placement& p = a.p;
  while (t.remaining > 1e-9 * std::max(1.0, t.rate)) {
    if (static_cast<int>(p.workers.size()) >= s.options->max_workers) {
      a.hit_max = true;
      return;
    }
    const int size = NextWorkerSize(s, n, on_trainer, t);
    if (size < 1) return;
    const double memory = double(s.memory_per_worker) + (on_trainer ? t.segments : 0);
    if (s.memory_per_worker > 0 && n.free_memory_bytes < memory) {
      a.memory_blocked = true;
      return;
    }
    double worker_rate = WorkerRate(s, size, on_trainer ? t.c_w.on_trainer : t.c_w.elsewhere);
    if (!on_trainer && t.bytes > 0) {
      const double cap =
          std::min(n.nic_bytes_per_s - n.nic_used, t.ingress_cap - t.ingress_used) / t.bytes;
      if (cap <= 1e-9) {
        a.network_blocked = true;
        return;
      }
      if (cap < std::min(worker_rate, t.remaining)) a.network_blocked = true;
      worker_rate = std::min(worker_rate, cap);
    }
    const double delivered = std::min(worker_rate, t.remaining);
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
      n.nic_used += delivered * t.bytes;
      t.ingress_used += delivered * t.bytes;
      p.network_bytes_per_s += delivered * t.bytes;
    }
    t.remaining -= delivered;
  }
}

// Keeps the trainer processes' CPUs and the client's tail stages' CPUs on the
// trainer's node(s), and records what each keeps.
std::vector<NodeUse> KeepTrainerCpus(const Setup& s, const CutPoint& cut, double rate, Attempt& a) {
  const double e = s.rate.efficiency(1);  // the client's stages run on one thread
  std::vector<NodeUse> trainer = s.trainer;
  for (NodeUse& n : trainer) {
    n.free_cpus = std::max(0, n.free_cpus - s.options->trainer_cpus * n.ranks);
    a.spare_total += n.free_cpus;
  }
  const double tail_cpus = rate * ClientCpuPerSample(s, cut) / e;
  if (tail_cpus > a.spare_total + 1e-9) a.tail_short = true;
  for (NodeUse& n : trainer) {
    const double share = n.ranks / double(s.world_size);
    n.free_cpus -= std::min(n.free_cpus, static_cast<int>(std::ceil(tail_cpus * share - 1e-9)));
    PlanTrainerNode t;
    t.name = n.node->name;
    t.gpus = n.gpus;
    t.cpus = n.node->free_cpus() - n.free_cpus;
    a.p.trainer_nodes.push_back(t);
  }
  return trainer;
}

Attempt PlaceAt(const Setup& s, const CutPoint& cut, double rate, const WorkerCost& c_w) {
  Attempt a;
  std::vector<NodeUse> trainer = KeepTrainerCpus(s, cut, rate, a);
  PlaceTotals t;
  t.rate = rate;
  t.remaining = a.tail_short ? 0 : rate;
  t.c_w = c_w;
  for (const NodeUse& n : trainer) t.ingress_cap += n.nic_bytes_per_s;
  t.bytes = std::max(0.0, cut.bytes_per_sample);
  // A worker on the trainer's node also holds the shared-memory segments it
  // lends its clients (dataplane/shm.h): one batch each at this cut's bytes.
  t.segments = s.memory_per_worker > 0 && s.profile->pipeline
                   ? double(kSameHostSegmentsPerWorker) *
                         std::max(0, s.profile->pipeline->batch_size) * t.bytes
                   : 0;
  std::vector<NodeUse> others = s.others;
  const std::string& trainer_partition = s.gpu_partition.empty() ? s.partition : s.gpu_partition;
  for (NodeUse& n : trainer) {
    if (!a.hit_max && !a.tail_short) PlaceWorkersOn(s, n, true, trainer_partition, t, a);
  }
  for (NodeUse& n : others) {
    if (!a.hit_max && !a.tail_short) PlaceWorkersOn(s, n, false, s.partition, t, a);
  }
  a.delivered = a.tail_short ? 0 : rate - std::max(0.0, t.remaining);
  return a;
}

bool Meets(const Attempt& a, double rate) { return a.delivered >= rate * (1 - 1e-9); }

// Says which limit stopped the plan short of the target, and by how much.
void ExplainLimit(const Setup& s, const CutPoint& cut, const Attempt& at_goal, double goal,
                  double shortfall, Placement& p) {
  const PlanOptions& o = *s.options;
  const double e = s.rate.efficiency(1);
  const double T = s.target;
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
}

// What a worker spends per sample at `cut`: the pipeline's share, then delivery
// (a frame per batch; over TCP also the cut's bytes).
WorkerCost CostAt(const Setup& s, const CutPoint& cut) {
  const double local = std::max(0.0, cut.local_cpu_s_per_sample);
  WorkerCost c;
  c.made = std::max({s.rate.cpu_s_per_sample - local, cut.remote_cpu_s_per_sample, 1e-9});
  const PipelineProfile& pipe = *s.profile->pipeline;
  const double frame = pipe.delivery.frame_cpu_s / std::max(1, pipe.batch_size);
  c.elsewhere =
      c.made + frame + pipe.delivery.tcp_cpu_s_per_byte * std::max(0.0, cut.bytes_per_sample);
  c.on_trainer = s.options->same_host ? c.made + frame : c.elsewhere;
  return c;
}

}  // namespace

std::string PartitionNames(const Cluster& c) {
  std::vector<std::string> names;
  for (const ClusterPartition& p : c.partitions) names.push_back(p.name);
  return Joined(names);
}

double ClientCpuPerSample(const Setup& s, const CutPoint& cut) {
  const bool gpus =
      std::any_of(s.trainer.begin(), s.trainer.end(), [](const NodeUse& n) { return n.gpus > 0; });
  return cut.device_tail && gpus ? 0.0 : std::max(0.0, cut.local_cpu_s_per_sample);
}

Placement Evaluate(const Setup& s, const CutPoint& cut) {
  const PlanOptions& o = *s.options;
  const WorkerCost c_w = CostAt(s, cut);
  // One CPU of a worker of --cpus-per-worker CPUs on the trainer's node: what the
  // CPU need is counted in.
  const double per_cpu = s.rate.efficiency(o.cpus_per_worker) / c_w.on_trainer;
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
  p.cost = c_w;
  p.per_cpu = per_cpu;
  p.cpus_needed = T / per_cpu;

  const double shortfall = T - p.samples_per_s;
  if (shortfall > 1e-6 * std::max(1.0, T)) ExplainLimit(s, cut, at_goal, goal, shortfall, p);
  return p;
}

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

double CpuRate::efficiency(int cpus) const {
  if (cpus <= 1 || threads_n <= 1) return cpus <= 1 ? efficiency_1 : efficiency_n;
  if (cpus >= threads_n) return efficiency_n;
  return efficiency_1 + (efficiency_n - efficiency_1) * (cpus - 1) / double(threads_n - 1);
}

Result<CpuRate> MeasuredCpuRate(const Profile& profile, const std::string& origin) {
  if (!profile.pipeline) {
    return Status::InvalidArgument(
        origin +
        " has no pipeline part and no DataLoader figures (it profiled a trainer whose batches "
        "came from no DataLoader worker process), so the CPU cost per sample is unknown; "
        "profile the pipeline (goldminer profile --pipeline pipeline.json -o " +
        origin + " [-- trainer command]), or a program whose DataLoader has num_workers > 0");
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
  if (one && one->threads == 1 && one->cpus == 1) {
    // A 1-thread run confined to one CPU, as a 1-CPU worker is: what that CPU
    // delivers prices a sample, whatever the process's threads and an exec stage's
    // children spent. A run on more CPUs may do better per CPU (its reader and
    // batcher no longer share the stage thread's CPU), up to kMaxEfficiency.
    r.cpu_s_per_sample = 1 / one->samples_per_s;
    r.efficiency_1 = 1;
    r.threads_n = all->threads;
    r.efficiency_n =
        std::clamp(all->samples_per_s * r.cpu_s_per_sample / all->threads, 1e-3, kMaxEfficiency);
    r.efficiency_source = "the 1-thread run on one CPU delivered " + Rate(one->samples_per_s) +
                          ": " + Num(r.cpu_s_per_sample * 1e3, 3) +
                          " ms of that CPU per sample (reader, stages, batcher and hand-off)";
    if (all->threads > 1) {
      r.efficiency_source += "; the " + std::to_string(all->threads) + "-thread run " +
                             Rate(all->samples_per_s) + ", " + Num(100 * r.efficiency_n, 0) +
                             "% of " + std::to_string(all->threads) + " such CPUs";
    }
  } else if (all) {
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

}  // namespace gm::planner
