#include "profiler/gpu_log.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/test_util.h"

namespace gm {
namespace {

constexpr std::string_view kHeader = "# goldminer gpu log 1 pid=4242\n";

std::string Log(std::string_view body) { return std::string(kHeader) + std::string(body); }

TEST(GpuLogTest, ParsesEveryLineKindOnTheMonotonicClock) {
  // Given a log as the library writes it with the monotonic timestamp callback.
  std::string text =
      Log("# clock=monotonic\n"
          "C 1000 1000\n"
          "K 2000 3000 0 7 11 _Z4spinPyl\n"
          "M 3100 3200 1 13 4096 HtoD\n"
          "S 3300 3350 0 7 256\n"
          "D 2\n"
          "D 3\n"
          "E cuptiActivityEnable(MEMSET) failed: CUPTI_ERROR_NOT_INITIALIZED (15)\n"
          "# untimed=0\n"
          "C 5000 5000\n");
  // When it is parsed.
  Result<GpuLog> log = ParseGpuLog(text, "gpu.4242.log");
  // Then every record keeps its fields, times unchanged.
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ(log->pid, 4242);
  ASSERT_EQ(log->activities.size(), 3u);
  const GpuActivity& k = log->activities[0];
  EXPECT_EQ(k.kind, GpuActivityKind::kKernel);
  EXPECT_EQ(k.start_ns, 2000u);
  EXPECT_EQ(k.end_ns, 3000u);
  EXPECT_EQ(k.device, 0u);
  EXPECT_EQ(k.stream, 7u);
  EXPECT_EQ(k.name, "_Z4spinPyl");
  const GpuActivity& m = log->activities[1];
  EXPECT_EQ(m.kind, GpuActivityKind::kMemcpy);
  EXPECT_EQ(m.device, 1u);
  EXPECT_EQ(m.stream, 13u);
  EXPECT_EQ(m.bytes, 4096u);
  EXPECT_EQ(m.name, "HtoD");
  const GpuActivity& s = log->activities[2];
  EXPECT_EQ(s.kind, GpuActivityKind::kMemset);
  EXPECT_EQ(s.start_ns, 3300u);
  EXPECT_EQ(s.end_ns, 3350u);
  EXPECT_EQ(s.bytes, 256u);
  EXPECT_EQ(log->dropped_records, 5u);
  ASSERT_EQ(log->errors.size(), 1u);
  EXPECT_EQ(log->errors[0], "cuptiActivityEnable(MEMSET) failed: CUPTI_ERROR_NOT_INITIALIZED (15)");
}

TEST(GpuLogTest, KernelNameIsTheRestOfTheLine) {
  Result<GpuLog> log = ParseGpuLog(Log("K 1 2 0 0 5 void add<float>(float*, int)\n"), "g");
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ(log->activities.at(0).name, "void add<float>(float*, int)");
}

TEST(GpuLogTest, CuptiClockIsConvertedWithTheClockPairs) {
  // Given CUPTI's realtime clock 1e18 ahead of monotonic, running 1000 ppm fast.
  std::string text =
      Log("# clock=cupti\n"
          "C 1000000000000000000 5000000\n"
          "K 1000000000001000000 1000000000002000000 0 7 1 k\n"
          "C 1000000000010000000 14990000\n");
  // When it is parsed.
  Result<GpuLog> log = ParseGpuLog(text, "g");
  // Then the kernel's times lie on the monotonic clock, through the pairs' line.
  ASSERT_TRUE(log.ok()) << log.status().message();
  const GpuActivity& k = log->activities.at(0);
  EXPECT_EQ(k.start_ns, 5000000u + 999000u);
  EXPECT_EQ(k.end_ns, 5000000u + 1998000u);
}

TEST(GpuLogTest, OneClockPairGivesAnOffset) {
  Result<GpuLog> log =
      ParseGpuLog(Log("# clock=cupti\nC 900000 100\nS 900500 900700 0 0 8\n"), "g");
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ(log->activities.at(0).start_ns, 600u);
  EXPECT_EQ(log->activities.at(0).end_ns, 800u);
}

TEST(GpuLogTest, CuptiClockWithoutPairsIsCorrupt) {
  Result<GpuLog> log = ParseGpuLog(Log("# clock=cupti\nK 1 2 0 0 1 k\n"), "dir/gpu.1.log");
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), Code::kCorrupt);
  EXPECT_NE(log.status().message().find("dir/gpu.1.log: the log says '# clock=cupti' but has "
                                        "no 'C' clock pair"),
            std::string::npos)
      << log.status().message();
}

TEST(GpuLogTest, ClockPairsThatAreNotNanosecondClocksAreCorrupt) {
  Result<GpuLog> log = ParseGpuLog(Log("# clock=cupti\nC 0 0\nC 1000 1\nK 5 6 0 0 1 k\n"), "g");
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("do not describe two nanosecond clocks"), std::string::npos)
      << log.status().message();
}

TEST(GpuLogTest, LastLineWithoutNewlineIsIgnored) {
  Result<GpuLog> log = ParseGpuLog(Log("K 1 2 0 0 1 k\nK 3 4 0 0 2 cut_sh"), "g");
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ(log->activities.size(), 1u);
}

