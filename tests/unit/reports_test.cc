// Tests of the report renderers (reports/report.h) on models built by hand: the
// summary's figures, downsampling that keeps peaks, escaping of everything a user
// wrote, the charts' points, and golden text and JSON.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "profiler/verdict.h"
#include "reports/pool_text.h"
#include "reports/profile_text.h"
#include "reports/report.h"
#include "reports/status_line.h"
#include "tests/unit/profile_fixture.h"

namespace gm::reports {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A finished run of 10 s: 2 workers, then 3 after an autoscaler decision at 4 s.
RunModel SmallRun() {
  RunModel m;
  m.run.id = "nightly-7";
  m.run.started_utc = "2026-11-30T10:00:00Z";
  m.run.ended_utc = "2026-11-30T10:00:11Z";
  m.run.backend = "slurm";
  m.run.job_id = "4711";
  m.run.host = "gpu1";
  m.run.command = {"python3", "train.py", "--lr", "0.1"};
  m.run.pipeline_path = "/data/pipeline.json";
  m.run.status = "succeeded";
  m.run.exit_code = 0;
  for (int i = 1; i <= 5; ++i) {
    const double t = 2.0 * i;
    m.series["samples_per_s"].push_back({t, i <= 2 ? 100.0 : 150.0});
    m.series["data_wait_fraction"].push_back({t, i <= 2 ? 0.4 : 0.05});
    m.series["workers"].push_back({t, i <= 2 ? 2.0 : 3.0});
    m.series["worker_cpus"].push_back({t, 1.8});
  }
  WorkerRecord w;
  w.worker_id = 0;
  w.host = "cpu1";
  w.step_id = "4712.1";
  w.started_utc = "2026-11-30T10:00:00Z";
  w.ended_utc = "2026-11-30T10:00:11Z";
  w.exit = "stopped at the end of the run: exited with status 0";
  m.workers.push_back(w);
  EventRecord e;
  e.run_id = m.run.id;
  e.t_utc = "2026-11-30T10:00:04Z";
  e.kind = "scale";
  e.message =
      "2 -> 3 workers: data wait 40% above 10% (100 samples/s, data wait 40%): adding a worker";
  m.events.push_back(e);
  StageProfile decode;
  decode.index = 0;
  decode.name = "decode_jpeg";
  decode.cpu_s_per_sample = 0.002;
  m.stage_costs.push_back(decode);
  return m;
}

TEST(ReportsTest, GivenARunThenTheSummaryIsTimeWeighted) {
  const RunSummary s = Summarize(SmallRun());
  EXPECT_DOUBLE_EQ(s.duration_s, 10);
  EXPECT_DOUBLE_EQ(s.samples_per_s_mean, (100 * 4 + 150 * 6) / 10.0);
  EXPECT_DOUBLE_EQ(s.samples_per_s_peak, 150);
  EXPECT_NEAR(s.data_wait_mean, (0.4 * 4 + 0.05 * 6) / 10.0, 1e-12);
  EXPECT_NEAR(s.worker_cpu_hours, 1.8 * 10 / 3600, 1e-12);
  EXPECT_EQ(s.workers_peak, 3);
  EXPECT_EQ(s.workers_started, 1);
  EXPECT_EQ(s.scale_decisions, 1);
  EXPECT_EQ(s.outcome, "succeeded");
  RunModel stale = SmallRun();
  stale.run.status = "running";
  stale.run.heartbeat_utc = "2026-11-30T10:00:09Z";
  stale.stale = true;
  EXPECT_EQ(Summarize(stale).outcome,
            "did not finish (no sign of life since 2026-11-30T10:00:09Z)");
  RunModel failed = SmallRun();
  failed.run.status = "failed";
  failed.run.exit_code = 3;
  EXPECT_EQ(Summarize(failed).outcome, "failed (exit 3)");
}

TEST(ReportsTest, GivenARunBelowItsPlan_ThenTheSummarySaysWhoSetThePace) {
  RunModel m = SmallRun();  // 130 samples/s on average
  m.plan.emplace();
  m.plan->prediction.samples_per_s = 130 / 0.52;
  for (auto& p : m.series["data_wait_fraction"]) p.value = 0.08;  // the trainer barely waited
  RunSummary s = Summarize(m);
  ASSERT_TRUE(s.measured_over_predicted.has_value());
  EXPECT_NEAR(*s.measured_over_predicted, 0.52, 1e-9);
  ASSERT_TRUE(s.plan_gap.has_value());
  EXPECT_NE(s.plan_gap->find("the trainer set the pace: it waited for data only 8%"),
            std::string::npos)
      << *s.plan_gap;
  ReportModel report;
  report.runs.push_back(m);
  EXPECT_NE(RenderHtml(report).find("the trainer set the pace"), std::string::npos);
  EXPECT_NE(RenderText(report).find("the trainer set the pace"), std::string::npos);
  for (auto& p : m.series["data_wait_fraction"]) p.value = 0.4;  // it was starved
  EXPECT_NE(Summarize(m).plan_gap.value_or("").find(
                "the workers fell short: the trainer waited for data 40%"),
            std::string::npos);
  m.plan->prediction.samples_per_s = 140;  // 0.93x: close enough, nothing to explain
  EXPECT_FALSE(Summarize(m).plan_gap.has_value());
}

TEST(ReportsTest, GivenRecordedTimesThenTheyAreReadAsSecondsAndJunkIsRefused) {
  EXPECT_EQ(*UtcSeconds("2026-11-30T10:00:04Z") - *UtcSeconds("2026-11-30T10:00:00Z"), 4);
  EXPECT_EQ(*UtcSeconds("1970-01-01T00:01:00Z"), 60);
  for (const char* bad : {"", "2026-11-30", "2026-11-30T10:00:04Zjunk", "yesterday"}) {
    EXPECT_FALSE(UtcSeconds(bad).has_value()) << bad;
  }
}

TEST(ReportsTest, GivenALongSeriesThenDownsamplingBoundsItAndKeepsThePeaks) {
  std::vector<Point> points;
  for (int i = 0; i < 100000; ++i) points.push_back({i * 0.1, (i % 1000) * 0.01});
  points[77777].value = 500;  // one spike
  points[33333].value = -40;  // one dip
  const std::vector<Point> d = Downsample(points, 1200);
  EXPECT_LE(d.size(), 1200u);
  EXPECT_GE(d.size(), 1000u);
  double hi = -1e9, lo = 1e9;
  for (size_t i = 0; i < d.size(); ++i) {
    hi = std::max(hi, d[i].value);
    lo = std::min(lo, d[i].value);
    if (i > 0) {
      EXPECT_LE(d[i - 1].t_s, d[i].t_s);  // still in time order
    }
  }
  EXPECT_EQ(hi, 500);
  EXPECT_EQ(lo, -40);
  const std::vector<Point> small(points.begin(), points.begin() + 10);
  EXPECT_EQ(Downsample(small, 1200), small);
}

TEST(ReportsTest, GivenStringsFromUsersThenTheHtmlShowsThemAsText) {
  RunModel m = SmallRun();
  m.run.id = "<script>alert(1)</script>";
  m.run.command = {"python3", "x.py", "--tag", "\"a\" & 'b' <i>"};
  m.events[0].message = "<img src=x onerror=alert(2)>";
  m.workers[0].host = "<b>cpu1</b>";
  ReportModel r;
  r.source = "runs<.db";
  r.runs.push_back(m);
  const std::string html = RenderHtml(r);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>cpu1"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("&quot;a&quot; &amp; &#39;b&#39; &lt;i&gt;"), std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(2)&gt;"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);  // nothing fetched
  EXPECT_EQ(html.find("https://"), std::string::npos);
}

TEST(ReportsTest, GivenARunThenEachChartHasItsPointsAndTheDecisionsAreMarkedWithTheirReasons) {
  ReportModel r;
  r.runs.push_back(SmallRun());
  const std::string html = RenderHtml(r);
  EXPECT_NE(html.find("id=\"chart-throughput-0\" data-points=\"5\""), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-workers-0\" data-points=\"5\" data-decisions=\"1\""),
            std::string::npos);
  EXPECT_NE(html.find("id=\"chart-stages-0\" data-bars=\"1\""), std::string::npos);
  EXPECT_EQ(Count(html, "<g class=\"decision\"><title>2026-11-30T10:00:04Z: 2 -&gt; 3 workers"),
            1u);
  EXPECT_EQ(Count(html, "<tr><td class=\"num\">0</td><td>cpu1</td><td>4712.1</td>"), 1u);
}

