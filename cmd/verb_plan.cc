// `goldminer plan`: from profile.json and a cluster (Slurm, a cluster.json, or this
// machine) to plan.json (how many data workers, their size, where, the cut, the
// prediction and the limit that binds), a row in runs.db, a summary and a job
// script. With --jobs, divides a pool of CPUs across several jobs. The model is
// planner/ (pure); this file reads the inputs and writes the outputs. See
// man/goldminer-plan.1.
#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <optional>

#include "cmd/cli.h"
#include "core/host.h"
#include "core/json.h"
#include "core/log.h"
#include "core/os/file_util.h"
#include "core/os/paths.h"
#include "core/store/sqlite_run_store.h"
#include "dataplane/shm.h"
#include "launcher/slurm_query.h"
#include "planner/cluster.h"
#include "planner/divide.h"
#include "planner/model.h"
#include "planner/sbatch.h"
#include "reports/plan_text.h"

namespace gm::cli {
namespace {

struct PlanFlags {
  std::string profile;
  std::string cluster;
  bool slurm = false;
  std::string partition;
  std::string gpu_partition;
  double target_rate = 0;  // 0: the trainer's demand
  int gpus = -1;
  int max_workers = 64;
  int cpus_per_worker = 4;
  double nic_gbps = 10;
  int trainer_cpus = 1;
  uint64_t epoch_samples = 0;
  bool all_cuts = false;
  bool best_effort = false;
  std::string out = "plan.json";
  std::string sbatch;
  std::string job_name = "goldminer";
  std::string time_limit;
  bool json = false;
  std::string db = "runs.db";
  bool no_db = false;
  std::vector<std::string> jobs;
  int cpus = 0;
  std::vector<std::string> command;
};

void Say(const std::string& line) { LogInfo("plan: " + line); }

// This machine as a one-node cluster: its usable CPUs, its memory and its GPUs
// (/dev/nvidiaN device files).
planner::Cluster LocalCluster() {
  planner::Cluster c;
  const std::string host = HostName();
  c.source = "local:" + host;
  c.partitions.push_back({"local", true, true});
  planner::ClusterNode n;
  n.name = host;
  n.partitions = {"local"};
  cpu_set_t set;
  CPU_ZERO(&set);
  n.cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? std::max(1, CPU_COUNT(&set)) : 1;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) {
    n.memory_mb = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / (1024 * 1024);
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
        name.find_first_not_of("0123456789", 6) == std::string::npos) {
      ++n.gpus;
    }
  }
  c.nodes.push_back(n);
  return c;
}

Result<planner::Cluster> ReadCluster(const PlanFlags& f) {
  if (f.slurm) {
    Say("reading the cluster from Slurm (scontrol show node/partition, sinfo GresUsed)");
    Result<planner::Cluster> cluster = AskCluster();
    if (!cluster.ok() && cluster.status().code() == Code::kNotFound) {
      return Status::NotFound("--slurm: " + cluster.status().message() + " (give --cluster)");
    }
    if (!cluster.ok()) return cluster.status().WithContext("--slurm");
    return cluster;
  }
  if (!f.cluster.empty()) {
    GM_ASSIGN_OR_RETURN(nlohmann::json doc, LoadJsonFile(f.cluster));
    return planner::ClusterFromJson(doc, f.cluster);
  }
  return LocalCluster();
}

Result<int> RunJobs(const PlanFlags& f) {
  if (f.cpus < 1) {
    LogError("--jobs needs --cpus N: the pool of CPUs to divide");
    return kExitUsage;
  }
  std::vector<planner::JobDemand> jobs;
  for (const std::string& path : f.jobs) {
    GM_ASSIGN_OR_RETURN(Profile p, LoadProfile(path));
    GM_ASSIGN_OR_RETURN(planner::CpuRate rate, planner::MeasuredCpuRate(p, path));
    if (!p.trainer || !(p.trainer->demand_samples_per_s > 0)) {
      return Status::InvalidArgument(path +
                                     " has no trainer part, so its demand is unknown; "
                                     "--jobs needs profiles made with a trainer command");
    }
    jobs.push_back(
        {path, p.trainer->demand_samples_per_s, rate.samples_per_s_per_cpu(f.cpus_per_worker)});
  }
  GM_ASSIGN_OR_RETURN(planner::Division d, planner::DivideCpus(jobs, f.cpus, f.cpus_per_worker));
  if (f.json) {
    std::cout << JsonText(reports::DivisionJson(d, jobs, f.cpus, f.cpus_per_worker), 2);
  } else {
    std::cout << reports::DivisionText(d, f.cpus);
  }
  return kExitOk;
}

