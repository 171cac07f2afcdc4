// Step log tests: the writer's lines read back by the parser, through real files in
// a temporary directory, and the parser's verdict on malformed input.
#include "core/step_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "core/clock.h"
#include "tests/unit/test_util.h"

namespace gm {
namespace {

constexpr std::string_view kHeader = "# goldminer step log 1 pid=42 source=torch\n";

// Sets an environment variable for the scope, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string OwnLogName() { return "steps." + std::to_string(::getpid()) + ".log"; }

TEST(StepLogTest, GivenAWriterWhenItRecordsAndClosesThenTheReaderGetsTheSameSteps) {
  testing::TempDir dir;
  const std::vector<StepRecord> steps = {
      {100, 250, 32}, {300, 300, 32}, {18446744073709551000u, 18446744073709551615u, 7}};
  {
    auto writer = StepLogWriter::Open(dir.path(), "goldminer");
    ASSERT_TRUE(writer.ok()) << writer.status().message();
    for (const StepRecord& step : steps) (*writer)->Record(step);
    EXPECT_EQ((*writer)->failures(), 0u);
    EXPECT_GE((*writer)->seconds_spent(), 0.0);
  }
  auto logs = ReadStepLogs(dir.path());
  ASSERT_TRUE(logs.ok()) << logs.status().message();
  ASSERT_EQ(logs->size(), 1u);
  const StepLog& log = logs->front();
  EXPECT_EQ(log.pid, ::getpid());
  EXPECT_EQ(log.source, "goldminer");
  EXPECT_EQ(log.steps, steps);
  EXPECT_TRUE(log.errors.empty());
  EXPECT_EQ(log.overhead_records, 3u);
  EXPECT_GE(log.overhead_s, 0.0);
  EXPECT_LT(log.overhead_s, 60.0);
  std::string text = testing::ReadAll(dir.path() + "/" + OwnLogName());
  EXPECT_TRUE(text.starts_with("# goldminer step log 1 pid=" + std::to_string(::getpid()) +
                               " source=goldminer\nS 100 250 32 0\n"))
      << text;
}

TEST(StepLogTest, GivenNoOverheadLineThenTheStepLinesCostsAreTheOverhead) {
  // A killed writer leaves no "O" line: each "S" line carries its predecessor's cost.
  Result<StepLog> log =
      ParseStepLog(std::string(kHeader) + "S 1 2 3 0\nS 4 5 3 1000\nS 6 7 3 3000\n", "f.log");
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ(log->steps.size(), 3u);
  EXPECT_EQ(log->overhead_records, 2u);
  EXPECT_NEAR(log->overhead_s, 4e-6, 1e-15);
  // With an "O" line, that line is the figure.
  Result<StepLog> closed =
      ParseStepLog(std::string(kHeader) + "S 1 2 3 0\nS 4 5 3 1000\nO 0.5 2\n", "f.log");
  ASSERT_TRUE(closed.ok()) << closed.status().message();
  EXPECT_EQ(closed->overhead_records, 2u);
  EXPECT_EQ(closed->overhead_s, 0.5);
}

TEST(StepLogTest, GivenTwoWritersInOneProcessThenOneLogSumsTheirOverhead) {
  testing::TempDir dir;
  for (int i = 0; i < 2; ++i) {
    auto writer = StepLogWriter::Open(dir.path(), "goldminer");
    ASSERT_TRUE(writer.ok()) << writer.status().message();
    (*writer)->Record({1, 2, 3});
  }
  auto logs = ReadStepLogs(dir.path());
  ASSERT_TRUE(logs.ok()) << logs.status().message();
  ASSERT_EQ(logs->size(), 1u);
  EXPECT_EQ(logs->front().steps.size(), 2u);
  EXPECT_EQ(logs->front().overhead_records, 2u);
}

TEST(StepLogTest, GivenErrorAndOverheadLinesThenTheyAreParsedAndSummed) {
  auto log = ParseStepLog(std::string(kHeader) +
                              "S 5 9 4\n"
                              "E hook failed: KeyError 'x'\n"
                              "# a comment\n"
                              "O 0.25 10\n"
                              "E\n"
                              "O 0.5 1\n",
                          "steps.42.log");
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ(log->pid, 42);
  EXPECT_EQ(log->source, "torch");
  EXPECT_EQ(log->steps, (std::vector<StepRecord>{{5, 9, 4}}));
  EXPECT_EQ(log->errors, (std::vector<std::string>{"hook failed: KeyError 'x'", ""}));
  EXPECT_DOUBLE_EQ(log->overhead_s, 0.75);
  EXPECT_EQ(log->overhead_records, 11u);
}

TEST(StepLogTest, GivenDataLoaderLinesThenEachBelongsToTheStepBeforeIt) {
  auto log = ParseStepLog(std::string(kHeader) +
                              "S 1 2 4\n"
                              "D 2 170000000 1640\n"
                              "S 3 4 4\n"
                              "S 5 6 4\n"
                              "D 3 660000000 1640\n",
                          "steps.42.log");
  ASSERT_TRUE(log.ok()) << log.status().message();
  ASSERT_EQ(log->steps.size(), 3u);
  EXPECT_EQ(log->steps[0].loader, (LoaderRecord{2, 170000000, 1640}));
  EXPECT_FALSE(log->steps[1].loader);  // a batch made in the process itself
  EXPECT_EQ(log->steps[2].loader, (LoaderRecord{3, 660000000, 1640}));
}

TEST(StepLogTest, GivenNativeEngineLinesThenTheyAreKeptInOrderWithTheReasonsNot) {
  auto log = ParseStepLog(std::string(kHeader) +
                              "N 32 48000000 19267584 41000000 4816896\n"
                              "S 1 2 4\n"
                              "X a DataLoader of Texts: the dataset is a Texts\n"
                              "N 8 8000000 4816896 7000000 1204224\n",
                          "steps.42.log");
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ(log->native, (std::vector<NativeRecord>{{32, 48000000, 19267584, 41000000, 4816896},
                                                    {8, 8000000, 4816896, 7000000, 1204224}}));
  EXPECT_EQ(log->not_native,
            (std::vector<std::string>{"a DataLoader of Texts: the dataset is a Texts"}));
  EXPECT_EQ(log->steps.size(), 1u);
}

TEST(StepLogTest, GivenALastLineWithoutNewlineThenItIsIgnored) {
  auto log = ParseStepLog(std::string(kHeader) + "S 1 2 3\nS 4 5", "x.log");
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ(log->steps, (std::vector<StepRecord>{{1, 2, 3}}));
  auto garbage_tail = ParseStepLog(std::string(kHeader) + "S 1 2 3\nxyz", "x.log");
  EXPECT_TRUE(garbage_tail.ok()) << garbage_tail.status().message();
}

TEST(StepLogTest, GivenMalformedLinesThenCorruptNamesFileLineAndProblem) {
  struct Case {
    std::string text;
    std::string where;  // "FILE:LINE:"
    std::string what;   // part of the message
  };
  const std::string h(kHeader);
  const std::vector<Case> cases = {
      {"", "f.log:1:", "empty"},
      {"S 1 2 3\n", "f.log:1:", "not a goldminer step log"},
      {"# goldminer step log 2 pid=1 source=torch\n", "f.log:1:", "version 2"},
      {"# goldminer step log 1 pid=0 source=torch\n", "f.log:1:", "malformed header"},
      {"# goldminer step log 1 pid=7 source=\n", "f.log:1:", "malformed header"},
      {"# goldminer step log 1 pid=7\n", "f.log:1:", "malformed header"},
      {h + "S 1 2\n", "f.log:2:", "malformed step"},
      {h + "S 1 2 3 4 5\n", "f.log:2:", "malformed step"},
      {h + "S 1 2 3 x\n", "f.log:2:", "malformed step"},
      {h + "S 1 2 -3\n", "f.log:2:", "malformed step"},
      {h + "S 1  2 3\n", "f.log:2:", "malformed step"},
      {h + "S 1 2 99999999999999999999\n", "f.log:2:", "malformed step"},
      {h + "S 9 2 3\n", "f.log:2:", "ends (2 ns) before it begins (9 ns)"},
      {h + "S 1 2 3\nO nan 1\n", "f.log:3:", "malformed overhead"},
      {h + "O 0.5\n", "f.log:2:", "malformed overhead"},
      {h + "O -0.5 1\n", "f.log:2:", "malformed overhead"},
      {h + "D 2 1 1\n", "f.log:2:", "follows no step line"},
      {h + "S 1 2 3\nD 2 1 1\nD 2 1 1\n", "f.log:4:", "follows no step line"},
      {h + "S 1 2 3\nD 0 1 1\n", "f.log:3:", "malformed DataLoader line"},
      {h + "S 1 2 3\nD 2 1\n", "f.log:3:", "malformed DataLoader line"},
      {h + "S 1 2 3\nD 2 -1 1\n", "f.log:3:", "malformed DataLoader line"},
      {h + "\n", "f.log:2:", "unknown line"},
      {h + "Z 1\n", "f.log:2:", "unknown line \"Z 1\""},
      {h + "N 0 1 1 1 1\n", "f.log:2:", "malformed native engine line"},
      {h + "N 4 1 1 1\n", "f.log:2:", "malformed native engine line"},
      {h + "N 4 1 1 1 -1\n", "f.log:2:", "malformed native engine line"},
      {h + "# goldminer step log 1 pid=43 source=torch\n", "f.log:2:", "pid 43"},
  };
  for (const Case& c : cases) {
    auto log = ParseStepLog(c.text, "f.log");
    ASSERT_FALSE(log.ok()) << c.text;
    EXPECT_EQ(log.status().code(), Code::kCorrupt) << c.text;
    EXPECT_TRUE(log.status().message().starts_with(c.where)) << log.status().message();
    EXPECT_NE(log.status().message().find(c.what), std::string::npos) << log.status().message();
  }
}

TEST(StepLogTest, GivenSeveralLogsThenReadStepLogsSortsThemByPidAndSkipsOtherFiles) {
  testing::TempDir dir;
  dir.Write("steps.20.log", "# goldminer step log 1 pid=20 source=torch\nS 1 2 3\n");
  dir.Write("steps.3.log", "# goldminer step log 1 pid=3 source=goldminer\n");
  dir.Write("gpu.3.log", "not a step log");
  dir.Write("steps.json", "{}");
  dir.Write("steps.7.log", "");                    // killed before its header
  dir.Write("steps.8.log", "# goldminer step l");  // killed while writing it
  auto logs = ReadStepLogs(dir.path());
  ASSERT_TRUE(logs.ok()) << logs.status().message();
  ASSERT_EQ(logs->size(), 2u);
  EXPECT_EQ((*logs)[0].pid, 3);
  EXPECT_EQ((*logs)[1].pid, 20);
  EXPECT_EQ((*logs)[1].steps.size(), 1u);
}

TEST(StepLogTest, GivenLogsGrowingThenTheStepCounterCountsCompleteStepLinesOnly) {
  testing::TempDir dir;
  StepCounter counter(dir.path());
  EXPECT_TRUE(counter.Update().empty());
  const std::string a = dir.path() + "/steps.5.log", b = dir.path() + "/steps.6.log";
  auto append = [](const std::string& path, std::string_view text) {
    std::FILE* f = std::fopen(path.c_str(), "a");
    ASSERT_NE(f, nullptr);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  };
  append(a, std::string(kHeader) + "S 1 2 3 0\nS 4 5 3 10\nS 6");
  EXPECT_EQ(counter.Update(), (std::vector<uint64_t>{2}));  // the third is unfinished
  EXPECT_EQ(counter.totals().samples, 6u);
  EXPECT_EQ(counter.totals().wait_ns, 2u);
  append(a, " 7 3 10\nE note\n");
  append(b, std::string(kHeader) + "S 1 2 3 0\n");
  EXPECT_EQ(counter.Update(), (std::vector<uint64_t>{3, 1}));
  EXPECT_EQ(counter.Update(), (std::vector<uint64_t>{3, 1}));  // nothing new, nothing twice
  std::string big;
  for (int i = 0; i < 5000; ++i) big += "S 100 200 8 5\n";  // more than one read buffer
  append(b, big + "O 0.1 5001\n");
  EXPECT_EQ(counter.Update(), (std::vector<uint64_t>{3, 5001}));
  // a: three steps of 3 samples waiting 1 ns; b: one such, then 5000 of 8 samples
  // waiting 100 ns (the third line of a was completed between two reads).
  const StepCounter::Totals t = counter.totals();
  EXPECT_EQ(t.steps, 5004u);
  EXPECT_EQ(t.samples, 9u + 3u + 40000u);
  EXPECT_EQ(t.wait_ns, 3u + 1u + 500000u);
  Result<std::vector<StepLog>> logs = ReadStepLogs(dir.path());
  ASSERT_TRUE(logs.ok()) << logs.status().message();
  EXPECT_EQ((*logs)[0].steps.size(), 3u);
  EXPECT_EQ((*logs)[1].steps.size(), 5001u);
}

TEST(StepLogTest, GivenACorruptLogInTheDirectoryThenReadStepLogsNamesItsPath) {
  testing::TempDir dir;
  std::string path = dir.Write("steps.5.log", "# goldminer step log 1 pid=5 source=torch\nS x\n");
  auto logs = ReadStepLogs(dir.path());
  ASSERT_FALSE(logs.ok());
  EXPECT_EQ(logs.status().code(), Code::kCorrupt);
  EXPECT_TRUE(logs.status().message().starts_with(path + ":2:")) << logs.status().message();
}

TEST(StepLogTest, GivenAMissingDirectoryThenReadStepLogsIsNotFoundNamingIt) {
  testing::TempDir dir;
  auto logs = ReadStepLogs(dir.path() + "/absent");
  ASSERT_FALSE(logs.ok());
  EXPECT_EQ(logs.status().code(), Code::kNotFound);
  EXPECT_NE(logs.status().message().find(dir.path() + "/absent"), std::string::npos)
      << logs.status().message();
  auto empty = ReadStepLogs(dir.path());
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_TRUE(empty->empty());
}

TEST(StepLogTest, GivenABadSourceOrDirectoryThenOpenFailsNamingIt) {
  testing::TempDir dir;
  auto spaced = StepLogWriter::Open(dir.path(), "two words");
  ASSERT_FALSE(spaced.ok());
  EXPECT_EQ(spaced.status().code(), Code::kInvalidArgument);
  auto missing = StepLogWriter::Open(dir.path() + "/absent", "torch");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kIoError);
  EXPECT_NE(missing.status().message().find(dir.path() + "/absent/" + OwnLogName()),
            std::string::npos)
      << missing.status().message();
}

TEST(StepLogTest, GivenNoProfileDirVariableThenFromEnvironmentIsNull) {
  ScopedEnv unset("GOLDMINER_PROFILE_DIR", nullptr);
  EXPECT_EQ(StepLogWriter::FromEnvironment("goldminer"), nullptr);
  ScopedEnv empty("GOLDMINER_PROFILE_DIR", "");
  EXPECT_EQ(StepLogWriter::FromEnvironment("goldminer"), nullptr);
}

TEST(StepLogTest, GivenTheProfileDirVariableThenFromEnvironmentWritesThere) {
  testing::TempDir dir;
  {
    ScopedEnv set("GOLDMINER_PROFILE_DIR", dir.path().c_str());
    auto writer = StepLogWriter::FromEnvironment("goldminer");
    ASSERT_NE(writer, nullptr);
    writer->Record({7, 8, 9});
  }
  auto logs = ReadStepLogs(dir.path());
  ASSERT_TRUE(logs.ok()) << logs.status().message();
  ASSERT_EQ(logs->size(), 1u);
  EXPECT_EQ(logs->front().steps, (std::vector<StepRecord>{{7, 8, 9}}));
}

TEST(StepLogTest, GivenAnUnwritableProfileDirThenFromEnvironmentIsNullAndTrainingGoesOn) {
  testing::TempDir dir;
  const std::string absent = dir.path() + "/absent";
  ScopedEnv set("GOLDMINER_PROFILE_DIR", absent.c_str());
  EXPECT_EQ(StepLogWriter::FromEnvironment("goldminer"), nullptr);
}

TEST(StepLogTest, MonotonicNanosIsTheClockOfMonotonicSeconds) {
  const double before = MonotonicSeconds();
  const uint64_t now = MonotonicNanos();
  const double after = MonotonicSeconds();
  EXPECT_GE(static_cast<double>(now) * 1e-9, before - 1e-6);
  EXPECT_LE(static_cast<double>(now) * 1e-9, after + 1e-6);
}

}  // namespace
}  // namespace gm
