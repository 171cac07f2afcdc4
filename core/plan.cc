#include "core/plan.h"

#include <optional>
#include <string>

#include "core/json.h"
#include "core/json_fields.h"

namespace gm {

using nlohmann::json;

namespace {

template <typename T>
void PutIfSet(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

}  // namespace

// ToJson and Convert overloads live in namespace gm: ArrayOf and Fields
// (core/json_fields.h) find them by argument-dependent lookup.

json ToJson(const PlanSources& s) {
  return {{"profile_path", s.profile_path},
          {"profile_created_utc", s.profile_created_utc},
          {"profile_host", s.profile_host},
          {"profile_sha256", s.profile_sha256},
          {"pipeline_path", s.pipeline_path},
          {"pipeline_sha256", s.pipeline_sha256},
          {"cluster", s.cluster},
          {"gpu_partition", s.gpu_partition},
          {"partition", s.partition}};
}

json ToJson(const PlanModel& m) {
  json j = {{"target_samples_per_s", m.target_samples_per_s},
            {"target_source", m.target_source},
            {"gpus", m.gpus},
            {"cpu_s_per_sample", m.cpu_s_per_sample},
            {"scaling_efficiency", m.scaling_efficiency},
            {"worker_cpu_s_per_sample", m.worker_cpu_s_per_sample},
            {"samples_per_s_per_cpu", m.samples_per_s_per_cpu},
            {"cpus_needed", m.cpus_needed},
            {"memory_per_worker_bytes", m.memory_per_worker_bytes},
            {"cpus_per_worker", m.cpus_per_worker},
            {"max_workers", m.max_workers},
            {"trainer_cpus", m.trainer_cpus},
            {"nic_gbps", m.nic_gbps}};
  PutIfSet(j, "demand_samples_per_s", m.demand_samples_per_s);
  return j;
}

json ToJson(const PlanCut& c) {
  return {{"after_stage", c.after_stage},
          {"bytes_per_sample", c.bytes_per_sample},
          {"local_cpu_s_per_sample", c.local_cpu_s_per_sample},
          {"runnable", c.runnable}};
}

json ToJson(const PlanCutOption& c) {
  return {{"after_stage", c.after_stage},     {"bytes_per_sample", c.bytes_per_sample},
          {"samples_per_s", c.samples_per_s}, {"limit", c.limit},
          {"runnable", c.runnable},           {"chosen", c.chosen}};
}

json ToJson(const PlanTrainerNode& n) {
  return {{"name", n.name}, {"gpus", n.gpus}, {"cpus", n.cpus}};
}

json ToJson(const PlanWorker& w) {
  return {{"node", w.node},
          {"partition", w.partition},
          {"cpus", w.cpus},
          {"memory_bytes", w.memory_bytes},
          {"on_trainer_node", w.on_trainer_node},
          {"samples_per_s", w.samples_per_s}};
}

json ToJson(const PlanPrediction& p) {
  json j = {{"samples_per_s", p.samples_per_s},
            {"worker_cpus", p.worker_cpus},
            {"network_bytes_per_s", p.network_bytes_per_s},
            {"cpu_hours_per_million_samples", p.cpu_hours_per_million_samples},
            {"limit", p.limit},
            {"shortfall_samples_per_s", p.shortfall_samples_per_s},
            {"limit_detail", p.limit_detail}};
  PutIfSet(j, "stall_fraction", p.stall_fraction);
  PutIfSet(j, "epoch_samples", p.epoch_samples);
  PutIfSet(j, "cpu_hours_per_epoch", p.cpu_hours_per_epoch);
  return j;
}

json ToJson(const PlanRun& r) {
  // plan.json keeps each slot's threads as "worker_threads" (where each worker
  // goes and its memory are in "workers").
  std::vector<int> worker_threads;
  for (const WorkerSlot& s : r.slots) worker_threads.push_back(s.threads);
  json j = {{"pipeline", r.pipeline},
            {"workers", r.workers},
            {"threads_per_worker", r.threads_per_worker},
            {"worker_threads", worker_threads},
            {"world_size", r.world_size},
            {"command", r.command}};
  // Only a plan of an unchanged program whose DataLoaders need more workers has it.
  if (r.dataloader_workers > 0) j["dataloader_workers"] = r.dataloader_workers;
  if (!r.offload.empty()) j["offload"] = r.offload;
  return j;
}

Status Convert(const JsonNode& n, PlanSources& out) {
  Fields f(n);
  f.Optional("profile_path", out.profile_path);
  f.Optional("profile_created_utc", out.profile_created_utc);
  f.Optional("profile_host", out.profile_host);
  f.Optional("profile_sha256", out.profile_sha256);
  f.Optional("pipeline_path", out.pipeline_path);
  f.Optional("pipeline_sha256", out.pipeline_sha256);
  f.Optional("cluster", out.cluster);
  f.Optional("gpu_partition", out.gpu_partition);
  f.Optional("partition", out.partition);
  return f.status();
}

Status Convert(const JsonNode& n, PlanModel& out) {
  Fields f(n);
  f.Optional("target_samples_per_s", out.target_samples_per_s);
  f.Optional("target_source", out.target_source);
  f.Optional("demand_samples_per_s", out.demand_samples_per_s);
  f.Optional("gpus", out.gpus);
  f.Optional("cpu_s_per_sample", out.cpu_s_per_sample);
  f.Optional("scaling_efficiency", out.scaling_efficiency);
  f.Optional("worker_cpu_s_per_sample", out.worker_cpu_s_per_sample);
  f.Optional("samples_per_s_per_cpu", out.samples_per_s_per_cpu);
  f.Optional("cpus_needed", out.cpus_needed);
  f.Optional("memory_per_worker_bytes", out.memory_per_worker_bytes);
  f.Optional("cpus_per_worker", out.cpus_per_worker);
  f.Optional("max_workers", out.max_workers);
  f.Optional("trainer_cpus", out.trainer_cpus);
  f.Optional("nic_gbps", out.nic_gbps);
  return f.status();
}

Status Convert(const JsonNode& n, PlanCut& out) {
  Fields f(n);
  f.Optional("after_stage", out.after_stage);
  f.Optional("bytes_per_sample", out.bytes_per_sample);
  f.Optional("local_cpu_s_per_sample", out.local_cpu_s_per_sample);
  f.Optional("runnable", out.runnable);
  return f.status();
}

Status Convert(const JsonNode& n, PlanCutOption& out) {
  Fields f(n);
  f.Optional("after_stage", out.after_stage);
  f.Optional("bytes_per_sample", out.bytes_per_sample);
  f.Optional("samples_per_s", out.samples_per_s);
  f.Optional("limit", out.limit);
  f.Optional("runnable", out.runnable);
  f.Optional("chosen", out.chosen);
  return f.status();
}

Status Convert(const JsonNode& n, PlanTrainerNode& out) {
  Fields f(n);
  f.Required("name", out.name);
  f.Optional("gpus", out.gpus);
  f.Optional("cpus", out.cpus);
  return f.status();
}

Status Convert(const JsonNode& n, PlanWorker& out) {
  Fields f(n);
  f.Required("node", out.node);
  f.Optional("partition", out.partition);
  f.Required("cpus", out.cpus);
  f.Optional("memory_bytes", out.memory_bytes);
  f.Optional("on_trainer_node", out.on_trainer_node);
  f.Optional("samples_per_s", out.samples_per_s);
  f.Check(out.cpus >= 1, "cpus", "an integer >= 1");
  return f.status();
}

Status Convert(const JsonNode& n, PlanPrediction& out) {
  Fields f(n);
  f.Required("samples_per_s", out.samples_per_s);
  f.Optional("stall_fraction", out.stall_fraction);
  f.Optional("worker_cpus", out.worker_cpus);
  f.Optional("network_bytes_per_s", out.network_bytes_per_s);
  f.Optional("cpu_hours_per_million_samples", out.cpu_hours_per_million_samples);
  f.Optional("epoch_samples", out.epoch_samples);
  f.Optional("cpu_hours_per_epoch", out.cpu_hours_per_epoch);
  f.Optional("limit", out.limit);
  f.Optional("shortfall_samples_per_s", out.shortfall_samples_per_s);
  f.Optional("limit_detail", out.limit_detail);
  return f.status();
}

Status Convert(const JsonNode& n, PlanRun& out) {
  Fields f(n);
  f.Required("pipeline", out.pipeline);
  f.Required("workers", out.workers);
  f.Required("threads_per_worker", out.threads_per_worker);
  std::vector<int> worker_threads;
  f.Optional("worker_threads", worker_threads);
  f.Optional("world_size", out.world_size);
  f.Optional("command", out.command);
  f.Optional("dataloader_workers", out.dataloader_workers);
  f.Optional("offload", out.offload);
  f.Check(out.offload.empty() || out.offload == "native", "offload", "\"native\" or absent");
  // "" is a plan of an unchanged program: the workers serve only its DataLoaders.
  f.Check(out.dataloader_workers >= 0 && out.dataloader_workers <= kMaxDataLoaderWorkers,
          "dataloader_workers",
          ("an integer from 0 to " + std::to_string(kMaxDataLoaderWorkers)).c_str());
  const std::string workers = "an integer from 1 to " + std::to_string(kMaxRunWorkers);
  const std::string threads = std::to_string(kMaxWorkerThreads);
  f.Check(out.workers >= 1 && out.workers <= kMaxRunWorkers, "workers", workers.c_str());
  f.Check(out.threads_per_worker >= 1 && out.threads_per_worker <= kMaxWorkerThreads,
          "threads_per_worker", ("an integer from 1 to " + threads).c_str());
  bool threads_ok =
      worker_threads.empty() || worker_threads.size() == static_cast<size_t>(out.workers);
  for (int t : worker_threads) threads_ok = threads_ok && t >= 1 && t <= kMaxWorkerThreads;
  out.slots.clear();
  for (int t : worker_threads) out.slots.push_back(WorkerSlot{t, true, 0});
  f.Check(threads_ok, "worker_threads",
          ("one integer from 1 to " + threads + " per worker (as many as run.workers)").c_str());
  f.Check(out.world_size >= 1 && out.world_size <= kMaxWorldSize, "world_size",
          ("an integer from 1 to " + std::to_string(kMaxWorldSize)).c_str());
  return f.status();
}

json PlanToJson(const Plan& p) {
  return {{"schema", kPlanSchema},
          {"version", kPlanVersion},
          {"created_utc", p.created_utc},
          {"goldminer_version", p.goldminer_version},
          {"sources", ToJson(p.sources)},
          {"model", ToJson(p.model)},
          {"cut", ToJson(p.cut)},
          {"cuts", ArrayOf(p.cuts)},
          {"trainer_nodes", ArrayOf(p.trainer_nodes)},
          {"workers", ArrayOf(p.workers)},
          {"prediction", ToJson(p.prediction)},
          {"run", ToJson(p.run)},
          {"notes", p.notes}};
}

Result<Plan> PlanFromJson(const json& j, const std::string& origin) {
  JsonNode root(j, origin);
  if (!root.is_object()) {
    return root.Expected("a plan object ({\"schema\": \"goldminer.plan\", ...})");
  }
  GM_RETURN_IF_ERROR(CheckSchemaAndVersion(root, kPlanSchema, kPlanVersion,
                                           "a plan.json written by `goldminer plan`",
                                           "re-run `goldminer plan` with this goldminer"));
  Plan p;
  Fields f(root);
  f.Optional("created_utc", p.created_utc);
  f.Optional("goldminer_version", p.goldminer_version);
  f.Optional("sources", p.sources);
  f.Optional("model", p.model);
  f.Optional("cut", p.cut);
  f.Optional("cuts", p.cuts);
  f.Optional("trainer_nodes", p.trainer_nodes);
  f.Optional("workers", p.workers);
  f.Required("prediction", p.prediction);
  f.Required("run", p.run);
  f.Optional("notes", p.notes);
  GM_RETURN_IF_ERROR(f.status());
  // Each slot's place and memory are the planned worker's (run keeps only threads).
  for (size_t i = 0; i < p.run.slots.size() && i < p.workers.size(); ++i) {
    p.run.slots[i].remote = !p.workers[i].on_trainer_node;
    p.run.slots[i].memory_bytes = p.workers[i].memory_bytes;
  }
  return p;
}

Result<Plan> LoadPlan(const std::string& path) {
  GM_ASSIGN_OR_RETURN(json doc, LoadJsonFile(path));
  return PlanFromJson(doc, path);
}

}  // namespace gm
