#include "planner/pool_state.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

namespace gm::planner {
namespace {

Status Bad(const RunReport& r, const std::string& what) {
  return Status::InvalidArgument("pool report of run \"" + r.run_id + "\": " + what);
}

Status CheckReport(const RunReport& r) {
  if (r.run_id.empty() || r.run_id.size() > 128) {
    return Status::InvalidArgument("pool report: run_id must be 1..128 characters");
  }
  if (!(r.gpus > 0) || !std::isfinite(r.gpus)) return Bad(r, "gpus must be positive");
  if (r.cpus_per_worker < 1) return Bad(r, "cpus_per_worker must be at least 1");
  if (r.base_workers < 0 || r.extra_workers < 0) return Bad(r, "a negative worker count");
  if (!(r.demand_samples_per_s > 0) || !std::isfinite(r.demand_samples_per_s)) {
    return Bad(r, "demand_samples_per_s must be positive");
  }
  if (r.rates.size() > kMaxReportedCounts) {
    return Bad(r, "more than " + std::to_string(kMaxReportedCounts) + " worker counts");
  }
  std::set<int> counts;
  for (const auto& [workers, rate] : r.rates) {
    if (workers < 1) return Bad(r, "a rate at a worker count below 1");
    if (!(rate >= 0) || !std::isfinite(rate)) return Bad(r, "a negative or non-finite rate");
    if (!counts.insert(workers).second) {
      return Bad(r, "worker count " + std::to_string(workers) + " given twice");
    }
  }
  return Status::Ok();
}

}  // namespace

std::vector<PoolSegment> RunCurve(const RunReport& r, int max_cpus) {
  std::map<int, double> measured;  // total workers -> fraction of the GPUs' speed
  for (const auto& [workers, rate] : r.rates) {
    measured[workers] = std::min(1.0, rate / r.demand_samples_per_s);
  }
  const auto base = measured.find(r.base_workers);
  double speed = 0;
  if (base != measured.end()) {
    speed = base->second;
  } else if (r.base_workers > 0) {
    return {};  // its own workers not measured yet: nothing to divide by
  }
  // What one more worker is assumed to add where nothing was measured: what the
  // last measured one added, else the mean of the base workers.
  double step = r.base_workers > 0 ? speed / r.base_workers : 0;
  std::vector<PoolSegment> curve;
  double last_slope = INFINITY;
  const int most = r.cpus_per_worker > 0 ? max_cpus / r.cpus_per_worker : 0;
  for (int k = 1; k <= most && speed < 1; ++k) {
    const auto m = measured.find(r.base_workers + k);
    double next;
    if (m != measured.end()) {
      next = std::max(speed, m->second);
      step = next - speed;
    } else {
      next = std::min(1.0, speed + step);
    }
    const double slope = std::min(last_slope, (next - speed) / r.cpus_per_worker);
    if (!(slope > 0)) break;
    if (!curve.empty() && curve.back().slope == slope) {
      curve.back().cpus += r.cpus_per_worker;
    } else {
      curve.push_back({r.cpus_per_worker, slope});
    }
    last_slope = slope;
    speed += slope * r.cpus_per_worker;
  }
  return curve;
}

namespace {

// A grant's reason in words ("divided anew: a budget of 8 CPUs over 2 runs; its
// 4 CPUs add 40% to its GPUs' speed; a worker more would add 3%").
std::string Reason(bool changed, int budget, const std::string& budget_why, size_t runs,
                   const PoolJob& job, int held_cpus, int cpus, int per_worker) {
  const double w = job.weight;
  const double now = PoolValue(job, cpus) / w;
  const double more = PoolValue(job, cpus + per_worker) / w - now;
  auto pct = [](double f) { return std::to_string(static_cast<int>(std::lround(100 * f))) + "%"; };
  // Unchanged, a holding beyond the budget was cut to it (DividePool saw it capped).
  const char* how = changed             ? "divided anew"
                    : cpus == held_cpus ? "kept as held (a new division gains too little)"
                                        : "cut to the budget";
  return std::string(how) + ": a budget of " + std::to_string(budget) + " CPUs" +
         (budget_why.empty() ? "" : " (" + budget_why + ")") + " over " + std::to_string(runs) +
         " run(s) by gain per GPU; its " + std::to_string(cpus) + " CPU(s) add " + pct(now) +
         " to its GPUs' speed; a worker more would add " + pct(more);
}

}  // namespace

int PoolState::HeldCpus() const {
  int held = 0;
  for (const auto& [id, run] : runs_) {
    held += run.report.extra_workers * run.report.cpus_per_worker;
  }
  return held;
}

Status PoolState::Report(const std::string& bound_run, const RunReport& report, double now_s) {
  GM_RETURN_IF_ERROR(CheckReport(report));
  if (!bound_run.empty() && report.run_id != bound_run) {
    return Status::InvalidArgument("a report for run \"" + report.run_id +
                                   "\" on the connection of run \"" + bound_run +
                                   "\": a run reports for itself only");
  }
  Run& run = runs_[report.run_id];
  run.report = report;
  run.last_report_s = now_s;
  return Status::Ok();
}

Result<std::vector<PoolGrant>> PoolState::Divide(double now_s,
                                                 std::vector<std::string>* forgotten) {
  if (o_.cpus < 0) return Status::InvalidArgument("pool: a negative CPU budget");
  for (auto it = runs_.begin(); it != runs_.end();) {
    if (now_s - it->second.last_report_s > o_.report_timeout_s) {
      if (forgotten != nullptr) forgotten->push_back(it->first);
      it = runs_.erase(it);
    } else {
      ++it;
    }
  }
  std::vector<PoolJob> jobs;
  for (const auto& [id, run] : runs_) {
    PoolJob j;
    j.id = id;
    j.weight = run.report.gpus;
    j.curve = RunCurve(run.report, o_.cpus);
    j.held = std::min(o_.cpus, run.report.extra_workers * run.report.cpus_per_worker);
    j.held_since_s = run.grew_at_s;
    jobs.push_back(std::move(j));
  }
  GM_ASSIGN_OR_RETURN(PoolDivision d, DividePool(jobs, o_.cpus, now_s, o_.division));
  std::vector<PoolGrant> grants;
  size_t i = 0;
  for (auto& [id, run] : runs_) {
    const int per = run.report.cpus_per_worker;
    const PoolJob& job = jobs[i];
    PoolGrant g;
    g.run_id = id;
    g.extra_workers = d.cpus[i++] / per;
    g.cpus = g.extra_workers * per;
    g.reason = Reason(d.changed, o_.cpus, budget_why_, jobs.size(), job,
                      run.report.extra_workers * per, g.cpus, per);
    if (g.cpus > run.granted_cpus) run.grew_at_s = now_s;
    run.granted_cpus = g.cpus;
    grants.push_back(std::move(g));
  }
  return grants;
}

}  // namespace gm::planner
