#include "planner/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "core/store/run_records.h"
#include "core/text_format.h"
#include "planner/model_internal.h"

namespace gm::planner {
namespace {

// ---- The partitions (goldminer-plan(1), MODEL: where the trainer and the workers go)

Status CheckPartition(const Cluster& cluster, const std::string& name, const char* flag) {
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
}

int ClusterGpus(const Cluster& cluster) {
  int gpus = 0;
  for (const ClusterNode& n : cluster.nodes) gpus += n.gpus;
  return gpus;
}

// The up partition with the most free GPUs on usable nodes ("" when none has any).
std::string BusiestGpuPartition(const Cluster& cluster) {
  std::map<std::string, int> free;
  for (const ClusterNode& n : cluster.nodes) {
    for (const std::string& part : n.partitions) {
      const ClusterPartition* p = cluster.partition(part);
      if (p && p->up && n.gpus > 0) free[part] += n.usable() ? n.free_gpus() : 0;
    }
  }
  std::string name;
  int best = -1;
  for (const auto& [partition, f] : free) {
    if (f > best) best = f, name = partition;
  }
  return name;
}

// The trainer's partition (--gpu-partition, else the one with the most free GPUs)
// and the workers' (--partition, else the default, else another that is up).
Status ChoosePartitions(const Cluster& cluster, const PlanOptions& o, Setup& s) {
  if (!o.gpu_partition.empty()) {
    GM_RETURN_IF_ERROR(CheckPartition(cluster, o.gpu_partition, "--gpu-partition"));
    s.gpu_partition = o.gpu_partition;
  } else if (ClusterGpus(cluster) > 0) {
    s.gpu_partition = BusiestGpuPartition(cluster);
  }
  if (!o.partition.empty()) {
    GM_RETURN_IF_ERROR(CheckPartition(cluster, o.partition, "--partition"));
    s.partition = o.partition;
    return Status::Ok();
  }
  for (const ClusterPartition& p : cluster.partitions) {
    if (p.is_default && p.up) s.partition = p.name;
  }
  for (const ClusterPartition& p : cluster.partitions) {
    if (s.partition.empty() && p.up && p.name != s.gpu_partition) s.partition = p.name;
  }
  if (s.partition.empty()) s.partition = s.gpu_partition;
  return Status::Ok();
}

// ---- The trainer's nodes, and the nodes left for workers

NodeUse UseOf(const ClusterNode& n, const PlanOptions& o) {
  NodeUse u;
  u.node = &n;
  u.free_cpus = n.free_cpus();
  u.free_memory_bytes = n.memory_mb > 0 ? double(n.free_memory_mb()) * kMiB : INFINITY;
  u.nic_bytes_per_s = (n.nic_gbps > 0 ? n.nic_gbps : o.nic_gbps) * 1e9 / 8;
  return u;
}

// One rank per GPU, on the usable nodes of the GPU partition with the most free GPUs
// (then CPUs) first.
Status PlaceGpuTrainers(const Cluster& cluster, const PlanOptions& o, int gpus, Setup& s) {
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
    NodeUse u = UseOf(*n, o);
    u.ranks = std::min(left, n->free_gpus());
    u.gpus = u.ranks;
    left -= u.ranks;
    s.trainer.push_back(u);
  }
  return Status::Ok();
}

// A trainer without a GPU: one rank on the usable node of the workers' partition
// with the most free CPUs.
Status PlaceCpuTrainer(const Cluster& cluster, const PlanOptions& o, Setup& s) {
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
  NodeUse u = UseOf(*best, o);
  u.ranks = 1;
  s.trainer.push_back(u);
  return Status::Ok();
}

// The trainer's nodes (s.trainer, s.world_size), then the other usable nodes of the
// workers' partition, most free CPUs first (s.others).
Status PlaceTrainers(const Cluster& cluster, const PlanOptions& o, int gpus, Setup& s) {
  s.world_size = std::max(1, gpus);
  GM_RETURN_IF_ERROR(gpus > 0 ? PlaceGpuTrainers(cluster, o, gpus, s)
                              : PlaceCpuTrainer(cluster, o, s));
  std::set<std::string> trainer_names;
  for (const NodeUse& u : s.trainer) trainer_names.insert(u.node->name);
  for (const ClusterNode& n : cluster.nodes) {
    if (n.usable() && n.in(s.partition) && !trainer_names.count(n.name)) {
      s.others.push_back(UseOf(n, o));
    }
  }
  std::sort(s.others.begin(), s.others.end(), [](const NodeUse& a, const NodeUse& b) {
    if (a.free_cpus != b.free_cpus) return a.free_cpus > b.free_cpus;
    return a.node->name < b.node->name;
  });
  return Status::Ok();
}

// ---- The target: --target-rate, else the trainer's demand (all ranks)

// Sets s.target and s.demand; returns where the target came from.
Result<std::string> ChooseTarget(const Profile& profile, const PlanOptions& o,
                                 const std::string& origin, Setup& s) {
  if (profile.trainer && profile.trainer->demand_samples_per_s > 0) {
    s.demand = profile.trainer->demand_samples_per_s * s.world_size;
  }
  if (o.target_samples_per_s) {
    if (!(*o.target_samples_per_s > 0) || !std::isfinite(*o.target_samples_per_s)) {
      return Status::InvalidArgument("--target-rate must be a positive number of samples/s");
    }
    s.target = *o.target_samples_per_s;
    return std::string("--target-rate");
  }
  if (s.demand) {
    s.target = *s.demand;
    return std::string("trainer demand");
  }
  return Status::InvalidArgument(
      origin +
      " has no trainer part (or its demand is 0), so the rate the trainer "
      "needs is unknown: give --target-rate SAMPLES_PER_S, or profile with the "
      "trainer command (goldminer profile --pipeline P -- python3 train.py)");
}

// ---- The cut: each allowed one evaluated, then the best

int WorkerCpus(const std::vector<PlanWorker>& workers) {
  int cpus = 0;
  for (const PlanWorker& w : workers) cpus += w.cpus;
  return cpus;
}

// Whether placement `a` at cut `ca` beats `b` at `cb`: the higher rate (within
// 0.5%), then the fewer bytes on the wire, then the fewer worker CPUs.
bool Better(const Placement& a, const CutPoint& ca, const Placement& b, const CutPoint& cb) {
  const double tol = 0.005 * std::max(a.samples_per_s, b.samples_per_s);
  if (a.samples_per_s > b.samples_per_s + tol) return true;
  if (a.samples_per_s < b.samples_per_s - tol) return false;
  if (ca.bytes_per_sample != cb.bytes_per_sample) return ca.bytes_per_sample < cb.bytes_per_sample;
  return WorkerCpus(a.workers) < WorkerCpus(b.workers);
}

struct CutChoice {
  std::vector<PlanCutOption> options;  // every allowed cut, as plan.json lists them
  CutPoint cut;                        // the chosen one
  bool runnable = false;
  Placement placement;
};

// Evaluates every allowed cut and chooses among the runnable ones (all of them
// with --all-cuts).
Result<CutChoice> ChooseCut(const Setup& s, const PipelineProfile& pipe,
                            const std::string& origin) {
  const auto candidates = Candidates(pipe);
  if (candidates.empty()) {
    return Status::InvalidArgument(origin + ": no stage of the pipeline may run on a worker (" +
                                   (pipe.cuts.empty() ? "no cuts" : pipe.cuts.front().reason) +
                                   ")");
  }
  CutChoice choice;
  int best = -1;
  std::vector<Placement> placements;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto& [cut, runnable] = candidates[i];
    placements.push_back(Evaluate(s, cut));
    const Placement& pl = placements.back();
    choice.options.push_back(
        {cut.after_stage, cut.bytes_per_sample, pl.samples_per_s, pl.limit, runnable, false});
    if (!runnable && !s.options->all_cuts) continue;
    const size_t b = static_cast<size_t>(best);
    if (best < 0 || Better(pl, cut, placements[b], candidates[b].first)) {
      best = static_cast<int>(i);
    }
  }
  if (best < 0) {
    return Status::InvalidArgument(origin + ": no allowed cut is runnable by this goldminer");
  }
  const size_t b = static_cast<size_t>(best);
  choice.options[b].chosen = true;
  choice.cut = candidates[b].first;
  choice.runnable = candidates[b].second;
  choice.placement = std::move(placements[b]);
  return choice;
}

