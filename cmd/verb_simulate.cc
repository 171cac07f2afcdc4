// `goldminer simulate`: replays a cluster trace under several policies of data
// workers (static, job, cluster) and compares them. The model is simulator/
// (pure); this file reads the CSV files, writes sim.json and prints the
// comparison. See man/goldminer-simulate.1.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cmd/cli.h"
#include "core/json.h"
#include "core/log.h"
#include "core/os/file_util.h"
#include "core/profile.h"
#include "core/store/sqlite_run_store.h"
#include "reports/sim_text.h"
#include "simulator/sim.h"
#include "simulator/trace.h"

namespace gm::cli {
namespace {

// The curve families of a --curves file (simulator/sim.h, ParseCurves).
Result<std::vector<sim::Family>> LoadCurves(const std::string& path) {
  GM_ASSIGN_OR_RETURN(nlohmann::json doc, LoadJsonFile(path));
  return sim::ParseCurves(doc, path);
}

// One curve family per goldminer profile in `dir` (its *.json files, by name:
// the family is the file's stem), in equal shares of the mix.
Result<std::vector<sim::Family>> LoadProfiles(const std::string& dir) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") {
      paths.push_back(entry.path().string());
    }
  }
  if (ec) return Status::IoError("--profiles " + dir + ": " + ec.message());
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) {
    return Status::InvalidArgument(
        "--profiles " + dir + ": no *.json profile in it (goldminer profile -o DIR/NAME.json)");
  }
  std::vector<sim::Family> out;
  for (const std::string& path : paths) {
    GM_ASSIGN_OR_RETURN(Profile profile, LoadProfile(path));
    GM_ASSIGN_OR_RETURN(
        sim::Family f,
        sim::FamilyFromProfile(profile, std::filesystem::path(path).stem().string(), path));
    f.share = 1.0 / static_cast<double>(paths.size());
    out.push_back(std::move(f));
  }
  return out;
}

