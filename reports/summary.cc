#include <algorithm>

#include "core/text_format.h"
#include "reports/report.h"

namespace gm::reports {
namespace {

const std::vector<Point>* Find(const RunModel& run, const std::string& name) {
  auto it = run.series.find(name);
  return it == run.series.end() || it->second.empty() ? nullptr : &it->second;
}

// The time-weighted mean of a series (each value holds from the previous point's
// time to its own: a point is the figure of the interval that ends at it).
double Mean(const std::vector<Point>& points) {
  double sum = 0, span = 0, prev = 0;
  for (const Point& p : points) {
    const double dt = std::max(0.0, p.t_s - prev);
    sum += p.value * dt;
    span += dt;
    prev = p.t_s;
  }
  return span > 0 ? sum / span : (points.empty() ? 0 : points.back().value);
}

double Integral(const std::vector<Point>& points) {
  double sum = 0, prev = 0;
  for (const Point& p : points) {
    sum += p.value * std::max(0.0, p.t_s - prev);
    prev = p.t_s;
  }
  return sum;
}

}  // namespace

RunSummary Summarize(const RunModel& run) {
  RunSummary s;
  if (const auto* rate = Find(run, "samples_per_s")) {
    s.duration_s = rate->back().t_s;
    s.samples_per_s_mean = Mean(*rate);
    for (const Point& p : *rate) s.samples_per_s_peak = std::max(s.samples_per_s_peak, p.value);
  }
  if (const auto* wait = Find(run, "data_wait_fraction")) s.data_wait_mean = Mean(*wait);
  if (const auto* cpus = Find(run, "worker_cpus")) s.worker_cpu_hours = Integral(*cpus) / 3600;
  if (const auto* workers = Find(run, "workers")) {
    for (const Point& p : *workers)
      s.workers_peak = std::max(s.workers_peak, static_cast<int>(p.value));
  }
  s.workers_started = static_cast<int>(run.workers.size());
  for (const EventRecord& e : run.events) s.scale_decisions += e.kind == "scale" ? 1 : 0;
  for (const WorkerRecord& w : run.workers) {
    s.elastic_workers += w.elastic ? 1 : 0;
    s.preempted += w.exit && w.exit->rfind("preempted", 0) == 0 ? 1 : 0;
  }
  const RunRecord& r = run.run;
  if (r.status == "running") {
    s.outcome = run.stale ? "did not finish (no sign of life since " +
                                r.heartbeat_utc.value_or(r.started_utc) + ")"
                          : "running";
  } else if (r.status == "failed" && r.exit_code) {
    s.outcome = "failed (exit " + std::to_string(*r.exit_code) + ")";
  } else {
    s.outcome = r.status;
  }
  if (run.plan) {
    s.predicted_samples_per_s = run.plan->prediction.samples_per_s;
    if (*s.predicted_samples_per_s > 0 && s.samples_per_s_mean > 0) {
      s.measured_over_predicted = s.samples_per_s_mean / *s.predicted_samples_per_s;
    }
    // The plan predicts what the workers can deliver; a trainer slower than that
    // takes less, and waits little.
    if (s.measured_over_predicted && *s.measured_over_predicted < 0.8) {
      const std::string wait = Percent(s.data_wait_mean);
      s.plan_gap =
          s.data_wait_mean < 0.1
              ? "the trainer set the pace: it waited for data only " + wait +
                    " of its time, so it took fewer samples than the workers could make (the "
                    "plan predicts the workers' rate; profile and plan on this trainer to "
                    "predict its own)"
              : "the workers fell short: the trainer waited for data " + wait +
                    " of its time (see the CPU per stage, and whether the workers had the "
                    "CPUs the plan counted on)";
    }
  }
  return s;
}

std::vector<Point> Downsample(const std::vector<Point>& points, size_t max_points) {
  if (points.size() <= max_points || max_points < 2) return points;
  const size_t buckets = max_points / 2;
  std::vector<Point> out;
  out.reserve(buckets * 2);
  for (size_t b = 0; b < buckets; ++b) {
    const size_t begin = points.size() * b / buckets;
    const size_t end = points.size() * (b + 1) / buckets;
    if (begin >= end) continue;
    size_t lo = begin, hi = begin;
    for (size_t i = begin; i < end; ++i) {
      if (points[i].value < points[lo].value) lo = i;
      if (points[i].value > points[hi].value) hi = i;
    }
    out.push_back(points[std::min(lo, hi)]);
    if (lo != hi) out.push_back(points[std::max(lo, hi)]);
  }
  return out;
}

std::string EscapeHtml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace gm::reports
