// profile.json: ProfileToJson / ProfileFromJson / LoadProfile.
#include "core/profile.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "core/json.h"
#include "tests/unit/profile_fixture.h"
#include "tests/unit/test_util.h"

namespace gm {
namespace {

using nlohmann::json;
using testing::FullProfile;

// Serializes to text and back, as a file written and read again would.
Result<Profile> ThroughText(const Profile& p) {
  GM_ASSIGN_OR_RETURN(json doc, ParseJson(ProfileToJson(p).dump(2) + "\n", "profile.json"));
  return ProfileFromJson(doc, "profile.json");
}

// The message of a failed ProfileFromJson on `doc`, or "" when it succeeded.
std::string ErrorOf(const json& doc) {
  Result<Profile> r = ProfileFromJson(doc, "profile.json");
  EXPECT_FALSE(r.ok()) << "expected an error for " << doc.dump();
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  return r.status().message();
}

// JSON pointers of every leaf, with array indices replaced by "*".
std::set<std::string> LeafShapes(const json& doc, const json* differs_from = nullptr) {
  std::set<std::string> out;
  const json flat = doc.flatten();
  const json other = differs_from ? differs_from->flatten() : json::object();
  static const std::regex kIndex("/[0-9]+(/|$)");
  for (const auto& [pointer, value] : flat.items()) {
    if (differs_from && other.contains(pointer) && other[pointer] == value) continue;
    out.insert(std::regex_replace(pointer, kIndex, "/*$1"));
  }
  return out;
}

TEST(ProfileTest, TheFixtureSetsEveryFieldToANonDefaultValue) {
  // Given a profile with the fixture's shape but default values everywhere
  Profile defaults;
  defaults.pipeline = PipelineProfile{};
  defaults.pipeline->runs.resize(2);
  defaults.pipeline->stages.resize(3);
  defaults.pipeline->cuts.resize(3);
  defaults.trainer = TrainerProfile{};
  defaults.trainer->command.resize(4);
  defaults.trainer->step_list.resize(3);
  defaults.trainer->gpu.instrumentation_overhead = 0.0;
  defaults.trainer->dataloader = DataLoaderProfile{};
  defaults.trainer->native = NativeProfile{};
  defaults.trainer->not_native.resize(1);
  for (StepProfile& s : defaults.trainer->step_list) {
    s.gpu_busy_s = s.gpu_idle_s = s.gpu_stall_s = 0.0;
  }
  const json full = ProfileToJson(FullProfile());
  const json base = ProfileToJson(defaults);
  // Then every leaf but schema and version differs somewhere (so the round trip
  // below would notice a field that is lost or rounded)
  std::set<std::string> all = LeafShapes(full);
  all.erase("/schema");
  all.erase("/version");
  EXPECT_EQ(LeafShapes(full, &base), all);
  EXPECT_EQ(LeafShapes(full), LeafShapes(base)) << "same shape, same keys";
}

TEST(ProfileTest, RoundTripOfAFullProfileKeepsEveryField) {
  const Profile p = FullProfile();
  Result<Profile> back = ThroughText(p);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->pipeline, p.pipeline);
  EXPECT_EQ(back->trainer, p.trainer);
  EXPECT_EQ(*back, p);
}

TEST(ProfileTest, WritesSchemaVersionAndSnakeCaseNames) {
  const json j = ProfileToJson(FullProfile());
  EXPECT_EQ(j["schema"], "goldminer.profile");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["pipeline"]["stages"][2]["cpu_s_per_sample"], 0.0013 * 3);
  EXPECT_EQ(j["trainer"]["gpu"]["busy_fraction"], 0.54);
  EXPECT_EQ(j["trainer"]["step_list"][0]["gpu_stall_s"], 0.029);
  EXPECT_EQ(j["input_bound_fraction"], 0.37);
}