// SmallRun with an elastic worker job that Slurm preempted, and two pool grants.
RunModel PooledRun() {
  RunModel m = SmallRun();
  WorkerRecord w;
  w.worker_id = 1;
  w.host = "cpu2";
  w.step_id = "4790.0";
  w.elastic = true;
  w.started_utc = "2026-11-30T10:00:03Z";
  w.ended_utc = "2026-11-30T10:00:08Z";
  w.exit = "preempted: exited with status 0";
  m.workers.push_back(w);
  auto event = [&m](const char* t, const char* kind, const char* message) {
    EventRecord e;
    e.run_id = m.run.id;
    e.t_utc = t;
    e.kind = kind;
    e.message = message;
    m.events.push_back(e);
  };
  event("2026-11-30T10:00:02Z", "pool",
        "the pool grants 1 elastic worker(s) (2 CPUs; it held 0): divided anew <fast>");
  event("2026-11-30T10:00:08Z", "worker",
        "worker (pid 77) exited with status 0 (its job was preempted)");
  event("2026-11-30T10:00:09Z", "pool", "the pool grants 0 elastic worker(s) (0 CPUs; it held 0)");
  m.pool_grants.push_back({1, "2026-11-30T10:00:02Z", 1, 2, 0, "divided anew <fast>",
                           R"({"run_id":"nightly-7","rates":[[1,100]]})"});
  m.pool_grants.push_back({2, "2026-11-30T10:00:09Z", 0, 0, 0, "", "not json"});
  return m;
}