// ---- The plan: sources, model, cut, placement, prediction, run and notes

PlanSources SourcesOf(const Profile& profile, const Cluster& cluster, const PlanOptions& o,
                      const Setup& s) {
  PlanSources src;
  src.profile_path = o.profile_path;
  src.profile_created_utc = profile.created_utc;
  src.profile_sha256 = ProfileDigest(profile);
  src.profile_host = profile.host;
  src.pipeline_path = profile.pipeline->path;
  src.pipeline_sha256 = profile.pipeline->sha256;
  src.cluster = cluster.source;
  src.gpu_partition = s.gpu_partition;
  src.partition = s.partition;
  return src;
}

PlanModel ModelOf(const Setup& s, const Placement& pl, const std::string& target_source, int gpus) {
  const PlanOptions& o = *s.options;
  PlanModel m;
  m.target_samples_per_s = s.target;
  m.target_source = target_source;
  m.demand_samples_per_s = s.demand;
  m.gpus = gpus;
  m.cpu_s_per_sample = s.rate.cpu_s_per_sample;
  m.scaling_efficiency = s.rate.efficiency(o.cpus_per_worker);
  m.worker_cpu_s_per_sample = pl.cost.on_trainer;
  m.samples_per_s_per_cpu = pl.per_cpu;
  m.cpus_needed = pl.cpus_needed;
  m.memory_per_worker_bytes = s.memory_per_worker;
  m.cpus_per_worker = o.cpus_per_worker;
  m.max_workers = o.max_workers;
  m.trainer_cpus = o.trainer_cpus;
  m.nic_gbps = o.nic_gbps;
  return m;
}

