// The report as one self-contained HTML page: inline CSS, inline SVG charts, no
// script and nothing fetched, so it reads offline and can be attached to a ticket.
// Hover shows each autoscaler decision's reason (SVG <title>).
#include <algorithm>
#include <cmath>
#include <string>

#include "core/text_format.h"
#include "reports/report.h"

namespace gm::reports {
namespace {

constexpr double kW = 760, kH = 210;                                // a chart's size
constexpr double kLeft = 56, kRight = 56, kTop = 26, kBottom = 30;  // its margins

const char* kStyle = R"css(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d2430;margin:0;background:#f6f7f9}
main{max-width:980px;margin:0 auto;padding:18px 24px 40px}
h1{font-size:22px;margin:8px 0 2px}h2{font-size:18px;margin:28px 0 8px;border-top:1px solid #d5d9e0;padding-top:18px}
h3{font-size:15px;margin:18px 0 6px}
.meta{color:#5b6472;margin:0 0 10px}
table{border-collapse:collapse;background:#fff;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #dde1e7;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:8px 0 14px;background:#fff;border:1px solid #dde1e7;padding:6px}
figcaption{font-size:12px;color:#5b6472;margin:2px 4px}
.ok{color:#1a7f37}.bad{color:#c62828}.warn{color:#a15c00}
svg text{font:11px system-ui,sans-serif;fill:#5b6472}
code{font:12px ui-monospace,monospace;background:#eef1f5;padding:0 3px}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}
)css";

std::string E(const std::string& s) { return EscapeHtml(s); }

// A round number >= v for an axis' top.
double NiceTop(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

struct Axis {
  double t_max = 1;
  double X(double t) const {
    return kLeft + (kW - kLeft - kRight) * std::clamp(t / t_max, 0.0, 1.0);
  }
};
double Y(double v, double top) {
  return kTop + (kH - kTop - kBottom) * (1 - std::clamp(v / top, 0.0, 1.0));
}

std::string Polyline(const std::vector<Point>& pts, const Axis& ax, double top, const char* color,
                     const char* cls, bool step) {
  std::string p;
  double prev_y = -1;
  for (const Point& q : pts) {
    const double x = ax.X(q.t_s), y = Y(q.value, top);
    if (step && prev_y >= 0) p += Fixed(x, 1) + "," + Fixed(prev_y, 1) + " ";
    p += Fixed(x, 1) + "," + Fixed(y, 1) + " ";
    prev_y = y;
  }
  return "<polyline class=\"" + std::string(cls) + "\" data-points=\"" +
         std::to_string(pts.size()) + "\" fill=\"none\" stroke=\"" + color +
         "\" stroke-width=\"1.6\" points=\"" + p + "\"/>";
}

std::string Frame(const Axis& ax, double top, const std::string& left_label,
                  const std::string& right_label, bool right_pct) {
  std::string s;
  const double x0 = kLeft, x1 = kW - kRight, y0 = kTop, y1 = kH - kBottom;
  s += "<rect x=\"" + Fixed(x0, 0) + "\" y=\"" + Fixed(y0, 0) + "\" width=\"" + Fixed(x1 - x0, 0) +
       "\" height=\"" + Fixed(y1 - y0, 0) + "\" fill=\"none\" stroke=\"#dde1e7\"/>";
  for (int i = 0; i <= 4; ++i) {
    const double v = top * i / 4, y = Y(v, top);
    s += "<line x1=\"" + Fixed(x0, 0) + "\" x2=\"" + Fixed(x1, 0) + "\" y1=\"" + Fixed(y, 1) +
         "\" y2=\"" + Fixed(y, 1) + "\" stroke=\"#eef1f5\"/>";
    s += "<text x=\"" + Fixed(x0 - 4, 0) + "\" y=\"" + Fixed(y + 4, 1) + "\" text-anchor=\"end\">" +
         (v >= 100 ? Fixed(v, 0) : Fixed(v, v >= 10 ? 0 : 1)) + "</text>";
    if (!right_label.empty()) {
      s += "<text x=\"" + Fixed(x1 + 4, 0) + "\" y=\"" + Fixed(y + 4, 1) + "\">" +
           (right_pct ? std::to_string(i * 25) + "%" : "") + "</text>";
    }
  }
  for (int i = 0; i <= 5; ++i) {
    const double t = ax.t_max * i / 5;
    s += "<text x=\"" + Fixed(ax.X(t), 1) + "\" y=\"" + Fixed(kH - 12, 0) +
         "\" text-anchor=\"middle\">" + Fixed(t, t >= 100 ? 0 : 1) + " s</text>";
  }
  s += "<text x=\"6\" y=\"14\">" + E(left_label) + "</text>";
  if (!right_label.empty()) {
    s += "<text x=\"" + Fixed(kW - 4, 0) + "\" y=\"14\" text-anchor=\"end\">" + E(right_label) +
         "</text>";
  }
  return s;
}

std::string Svg(const std::string& body) {
  return "<svg viewBox=\"0 0 " + Fixed(kW, 0) + " " + Fixed(kH, 0) +
         "\" width=\"100%\" role=\"img\">" + body + "</svg>";
}

const std::vector<Point>& Series(const RunModel& m, const std::string& name) {
  static const std::vector<Point> kNone;
  auto it = m.series.find(name);
  return it == m.series.end() ? kNone : it->second;
}

std::string ThroughputChart(const RunModel& m, size_t n, const Axis& ax) {
  const std::vector<Point> rate = Downsample(Series(m, "samples_per_s"), kMaxChartPoints);
  std::vector<Point> wait = Downsample(Series(m, "data_wait_fraction"), kMaxChartPoints);
  double peak = 0;
  for (const Point& p : rate) peak = std::max(peak, p.value);
  const double top = NiceTop(peak);
  for (Point& p : wait) p.value *= top;  // 0..1 on the right axis
  std::string body = Frame(ax, top, "samples/s", "data wait", true);
  body += Polyline(rate, ax, top, "#1f6feb", "rate", false);
  body += Polyline(wait, ax, top, "#d1242f", "wait", false);
  return "<figure class=\"chart\" id=\"chart-throughput-" + std::to_string(n) +
         "\" data-points=\"" + std::to_string(rate.size()) + "\">" + Svg(body) +
         "<figcaption class=\"legend\"><span><i class=\"sw\" style=\"background:#1f6feb\"></i>"
         "samples/s delivered to the trainer</span><span><i class=\"sw\" "
         "style=\"background:#d1242f\">"
         "</i>the trainer's data wait (right axis)</span></figcaption></figure>";
}

std::string WorkersChart(const RunModel& m, size_t n, const Axis& ax) {
  const std::vector<Point> workers = Downsample(Series(m, "workers"), kMaxChartPoints);
  double peak = 1;
  for (const Point& p : workers) peak = std::max(peak, p.value);
  const double top = std::max(2.0, std::ceil(peak + 1));
  std::string body = Frame(ax, top, "workers", "", false);
  body += Polyline(workers, ax, top, "#2da44e", "workers", true);
  // The autoscaler's decisions, the pool's grants and the preemptions of elastic
  // worker jobs, where they happened; hover shows the reason.
  const std::optional<double> start = UtcSeconds(m.run.started_utc);
  size_t marks = 0, pool_marks = 0, preempt_marks = 0;
  for (const EventRecord& e : m.events) {
    const bool preempted =
        e.kind == "worker" && e.message.find("its job was preempted") != std::string::npos;
    if ((e.kind != "scale" && e.kind != "pool" && !preempted) || !start) continue;
    const std::optional<double> at = UtcSeconds(e.t_utc);
    if (!at) continue;
    const double x = ax.X(*at - *start);
    const char* color = e.kind == "pool"                                ? "#0969da"
                        : preempted                                     ? "#d1242f"
                        : e.message.find("adding") != std::string::npos ? "#8250df"
                                                                        : "#a15c00";
    const std::string cls = e.kind == "pool" ? "pool" : preempted ? "preempted" : "decision";
    // Pool marks sit lower on the line, preemptions lowest: they may share a moment.
    const double cy = kTop + (e.kind == "pool" ? 18 : preempted ? 30 : 6);
    body += "<g class=\"" + cls + "\"><title>" + E(e.t_utc + ": " + e.message) +
            "</title><line x1=\"" + Fixed(x, 1) + "\" x2=\"" + Fixed(x, 1) + "\" y1=\"" +
            Fixed(kTop, 0) + "\" y2=\"" + Fixed(kH - kBottom, 0) + "\" stroke=\"" + color +
            "\" stroke-dasharray=\"3,3\"/><circle cx=\"" + Fixed(x, 1) + "\" cy=\"" + Fixed(cy, 0) +
            "\" r=\"5\" fill=\"" + color + "\"/></g>";
    (e.kind == "pool" ? pool_marks : preempted ? preempt_marks : marks) += 1;
  }
  std::string legend =
      "<span><i class=\"sw\" style=\"background:#2da44e\"></i>workers running</span>"
      "<span><i class=\"sw\" style=\"background:#8250df\"></i>autoscaler added</span>"
      "<span><i class=\"sw\" style=\"background:#a15c00\"></i>autoscaler drained (hover a mark "
      "for its reason)</span>";
  if (pool_marks > 0) {
    legend += "<span><i class=\"sw\" style=\"background:#0969da\"></i>the pool's grant</span>";
  }
  if (preempt_marks > 0) {
    legend +=
        "<span><i class=\"sw\" style=\"background:#d1242f\"></i>a worker job preempted</span>";
  }
  return "<figure class=\"chart\" id=\"chart-workers-" + std::to_string(n) + "\" data-points=\"" +
         std::to_string(workers.size()) + "\" data-decisions=\"" + std::to_string(marks) +
         "\" data-pool=\"" + std::to_string(pool_marks) + "\" data-preempted=\"" +
         std::to_string(preempt_marks) + "\">" + Svg(body) + "<figcaption class=\"legend\">" +
         legend + "</figcaption></figure>";
}

// The pool's grants to a run, as recorded (goldminer-runs.db(5), pool_grants).
std::string PoolTable(const RunModel& m, size_t n) {
  if (m.pool_grants.empty()) return "";
  std::string h = "<h3>The pool's grants</h3><table class=\"pool\" id=\"pool-" + std::to_string(n) +
                  "\"><tr><th>when</th><th>elastic workers</th><th>CPUs</th><th>it held</th>"
                  "<th>why</th></tr>";
  for (const PoolGrantRecord& g : m.pool_grants) {
    h += "<tr><td>" + E(g.t_utc) + "</td><td class=\"num\">" + std::to_string(g.extra_workers) +
         "</td><td class=\"num\">" + std::to_string(g.cpus) + "</td><td class=\"num\">" +
         std::to_string(g.held_workers) + "</td><td>" + E(g.reason) + "</td></tr>";
  }
  return h + "</table>";
}

// Horizontal bars: one per (label, value), scaled to the largest.
std::string Bars(const std::string& id, const std::vector<std::pair<std::string, double>>& bars,
                 const std::string& unit, const char* color) {
  const double row = 22, h = kTop + row * static_cast<double>(bars.size()) + 8;
  double peak = 0;
  for (const auto& b : bars) peak = std::max(peak, b.second);
  std::string body;
  double y = kTop;
  for (const auto& [label, value] : bars) {
    // Room for the value after the longest bar; a long label is cut (whole on hover).
    const double w = peak > 0 ? (kW - 170 - 130) * value / peak : 0;
    const std::string shown = label.size() > 24 ? label.substr(0, 23) + "\u2026" : label;
    body += "<g class=\"bar\"><title>" + E(label) + ": " + Fixed(value, 3) + " " + unit +
            "</title><text x=\"6\" y=\"" + Fixed(y + 14, 1) + "\">" + E(shown) +
            "</text><rect x=\"170\" y=\"" + Fixed(y + 3, 1) + "\" width=\"" +
            Fixed(std::max(w, 1.0), 1) + "\" height=\"15\" fill=\"" + color + "\"/><text x=\"" +
            Fixed(176 + w, 1) + "\" y=\"" + Fixed(y + 14, 1) + "\">" + Fixed(value, 3) + " " +
            E(unit) + "</text></g>";
    y += row;
  }
  return "<figure class=\"chart bars\" id=\"" + id + "\" data-bars=\"" +
         std::to_string(bars.size()) + "\"><svg viewBox=\"0 0 " + Fixed(kW, 0) + " " + Fixed(h, 0) +
         "\" width=\"100%\" role=\"img\">" + body + "</svg></figure>";
}

std::string Row(const std::string& k, const std::string& v) {
  return "<tr><th>" + E(k) + "</th><td>" + v + "</td></tr>";
}

std::string Join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

std::string OutcomeClass(const RunModel& m) {
  if (m.run.status == "succeeded") return "ok";
  if (m.run.status == "running" && !m.stale) return "warn";
  return "bad";
}

// The run's workers and its events, one row each.
std::string WorkerAndEventTables(const RunModel& m) {
  std::string h;
  h += "<h3>Workers</h3><table class=\"workers\"><tr><th>#</th><th>node</th><th>step</th>"
       "<th>kind</th><th>started</th><th>ended</th><th>how it ended</th></tr>";
  for (const WorkerRecord& w : m.workers) {
    h += "<tr" + std::string(w.elastic ? " class=\"elastic\"" : "") + "><td class=\"num\">" +
         std::to_string(w.worker_id) + "</td><td>" + E(w.host) + "</td><td>" +
         E(w.step_id.value_or("")) + "</td><td>" +
         (w.elastic   ? "elastic job"
          : w.step_id ? "step"
                      : "local") +
         "</td><td>" + E(w.started_utc) + "</td><td>" + E(w.ended_utc.value_or("running")) +
         "</td><td>" + E(w.exit.value_or("")) + "</td></tr>";
  }
  h += "</table><h3>Events</h3><table "
       "class=\"events\"><tr><th>when</th><th>kind</th><th>what</th></tr>";
  for (const EventRecord& e : m.events) {
    h += "<tr><td>" + E(e.t_utc) + "</td><td>" + E(e.kind) + "</td><td>" + E(e.message) +
         "</td></tr>";
  }
  h += "</table>";
  return h;
}

std::string RunSection(const RunModel& m, size_t n) {
  const RunRecord& r = m.run;
  const RunSummary s = Summarize(m);
  std::string h = "<section class=\"run\" id=\"run-" + std::to_string(n) + "\">";
  h += "<h2>Run <span class=\"run-id\">" + E(r.id) + "</span>: <span class=\"outcome " +
       OutcomeClass(m) + "\">" + E(s.outcome) + "</span></h2>";
  h += "<table class=\"summary\">";
  h += Row("command", "<code>" + E(Join(r.command)) + "</code>");
  h += Row("where", E(r.backend + " on " + r.host + (r.job_id ? ", Slurm job " + *r.job_id : "") +
                      ", " + std::to_string(r.world_size) + " trainer rank(s)"));
  h += Row("when", E(r.started_utc + (r.ended_utc ? " to " + *r.ended_utc : " (no end recorded)")) +
                       ", " + Fixed(s.duration_s, 1) + " s recorded");
  h += Row("delivered", SamplesPerS(s.samples_per_s_mean) + " on average (peak " +
                            SamplesPerS(s.samples_per_s_peak) + ")");
  h += Row("data wait", "<span class=\"" + std::string(s.data_wait_mean > 0.1 ? "bad" : "ok") +
                            "\">" + Percent(s.data_wait_mean) + "</span> of the trainer's time" +
                            (s.data_wait_mean > 0.1 ? ": the trainer was starved" : ""));
  h += Row(
      "workers",
      std::to_string(s.workers_started) + " started, at most " + std::to_string(s.workers_peak) +
          " at once; " + std::to_string(s.scale_decisions) + " autoscaler decision(s)" +
          (s.elastic_workers > 0 ? "; " + std::to_string(s.elastic_workers) +
                                       " worker job(s) of their own in the elastic partition, " +
                                       std::to_string(s.preempted) + " preempted"
                                 : std::string()));
  h += Row("CPU", Fixed(s.worker_cpu_hours, 4) + " CPU-hours in the workers");
  h += Row("pipeline", "<code>" + E(r.pipeline_path) + "</code>");
  if (m.plan) {
    h += Row("plan",
             "<code>" + E(r.plan_path) +
                 "</code>: " + SamplesPerS(m.plan->prediction.samples_per_s) + " predicted with " +
                 std::to_string(m.plan->run.workers) +
                 " worker(s) (limit: " + E(m.plan->prediction.limit) + ")" +
                 (s.measured_over_predicted
                      ? "; measured <b>" + Fixed(*s.measured_over_predicted, 2) + "x</b> of it"
                      : std::string()) +
                 (s.plan_gap ? ": " + E(*s.plan_gap) : std::string()));
  } else if (!m.plan_problem.empty()) {
    h += Row("plan", E(m.plan_problem));
  }
  h += "</table>";
  Axis ax;
  for (const auto& [name, pts] : m.series) {
    if (!pts.empty()) ax.t_max = std::max(ax.t_max, pts.back().t_s);
  }
  h += "<h3>Throughput and data wait</h3>" + ThroughputChart(m, n, ax);
  h += "<h3>Workers and the autoscaler</h3>" + WorkersChart(m, n, ax);
  if (!m.stage_costs.empty()) {
    std::vector<std::pair<std::string, double>> bars;
    for (const StageProfile& st : m.stage_costs)
      bars.push_back({st.name, st.cpu_s_per_sample * 1e3});
    h += "<h3>CPU per sample, by stage (from the workers' reports)</h3>" +
         Bars("chart-stages-" + std::to_string(n), bars, "ms", "#bf8700");
  }
  if (m.plan && s.samples_per_s_mean > 0) {
    h += "<h3>The plan against the run</h3>" +
         Bars("chart-plan-" + std::to_string(n),
              {{"predicted", m.plan->prediction.samples_per_s}, {"measured", s.samples_per_s_mean}},
              "samples/s", "#1f6feb");
  }
  h += PoolTable(m, n);
  h += WorkerAndEventTables(m);
  h += "</section>";
  return h;
}

std::string Compare(const std::vector<RunModel>& runs) {
  std::string h =
      "<h2>Runs side by side</h2><table class=\"compare\"><tr><th>run</th><th>outcome</th>"
      "<th>samples/s</th><th>data wait</th><th>workers (peak)</th><th>CPU-hours</th>"
      "<th>measured / planned</th></tr>";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunSummary s = Summarize(runs[i]);
    h += "<tr><td><a href=\"#run-" + std::to_string(i) + "\">" + E(runs[i].run.id) +
         "</a></td><td>" + E(s.outcome) + "</td><td class=\"num\">" +
         SamplesPerS(s.samples_per_s_mean) + "</td><td class=\"num\">" + Percent(s.data_wait_mean) +
         "</td><td class=\"num\">" + std::to_string(s.workers_peak) + "</td><td class=\"num\">" +
         Fixed(s.worker_cpu_hours, 4) + "</td><td class=\"num\">" +
         (s.measured_over_predicted ? Fixed(*s.measured_over_predicted, 2) + "x"
                                    : std::string("-")) +
         "</td></tr>";
  }
  return h + "</table>";
}

// Per measured step: GPU busy, idle while the trainer waited for data (input
// stall), and other idle, as a strip of stacked columns.
std::string GpuStrip(const TrainerProfile& t) {
  std::vector<const StepProfile*> steps;
  for (const StepProfile& s : t.step_list) {
    if (s.gpu_busy_s && s.gpu_idle_s) steps.push_back(&s);
  }
  if (steps.empty()) return "";
  const size_t n = std::min<size_t>(steps.size(), 600);
  const double w = (kW - kLeft - 10) / static_cast<double>(n), h = 90;
  std::string body;
  for (size_t i = 0; i < n; ++i) {
    const StepProfile& s = *steps[i * steps.size() / n];
    const double stall = s.gpu_stall_s.value_or(0);
    const double total = std::max(1e-12, *s.gpu_busy_s + *s.gpu_idle_s);
    const double parts[3] = {*s.gpu_busy_s / total, stall / total,
                             std::max(0.0, *s.gpu_idle_s - stall) / total};
    const char* colors[3] = {"#2da44e", "#d1242f", "#c9ced6"};
    double y = 10;
    for (int k = 0; k < 3; ++k) {
      body += "<rect x=\"" + Fixed(kLeft + w * static_cast<double>(i), 2) + "\" y=\"" +
              Fixed(y, 2) + "\" width=\"" + Fixed(std::max(w, 0.5), 2) + "\" height=\"" +
              Fixed(h * parts[k], 2) + "\" fill=\"" + colors[k] + "\"/>";
      y += h * parts[k];
    }
  }
  return "<figure class=\"chart\" id=\"chart-gpu\" data-steps=\"" + std::to_string(n) +
         "\"><svg viewBox=\"0 0 " + Fixed(kW, 0) +
         " 110\" width=\"100%\" role=\"img\">"
         "<text x=\"6\" y=\"20\">step</text>" +
         body +
         "</svg><figcaption class=\"legend\"><span><i class=\"sw\" "
         "style=\"background:#2da44e\"></i>GPU "
         "busy</span><span><i class=\"sw\" style=\"background:#d1242f\"></i>GPU idle, trainer "
         "waiting "
         "for data</span><span><i class=\"sw\" style=\"background:#c9ced6\"></i>GPU idle "
         "otherwise</span>"
         "</figcaption></figure>";
}

std::string ProfileSection(const ProfileModel& pm) {
  const Profile& p = pm.profile;
  std::string h = "<section class=\"profile\" id=\"profile\"><h2>Profile " + std::to_string(pm.id) +
                  ": <span class=\"" + std::string(p.verdict == "input-bound" ? "bad" : "ok") +
                  "\">" + E(p.verdict) + "</span></h2><table class=\"summary\">";
  h += Row("measured",
           E(p.created_utc + " on " + p.host + ", " + std::to_string(p.cores) + " CPUs"));
  h += Row("input-bound",
           Percent(p.input_bound_fraction) + " of the trainer's step time waiting for data");
  if (p.pipeline) {
    const PipelineProfile& pp = *p.pipeline;
    h += Row("pipeline", "<code>" + E(pp.path) + "</code>: " + Fixed(pp.cpu_s_per_sample * 1e3, 3) +
                             " ms CPU per sample, " + SamplesPerS(pp.samples_per_s_per_core) +
                             " per core");
  }
  if (p.trainer) {
    const TrainerProfile& t = *p.trainer;
    h += Row("trainer", "<code>" + E(Join(t.command)) + "</code>, " + E(t.exit));
  }
  h += "</table>";
  if (p.pipeline && !p.pipeline->stages.empty()) {
    std::vector<std::pair<std::string, double>> bars;
    for (const StageProfile& st : p.pipeline->stages)
      bars.push_back({st.name, st.cpu_s_per_sample * 1e3});
    h += "<h3>CPU per sample, by stage</h3>" + Bars("chart-profile-stages", bars, "ms", "#bf8700");
    h += "<h3>Cut points</h3><table class=\"cuts\"><tr><th>after stage</th><th>bytes on the wire "
         "per "
         "sample</th><th>worker CPU ms/sample</th><th>trainer-node CPU "
         "ms/sample</th><th>allowed</th></tr>";
    for (const CutPoint& c : p.pipeline->cuts) {
      // The stage by its index in pipeline.json (the profile lists fused stages once).
      std::string after = c.after_stage < 0 ? std::string("(source: raw records)")
                                            : "stage " + std::to_string(c.after_stage);
      for (const StageProfile& st : p.pipeline->stages) {
        if (st.index == c.after_stage) after += " (" + st.name + ")";
      }
      if (c.pipeline_cut) {
        after += ", the pipeline's cut: the rest on the trainer's device";
      } else if (c.device_tail) {
        after += ", the rest could run on the trainer's device (mark it \"on\": \"device\")";
      }
      h += "<tr><td>" + E(after) + "</td><td class=\"num\">" + Fixed(c.bytes_per_sample, 0) +
           "</td><td class=\"num\">" + Fixed(c.remote_cpu_s_per_sample * 1e3, 3) +
           "</td><td class=\"num\">" + Fixed(c.local_cpu_s_per_sample * 1e3, 3) + "</td><td>" +
           (c.allowed ? std::string("yes") : "no: " + E(c.reason)) + "</td></tr>";
    }
    h += "</table>";
  }
  if (p.trainer) {
    const TrainerProfile& t = *p.trainer;
    h += "<h3>Demand against delivered</h3>" +
         Bars("chart-demand",
              {{"trainer demand", t.demand_samples_per_s}, {"delivered", t.samples_per_s}},
              "samples/s", "#1f6feb");
    if (t.gpu.available) {
      h += "<h3>The GPU, step by step</h3><p class=\"meta\">busy " + Percent(t.gpu.busy_fraction) +
           ", idle while the trainer waited for data " + Percent(t.gpu.stall_fraction) + "</p>" +
           GpuStrip(t);
    } else {
      h += "<p class=\"meta\">No GPU timeline: " + E(t.gpu.reason) + "</p>";
    }
  }
  return h + "</section>";
}

// ---- a simulation (goldminer simulate's sim.json)

const char* const kPolicyColors[] = {"#57606a", "#1f6feb", "#1a7f37", "#a15c00"};

double JsonNum(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}

// One chart of a series field of every policy, one line each.
std::string SimChart(const nlohmann::json& policies, const char* field, const char* id,
                     const std::string& label, bool fraction) {
  Axis ax;
  double peak = fraction ? 1 : 0;
  std::vector<std::vector<Point>> lines;
  for (const nlohmann::json& p : policies) {
    std::vector<Point> pts;
    for (const nlohmann::json& s : p.value("series", nlohmann::json::array())) {
      pts.push_back({JsonNum(s, "t_s"), JsonNum(s, field) * (fraction ? 100 : 1)});
      ax.t_max = std::max(ax.t_max, pts.back().t_s);
      peak = std::max(peak, pts.back().value);
    }
    lines.push_back(std::move(pts));
  }
  const double top = NiceTop(peak);
  std::string body = Frame(ax, top, label, "", false), legend;
  for (size_t i = 0; i < lines.size(); ++i) {
    const char* color = kPolicyColors[i % 4];
    body += Polyline(lines[i], ax, top, color, "policy", true);
    legend += "<span><i class=\"sw\" style=\"background:" + std::string(color) + "\"></i>" +
              E(policies[i].value("policy", std::string())) + "</span>";
  }
  return "<figure class=\"chart\" id=\"" + std::string(id) + "\" data-lines=\"" +
         std::to_string(lines.size()) + "\">" + Svg(body) + "<figcaption class=\"legend\">" +
         legend + "</figcaption></figure>";
}

std::string SimTable(const nlohmann::json& policies) {
  std::string h =
      "<table id=\"sim-compare\"><tr><th>policy</th><th>GPU tasks</th><th>JCT mean</th>"
      "<th>p50</th><th>p95</th><th>p99</th><th>queueing mean</th><th>makespan</th>"
      "<th>GPU allocated</th><th>GPU effective</th><th>GPU allocated, submission window</th>"
      "<th>GPU effective, submission window</th><th>CPU</th><th>worker CPUs started</th>"
      "<th>preempted</th></tr>";
  auto num = [](double v, int digits) { return "<td class=\"num\">" + Fixed(v, digits) + "</td>"; };
  for (const nlohmann::json& p : policies) {
    h += "<tr><td>" + E(p.value("policy", std::string())) + "</td>" +
         num(JsonNum(p, "gpu_tasks"), 0) + num(JsonNum(p, "jct_mean_s"), 0) +
         num(JsonNum(p, "jct_p50_s"), 0) + num(JsonNum(p, "jct_p95_s"), 0) +
         num(JsonNum(p, "jct_p99_s"), 0) + num(JsonNum(p, "queue_mean_s"), 0) +
         num(JsonNum(p, "makespan_s"), 0) + num(100 * JsonNum(p, "gpu_util_allocated"), 1) +
         num(100 * JsonNum(p, "gpu_util_effective"), 1) +
         num(100 * JsonNum(p, "gpu_util_allocated_window"), 1) +
         num(100 * JsonNum(p, "gpu_util_effective_window"), 1) +
         num(100 * JsonNum(p, "cpu_util"), 1) + num(JsonNum(p, "worker_cpus_started"), 0) +
         num(JsonNum(p, "worker_cpus_preempted"), 0) + "</tr>";
  }
  return h +
         "</table><p class=\"meta\">Times in seconds; utilization in percent, over the "
         "makespan (first arrival to last end) and over the submission window (first to last "
         "arrival, while tasks keep coming).</p>";
}

}  // namespace

std::string RenderSimHtml(const nlohmann::json& sim, const std::string& source,
                          const std::string& generated_utc) {
  const nlohmann::json& in = sim.value("inputs", nlohmann::json::object());
  const nlohmann::json& policies = sim.value("policies", nlohmann::json::array());
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>goldminer simulation</title><style>";
  h += kStyle;
  h += "</style></head><body><main><h1>goldminer simulation</h1><p class=\"meta\">from <code>" +
       E(source) + "</code>, generated " + E(generated_utc) + ": <code>" +
       E(in.value("trace", std::string())) + "</code> on " + Fixed(JsonNum(in, "node_count"), 0) +
       " node(s), " + Fixed(JsonNum(in, "gpus"), 0) + " GPUs, " + Fixed(JsonNum(in, "cpus"), 0) +
       " CPUs; " + Fixed(JsonNum(in, "tasks"), 0) + " task(s) replayed, " +
       Fixed(JsonNum(in, "never_scheduled"), 0) + " never scheduled, " +
       Fixed(JsonNum(in, "dropped"), 0) + " fit no node</p>";
  h += "<h2>Policies side by side</h2>" + SimTable(policies);
  const nlohmann::json& ratios = sim.value("ratios", nlohmann::json::object());
  h += "<ul id=\"sim-ratios\">";
  for (const auto& [name, value] : ratios.items()) {
    h += "<li><code>" + E(name) + "</code> " +
         Fixed(value.is_number() ? value.get<double>() : 0, 2) + "</li>";
  }
  h += "</ul><h2>Over time</h2>" +
       SimChart(policies, "queued", "chart-queue", "tasks waiting", false) +
       SimChart(policies, "gpu_effective", "chart-gpu", "GPU effective %", true);
  h += "<h2>Assumptions</h2><ul id=\"sim-assumptions\">";
  for (const nlohmann::json& a : sim.value("assumptions", nlohmann::json::array())) {
    h += "<li>" + E(a.is_string() ? a.get<std::string>() : a.dump()) + "</li>";
  }
  h += "</ul><p class=\"meta\">These figures are the model's (goldminer-simulate(1), MODEL), "
       "on the curves it assumed.</p></main></body></html>\n";
  return h;
}

std::string RenderHtml(const ReportModel& report) {
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>goldminer report</title><style>";
  h += kStyle;
  h += "</style></head><body><main><h1>goldminer report</h1><p class=\"meta\">from <code>" +
       E(report.source) + "</code>, generated " + E(report.generated_utc) + "</p>";
  if (report.runs.size() > 1) h += Compare(report.runs);
  for (size_t i = 0; i < report.runs.size(); ++i) h += RunSection(report.runs[i], i);
  if (report.profile) h += ProfileSection(*report.profile);
  if (report.runs.empty() && !report.profile) h += "<p>Nothing to show.</p>";
  h += "</main></body></html>\n";
  return h;
}

}  // namespace gm::reports