TEST(ReportsTest, GivenElasticWorkersAndAPoolThenTheRecordSaysWhoHadWhatAndWhy) {
  ReportModel r;
  r.runs.push_back(PooledRun());
  const RunSummary s = Summarize(r.runs[0]);
  EXPECT_EQ(s.elastic_workers, 1);
  EXPECT_EQ(s.preempted, 1);
  const std::string html = RenderHtml(r);
  EXPECT_NE(html.find("data-decisions=\"1\" data-pool=\"2\" data-preempted=\"1\""),
            std::string::npos);
  EXPECT_EQ(Count(html, "<g class=\"pool\"><title>"), 2u);
  EXPECT_EQ(Count(html, "<g class=\"preempted\"><title>2026-11-30T10:00:08Z"), 1u);
  EXPECT_NE(html.find("a worker job preempted"), std::string::npos) << "in the legend";
  EXPECT_NE(html.find("<table class=\"pool\" id=\"pool-0\">"), std::string::npos);
  EXPECT_NE(html.find("divided anew &lt;fast&gt;"), std::string::npos) << "escaped";
  EXPECT_EQ(Count(html, "<td>elastic job</td>"), 1u);
  EXPECT_EQ(Count(html, "<td>step</td>"), 1u);
  EXPECT_NE(html.find("1 worker job(s) of their own in the elastic partition, 1 preempted"),
            std::string::npos);
  const nlohmann::json j = RenderJson(r);
  const nlohmann::json& run = j["runs"][0];
  EXPECT_EQ(run["summary"]["preempted"], 1);
  EXPECT_EQ(run["workers"][1]["elastic"], true);
  ASSERT_EQ(run["pool_grants"].size(), 2u);
  EXPECT_EQ(run["pool_grants"][0]["report"]["rates"][0][1], 100) << "the inputs, as JSON";
  EXPECT_TRUE(run["pool_grants"][1]["report"].is_null()) << "a row that is not JSON";
  const std::string text = RenderText(r);
  EXPECT_NE(text.find("  elastic    1 worker job(s) of their own, 1 preempted; the pool's grant "
                      "changed 2 time(s), last: 0 worker(s)\n"),
            std::string::npos)
      << text;
  // A run without either shows none of it.
  ReportModel plain;
  plain.runs.push_back(SmallRun());
  EXPECT_EQ(RenderHtml(plain).find("The pool's grants"), std::string::npos);
  EXPECT_EQ(RenderText(plain).find("elastic"), std::string::npos);
}

