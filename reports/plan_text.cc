#include "reports/plan_text.h"

#include <cstdio>
#include <map>

#include "core/text_format.h"

namespace gm::reports {
namespace {

std::string Rate(double v) { return SamplesPerS(v); }

std::string Bytes(double v) {
  if (v >= 1e6) return Fixed(v / 1e6, 2) + " MB";
  if (v >= 1e3) return Fixed(v / 1e3, 1) + " kB";
  return Fixed(v, 0) + " B";
}

std::string CutName(int after_stage) {
  return after_stage < 0 ? "before stage 0 (raw records)"
                         : "after stage " + std::to_string(after_stage);
}

}  // namespace

std::string PlanText(const Plan& p) {
  const PlanModel& m = p.model;
  const PlanPrediction& pr = p.prediction;
  std::string s;
  s += "plan: " + std::to_string(p.workers.size()) + " worker(s), " +
       std::to_string(pr.worker_cpus) + " worker CPU(s), for " + Rate(pr.samples_per_s);
  if (m.demand_samples_per_s && *m.demand_samples_per_s > 0) {
    s += " (" + Fixed(100 * pr.samples_per_s / *m.demand_samples_per_s, 0) +
         "% of the trainer's demand of " + Rate(*m.demand_samples_per_s) + ")";
  }
  s += "\n";
  s += "  target:     " + Rate(m.target_samples_per_s) + " (" + m.target_source + ")\n";
  if (pr.limit == "none") {
    s += "  limit:      none: the target is met\n";
  } else {
    s += "  limit:      " + pr.limit + ": " + pr.limit_detail + "\n";
  }
  s += "  trainer:    ";
  for (size_t i = 0; i < p.trainer_nodes.size(); ++i) {
    const PlanTrainerNode& t = p.trainer_nodes[i];
    s += (i ? ", " : "") + t.name + " (" + std::to_string(t.gpus) + " GPU(s), " +
         std::to_string(t.cpus) + " CPU(s) kept)";
  }
  s += "\n  workers:\n";
  std::map<std::string, std::pair<int, double>> per_node;
  for (const PlanWorker& w : p.workers) {
    char line[256];
    std::snprintf(
        line, sizeof line, "    %-16s %3d CPU(s)  %-22s %10s\n", w.node.c_str(), w.cpus,
        w.on_trainer_node ? "on the trainer's node" : ("partition " + w.partition).c_str(),
        Rate(w.samples_per_s).c_str());
    s += line;
  }
  if (p.workers.empty()) s += "    (none)\n";
  s += "  cut:        " + CutName(p.cut.after_stage) + ", " + Bytes(p.cut.bytes_per_sample) +
       " per sample on the wire, " + Fixed(pr.network_bytes_per_s * 8 / 1e9, 2) +
       " Gb/s across NICs" + (p.cut.runnable ? "" : " (not pipeline.json's cut: see the note)") +
       "\n";
  s += "  model:      " + Fixed(m.worker_cpu_s_per_sample * 1e3, 3) +
       " ms worker CPU per sample, scaling efficiency " + Fixed(m.scaling_efficiency, 2) + " -> " +
       Rate(m.samples_per_s_per_cpu) + " per worker CPU; the target needs " +
       Fixed(m.cpus_needed, 1) + " CPUs\n";
  s += "  prediction: " + Rate(pr.samples_per_s);
  if (pr.stall_fraction) s += ", trainer stall " + Percent(*pr.stall_fraction);
  s += ", " + Fixed(pr.cpu_hours_per_million_samples, 2) + " CPU-hours per million samples";
  if (pr.cpu_hours_per_epoch) {
    s += ", " + Fixed(*pr.cpu_hours_per_epoch, 3) + " CPU-hours per epoch of " +
         std::to_string(*pr.epoch_samples) + " samples";
  }
  s += "\n";
  if (p.cuts.size() > 1) {
    s += "  cuts:\n";
    for (const PlanCutOption& c : p.cuts) {
      char line[256];
      std::snprintf(line, sizeof line, "    %s %-30s %10s  %12s  limit %s%s\n",
                    c.chosen ? "*" : " ", CutName(c.after_stage).c_str(),
                    Bytes(c.bytes_per_sample).c_str(), Rate(c.samples_per_s).c_str(),
                    c.limit.c_str(), c.runnable ? "" : " (not pipeline.json's cut)");
      s += line;
    }
  }
  for (const std::string& note : p.notes) s += "  note: " + note + "\n";
  return s;
}

std::string DivisionText(const Division& d, int cpus) {
  std::string s = "division of " + std::to_string(cpus) +
                  " CPU(s) by marginal gain in normalised "
                  "throughput:\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %-28s %5s %8s %14s %7s %14s %8s\n", "job", "CPUs", "workers",
                "samples/s", "of need", "equal split", "speed-up");
  s += line;
  for (const JobShare& j : d.jobs) {
    std::snprintf(line, sizeof line, "  %-28s %5d %8d %14.1f %6.0f%% %14.1f %7.2fx\n",
                  j.name.c_str(), j.cpus, j.workers, j.samples_per_s, 100 * j.normalized,
                  j.equal_samples_per_s, j.speedup);
    s += line;
  }
  std::snprintf(line, sizeof line,
                "  sum of normalised throughput: %.2f (equal split: %.2f); %d CPU(s) unused\n",
                d.normalized_sum, d.equal_normalized_sum, d.cpus_unused);
  s += line;
  return s;
}

nlohmann::json DivisionJson(const Division& d, const std::vector<JobDemand>& jobs, int cpus,
                            int cpus_per_worker) {
  nlohmann::json j = {{"schema", "goldminer.division"},
                      {"version", 1},
                      {"cpus", cpus},
                      {"cpus_per_worker", cpus_per_worker},
                      {"cpus_unused", d.cpus_unused},
                      {"normalized_sum", d.normalized_sum},
                      {"equal_normalized_sum", d.equal_normalized_sum}};
  j["jobs"] = nlohmann::json::array();
  for (size_t i = 0; i < d.jobs.size() && i < jobs.size(); ++i) {
    const JobShare& s = d.jobs[i];
    j["jobs"].push_back({{"profile", s.name},
                         {"demand_samples_per_s", jobs[i].demand_samples_per_s},
                         {"samples_per_s_per_cpu", jobs[i].samples_per_s_per_cpu},
                         {"cpus", s.cpus},
                         {"workers", s.workers},
                         {"samples_per_s", s.samples_per_s},
                         {"normalized", s.normalized},
                         {"equal_cpus", s.equal_cpus},
                         {"equal_samples_per_s", s.equal_samples_per_s},
                         {"speedup", s.speedup}});
  }
  return j;
}

}  // namespace gm::reports
