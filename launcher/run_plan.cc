#include "launcher/run_plan.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "core/os/cpus.h"

namespace gm {
namespace {

// The plan's pipeline (none for an unchanged program's plan: the workers serve
// its DataLoaders), looked up from here, then beside plan.json.
Status TakePipeline(const Plan& plan, const std::string& plan_path, RunSpec& spec) {
  if (plan.run.pipeline.empty()) return Status::Ok();
  spec.pipeline = plan.run.pipeline;
  std::error_code ec;  // the non-throwing overloads: an unreadable path reads as absent
  if (std::filesystem::exists(spec.pipeline, ec)) return Status::Ok();
  // A relative path in plan.json may be relative to the plan's folder.
  const auto beside = std::filesystem::path(plan_path).parent_path() / spec.pipeline;
  if (std::filesystem::path(spec.pipeline).is_relative() && std::filesystem::exists(beside, ec)) {
    spec.pipeline = beside.string();
    return Status::Ok();
  }
  return Status::NotFound(plan_path + ": $.run.pipeline: " + plan.run.pipeline +
                          " does not exist (give --pipeline FILE)");
}

// One slot per planned worker: its threads (unless --threads-per-worker says
// otherwise), where it belongs and its memory.
void TakeSlots(const Plan& plan, bool plan_threads, RunSpec& spec) {
  const size_t planned = std::max(plan.workers.size(), plan.run.slots.size());
  spec.slots.assign(planned, WorkerSlot{spec.threads_per_worker, true, 0});
  for (size_t i = 0; i < planned; ++i) {
    WorkerSlot& slot = spec.slots[i];
    if (plan_threads && i < plan.run.slots.size()) slot.threads = plan.run.slots[i].threads;
    if (i < plan.workers.size()) {
      slot.remote = !plan.workers[i].on_trainer_node;
      slot.memory_bytes = plan.workers[i].memory_bytes;
    }
  }
}

// Local backend: the trainer on the CPUs the plan keeps for it (the first this
// process may use), the workers on the others, as the plan's division assumes.
void TakeTrainerCpus(const Plan& plan, const std::vector<int>& allowed, RunFromPlan& run,
                     PlanNotes& notes) {
  int kept = 0;
  for (const PlanTrainerNode& t : plan.trainer_nodes) kept += t.cpus;
  if (kept <= 0) return;
  if (static_cast<size_t>(kept) < allowed.size()) {
    run.trainer_cpus = FormatCpuList({allowed.begin(), allowed.begin() + kept});
    notes.info.push_back("run: the plan keeps " + std::to_string(kept) +
                         " CPU(s) for the trainer: --trainer-cpus " + run.trainer_cpus +
                         " (--trainer-cpus none: no pinning)");
  } else {
    notes.info.push_back("run: the plan keeps " + std::to_string(kept) +
                         " CPU(s) for the trainer, and this process may use " +
                         std::to_string(allowed.size()) + ": no pinning");
  }
}

}  // namespace

Result<PlanNotes> ApplyRunPlan(const Plan& plan, const std::string& plan_path,
                               const PlanFlagsGiven& given, bool local,
                               const std::vector<int>& allowed_cpus, RunFromPlan& run) {
  if (!plan.cut.runnable) {
    return Status::InvalidArgument(
        plan_path + ": the plan cuts the pipeline after stage " +
        std::to_string(plan.cut.after_stage) +
        ", which is not the cut pipeline.json makes (run follows the file: mark the stages after "
        "the cut \"on\": \"device\", or plan again without --all-cuts)");
  }
  PlanNotes notes;
  RunSpec& spec = run.spec;
  if (!given.pipeline) GM_RETURN_IF_ERROR(TakePipeline(plan, plan_path, spec));
  if (!given.workers) spec.workers = plan.run.workers;
  // A plan of an unchanged program priced on the native engine runs it there.
  if (!given.offload && !plan.run.offload.empty()) run.offload = plan.run.offload;
  // A plan of an unchanged program sizes its DataLoaders' virtual workers.
  if (!run.dataloader_workers && plan.run.dataloader_workers > 0 && run.offload != "off") {
    run.dataloader_workers = plan.run.dataloader_workers;
  }
  const bool plan_threads = !given.threads_per_worker;
  if (plan_threads) spec.threads_per_worker = plan.run.threads_per_worker;
  TakeSlots(plan, plan_threads, spec);
  int elsewhere = 0;
  for (const PlanWorker& w : plan.workers) elsewhere += w.on_trainer_node ? 0 : 1;
  if (elsewhere > 0 && local) {
    notes.warnings.push_back("run: the plan puts " + std::to_string(elsewhere) +
                             " worker(s) on other nodes; the local backend starts every worker "
                             "on this machine");
  }
  if (local && !given.trainer_cpus) TakeTrainerCpus(plan, allowed_cpus, run, notes);
  if (!given.world_size) spec.world_size = plan.run.world_size;
  if (spec.command.empty()) spec.command = plan.run.command;
  std::string threads;
  if (plan_threads && !plan.run.slots.empty()) {
    for (const WorkerSlot& s : spec.slots) {
      threads += (threads.empty() ? "" : "+") + std::to_string(s.threads);
    }
  }
  notes.info.push_back(
      "run: plan " + plan_path + ": " + std::to_string(spec.workers) + " worker(s), " +
      (threads.empty() ? std::to_string(spec.threads_per_worker) + " thread(s) each"
                       : threads + " thread(s)") +
      ", predicted " + std::to_string(static_cast<long long>(plan.prediction.samples_per_s)) +
      " samples/s (limit: " + plan.prediction.limit + ")");
  return notes;
}

}  // namespace gm
