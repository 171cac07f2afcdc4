#include "reports/report.h"

namespace gm::reports {
namespace {

using nlohmann::json;

template <typename T>
json Opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json StagesJson(const std::vector<StageProfile>& stages) {
  json out = json::array();
  for (const StageProfile& s : stages) {
    out.push_back({{"index", s.index},
                   {"name", s.name},
                   {"cpu_s_per_sample", s.cpu_s_per_sample},
                   {"cpu_share", s.cpu_share},
                   {"bytes_out_per_sample", s.bytes_out_per_sample}});
  }
  return out;
}

json RunJson(const RunModel& m) {
  const RunRecord& r = m.run;
  const RunSummary s = Summarize(m);
  json run = {{"id", r.id},
              {"status", r.status},
              {"outcome", s.outcome},
              {"started_utc", r.started_utc},
              {"ended_utc", Opt(r.ended_utc)},
              {"exit_code", Opt(r.exit_code)},
              {"backend", r.backend},
              {"job_id", Opt(r.job_id)},
              {"host", r.host},
              {"command", r.command},
              {"world_size", r.world_size},
              {"pipeline_path", r.pipeline_path},
              {"plan_path", r.plan_path}};
  json summary = {{"duration_s", s.duration_s},
                  {"samples_per_s_mean", s.samples_per_s_mean},
                  {"samples_per_s_peak", s.samples_per_s_peak},
                  {"data_wait_mean", s.data_wait_mean},
                  {"worker_cpu_hours", s.worker_cpu_hours},
                  {"workers_peak", s.workers_peak},
                  {"workers_started", s.workers_started},
                  {"scale_decisions", s.scale_decisions},
                  {"elastic_workers", s.elastic_workers},
                  {"preempted", s.preempted},
                  {"predicted_samples_per_s", Opt(s.predicted_samples_per_s)},
                  {"measured_over_predicted", Opt(s.measured_over_predicted)},
                  {"plan_gap", Opt(s.plan_gap)}};
  json series = json::object();
  for (const auto& [name, points] : m.series) {
    json pts = json::array();
    for (const Point& p : Downsample(points, kMaxChartPoints)) pts.push_back({p.t_s, p.value});
    series[name] = {{"points_recorded", points.size()}, {"points", pts}};
  }
  json workers = json::array();
  for (const WorkerRecord& w : m.workers) {
    workers.push_back({{"worker_id", w.worker_id},
                       {"host", w.host},
                       {"step_id", Opt(w.step_id)},
                       {"elastic", w.elastic},
                       {"started_utc", w.started_utc},
                       {"ended_utc", Opt(w.ended_utc)},
                       {"exit", Opt(w.exit)}});
  }
  json events = json::array();
  for (const EventRecord& e : m.events) {
    events.push_back({{"t_utc", e.t_utc}, {"kind", e.kind}, {"message", e.message}});
  }
  json grants = json::array();
  for (const PoolGrantRecord& g : m.pool_grants) {
    json inputs = json::parse(g.report_json, nullptr, false);
    if (inputs.is_discarded()) inputs = nullptr;  // a hand-edited row
    grants.push_back({{"t_utc", g.t_utc},
                      {"extra_workers", g.extra_workers},
                      {"cpus", g.cpus},
                      {"held_workers", g.held_workers},
                      {"reason", g.reason},
                      {"report", inputs}});
  }
  json plan = nullptr;
  if (m.plan) {
    plan = {{"samples_per_s", m.plan->prediction.samples_per_s},
            {"limit", m.plan->prediction.limit},
            {"workers", m.plan->run.workers},
            {"worker_cpus", m.plan->prediction.worker_cpus}};
  }
  return {{"run", run},
          {"summary", summary},
          {"series", series},
          {"stage_costs", StagesJson(m.stage_costs)},
          {"workers", workers},
          {"events", events},
          {"pool_grants", grants},
          {"plan", plan},
          {"plan_problem", m.plan_problem}};
}

}  // namespace

nlohmann::json RenderJson(const ReportModel& report) {
  json runs = json::array();
  for (const RunModel& m : report.runs) runs.push_back(RunJson(m));
  json out = {{"schema", kReportSchema},
              {"version", kReportVersion},
              {"generated_utc", report.generated_utc},
              {"source", report.source},
              {"runs", runs},
              {"profile", nullptr}};
  if (report.profile) {
    out["profile"] = {{"id", report.profile->id},
                      {"profile", ProfileToJson(report.profile->profile)}};
  }
  return out;
}

}  // namespace gm::reports