Result<int> RunPlan(const PlanFlags& f) {
  if (!f.jobs.empty()) return RunJobs(f);
  if (f.profile.empty()) {
    LogError("plan needs --profile profile.json (or --jobs a.json b.json ... --cpus N)");
    return kExitUsage;
  }
  GM_RETURN_IF_ERROR(CheckWritable(f.out, "-o"));
  if (!f.sbatch.empty()) GM_RETURN_IF_ERROR(CheckWritable(f.sbatch, "--sbatch"));
  if (!f.no_db) GM_RETURN_IF_ERROR(CheckWritable(f.db, "--db"));
  GM_ASSIGN_OR_RETURN(Profile profile, LoadProfile(f.profile));
  GM_ASSIGN_OR_RETURN(planner::Cluster cluster, ReadCluster(f));

  planner::PlanOptions o;
  if (f.target_rate > 0) o.target_samples_per_s = f.target_rate;
  o.gpus = f.gpus;
  o.max_workers = f.max_workers;
  o.cpus_per_worker = f.cpus_per_worker;
  o.nic_gbps = f.nic_gbps;
  o.same_host = SameHostEnabled();  // as the trainer's client will find it
  o.trainer_cpus = f.trainer_cpus;
  o.partition = f.partition;
  o.gpu_partition = f.gpu_partition;
  o.all_cuts = f.all_cuts;
  if (f.epoch_samples > 0) o.epoch_samples = f.epoch_samples;
  o.command = f.command;
  o.profile_path = f.profile;
  o.created_utc = SystemUtcNow();
  o.goldminer_version = GOLDMINER_VERSION;
  GM_ASSIGN_OR_RETURN(Plan plan, planner::MakePlan(profile, cluster, o));
  if (plan.prediction.limit != "none" && o.target_samples_per_s && !f.best_effort) {
    return Status::InvalidArgument(
        "--target-rate " + std::to_string(static_cast<long long>(f.target_rate)) +
        " cannot be met: " + plan.prediction.limit + ": " + plan.prediction.limit_detail +
        ". Nothing was written; lower the target, or give --best-effort to write the best "
        "plan anyway");
  }
  if (plan.workers.empty()) {
    return Status::InvalidArgument("no worker fits in the cluster (" + cluster.source +
                                   "): " + plan.prediction.limit_detail + ". Nothing was written");
  }

  std::string script;
  if (!f.sbatch.empty()) {
    planner::SbatchOptions so;
    std::error_code ec;  // absolute() fails only without a working directory
    so.plan_path = std::filesystem::absolute(f.out, ec).string();
    if (ec) return Status::IoError(f.out + ": " + ec.message());
    so.job_name = f.job_name;
    so.time_limit = f.time_limit;
    const std::string self = ExecutablePath();
    so.goldminer = self.empty() ? "goldminer" : self;
    script = planner::SbatchScript(plan, so);
  }
  GM_RETURN_IF_ERROR(WriteFileAtomic(f.out, JsonText(PlanToJson(plan), 2)));
  Say("wrote " + f.out);
  if (!f.sbatch.empty()) {
    GM_RETURN_IF_ERROR(WriteFileAtomic(f.sbatch, script));
    std::error_code ec;
    std::filesystem::permissions(f.sbatch, std::filesystem::perms::owner_exec,
                                 std::filesystem::perm_options::add, ec);
    Say("wrote " + f.sbatch + " (submit it: sbatch " + f.sbatch + ")");
  }
  if (!f.no_db) {
    GM_ASSIGN_OR_RETURN(std::unique_ptr<SqliteRunStore> store, SqliteRunStore::Open(f.db));
    // A profile that cannot be looked up leaves the plan unlinked, not unrecorded.
    Result<std::optional<int64_t>> found = FindPlanProfile(*store, plan);
    const std::optional<int64_t> profile_id = found.ok() ? *found : std::nullopt;
    GM_ASSIGN_OR_RETURN(int64_t id, store->AddPlan(plan, profile_id));
    Say("recorded as plan " + std::to_string(id) + " in " + f.db +
        (profile_id ? " (from profile " + std::to_string(*profile_id) + ")" : ""));
  }
  if (f.json) {
    std::cout << JsonText(PlanToJson(plan), 2);
  } else {
    std::cout << reports::PlanText(plan);
  }
  return kExitOk;
}

}  // namespace