TEST(ProfileTest, AbsentPartsAreLeftOutAndComeBackAbsent) {
  // Given a profile without a trainer, and one with a trainer but no GPU figures
  Profile no_trainer = FullProfile();
  no_trainer.trainer.reset();
  no_trainer.verdict = "unknown";
  Profile no_gpu = FullProfile();
  no_gpu.pipeline.reset();
  for (StepProfile& s : no_gpu.trainer->step_list) {
    s.gpu_busy_s.reset();
    s.gpu_idle_s.reset();
    s.gpu_stall_s.reset();
  }
  // Then the keys are not written (not even as null)
  EXPECT_FALSE(ProfileToJson(no_trainer).contains("trainer"));
  EXPECT_FALSE(ProfileToJson(no_gpu).contains("pipeline"));
  const json step = ProfileToJson(no_gpu)["trainer"]["step_list"][0];
  EXPECT_FALSE(step.contains("gpu_busy_s"));
  EXPECT_FALSE(step.contains("gpu_idle_s"));
  EXPECT_FALSE(step.contains("gpu_stall_s"));
  // And both read back equal
  EXPECT_EQ(*ThroughText(no_trainer), no_trainer);
  EXPECT_EQ(*ThroughText(no_gpu), no_gpu);
}

TEST(ProfileTest, AnotherVersionNamesTheFileAndBothVersions) {
  json j = ProfileToJson(FullProfile());
  j["version"] = 2;
  EXPECT_EQ(ErrorOf(j),
            "profile.json: $.version: this is goldminer.profile version 2; this goldminer reads "
            "version 1 (re-run `goldminer profile` with this goldminer, or use the goldminer "
            "that wrote it)");
}

TEST(ProfileTest, AnotherSchemaIsRejectedBeforeAnyField) {
  json j = {{"schema", "goldminer.plan"}, {"version", 1}};
  EXPECT_EQ(ErrorOf(j),
            "profile.json: $.schema: expected \"goldminer.profile\" (is this a profile.json "
            "written by `goldminer profile`?), got \"goldminer.plan\"");
  EXPECT_EQ(ErrorOf(json::array()),
            "profile.json: $: expected a profile object ({\"schema\": \"goldminer.profile\", "
            "...}), got an array");
}

TEST(ProfileTest, AWrongTypeNamesTheJsonPath) {
  json j = ProfileToJson(FullProfile());
  j["pipeline"]["stages"][2]["cpu_s_per_sample"] = "x";
  EXPECT_EQ(ErrorOf(j),
            "profile.json: $.pipeline.stages[2].cpu_s_per_sample: expected a number, got \"x\"");

  j = ProfileToJson(FullProfile());
  j["trainer"]["step_list"][1]["gpu_idle_s"] = true;
  EXPECT_EQ(ErrorOf(j),
            "profile.json: $.trainer.step_list[1].gpu_idle_s: expected a number, got true");

  j = ProfileToJson(FullProfile());
  j["trainer"]["command"][3] = 1;
  EXPECT_EQ(ErrorOf(j), "profile.json: $.trainer.command[3]: expected a string, got 1");

  j = ProfileToJson(FullProfile());
  j["pipeline"]["samples"] = -5;
  EXPECT_EQ(ErrorOf(j), "profile.json: $.pipeline.samples: expected an integer >= 0, got -5");

  j = ProfileToJson(FullProfile());
  j["cores"] = 4294967296;
  EXPECT_EQ(ErrorOf(j),
            "profile.json: $.cores: expected an integer of at most 31 bits, got 4294967296");

  j = ProfileToJson(FullProfile());
  j["trainer"]["gpu"] = "none";
  EXPECT_EQ(ErrorOf(j), "profile.json: $.trainer.gpu: expected an object, got \"none\"");

  j = ProfileToJson(FullProfile());
  j["trainer"]["dataloader"]["cpu_s_per_sample"] = 0;
  EXPECT_EQ(ErrorOf(j),
            "profile.json: $.trainer.dataloader.cpu_s_per_sample: expected a positive number of "
            "seconds, got 0");
  j["trainer"]["dataloader"]["cpu_s_per_sample"] = 0.002;
  j["trainer"]["dataloader"]["workers"] = 0;
  EXPECT_EQ(ErrorOf(j),
            "profile.json: $.trainer.dataloader.workers: expected a worker count of at least 1, "
            "got 0");

  j = ProfileToJson(FullProfile());
  j["trainer"]["native"]["cut_cpu_s_per_sample"] = -1;
  EXPECT_EQ(ErrorOf(j),
            "profile.json: $.trainer.native.cut_cpu_s_per_sample: expected a number of seconds, "
            "0 or more, got -1");
  j["trainer"]["native"]["cut_cpu_s_per_sample"] = 0.001;
  j["trainer"]["native"]["samples"] = 0;
  EXPECT_EQ(ErrorOf(j),
            "profile.json: $.trainer.native.samples: expected a sample count of at least 1, got 0");
  j = ProfileToJson(FullProfile());
  j["trainer"]["not_native"] = {1};
  EXPECT_EQ(ErrorOf(j).rfind("profile.json: $.trainer.not_native[0]: expected a string", 0), 0u)
      << ErrorOf(j);

  j = ProfileToJson(FullProfile());
  j["verdict"] = "slow";
  EXPECT_EQ(ErrorOf(j),
            "profile.json: $.verdict: expected \"input-bound\", \"compute-bound\" or "
            "\"unknown\", got \"slow\"");
}

