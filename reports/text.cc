#include <string>

#include "core/text_format.h"
#include "reports/report.h"

namespace gm::reports {
namespace {

std::string Duration(double s) {
  const long long t = static_cast<long long>(s + 0.5);
  if (t < 60) return std::to_string(t) + " s";
  if (t < 3600) return std::to_string(t / 60) + " min " + std::to_string(t % 60) + " s";
  return std::to_string(t / 3600) + " h " + std::to_string(t % 3600 / 60) + " min";
}

std::string Join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

void RunText(const RunModel& m, std::string& out) {
  const RunRecord& r = m.run;
  const RunSummary s = Summarize(m);
  out += "run " + r.id + ": " + s.outcome + "\n";
  out += "  command    " + Join(r.command) + "\n";
  out += "  where      " + r.backend + " on " + r.host +
         (r.job_id ? ", Slurm job " + *r.job_id : std::string()) + ", " +
         std::to_string(r.world_size) + " trainer rank(s)\n";
  out += "  started    " + r.started_utc + (r.ended_utc ? ", ended " + *r.ended_utc : "") + " (" +
         Duration(s.duration_s) + " recorded)\n";
  out += "  delivered  " + SamplesPerS(s.samples_per_s_mean) + " on average, peak " +
         SamplesPerS(s.samples_per_s_peak) + "\n";
  out += "  data wait  " + Percent(s.data_wait_mean) + " of the trainer's time\n";
  out += "  workers    " + std::to_string(s.workers_started) + " started, at most " +
         std::to_string(s.workers_peak) + " at once, " + Fixed(s.worker_cpu_hours, 3) +
         " CPU-hours; " + std::to_string(s.scale_decisions) + " autoscaler decision(s)\n";
  if (s.elastic_workers > 0 || !m.pool_grants.empty()) {
    out += "  elastic    " + std::to_string(s.elastic_workers) + " worker job(s) of their own, " +
           std::to_string(s.preempted) + " preempted" +
           (m.pool_grants.empty()
                ? std::string()
                : "; the pool's grant changed " + std::to_string(m.pool_grants.size()) +
                      " time(s), last: " + std::to_string(m.pool_grants.back().extra_workers) +
                      " worker(s)") +
           "\n";
  }
  if (s.predicted_samples_per_s) {
    out += "  plan       " + SamplesPerS(*s.predicted_samples_per_s) + " predicted" +
           (s.measured_over_predicted
                ? ", measured " + Fixed(*s.measured_over_predicted, 2) + "x of it"
                : std::string()) +
           " (limit: " + m.plan->prediction.limit + ")\n";
    if (s.plan_gap) out += "             " + *s.plan_gap + "\n";
  } else if (!m.plan_problem.empty()) {
    out += "  plan       " + m.plan_problem + "\n";
  }
  if (!m.stage_costs.empty()) {
    out += "  stages     ";
    bool first = true;
    for (const StageProfile& st : m.stage_costs) {
      out += (first ? "" : ", ") + st.name + " " + Fixed(st.cpu_s_per_sample * 1e3, 3) + " ms";
      first = false;
    }
    out += " CPU per sample\n";
  }
}

}  // namespace

std::string RenderText(const ReportModel& report) {
  std::string out;
  for (size_t i = 0; i < report.runs.size(); ++i) {
    if (i > 0) out += "\n";
    RunText(report.runs[i], out);
  }
  if (report.profile) {
    const Profile& p = report.profile->profile;
    if (!out.empty()) out += "\n";
    out += "profile " + std::to_string(report.profile->id) + " (" + p.created_utc + ", " + p.host +
           "): " + p.verdict + ", input-bound " + Percent(p.input_bound_fraction) + "\n";
    if (p.pipeline) {
      out += "  pipeline   " + p.pipeline->path + ": " +
             Fixed(p.pipeline->cpu_s_per_sample * 1e3, 3) + " ms CPU per sample, " +
             SamplesPerS(p.pipeline->samples_per_s_per_core) + " per core\n";
    }
    if (p.trainer) {
      out += "  trainer    demand " + SamplesPerS(p.trainer->demand_samples_per_s) +
             ", delivered " + SamplesPerS(p.trainer->samples_per_s) + ", data wait " +
             Percent(p.trainer->stall_fraction) + "\n";
      if (p.trainer->gpu.available) {
        out += "  gpu        busy " + Percent(p.trainer->gpu.busy_fraction) + ", input stall " +
               Percent(p.trainer->gpu.stall_fraction) + "\n";
      }
    }
  }
  return out;
}

}  // namespace gm::reports