PlanPrediction PredictionOf(const Setup& s, const Placement& pl) {
  PlanPrediction pr;
  pr.samples_per_s = pl.samples_per_s;
  if (s.demand) pr.stall_fraction = std::max(0.0, 1.0 - pl.samples_per_s / *s.demand);
  pr.worker_cpus = WorkerCpus(pl.workers);
  pr.network_bytes_per_s = pl.network_bytes_per_s;
  const std::optional<uint64_t>& epoch = s.options->epoch_samples;
  if (pl.samples_per_s > 0) {
    pr.cpu_hours_per_million_samples = pr.worker_cpus * (1e6 / pl.samples_per_s) / 3600;
    if (epoch) {
      pr.epoch_samples = epoch;
      pr.cpu_hours_per_epoch = pr.worker_cpus * (double(*epoch) / pl.samples_per_s) / 3600;
    }
  }
  pr.limit = pl.limit;
  pr.shortfall_samples_per_s = std::max(0.0, s.target - pl.samples_per_s);
  pr.limit_detail = pl.detail;
  return pr;
}

PlanRun RunOf(const Profile& profile, const PlanOptions& o, const Setup& s, const Placement& pl) {
  PlanRun run;
  run.pipeline = profile.pipeline->path;
  run.workers = static_cast<int>(pl.workers.size());
  for (const PlanWorker& w : pl.workers) {
    run.threads_per_worker = std::max(run.threads_per_worker, w.cpus);
    run.slots.push_back(WorkerSlot{w.cpus, !w.on_trainer_node, w.memory_bytes});
  }
  run.world_size = s.world_size;
  run.command = !o.command.empty() ? o.command
                : profile.trainer  ? profile.trainer->command
                                   : std::vector<std::string>{};
  return run;
}