struct SimulateFlags {
  std::string trace;
  std::string nodes;
  int gpus = 0;
  double load = 1;
  std::string policies = "static,job,cluster";
  uint64_t seed = 1;
  double trainer_cpus_per_gpu = 1;
  double nic_gbps = 25;
  double node_cpus_per_gpu = 0;
  double min_gain = 0.02;
  double min_lifetime_s = 60;
  double task_start_s = 0;
  double worker_delay_s = 0;
  std::string out = "sim.json";
  std::string tasks;  // a CSV of every GPU task's times; empty: none
  bool json = false;
  std::string curves;    // a JSON file of curve families; empty: the defaults
  std::string profiles;  // a folder of profile.json files, one family each
  std::string db;        // runs.db to record the simulation in; empty: none
};

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Result<int> RunSimulate(const SimulateFlags& f) {
  sim::SimOptions o;
  o.policies = SplitList(f.policies);
  o.gpus = f.gpus;
  o.load = f.load;
  o.seed = f.seed;
  o.trainer_cpus_per_gpu = f.trainer_cpus_per_gpu;
  o.nic_gbps = f.nic_gbps;
  o.node_cpus_per_gpu = f.node_cpus_per_gpu;
  o.pool.min_gain = f.min_gain;
  o.pool.min_lifetime_s = f.min_lifetime_s;
  o.task_start_s = f.task_start_s;
  o.worker_delay_s = f.worker_delay_s;
  if (!f.curves.empty() && !f.profiles.empty()) {
    return Status::InvalidArgument(
        "--curves and --profiles both give the curve families: give one of them");
  }
  if (!f.curves.empty()) {
    GM_ASSIGN_OR_RETURN(o.families, LoadCurves(f.curves));
  }
  if (!f.profiles.empty()) {
    GM_ASSIGN_OR_RETURN(o.families, LoadProfiles(f.profiles));
  }
  GM_RETURN_IF_ERROR(CheckWritable(f.out, "-o"));
  if (!f.tasks.empty()) GM_RETURN_IF_ERROR(CheckWritable(f.tasks, "--tasks"));
  if (!f.db.empty()) GM_RETURN_IF_ERROR(CheckWritable(f.db, "--db"));
  GM_ASSIGN_OR_RETURN(std::string trace_text, ReadFile(f.trace));
  GM_ASSIGN_OR_RETURN(sim::Trace trace, sim::ParseTrace(trace_text, f.trace));
  GM_ASSIGN_OR_RETURN(std::string nodes_text, ReadFile(f.nodes));
  GM_ASSIGN_OR_RETURN(std::vector<sim::SimNode> nodes, sim::ParseNodes(nodes_text, f.nodes));
  LogInfo("simulate: " + std::to_string(trace.tasks.size()) + " task(s) of " + f.trace + ", " +
          std::to_string(nodes.size()) + " node(s) of " + f.nodes + "; policies " + f.policies);
  const auto start = std::chrono::steady_clock::now();
  GM_ASSIGN_OR_RETURN(sim::SimResult result, sim::Simulate(trace, nodes, o));
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.nodes_origin = f.nodes;
  uint64_t events = 0;
  for (const sim::PolicyResult& p : result.policies) events += p.events;
  char rate[128];
  std::snprintf(rate, sizeof(rate), "simulate: %llu events in %.3f s (%.0f events/s)",
                static_cast<unsigned long long>(events), wall, wall > 0 ? events / wall : 0.0);
  LogInfo(rate);
  const nlohmann::json doc = sim::SimToJson(result);
  GM_RETURN_IF_ERROR(WriteFileAtomic(f.out, JsonText(doc, 2)));
  LogInfo("simulate: wrote " + f.out);
  if (!f.tasks.empty()) {
    GM_RETURN_IF_ERROR(WriteFileAtomic(f.tasks, sim::TasksCsv(result)));
    LogInfo("simulate: wrote " + f.tasks);
  }
  if (!f.db.empty()) {
    GM_ASSIGN_OR_RETURN(std::unique_ptr<SqliteRunStore> store, SqliteRunStore::Open(f.db));
    SimulationRecord r;
    r.trace = f.trace;
    r.nodes = f.nodes;
    r.gpus = result.gpus;
    r.load = f.load;
    r.seed = static_cast<int64_t>(f.seed);
    r.policies = f.policies;
    const nlohmann::json& ratios = doc["ratios"];
    if (ratios.contains("jct_static_over_cluster"))
      r.jct_static_over_cluster = ratios["jct_static_over_cluster"].get<double>();
    if (ratios.contains("gpu_util_effective_cluster_over_static")) {
      r.gpu_util_effective_cluster_over_static =
          ratios["gpu_util_effective_cluster_over_static"].get<double>();
    }
    r.json = doc.dump();
    GM_ASSIGN_OR_RETURN(int64_t id, store->AddSimulation(r));
    LogInfo("simulate: recorded as simulation " + std::to_string(id) + " in " + f.db +
            " (goldminer report --db " + f.db + " --sim " + std::to_string(id) + ")");
  }
  std::cout << (f.json ? JsonText(doc, 2) : reports::SimText(doc));
  return kExitOk;
}