TEST(GpuLogTest, TextWithoutACompleteLineIsAnEmptyLog) {
  for (std::string_view text : {std::string_view(""), std::string_view("# goldminer gpu l")}) {
    Result<GpuLog> log = ParseGpuLog(text, "g");
    ASSERT_TRUE(log.ok()) << log.status().message();
    EXPECT_EQ(log->pid, 0);
    EXPECT_TRUE(log->activities.empty());
  }
}

TEST(GpuLogTest, MalformedLinesNameFileAndLine) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {"# goldminer step log 1 pid=3\n", "g:1: expected the header"},
      {"# goldminer gpu log 2 pid=3\n", "g:1: expected the header"},
      {"# goldminer gpu log 1\n", "g:1: expected the header"},
      {Log("K 1 2 0 0 1\n"), "g:2: expected 'K START_NS END_NS DEVICE STREAM CORRELATION NAME'"},
      {Log("K 1 2 0 x 1 k\n"), "g:2: expected 'K"},
      {Log("M 1 2 0 0 5\n"), "g:2: expected 'M START_NS END_NS DEVICE STREAM BYTES COPY_KIND'"},
      {Log("S 1 2 0 0 5 extra\n"), "g:2: expected 'S START_NS END_NS DEVICE STREAM BYTES'"},
      {Log("S 1 2 4294967296 0 5\n"), "g:2: expected 'S"},
      {Log("S 5 2 0 0 5\n"), "g:2: activity ends before it starts"},
      {Log("S -1 2 0 0 5\n"), "g:2: expected 'S"},
      {Log("C 1\n"), "g:2: expected 'C CUPTI_NS MONOTONIC_NS'"},
      {Log("D\n"), "g:2: expected a line 'TAG FIELDS...'"},
      {Log("D many\n"), "g:2: expected 'D DROPPED_RECORDS'"},
      {Log("# clock=gpu\n"), "g:2: expected '# clock=monotonic|cupti'"},
      {Log("\n"), "g:2: expected a line 'TAG FIELDS...'"},
      {Log("K 1 2 0 0 1 k\nX 1\n"), "g:3: unknown line tag 'X'"},
  };
  for (const Case& c : cases) {
    Result<GpuLog> log = ParseGpuLog(c.text, "g");
    ASSERT_FALSE(log.ok()) << c.text;
    EXPECT_EQ(log.status().code(), Code::kCorrupt);
    EXPECT_EQ(log.status().message().rfind(c.expected, 0), 0u)
        << "text: " << c.text << "\nmessage: " << log.status().message();
  }
}

TEST(GpuLogTest, ErrorQuotesTheLine) {
  Result<GpuLog> log = ParseGpuLog(Log("Q what\n"), "g");
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("got 'Q what'"), std::string::npos)
      << log.status().message();
}

TEST(GpuLogTest, ReadGpuLogsReadsEveryPidSortedAndSkipsOtherFiles) {
  // Given a profile directory with two GPU logs, a step log and a stray file.
  testing::TempDir dir;
  dir.Write("gpu.300.log", "# goldminer gpu log 1 pid=300\nK 1 2 0 0 1 a\n");
  dir.Write("gpu.20.log", "# goldminer gpu log 1 pid=20\nS 1 2 0 0 4\nS 3 4 0 0 4\n");
  dir.Write("gpu.7.log", "");  // the process died before its header reached the file
  dir.Write("steps.20.log", "# goldminer step log 1 pid=20 source=goldminer\n");
  dir.Write("gpu.x.log", "not a log");
  // When they are read.
  Result<std::vector<GpuLog>> logs = ReadGpuLogs(dir.path());
  // Then there is one per pid, in pid order.
  ASSERT_TRUE(logs.ok()) << logs.status().message();
  ASSERT_EQ(logs->size(), 3u);
  EXPECT_EQ((*logs)[0].pid, 7);
  EXPECT_TRUE((*logs)[0].activities.empty());
  EXPECT_EQ((*logs)[1].pid, 20);
  EXPECT_EQ((*logs)[1].activities.size(), 2u);
  EXPECT_EQ((*logs)[2].pid, 300);
  EXPECT_EQ((*logs)[2].activities.at(0).name, "a");
}

TEST(GpuLogTest, ReadGpuLogsNamesTheCorruptFile) {
  testing::TempDir dir;
  std::string path = dir.Write("gpu.5.log", "# goldminer gpu log 1 pid=5\nK 1\n");
  Result<std::vector<GpuLog>> logs = ReadGpuLogs(dir.path());
  ASSERT_FALSE(logs.ok());
  EXPECT_EQ(logs.status().message().rfind(path + ":2: ", 0), 0u) << logs.status().message();
}

TEST(GpuLogTest, ReadGpuLogsOfAnEmptyOrMissingDirectory) {
  testing::TempDir dir;
  Result<std::vector<GpuLog>> empty = ReadGpuLogs(dir.path());
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_TRUE(empty->empty());
  Result<std::vector<GpuLog>> missing = ReadGpuLogs(dir.path() + "/absent");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find(dir.path() + "/absent"), std::string::npos);
}

}  // namespace
}  // namespace gm