// What sending a sample to the trainer costs a worker's CPU, as the plan counts it.
std::string DeliveryNote(const Setup& s, const CutChoice& c) {
  const PipelineProfile& pipe = *s.profile->pipeline;
  const DeliveryCost& d = pipe.delivery;
  if (d.frame_cpu_s <= 0 && d.tcp_cpu_s_per_byte <= 0) {
    return "the profile has no delivery costs (a profile of an older goldminer): sending "
           "batches to the trainer is not priced; profile again to price it";
  }
  const WorkerCost& w = c.placement.cost;
  const double e = s.rate.efficiency(s.options->cpus_per_worker);
  std::string note = "delivery, measured on the profile's host: one frame per batch of " +
                     std::to_string(pipe.batch_size) + " costs " + Num(d.frame_cpu_s * 1e6, 0) +
                     " us of the worker's CPU";
  note += s.options->same_host
              ? " (" + Num((w.on_trainer - w.made) * 1e3, 4) +
                    " ms per sample on the trainer's node, where batches are written into "
                    "shared memory)"
              : " ($GOLDMINER_SAME_HOST is off: workers on the trainer's node send over TCP too)";
  note += "; over TCP each MB costs " + Num(d.tcp_cpu_s_per_byte * kMiB * 1e3, 3) + " ms, " +
          Num((w.elsewhere - w.made) * 1e3, 3) + " ms per sample of " +
          Num(c.cut.bytes_per_sample / 1e3, 1) + " kB at this cut: a worker CPU elsewhere " +
          "delivers " + Rate(e / w.elsewhere);
  return note;
}

// The explanations a person reads with the plan: why, and what was assumed.
std::vector<std::string> NotesOf(const Setup& s, const Plan& plan, const CutChoice& c) {
  const CutPoint& cut = c.cut;
  std::vector<std::string> notes;
  notes.push_back("scaling efficiency " + Num(plan.model.scaling_efficiency, 2) + " for " +
                  std::to_string(s.options->cpus_per_worker) +
                  "-CPU workers (linear between the "
                  "measured 1-thread and all-core runs): " +
                  s.rate.efficiency_source);
  notes.push_back("one worker CPU delivers " + Rate(c.placement.per_cpu) + " = efficiency / " +
                  Num(c.placement.cost.on_trainer * 1e3, 3) +
                  " ms worker CPU per sample at the cut after stage " +
                  std::to_string(cut.after_stage));
  notes.push_back(DeliveryNote(s, c));
  if (s.memory_per_worker == 0) {
    notes.push_back("the profile has no peak RSS: memory was not checked");
  }
  if (cut.device_tail && cut.local_cpu_s_per_sample > 0 && ClientCpuPerSample(s, cut) == 0) {
    notes.push_back("the stages after stage " + std::to_string(cut.after_stage) +
                    " run on the trainer's GPU (goldminer.torch.DeviceLoader): no CPU of "
                    "its node is counted for them (" +
                    Num(cut.local_cpu_s_per_sample * 1e3, 3) + " ms per sample on a CPU)");
  }
  if (!c.runnable) {
    notes.push_back("the chosen cut (after stage " + std::to_string(cut.after_stage) +
                    ") is not the one pipeline.json makes, and run follows the file: mark "
                    "the stages after it \"on\": \"device\" (possible when they are "
                    "to_tensor and normalize) and profile again; until then this plan is "
                    "for comparison and run --plan refuses it");
  }
  if (plan.run.command.empty()) {
    notes.push_back("no trainer command (the profile has none): give one after -- to run it");
  }
  return notes;
}

Status CheckPlanInputs(const Cluster& cluster, const PlanOptions& o) {
  if (o.cpus_per_worker < 1 || o.max_workers < 1 || o.trainer_cpus < 0 || !(o.nic_gbps > 0)) {
    return Status::InvalidArgument(
        "plan options out of range (cpus per worker, max workers, "
        "trainer CPUs, NIC speed)");
  }
  if (cluster.nodes.empty()) {
    return Status::InvalidArgument("the cluster (" + cluster.source +
                                   ") has no nodes; nothing to place workers on");
  }
  return Status::Ok();
}

