// Fuzzes the planner's readers and model. The first byte chooses the input:
//   0: Slurm's text (scontrol nodes \0 scontrol partitions \0 sinfo GresUsed),
//   1: cluster.json, 2: plan.json.
// Any bytes must yield a value or a Status, never a crash, a hang or an exception.
// A cluster that was read is planned for (a fixed profile) and the plan must hold
// its invariants: it never promises more than the target, never gives a node more
// CPUs than it has free, and names a limit exactly when it falls short. A plan.json
// that was read must survive a round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "core/json.h"
#include "core/plan.h"
#include "planner/cluster.h"
#include "planner/model.h"
#include "planner/sbatch.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_plan: %s: %s\n", what, detail.c_str());
  std::abort();
}

gm::Profile FixedProfile() {
  gm::Profile p;
  p.created_utc = "2026-11-30T06:00:00Z";
  p.host = "h";
  p.verdict = "input-bound";
  gm::PipelineProfile pipe;
  pipe.path = "pipeline.json";
  pipe.cpu_s_per_sample = 0.01;
  pipe.runs = {{1, 100, 1, 1, 100, 100}, {4, 400, 1.25, 4, 320, 100}};
  pipe.peak_rss_bytes = 1ull << 30;
  gm::StageProfile s;
  s.name = "decode";
  s.cpu_s_per_sample = 0.01;
  s.bytes_out_per_sample = 150000;
  pipe.stages = {s};
  pipe.cuts = {{-1, true, 50000, 0, 0.01, ""}, {0, true, 150000, 0.01, 0, ""}};
  p.pipeline = pipe;
  gm::TrainerProfile t;
  t.command = {"train"};
  t.demand_samples_per_s = 3000;
  p.trainer = t;
  return p;
}

void CheckPlan(const gm::planner::Cluster& cluster, bool all_cuts) {
  static const gm::Profile profile = FixedProfile();
  gm::planner::PlanOptions o;
  o.all_cuts = all_cuts;
  o.nic_gbps = 1;
  auto plan = gm::planner::MakePlan(profile, cluster, o);
  if (!plan.ok()) return;
  const gm::PlanPrediction& pr = plan->prediction;
  const double target = plan->model.target_samples_per_s;
  if (pr.samples_per_s > target * (1 + 1e-9) + 1e-9) Fail("promises more than the target", "");
  if ((pr.limit == "none") != (pr.shortfall_samples_per_s <= 1e-6 * std::max(1.0, target))) {
    Fail("limit and shortfall disagree",
         pr.limit + " " + std::to_string(pr.shortfall_samples_per_s));
  }
  std::map<std::string, int> used;
  for (const gm::PlanWorker& w : plan->workers) {
    if (w.cpus < 1) Fail("a worker without CPUs", w.node);
    used[w.node] += w.cpus;
  }
  for (const gm::PlanTrainerNode& t : plan->trainer_nodes) used[t.name] += t.cpus;
  for (const auto& [name, cpus] : used) {
    for (const gm::planner::ClusterNode& n : cluster.nodes) {
      if (n.name == name && cpus > n.free_cpus()) {
        Fail("a node is given more CPUs than it has free", name);
      }
    }
  }
  (void)gm::planner::SbatchScript(*plan, {});
  auto back = gm::PlanFromJson(gm::PlanToJson(*plan), "plan");
  if (!back.ok() && plan->run.workers >= 1)
    Fail("a plan does not read back", back.status().message());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int mode = data[0] % 3;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode == 0) {
    const size_t a = text.find('\0');
    const size_t b = a == std::string_view::npos ? a : text.find('\0', a + 1);
    const std::string nodes(text.substr(0, a));
    const std::string parts(a == std::string_view::npos ? "" : text.substr(a + 1, b - a - 1));
    const std::string gres(b == std::string_view::npos ? "" : text.substr(b + 1));
    auto cluster = gm::planner::ClusterFromScontrol(nodes, parts, gres, "scontrol");
    if (cluster.ok()) CheckPlan(*cluster, false);
    return 0;
  }
  auto doc = gm::ParseJson(text, "fuzz.json");
  if (!doc.ok()) return 0;
  if (mode == 1) {
    auto cluster = gm::planner::ClusterFromJson(*doc, "cluster.json");
    if (!cluster.ok()) return 0;
    auto again = gm::planner::ClusterFromJson(gm::planner::ClusterToJson(*cluster), "cluster.json");
    if (!again.ok() || !(*again == *cluster)) Fail("cluster round trip", "");
    CheckPlan(*cluster, false);
    CheckPlan(*cluster, true);
    return 0;
  }
  auto plan = gm::PlanFromJson(*doc, "plan.json");
  if (!plan.ok()) return 0;
  const nlohmann::json written = gm::PlanToJson(*plan);
  auto again = gm::PlanFromJson(written, "again.json");
  if (!again.ok()) Fail("written plan does not read", again.status().message());
  if (!(*again == *plan)) Fail("round trip changed the plan", written.dump());
  return 0;
}
