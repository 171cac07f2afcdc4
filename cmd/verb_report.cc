// `goldminer report`: loads runs and profiles from runs.db into report models and
// writes them as one HTML page, a terminal summary or JSON (reports/report.h).
#include <charconv>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "cmd/cli.h"
#include "core/json.h"
#include "core/log.h"
#include "core/os/file_util.h"
#include "core/plan.h"
#include "core/store/sqlite_run_store.h"
#include "reports/report.h"
#include "reports/sim_text.h"

namespace gm::cli {
namespace {

// A run that says "running" but has shown no sign of life for this long did not
// finish (its heartbeat comes with every sample, every few seconds).
constexpr double kStaleS = 60;

struct ReportFlags {
  std::string db = "runs.db";
  std::string run;      // an id, "latest" or "all"; empty: latest unless --profile
  std::string profile;  // an id or "latest"
  std::string format = "html";
  std::string out;  // empty: report.html for html, stdout otherwise; "-": stdout
  std::string sim;  // a sim.json, or a simulation of runs.db (its id, or latest)
};

// The simulation --sim names: a sim.json file, else a simulation recorded in
// runs.db by its id or "latest"; `origin` says which, for the page.
Result<nlohmann::json> LoadSim(const ReportFlags& f, std::string* origin) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(f.sim, ec)) {
    *origin = f.sim;
    return LoadJsonFile(f.sim);
  }
  int64_t id = 0;
  const bool latest = f.sim == "latest";
  const char* end = f.sim.data() + f.sim.size();
  const auto [stop, bad] = std::from_chars(f.sim.data(), end, id);
  if (!latest && (f.sim.empty() || bad != std::errc() || stop != end || id < 1)) {
    return Status::InvalidArgument("--sim " + f.sim +
                                   ": no such file, and not a simulation id of runs.db (a "
                                   "number, or latest)");
  }
  if (!std::filesystem::exists(f.db, ec)) {
    return Status::NotFound("--sim " + f.sim + ": " + f.db +
                            " does not exist (goldminer simulate --db records simulations)");
  }
  GM_ASSIGN_OR_RETURN(std::unique_ptr<SqliteRunStore> store, SqliteRunStore::Open(f.db));
  if (latest) {
    GM_ASSIGN_OR_RETURN(std::vector<SimulationRecord> all, store->ListSimulations());
    if (all.empty()) return Status::NotFound(f.db + ": no simulation recorded");
    id = all.back().id;
  }
  GM_ASSIGN_OR_RETURN(SimulationRecord r, store->GetSimulation(id));
  *origin = f.db + " simulation " + std::to_string(r.id);
  return ParseJson(r.json, *origin);
}

// A simulation's page (--sim): sim.json as `goldminer simulate` wrote it.
Result<std::string> SimReport(const ReportFlags& f) {
  std::string origin;
  GM_ASSIGN_OR_RETURN(nlohmann::json sim, LoadSim(f, &origin));
  if (!sim.is_object() || sim.value("schema", std::string()) != "goldminer.sim" ||
      sim.value("version", 0) != 1) {
    return Status::InvalidArgument(origin +
                                   ": not a sim.json of version 1 ({\"schema\": "
                                   "\"goldminer.sim\", \"version\": 1}, as goldminer simulate "
                                   "writes it)");
  }
  if (f.format == "html") return reports::RenderSimHtml(sim, origin, SystemUtcNow());
  if (f.format == "text") return reports::SimText(sim);
  return sim.dump(2) + "\n";
}

// The plan a run ran, from its row in runs.db (the report reads no plan.json: the
// file may have moved or changed since). A run recorded before schema 3 has no
// plan row: the page says so.
Status LoadRunPlan(SqliteRunStore& store, const RunRecord& run, reports::RunModel& m) {
  if (!run.plan_id) {
    if (!run.plan_path.empty()) {
      m.plan_problem =
          "the run was recorded before runs.db kept the plan it ran (schema 3); "
          "its file was " +
          run.plan_path;
    }
    return Status::Ok();
  }
  GM_ASSIGN_OR_RETURN(PlanRecord row, store.GetPlan(*run.plan_id));
  const std::string origin = store.path() + ": plan " + std::to_string(row.id);
  Result<nlohmann::json> doc = ParseJson(row.json, origin);
  Result<Plan> plan = doc.ok() ? PlanFromJson(*doc, origin) : doc.status();
  if (plan.ok()) {
    m.plan = std::move(*plan);
  } else {
    m.plan_problem = "the plan it ran cannot be read: " + plan.status().message();
  }
  return Status::Ok();
}

Result<reports::RunModel> LoadRun(SqliteRunStore& store, const RunRecord& run,
                                  const std::vector<EventRecord>& events) {
  reports::RunModel m;
  m.run = run;
  GM_ASSIGN_OR_RETURN(m.workers, store.ListWorkers(run.id));
  GM_ASSIGN_OR_RETURN(m.pool_grants, store.ListPoolGrants(run.id));
  GM_ASSIGN_OR_RETURN(std::vector<MetricPoint> metrics, store.ListMetrics(run.id));
  for (const MetricPoint& p : metrics) m.series[p.name].push_back({p.t_s, p.value});
  GM_ASSIGN_OR_RETURN(m.stage_costs, store.ListRunStageCosts(run.id));
  for (const EventRecord& e : events) {
    if (e.run_id == run.id) m.events.push_back(e);
  }
  GM_RETURN_IF_ERROR(LoadRunPlan(store, run, m));
  if (run.status == "running") {
    const auto last = UtcSeconds(run.heartbeat_utc.value_or(run.started_utc));
    const auto now = UtcSeconds(SystemUtcNow());
    m.stale = last && now && *now - *last > kStaleS;
  }
  return m;
}

