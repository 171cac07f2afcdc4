// ChromeTrace: the Trace Event Format document a person opens in Perfetto.
#include "profiler/trace.h"

#include <gtest/gtest.h>

#include <set>

namespace gm {
namespace {

using json = nlohmann::json;

std::vector<json> Named(const json& trace, const std::string& ph, const std::string& name) {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == ph && e["name"] == name) out.push_back(e);
  }
  return out;
}

TEST(ChromeTrace, HasStageSpansDataWaitsComputeAndGpuActivity) {
  TraceInput in;
  in.stage_names = {"decode_jpeg", "resize"};
  in.spans = {{0, 0, 7, 1.000, 1.002}, {1, 0, 7, 1.002, 1.003}, {0, 1, 8, 1.001, 1.004}};
  StepLog steps;
  steps.pid = 42;
  steps.source = "torch";
  steps.steps = {{2'000'000'000, 2'005'000'000, 8}, {2'025'000'000, 2'026'000'000, 8}};
  in.steps = {steps};
  GpuLog gpu;
  gpu.pid = 42;
  GpuActivity k;
  k.start_ns = 2'006'000'000;
  k.end_ns = 2'020'000'000;
  k.stream = 7;
  k.name = "_Z6kernelv";
  GpuActivity m = k;
  m.kind = GpuActivityKind::kMemcpy;
  m.name = "HtoD";
  m.bytes = 4096;
  m.start_ns = 2'005'000'000;
  m.end_ns = 2'005'500'000;
  gpu.activities = {k, m};
  in.gpu = {gpu};

  json t = ChromeTrace(in);
  ASSERT_TRUE(t["traceEvents"].is_array());
  EXPECT_EQ(t["displayTimeUnit"], "ms");
  // Round trip through text: what the viewer parses.
  json again = json::parse(t.dump());
  EXPECT_EQ(again, t);

  auto decode = Named(t, "X", "decode_jpeg");
  ASSERT_EQ(decode.size(), 2u);
  EXPECT_EQ(decode[0]["ts"], 0.0);  // the earliest event is the origin
  EXPECT_NEAR(decode[0]["dur"].get<double>(), 2000.0, 1e-6);
  EXPECT_EQ(decode[0]["args"]["sample"], 7);
  std::set<int> tids;
  for (const json& e : decode) tids.insert(e["tid"].get<int>());
  EXPECT_EQ(tids.size(), 2u);  // one track per stage thread

  auto waits = Named(t, "X", "data wait");
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_EQ(waits[0]["pid"], 42);
  EXPECT_NEAR(waits[0]["ts"].get<double>(), 1e6, 1e-3);  // 1 s after the first span
  EXPECT_NEAR(waits[0]["dur"].get<double>(), 5000.0, 1e-6);
  EXPECT_EQ(waits[0]["args"]["samples"], 8);
  auto step0 = Named(t, "X", "step 0");
  ASSERT_EQ(step0.size(), 1u);
  EXPECT_NEAR(step0[0]["dur"].get<double>(), 20000.0, 1e-6);
  EXPECT_TRUE(Named(t, "X", "step 1").empty());  // the last request closes no step

  auto kernel = Named(t, "X", "_Z6kernelv");
  ASSERT_EQ(kernel.size(), 1u);
  EXPECT_EQ(kernel[0]["pid"], 42);
  auto copy = Named(t, "X", "memcpy HtoD");
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(copy[0]["args"]["bytes"], 4096);
  EXPECT_EQ(copy[0]["tid"], kernel[0]["tid"]);  // same device and stream, one track

  bool named_stream = false;
  for (const json& e : Named(t, "M", "thread_name")) {
    if (e["args"]["name"] == "GPU 0 stream 7") named_stream = true;
  }
  EXPECT_TRUE(named_stream);
}

TEST(ChromeTrace, EmptyInputIsAnEmptyValidTrace) {
  json t = ChromeTrace({});
  EXPECT_TRUE(t["traceEvents"].is_array());
  EXPECT_TRUE(t["traceEvents"].empty());
}

}  // namespace
}  // namespace gm