TEST(ReportsTest, GivenALongRunThenThePageStaysSmall) {
  RunModel m = SmallRun();
  for (auto& [name, pts] : m.series) {
    pts.clear();
    for (int i = 0; i < 100000; ++i) pts.push_back({i * 2.0, static_cast<double>(i % 97)});
  }
  ReportModel r;
  r.runs.push_back(m);
  const std::string html = RenderHtml(r);
  EXPECT_LT(html.size(), 300000u) << "100,000 rows per series must not make a huge page";
  EXPECT_NE(html.find("id=\"chart-throughput-0\" data-points=\"1200\""), std::string::npos);
  const nlohmann::json j = RenderJson(r);
  EXPECT_EQ(j["runs"][0]["series"]["samples_per_s"]["points_recorded"], 100000);
  EXPECT_EQ(j["runs"][0]["series"]["samples_per_s"]["points"].size(), 1200u);
}

TEST(ReportsTest, GivenSeveralRunsThenTheyAreComparedSideBySide) {
  ReportModel r;
  r.runs.push_back(SmallRun());
  RunModel other = SmallRun();
  other.run.id = "nightly-8";
  r.runs.push_back(other);
  const std::string html = RenderHtml(r);
  EXPECT_EQ(Count(html, "<table class=\"compare\">"), 1u);
  EXPECT_NE(html.find("<a href=\"#run-1\">nightly-8</a>"), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-throughput-1\""), std::string::npos);
}

// Golden files: GM_UPDATE_GOLDEN=1 rewrites them (then read the diff).
void Golden(const std::string& name, const std::string& got) {
  const std::string path = std::string(GOLDMINER_SOURCE_DIR) + "/tests/data/reports/" + name;
  if (std::getenv("GM_UPDATE_GOLDEN") != nullptr) std::ofstream(path) << got;
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " is missing (GM_UPDATE_GOLDEN=1 writes it)";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(got, want.str()) << "differs from " << path;
}

TEST(ReportsTest, GivenARunThenTextAndJsonMatchTheirGoldenFiles) {
  ReportModel r;
  r.source = "runs.db";
  r.generated_utc = "2026-11-30T12:00:00Z";
  r.runs.push_back(SmallRun());
  Golden("small_run.txt", RenderText(r));
  Golden("small_run.json", RenderJson(r).dump(2) + "\n");
  EXPECT_EQ(RenderJson(r)["schema"], "goldminer.report");
  EXPECT_EQ(RenderJson(r)["version"], 1);
}