TEST(ProfileTest, AMissingRequiredFieldNamesTheJsonPath) {
  json j = ProfileToJson(FullProfile());
  j["trainer"].erase("steps");
  EXPECT_EQ(ErrorOf(j), "profile.json: $.trainer: missing required key \"steps\"");

  j = ProfileToJson(FullProfile());
  j["pipeline"]["cuts"][1].erase("bytes_per_sample");
  EXPECT_EQ(ErrorOf(j),
            "profile.json: $.pipeline.cuts[1]: missing required key \"bytes_per_sample\"");

  j = ProfileToJson(FullProfile());
  j.erase("verdict");
  EXPECT_EQ(ErrorOf(j), "profile.json: $: missing required key \"verdict\"");

  j = ProfileToJson(FullProfile());
  j.erase("version");
  EXPECT_EQ(ErrorOf(j), "profile.json: $: missing required key \"version\"");
}

TEST(ProfileTest, UnknownFieldsAreAccepted) {
  // Given a document from a newer minor version with members this one does not know
  json j = ProfileToJson(FullProfile());
  j["energy_j"] = 12.5;
  j["pipeline"]["stages"][0]["gpu_s_per_sample"] = 0.1;
  j["trainer"]["gpu"]["model"] = {{"name", "H100"}};
  // When it is read, Then it equals the profile without them
  Result<Profile> p = ProfileFromJson(j, "profile.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, FullProfile());
}

TEST(ProfileTest, OptionalFieldsTakeTheirDefaults) {
  // Given only the required members
  const json j = json::parse(R"({
    "schema": "goldminer.profile", "version": 1, "created_utc": "2026-01-01T00:00:00Z",
    "host": "h", "cores": 4, "verdict": "compute-bound", "input_bound_fraction": 0,
    "pipeline": {"path": "p.json", "batch_size": 8, "samples": 100, "cpu_s_per_sample": 0.5,
                 "samples_per_s_per_core": 2,
                 "stages": [{"index": 0, "name": "decode_jpeg", "cpu_s_per_sample": 0.5,
                             "bytes_in_per_sample": 10, "bytes_out_per_sample": 30}]},
    "trainer": {"command": ["t"], "steps": 5, "seconds": 1, "samples_per_s": 40,
                "batch_size": 8, "step_s_median": 0.2, "wait_s_median": 0,
                "compute_s_median": 0.2, "demand_samples_per_s": 40, "stall_fraction": 0}})");
  Result<Profile> p = ProfileFromJson(j, "profile.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  // Then the others keep the struct's defaults
  EXPECT_EQ(p->goldminer_version, "");
  EXPECT_TRUE(p->pipeline->stages[0].stateless);
  EXPECT_TRUE(p->pipeline->runs.empty());
  EXPECT_TRUE(p->pipeline->cuts.empty());
  EXPECT_EQ(p->pipeline->sha256, "");
  EXPECT_EQ(p->trainer->gpu, GpuProfile{});
  EXPECT_TRUE(p->trainer->step_list.empty());
  EXPECT_EQ(p->pipeline->stages[0].bytes_out_per_sample, 30);
  EXPECT_EQ(p->trainer->demand_samples_per_s, 40);
}

TEST(ProfileTest, LoadProfileReadsTheFileAndNamesItInErrors) {
  testing::TempDir dir;
  const std::string good = dir.Write("profile.json", ProfileToJson(FullProfile()).dump(2) + "\n");
  Result<Profile> p = LoadProfile(good);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, FullProfile());

  const std::string bad = dir.Write("bad.json", R"({"schema": "goldminer.profile", "version": 1,
    "created_utc": "", "host": "", "cores": "four"})");
  Result<Profile> q = LoadProfile(bad);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message(), bad + ": $.cores: expected an integer, got \"four\"");

  Result<Profile> missing = LoadProfile(dir.path() + "/nope.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find(dir.path() + "/nope.json"), std::string::npos);
}

}  // namespace
}  // namespace gm