Verb PlanVerb() {
  return Verb{
      "plan", "Compute worker count, size, placement and cut; write plan.json + job.sbatch",
      [](CLI::App& sub) {
        auto f = std::make_shared<PlanFlags>();
        sub.add_option("--profile", f->profile, "profile.json to plan from (goldminer profile)")
            ->check(CLI::ExistingFile);
        auto* cluster = sub.add_option("--cluster", f->cluster,
                                       "cluster.json describing partitions and nodes (see "
                                       "goldminer-plan(1)); default: this machine")
                            ->check(CLI::ExistingFile);
        sub.add_flag("--slurm", f->slurm,
                     "Read partitions and nodes from Slurm (scontrol show node/partition)")
            ->excludes(cluster);
        sub.add_option("--partition", f->partition,
                       "Partition of CPU nodes for workers (default: the default partition)");
        sub.add_option("--gpu-partition", f->gpu_partition,
                       "Partition of the trainer's GPU nodes (default: the one with the most "
                       "free GPUs)");
        sub.add_option("--target-rate", f->target_rate,
                       "Samples/s to deliver (default: the trainer's demand from the profile); "
                       "a target the cluster cannot meet is an error unless --best-effort")
            ->check(CLI::Range(1e-6, 1e12));
        sub.add_option("--gpus", f->gpus,
                       "GPUs (trainer ranks) the trainer uses (default: 1 if the cluster has "
                       "GPUs, else 0)")
            ->check(CLI::Range(0, 4096));
        sub.add_option("--max-workers", f->max_workers, "Most data workers to plan")
            ->capture_default_str()
            ->check(CLI::Range(1, 1024));
        sub.add_option("--cpus-per-worker", f->cpus_per_worker,
                       "CPUs (and stage threads) of each worker on a CPU node; workers on the "
                       "trainer's node take what is spare, up to this")
            ->capture_default_str()
            ->check(CLI::Range(1, 1024));
        sub.add_option("--nic-gbps", f->nic_gbps,
                       "NIC speed of nodes whose speed the cluster does not give, Gb/s")
            ->capture_default_str()
            ->check(CLI::Range(0.001, 100000.0));
        sub.add_option("--trainer-cpus", f->trainer_cpus,
                       "CPUs kept for each trainer process on its node")
            ->capture_default_str()
            ->check(CLI::Range(0, 1024));
        sub.add_option("--epoch-samples", f->epoch_samples,
                       "Samples per epoch, for the CPU-hours per epoch prediction")
            ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 50));
        sub.add_flag("--all-cuts", f->all_cuts,
                     "Also choose cuts other than the one pipeline.json makes (run follows "
                     "the file: mark the stages after the cut \"on\": \"device\" to run one; "
                     "for comparison until then)");
        sub.add_flag("--best-effort", f->best_effort,
                     "With --target-rate: write the best plan even when the target cannot be met");
        sub.add_option("-o,--output", f->out, "Where to write plan.json")->capture_default_str();
        sub.add_option("--sbatch", f->sbatch,
                       "Also write a job script that runs `goldminer run --plan` (a "
                       "heterogeneous job when workers go to CPU nodes)");
        sub.add_option("--job-name", f->job_name, "The job script's --job-name")
            ->capture_default_str();
        sub.add_option("--time", f->time_limit, "The job script's --time (e.g. 04:00:00)");
        sub.add_flag("--json", f->json, "Print plan.json on stdout instead of the summary");
        sub.add_option("--db", f->db, "runs.db to record the plan in (SQLite)")
            ->capture_default_str();
        sub.add_flag("--no-db", f->no_db, "Do not record the plan in a runs.db");
        sub.add_option("--jobs", f->jobs,
                       "Several profile.json files: divide --cpus across these jobs instead")
            ->check(CLI::ExistingFile);
        sub.add_option("--cpus", f->cpus, "With --jobs: the pool of CPUs to divide")
            ->check(CLI::Range(1, 10000000));
        sub.add_option("command", f->command,
                       "Trainer command for the job script, after -- (default: the profile's)");
        return std::function<Result<int>()>([f]() { return RunPlan(*f); });
      }};
}

}  // namespace gm::cli