// The model's flags: the trainers', the network's, the what-if's, the pool's
// hysteresis, and the start-up and worker delays.
void AddModelFlags(CLI::App& sub, SimulateFlags& f) {
  sub.add_option("--trainer-cpus-per-gpu", f.trainer_cpus_per_gpu,
                 "CPUs a task keeps for its trainer under job and cluster (at least 1; "
                 "0: trainers hold none, the trace's CPUs are its data workers' only)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1024.0));
  sub.add_option("--nic-gbps", f.nic_gbps,
                 "Each node's NIC: what workers off a task's node can send it")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
  sub.add_option("--node-cpus-per-gpu", f.node_cpus_per_gpu,
                 "What if GPU nodes were short of CPUs: each GPU node gets this many CPUs "
                 "per GPU, and a GPU task asks at most that many (0: as the node list says)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1024.0));
  sub.add_option("--min-gain", f.min_gain,
                 "cluster: a new division of the pool is applied only when it is worth "
                 "this fraction more than the current one")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub.add_option("--min-worker-lifetime", f.min_lifetime_s,
                 "cluster: seconds a worker CPU is kept at least, unless a task being "
                 "admitted takes it back")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  sub.add_option("--task-start", f.task_start_s,
                 "Seconds a GPU task makes no progress after it starts (its processes' "
                 "start), under every policy")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  sub.add_option("--worker-delay", f.worker_delay_s,
                 "cluster: seconds before worker CPUs granted to a running task beyond "
                 "its baseline feed it (a worker job's start and the run's autoscaler's "
                 "first decision, three of its --scale-period after its first data)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
}

}  // namespace

Verb SimulateVerb() {
  return Verb{
      "simulate",
      "Replay a cluster trace under data-worker policies (static, job, cluster) side by side",
      [](CLI::App& sub) {
        auto f = std::make_shared<SimulateFlags>();
        sub.add_option("--trace", f->trace,
                       "The tasks: Alibaba's v2023 pod list, a Slurm history, or a CSV of "
                       "submit_s, duration_s, gpus, cpus[, memory_mib, class, samples] (see "
                       "goldminer-simulate(1))")
            ->required()
            ->check(CLI::ExistingFile);
        sub.add_option("--nodes", f->nodes,
                       "The nodes: Alibaba's v2023 node list, or a CSV of name, cpus, "
                       "memory_mib, gpus")
            ->required()
            ->check(CLI::ExistingFile);
        sub.add_option("--gpus", f->gpus,
                       "Draw GPU nodes (seeded) until this many GPUs and replay the whole "
                       "trace on them (0: the whole cluster; the paper's scale is 64)")
            ->capture_default_str()
            ->check(CLI::Range(0, 10000000));
        sub.add_option("--load", f->load,
                       "Divide the arrival times by this: 2 submits the same tasks twice as "
                       "fast")
            ->capture_default_str()
            ->check(CLI::Range(1e-6, 1e6));
        sub.add_option("--policy", f->policies,
                       "Policies to compare, comma-separated: static (CPUs as asked, on the "
                       "GPU's node), job (goldminer inside each job's allocation), cluster (a "
                       "pool of every idle CPU divided between jobs)")
            ->capture_default_str();
        sub.add_option("--seed", f->seed,
                       "Seed of the node draw, the task sample and the curve families' mix")
            ->capture_default_str();
        AddModelFlags(sub, *f);
        sub.add_option("--db", f->db,
                       "Also record the simulation in this runs.db (created if missing); "
                       "goldminer report --db FILE --sim ID shows it");
        sub.add_option("--profiles", f->profiles,
                       "Curve families from goldminer profiles instead of the defaults: every "
                       "*.json profile in DIR is a family (its name: the file's stem) in equal "
                       "shares of the mix")
            ->check(CLI::ExistingDirectory);
        sub.add_option("--curves", f->curves,
                       "Curve families instead of the defaults: a JSON file {\"families\": "
                       "[{name, cpus_per_gpu, samples_per_s_per_gpu, bytes_per_sample, "
                       "share}]} (a trace's class names one; share: of the tasks without one)")
            ->check(CLI::ExistingFile);
        sub.add_option("-o,--output", f->out, "Where to write sim.json")->capture_default_str();
        sub.add_option("--tasks", f->tasks,
                       "Also write every GPU task's times under every policy to this CSV "
                       "(policy, line, family, submit_s, start_s, end_s, jct_s)");
        sub.add_flag("--json", f->json, "Print sim.json on stdout instead of the comparison");
        return [f]() { return RunSimulate(*f); };
      }};
}

}  // namespace gm::cli