// An unchanged program's DataLoader workers as the model's pipeline: one stateless
// stage of their measured CPU per sample, all of it on the data workers (its
// virtual workers), its batches' bytes on the wire, one process per CPU (so one
// run at 1 thread with efficiency 1: the model scales it linearly).
PipelineProfile DataLoaderAsPipeline(const DataLoaderProfile& d, double batch_size,
                                     const std::string& stage_name) {
  PipelineProfile p;
  p.batch_size = static_cast<int>(std::lround(batch_size));
  p.cpu_s_per_sample = p.stage_cpu_s_per_sample = d.cpu_s_per_sample;
  p.samples_per_s_per_core = 1 / d.cpu_s_per_sample;
  p.runs.push_back(
      PipelineRun{1, d.samples, d.cpu_s, d.cpu_s, 1 / d.cpu_s_per_sample, 1 / d.cpu_s_per_sample});
  StageProfile stage;
  stage.name = stage_name;
  stage.cpu_s_per_sample = stage.wall_s_per_sample = d.cpu_s_per_sample;
  stage.bytes_out_per_sample = d.bytes_per_sample;
  stage.cpu_share = 1;
  p.stages.push_back(stage);
  CutPoint cut;
  cut.after_stage = 0;
  cut.bytes_per_sample = d.bytes_per_sample;
  cut.remote_cpu_s_per_sample = d.cpu_s_per_sample;
  p.cuts.push_back(cut);
  return p;
}

// An unchanged program's DataLoaders priced on the native engine, as the model
// sees DataLoader workers: the engine's CPU per sample to the transform's end (all
// of it on a data worker, as on one of the trainer's host), and the uint8 cut's
// bytes on the wire (what --offload-cut auto sends from other hosts).
DataLoaderProfile NativeAsDataLoader(const TrainerProfile& t) {
  const NativeProfile& n = *t.native;
  DataLoaderProfile d;
  d.workers = t.dataloader ? t.dataloader->workers : 0;
  d.samples = n.samples;
  d.cpu_s_per_sample = n.cpu_s_per_sample;
  d.cpu_s = n.cpu_s_per_sample * static_cast<double>(n.samples);
  d.bytes_per_sample = n.cut_bytes_per_sample > 0 ? n.cut_bytes_per_sample : n.bytes_per_sample;
  return d;
}

// The first note of a plan on the native engine: its cost against the program's
// own workers', and what the run does.
std::string NativeNote(const TrainerProfile& t, const Plan& plan) {
  const NativeProfile& n = *t.native;
  std::string note =
      "an unchanged program on goldminer's native engine (profile --offload "
      "native): " +
      Num(n.cpu_s_per_sample * 1e3, 3) + " ms CPU per sample";
  if (t.dataloader) {
    note += ", against " + Num(t.dataloader->cpu_s_per_sample * 1e3, 3) + " ms in its " +
            std::to_string(t.dataloader->workers) + " DataLoader worker process(es) (" +
            Num(t.dataloader->cpu_s_per_sample / n.cpu_s_per_sample, 2) + "x)";
  }
  note += "; the engine's ops alone, measured on " + std::to_string(n.samples) +
          " samples (a virtual worker's loop adds to them)";
  if (n.cut_bytes_per_sample > 0) {
    note += "; from other hosts " + Num(n.cut_bytes_per_sample / 1e3, 1) +
            " kB per sample cross as uint8 (--offload-cut auto), not " +
            Num(n.bytes_per_sample / 1e3, 1) + " kB";
  }
  note += "; run --plan runs it with --offload native";
  if (plan.run.dataloader_workers > 0) {
    note += " and " + std::to_string(plan.run.dataloader_workers) +
            " virtual workers (--dataloader-workers " +
            std::to_string(plan.run.dataloader_workers) + ")";
  }
  return note + ": goldminer's random draws, not stock's batches bit for bit";
}