TEST(ReportsTest, GivenAProfileThenItsVerdictFollowsTheStallAndItsPageHasItsParts) {
  Profile p = gm::testing::FullProfile();
  p.trainer->gpu.available = false;
  p.trainer->steps = 10;
  p.trainer->stall_fraction = 0.3;
  EXPECT_EQ(ClassifyProfile(p).verdict, Verdict::kInputBound);
  p.trainer->stall_fraction = 0.05;  // at the threshold: not above it
  EXPECT_EQ(ClassifyProfile(p).verdict, Verdict::kComputeBound);
  p.trainer->gpu.available = true;  // with a GPU, its input stall decides
  p.trainer->gpu.stall_fraction = 0.4;
  SetVerdict(p);
  EXPECT_EQ(p.verdict, "input-bound");
  EXPECT_DOUBLE_EQ(p.input_bound_fraction, 0.4);
  Profile none = p;
  none.trainer.reset();
  SetVerdict(none);
  EXPECT_EQ(none.verdict, "unknown");
  EXPECT_NE(ProfileText(p).find("verdict: input-bound: 40.0% of step time the GPU idled"),
            std::string::npos);
  ReportModel r;
  r.profile = ProfileModel{3, p};
  const std::string html = RenderHtml(r);
  EXPECT_NE(html.find("id=\"chart-profile-stages\" data-bars=\"" +
                      std::to_string(p.pipeline->stages.size()) + "\""),
            std::string::npos);
  EXPECT_NE(html.find("<table class=\"cuts\">"), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-demand\""), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-gpu\" data-steps=\"3\""), std::string::npos)
      << "a strip of the 3 measured steps: busy, input stall, other idle";
}

}  // namespace
}  // namespace gm::reports

namespace gm {
namespace {

TEST(StatusLineTest, GivenAnIntervalsRatesThenTheLineSaysRateWaitWorkersAndEpoch) {
  RunRates r;
  r.samples_per_s = 811.6;
  r.data_wait_fraction = 0.123;
  r.workers = 3;
  r.worker_cpus = 2.94;
  r.epoch = 2;
  EXPECT_EQ(reports::RatesLine(r), "812 samples/s, data wait 12%, 3 worker(s) (2.9 CPUs), epoch 2");
  // Workers Slurm has not started yet are not counted as running.
  r.workers_live = 1;
  EXPECT_EQ(reports::RatesLine(r),
            "812 samples/s, data wait 12%, 1 of 3 worker(s) running (2.9 CPUs), epoch 2");
  r.workers_live = 3;
  EXPECT_EQ(reports::RatesLine(r), "812 samples/s, data wait 12%, 3 worker(s) (2.9 CPUs), epoch 2");
}

TEST(WorkerProgressLineTest, GivenATotalOrNoneThenTheLineSaysSamplesRateAndSkipped) {
  EXPECT_EQ(reports::WorkerProgressLine(1, 500, 1000, 2, 3),
            "epoch 1  500/1000 samples  250.0 samples/s  skipped 3");
  EXPECT_EQ(reports::WorkerProgressLine(0, 7, 0, 0, 0),
            "epoch 0  7 samples  7000000000.0 samples/s  skipped 0");
}

TEST(PoolStateTextTest, GivenRunsAndChangesThenEachIsOneLineAndTheGrantsAddUp) {
  const nlohmann::json state = nlohmann::json::parse(R"({
    "cpus": 8,
    "runs": [
      {"run_id": "run-a", "gpus": 2, "extra_workers": 3, "cpus": 6, "held_workers": 2, "age_s": 1.4},
      {"run_id": "run-b", "gpus": 0.5, "extra_workers": 1, "cpus": 2, "held_workers": 1, "age_s": 12}
    ],
    "history": [{"age_s": 30.2, "run_id": "run-a", "from_cpus": 4, "to_cpus": 6,
                 "reason": "its gain is steepest"}]})");
  EXPECT_EQ(reports::PoolStateText(state),
            "pool: 8 CPUs, 8 granted to 2 run(s)\n"
            "run                               GPUs  granted workers  CPUs  holds  last report\n"
            "run-a                               2.0                3     6      2  1 s ago\n"
            "run-b                               0.5                1     2      1  12 s ago\n"
            "changes (newest last):\n"
            "  30 s ago: run-a 4 -> 6 CPUs: its gain is steepest\n");
  EXPECT_EQ(reports::PoolStateText(nlohmann::json::parse(R"({"cpus": 4, "runs": []})")),
            "pool: 4 CPUs, 0 granted to 0 run(s)\n");
  EXPECT_EQ(reports::PoolStateText(nlohmann::json()), "pool: no state\n");
}

}  // namespace
}  // namespace gm