std::string RunIds(const std::vector<RunRecord>& runs) {
  std::string out;
  for (size_t i = 0; i < runs.size() && i < 10; ++i) out += (i ? ", " : "") + runs[i].id;
  if (runs.size() > 10) out += ", ... (" + std::to_string(runs.size()) + " in all)";
  return out;
}

Result<reports::ReportModel> Load(const ReportFlags& f) {
  GM_ASSIGN_OR_RETURN(std::unique_ptr<SqliteRunStore> store, SqliteRunStore::OpenExisting(f.db));
  reports::ReportModel model;
  model.source = f.db;
  model.generated_utc = SystemUtcNow();
  const std::string which = f.run.empty() && f.profile.empty() ? "latest" : f.run;
  if (!which.empty()) {
    GM_ASSIGN_OR_RETURN(std::vector<RunRecord> runs, store->ListRuns());
    GM_ASSIGN_OR_RETURN(std::vector<EventRecord> events, store->ListEvents());
    std::vector<RunRecord> chosen;
    if (which == "all") {
      chosen = runs;
    } else if (which == "latest") {
      if (!runs.empty()) chosen.push_back(runs.back());
    } else {
      for (const RunRecord& r : runs) {
        if (r.id == which) chosen.push_back(r);
      }
      if (chosen.empty()) {
        return Status::NotFound(
            f.db + " has no run \"" + which + "\"" +
            (runs.empty() ? std::string(" (it has no runs)") : "; its runs: " + RunIds(runs)));
      }
    }
    if (chosen.empty() && f.profile.empty()) {
      return Status::NotFound(f.db +
                              " has no runs yet: `goldminer run` records one; "
                              "for a profile, use --profile latest");
    }
    for (const RunRecord& r : chosen) {
      GM_ASSIGN_OR_RETURN(reports::RunModel m, LoadRun(*store, r, events));
      model.runs.push_back(std::move(m));
    }
  }
  if (!f.profile.empty()) {
    GM_ASSIGN_OR_RETURN(std::vector<ProfileSummary> profiles, store->ListProfiles());
    int64_t id = 0;
    if (f.profile == "latest") {
      if (profiles.empty()) return Status::NotFound(f.db + " has no profiles yet");
      id = profiles.back().id;
    } else {
      const char* end = f.profile.data() + f.profile.size();
      auto [stop, ec] = std::from_chars(f.profile.data(), end, id);
      if (f.profile.empty() || ec != std::errc() || stop != end) {
        return Status::InvalidArgument("--profile " + f.profile +
                                       ": expected a profile id or latest");
      }
    }
    Result<Profile> profile = store->GetProfile(id);
    if (!profile.ok()) {
      std::string ids;
      for (const ProfileSummary& p : profiles)
        ids += (ids.empty() ? "" : ", ") + std::to_string(p.id);
      return Status::NotFound(
          f.db + " has no profile " + std::to_string(id) +
          (ids.empty() ? std::string(" (it has none)") : "; its profiles: " + ids));
    }
    model.profile = reports::ProfileModel{id, std::move(*profile)};
  }
  return model;
}

Result<int> RunReport(const ReportFlags& f) {
  if (!f.sim.empty()) {
    GM_ASSIGN_OR_RETURN(const std::string page, SimReport(f));
    const std::string out = !f.out.empty() ? f.out : f.format == "html" ? "report.html" : "-";
    if (out == "-") {
      std::cout << page << std::flush;
      return kExitOk;
    }
    GM_RETURN_IF_ERROR(WriteFileAtomic(out, page));
    LogInfo("report: wrote " + out + " (the simulation of " + f.sim + ")");
    return kExitOk;
  }
  GM_ASSIGN_OR_RETURN(reports::ReportModel model, Load(f));
  std::string bytes;
  if (f.format == "html") {
    bytes = reports::RenderHtml(model);
  } else if (f.format == "text") {
    bytes = reports::RenderText(model);
  } else {
    bytes = reports::RenderJson(model).dump(2) + "\n";
  }
  const std::string out = !f.out.empty() ? f.out : f.format == "html" ? "report.html" : "-";
  if (out == "-") {
    std::cout << bytes << std::flush;
    return kExitOk;
  }
  GM_RETURN_IF_ERROR(WriteFileAtomic(out, bytes));
  LogInfo("report: wrote " + out + " (" + std::to_string(model.runs.size()) + " run(s)" +
          (model.profile ? ", profile " + std::to_string(model.profile->id) : std::string()) + ")");
  return kExitOk;
}

}  // namespace

Verb ReportVerb() {
  return Verb{
      "report", "Turn runs.db into an HTML page, a text summary or JSON", [](CLI::App& sub) {
        auto f = std::make_shared<ReportFlags>();
        sub.add_option("--db", f->db, "runs.db to read (it must exist)")->capture_default_str();
        sub.add_option("--run", f->run,
                       "The run to show: its id, latest, or all (side by side); default: latest, "
                       "unless only --profile is given");
        sub.add_option("--profile", f->profile, "A profile to show: its id, or latest");
        sub.add_option("--sim", f->sim,
                       "A simulation to show instead: a sim.json from goldminer simulate, or "
                       "the id (or latest) of one it recorded in --db: the policies side by "
                       "side, queue and GPU utilization over time, the assumptions");
        sub.add_option("--format", f->format,
                       "html (one self-contained page), text (a terminal summary) or json")
            ->capture_default_str()
            ->check(CLI::IsMember({"html", "text", "json"}));
        sub.add_option("-o,--output", f->out,
                       "Where to write it (- for stdout); default: report.html for html, stdout "
                       "for text and json");
        return std::function<Result<int>()>([f]() -> Result<int> { return RunReport(*f); });
      }};
}

}  // namespace gm::cli