// The plan of an unchanged program: its DataLoader workers' cost as the pipeline
// (the native engine's, when the profile priced it), the workers serving only its
// DataLoaders (no pipeline file), and as many virtual workers as the planned CPUs
// when its num_workers is fewer (on the native engine, always: its samples do not
// depend on the worker count).
Result<Plan> MakeDataLoaderPlan(const Profile& profile, const Cluster& cluster,
                                const PlanOptions& o) {
  const TrainerProfile& t = *profile.trainer;
  const bool native = t.native.has_value();
  const DataLoaderProfile d = native ? NativeAsDataLoader(t) : *t.dataloader;
  Profile as_pipeline = profile;
  as_pipeline.pipeline =
      DataLoaderAsPipeline(d, t.batch_size, native ? "native engine" : "DataLoader worker");
  GM_ASSIGN_OR_RETURN(Plan plan, MakePlan(as_pipeline, cluster, o));
  plan.run.pipeline.clear();
  plan.sources.pipeline_path.clear();
  const int cpus = plan.prediction.worker_cpus;
  if (cpus > d.workers || (native && cpus > 0)) {
    plan.run.dataloader_workers = std::min(cpus, kMaxDataLoaderWorkers);
  }
  // Not the pipeline's measured scaling: one Python process per CPU.
  std::erase_if(plan.notes,
                [](const std::string& n) { return n.starts_with("scaling efficiency "); });
  plan.notes.insert(plan.notes.begin(),
                    "a DataLoader worker is one Python process on one CPU: the model scales "
                    "its rate linearly with the CPUs (scaling efficiency 1)");
  if (native) {
    plan.run.offload = "native";
    plan.notes.insert(plan.notes.begin(), NativeNote(t, plan));
    return plan;
  }
  plan.notes.insert(
      plan.notes.begin(),
      "an unchanged program: its DataLoader's " + std::to_string(d.workers) +
          " worker process(es) used " + Num(d.cpu_s_per_sample * 1e3, 3) + " ms CPU per sample (" +
          Num(d.bytes_per_sample / 1e3, 1) +
          " kB per sample in its batches); run --plan serves only its DataLoaders, each "
          "worker CPU hosting a virtual worker" +
          (plan.run.dataloader_workers > 0
               ? "; " + std::to_string(plan.run.dataloader_workers) +
                     " virtual workers (run --dataloader-workers " +
                     std::to_string(plan.run.dataloader_workers) +
                     ": the batches of DataLoader(num_workers=" +
                     std::to_string(plan.run.dataloader_workers) + "), not those of its " +
                     std::to_string(d.workers) + "; give --dataloader-workers " +
                     std::to_string(d.workers) + " to keep them, or run --offload elastic)"
               : std::string()));
  return plan;
}

}  // namespace

Result<Plan> MakePlan(const Profile& profile, const Cluster& cluster, const PlanOptions& o) {
  const std::string& origin = o.profile_path.empty() ? "profile.json" : o.profile_path;
  if (!profile.pipeline && profile.trainer &&
      (profile.trainer->dataloader || profile.trainer->native)) {
    return MakeDataLoaderPlan(profile, cluster, o);
  }
  GM_ASSIGN_OR_RETURN(CpuRate rate, MeasuredCpuRate(profile, origin));
  GM_RETURN_IF_ERROR(CheckPlanInputs(cluster, o));
  Setup s;
  s.profile = &profile;
  s.options = &o;
  s.rate = rate;
  s.memory_per_worker = profile.pipeline->peak_rss_bytes;
  GM_RETURN_IF_ERROR(ChoosePartitions(cluster, o, s));
  const int gpus = o.gpus >= 0 ? o.gpus : (ClusterGpus(cluster) > 0 ? 1 : 0);
  GM_RETURN_IF_ERROR(PlaceTrainers(cluster, o, gpus, s));
  GM_ASSIGN_OR_RETURN(std::string target_source, ChooseTarget(profile, o, origin, s));
  GM_ASSIGN_OR_RETURN(CutChoice choice, ChooseCut(s, *profile.pipeline, origin));

  Plan plan;
  plan.created_utc = o.created_utc;
  plan.goldminer_version = o.goldminer_version;
  plan.sources = SourcesOf(profile, cluster, o, s);
  plan.model = ModelOf(s, choice.placement, target_source, gpus);
  plan.cut.after_stage = choice.cut.after_stage;
  plan.cut.bytes_per_sample = choice.cut.bytes_per_sample;
  plan.cut.local_cpu_s_per_sample = choice.cut.local_cpu_s_per_sample;
  plan.cut.runnable = choice.runnable;
  plan.cuts = choice.options;
  plan.trainer_nodes = choice.placement.trainer_nodes;
  plan.workers = choice.placement.workers;
  plan.prediction = PredictionOf(s, choice.placement);
  plan.run = RunOf(profile, o, s, choice.placement);
  plan.notes = NotesOf(s, plan, choice);
  return plan;
}

}  // namespace gm::planner
