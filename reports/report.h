// The report of `goldminer report`: what a run (or several, or a profile) did, as a
// model loaded from runs.db by cmd/verb_report.cc, and its three renderings: one
// self-contained HTML page (inline CSS and SVG, no script, nothing fetched), a
// terminal summary, and versioned JSON with everything the page shows.
//
// Pure: models in, bytes out. Every string that came from a user or a peer (run
// names, commands, paths, event messages, host names) is escaped by the renderer.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/plan.h"
#include "core/profile.h"
#include "core/store/run_records.h"

namespace gm::reports {

inline constexpr const char* kReportSchema = "goldminer.report";
inline constexpr int kReportVersion = 1;
// Points per chart line at most; longer series are downsampled (Downsample).
inline constexpr size_t kMaxChartPoints = 1200;

struct Point {
  double t_s = 0;
  double value = 0;
  bool operator==(const Point&) const = default;
};

// A run as recorded: the run's row, its workers, time series, stage costs, events,
// and the plan it ran (when its plan.json could be read).
struct RunModel {
  RunRecord run;
  std::vector<WorkerRecord> workers;
  std::map<std::string, std::vector<Point>> series;  // by metric name, in time order
  std::vector<StageProfile> stage_costs;
  std::vector<EventRecord> events;
  std::vector<PoolGrantRecord> pool_grants;  // with --pool: each change of its grant
  std::optional<Plan> plan;
  std::string plan_problem;  // why the plan is absent although plan_path is set
  // True when the run says "running" but its last heartbeat is older than a few
  // sample intervals: it did not finish (killed).
  bool stale = false;
};

// Figures a person reads first, computed from a RunModel.
struct RunSummary {
  double duration_s = 0;          // the time series' span
  double samples_per_s_mean = 0;  // delivered, over the run
  double samples_per_s_peak = 0;
  double data_wait_mean = 0;    // the trainer's data wait, 0..1, time-weighted
  double worker_cpu_hours = 0;  // integral of the workers' CPUs over time
  int workers_peak = 0;
  int workers_started = 0;  // rows in workers (replacements included)
  int scale_decisions = 0;  // events of kind "scale"
  int elastic_workers = 0;  // workers that were jobs of their own (elastic partition)
  int preempted = 0;        // workers whose job Slurm preempted
  std::string outcome;      // "succeeded", "failed (exit 3)", "running", "did not finish", ...
  std::optional<double> predicted_samples_per_s;  // the plan's
  std::optional<double> measured_over_predicted;
  // Why the run fell short of the plan, when it did (measured below 0.8x of the
  // prediction), for a person: who set the pace, from the trainer's data wait.
  std::optional<std::string> plan_gap;
};
RunSummary Summarize(const RunModel& run);

struct ProfileModel {
  int64_t id = 0;
  Profile profile;
};

struct ReportModel {
  std::string generated_utc;
  std::string source;          // the runs.db path, as given
  std::vector<RunModel> runs;  // several: side by side
  std::optional<ProfileModel> profile;
};

// At most `max_points` points that keep the series' shape and its peaks: the series
// is cut into max_points/2 equal runs of points, and each run gives its lowest and
// its highest point, in time order. A series that fits is returned as is.
std::vector<Point> Downsample(const std::vector<Point>& points, size_t max_points);

// HTML text with &, <, >, " and ' escaped.
std::string EscapeHtml(const std::string& text);

std::string RenderHtml(const ReportModel& report);
// A simulation's page: sim.json's document (goldminer simulate), its file name and
// when the page was made. Missing fields read as 0 or "".
std::string RenderSimHtml(const nlohmann::json& sim, const std::string& source,
                          const std::string& generated_utc);
std::string RenderText(const ReportModel& report);
// {"schema": "goldminer.report", "version": 1, ...}: what the page shows.
nlohmann::json RenderJson(const ReportModel& report);

}  // namespace gm::reports
