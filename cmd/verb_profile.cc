// `goldminer profile`: is this job input-bound, by how much, and which stage costs
// the CPU? Runs the pipeline here (per-stage costs), the trainer for a bounded
// number of steps (data wait, demand, GPU stall), and writes profile.json (what
// `plan` reads), rows in runs.db, a table on the terminal and optionally a
// Chrome/Perfetto trace. See man/goldminer-profile.1.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "cmd/cli.h"
#include "cmd/run_flags.h"
#include "core/host.h"
#include "core/log.h"
#include "core/os/file_util.h"
#include "core/store/sqlite_run_store.h"
#include "profiler/measure.h"
#include "profiler/trace.h"
#include "profiler/trainer_profile.h"
#include "reports/profile_text.h"
#include "worker/pipeline.h"

namespace gm::cli {
namespace {

struct ProfileFlags {
  ProfileFlags() { spec.epochs = 1000; }  // the trainer's own loop decides; the profile stops it
  RunSpec spec;  // --pipeline, --workers, ... and the trainer command (cmd/run_flags.h)
  uint64_t samples = 512;
  uint64_t warmup = 64;
  uint64_t steps = 100;
  double seconds = 0;
  uint64_t warmup_steps = 5;
  double step_timeout_s = 120;
  std::string db = "runs.db";
  bool no_db = false;
  std::string out = "profile.json";
  std::string trace;
  bool json = false;
  bool no_cupti = false;
  std::string offload = "exact";  // --offload
};

void Say(const std::string& line) { LogInfo("profile: " + line); }

// Writes profile.json, the runs.db rows and the trace. The first failure is
// returned, after trying the others (nothing measured is thrown away).
Status WriteOutputs(const ProfileFlags& f, const Profile& profile, const TraceInput* trace) {
  Status first = WriteFileAtomic(f.out, JsonText(ProfileToJson(profile), 2));
  if (first.ok()) Say("wrote " + f.out);
  if (!f.no_db) {
    Result<int64_t> id = [&]() -> Result<int64_t> {
      GM_ASSIGN_OR_RETURN(std::unique_ptr<SqliteRunStore> store, SqliteRunStore::Open(f.db));
      return store->AddProfile(profile);
    }();
    if (id.ok()) {
      Say("recorded as profile " + std::to_string(*id) + " in " + f.db);
    } else if (first.ok()) {
      first = id.status();
    }
  }
  if (trace != nullptr && !f.trace.empty()) {
    Status st = WriteFileAtomic(f.trace, JsonText(ChromeTrace(*trace), -1));
    if (st.ok()) {
      Say("wrote " + f.trace + " (open it in ui.perfetto.dev or chrome://tracing)");
    } else if (first.ok()) {
      first = st;
    }
  }
  return first;
}

Result<int> RunProfile(const ProfileFlags& f) {
  if (f.spec.world_size > 1 && f.spec.pipeline.empty()) {
    LogError(
        "--world-size needs --pipeline: without it the program runs as it is, "
        "starting its own processes");
    return kExitUsage;
  }
  if (f.spec.pipeline.empty() && f.spec.command.empty()) {  // a usage error: exit 2
    LogError(
        "profile needs --pipeline FILE, a trainer command after --, or both; e.g. "
        "goldminer profile --pipeline pipeline.json -- python3 train.py");
    return kExitUsage;
  }
  GM_RETURN_IF_ERROR(CheckWritable(f.out, "-o"));
  if (!f.no_db) GM_RETURN_IF_ERROR(CheckWritable(f.db, "--db"));
  if (!f.trace.empty()) GM_RETURN_IF_ERROR(CheckWritable(f.trace, "--trace"));
  MeasureOptions mo;
  mo.spec = f.spec;
  mo.samples = f.samples;
  mo.warmup = f.warmup;
  mo.warmup_steps = f.warmup_steps;
  mo.steps = f.steps;
  mo.seconds = f.seconds;
  mo.step_timeout_s = f.step_timeout_s;
  mo.inject_cupti = !f.no_cupti;
  mo.price_native = f.offload == "native";
  mo.trace = !f.trace.empty();
  mo.goldminer_version = GOLDMINER_VERSION;
  mo.progress = Say;
  GM_ASSIGN_OR_RETURN(Measurement m, MeasureProfile(mo));
  const Profile& profile = m.profile;
  int exit_code = kExitOk;
  if (m.trainer_failed) {
    LogWarning("profile: the trainer " + profile.trainer->exit +
               " before the profile stopped it; the figures cover its " +
               std::to_string(profile.trainer->steps) + " measured steps");
    exit_code = kExitFailure;
  }
  const Status& trainer_problem = m.trainer_problem;
  const TraceInput& trace = m.trace;
  Status written = WriteOutputs(f, profile, &trace);
  if (f.json) {
    std::cout << JsonText(ProfileToJson(profile), 2);
  } else {
    std::cout << reports::ProfileText(profile);
  }
  std::cout.flush();
  if (!trainer_problem.ok()) return trainer_problem;
  if (!written.ok()) return written;
  return exit_code;
}

}  // namespace

Verb ProfileVerb() {
  return Verb{
      "profile", "Measure per-stage CPU cost, trainer demand and GPU stall", [](CLI::App& sub) {
        auto f = std::make_shared<ProfileFlags>();
        RunSpecHelp help;
        help.pipeline = "pipeline.json: profile its stages here and feed the trainer from it";
        help.epochs =
            "Epochs the workers serve the trainer (its own loop decides how many it "
            "asks for)";
        AddRunSpecFlags(sub, f->spec, help);
        sub.add_option("--samples", f->samples, "Samples per measured pipeline run")
            ->capture_default_str()
            ->check(CLI::Range(1, 100000000));
        sub.add_option("--warmup", f->warmup, "Pipeline samples run first and not measured")
            ->capture_default_str()
            ->check(CLI::Range(0, 100000000));
        sub.add_option("--steps", f->steps,
                       "Trainer steps to measure (after the warm-up steps), then stop it; "
                       "0: no limit")
            ->capture_default_str()
            ->check(CLI::Range(0, 100000000));
        sub.add_option("--seconds", f->seconds,
                       "Stop the trainer after this many seconds (0: no limit)")
            ->capture_default_str()
            ->check(CLI::Range(0.0, 1e9));
        sub.add_option("--warmup-steps", f->warmup_steps, "Trainer steps not measured at start")
            ->capture_default_str()
            ->check(CLI::Range(0, 1000000));
        sub.add_option("--step-timeout", f->step_timeout_s,
                       "Stop the trainer when it makes no step for this many seconds")
            ->capture_default_str()
            ->check(CLI::Range(0.1, 1e9));
        sub.add_option("--db", f->db, "runs.db to record the profile in (SQLite)")
            ->capture_default_str();
        sub.add_flag("--no-db", f->no_db, "Do not record the profile in a runs.db");
        sub.add_option("-o,--output", f->out, "Where to write profile.json")->capture_default_str();
        sub.add_option(
            "--trace", f->trace,
            "Also write a Chrome/Perfetto trace (stage spans, data waits, GPU activity)");
        sub.add_flag("--json", f->json, "Print profile.json on stdout instead of the table");
        sub.add_option("--offload", f->offload,
                       "exact: an unchanged program's DataLoaders are priced by their own "
                       "worker processes' CPU; native: also by goldminer's native engine, "
                       "each DataLoader it recognises making a few samples here, and plan "
                       "sizes the data workers by that (run --offload native)")
            ->capture_default_str()
            ->check(CLI::IsMember({"exact", "native"}));
        sub.add_flag("--no-cupti", f->no_cupti,
                     "Do not inject libgoldminer_cupti.so into the trainer (no GPU timeline)");
        return std::function<Result<int>()>([f]() -> Result<int> { return RunProfile(*f); });
      }};
}

}  // namespace gm::cli
