#include "worker/exec_op.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <thread>

#include "core/json.h"
#include "core/os/paths.h"
#include "tests/unit/test_util.h"
#include "worker/subprocess.h"

namespace gm {
namespace {

constexpr char kStages[] = R"(import os, time
import numpy as np

def reverse(s):
    s["data"] = s["data"][::-1]
    s["fields"]["pid"] = str(os.getpid()).encode()
    s["fields"]["env"] = os.environ.get("GM_TEST_VALUE", "").encode()
    s["fields"]["secret"] = (os.environ.get("GOLDMINER_SECRET", "") +
                             os.environ.get("GOLDMINER_SECRET_FILE", "")).encode()
    return s

def floats(s):
    return np.frombuffer(s["data"], np.uint8).astype(np.float32)[::-1]

def fail_on_odd(s):
    if s["index"] % 2:
        raise ValueError("odd index %d" % s["index"])
    return s

def die_on_3(s):
    if s["index"] == 3:
        os._exit(3)
    s["fields"]["pid"] = str(os.getpid()).encode()
    return s

def burn(s):
    start = time.process_time()
    while time.process_time() - start < 0.1:
        pass
    return s

def out_of_memory(s):
    raise MemoryError()

def out_of_descriptors(s):
    # A real EMFILE: the soft limit lowered to the descriptors open now.
    import resource
    fd = os.dup(0)
    os.close(fd)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (fd, hard))
    try:
        open(os.devnull).close()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return s

def killed_on_3(s):
    if s["index"] == 3:
        os.kill(os.getpid(), 9)
    return s
)";

constexpr char kDatasets[] = R"(import numpy as np

class Squares:
    def __getitem__(self, i):
        return np.array([i, i * i], dtype=np.int64), i + 100

def plain():
    return Squares()

class TorchImages:
    def __getitem__(self, i):
        import torch
        return torch.full((3, 2, 2), float(i)), torch.tensor(i)

def torch_images():
    return TorchImages()
)";

class ExecOpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("stages.py", kStages);
    dir_.Write("datasets.py", kDatasets);
  }

  // Builds an exec op through the registry, as pipeline.json would.
  std::unique_ptr<Op> Make(const std::string& json_text, int threads = 1) {
    auto j = ParseJson(json_text, "pipeline.json");
    EXPECT_TRUE(j.ok()) << j.status().message();
    OpEnv env;
    env.base_dir = dir_.path();
    env.threads = threads;
    auto op = OpRegistry::BuiltIn().Make(JsonNode(*j, "pipeline.json", "$.stages[0]"), env);
    EXPECT_TRUE(op.ok()) << op.status().message();
    return op.ok() ? std::move(op).value() : nullptr;
  }

  std::unique_ptr<Op> MakeStage(const std::string& spec, const std::string& extra = "") {
    return Make(R"({"op":"exec","cmd":["/usr/bin/python3","-m","goldminer.stage",")" + spec +
                "\"]" + extra + "}");
  }

  static Sample TextSample(uint64_t index, std::string data) {
    Sample s;
    s.index = index;
    s.key = "range:" + std::to_string(index);
    s.data = std::move(data);
    return s;
  }

  testing::TempDir dir_;
};

TEST_F(ExecOpTest, GivenTheRunSecretInTheWorkerEnvironmentThenExecChildrenDoNotGetIt) {
  ::setenv("GOLDMINER_SECRET", "ab", 1);
  ::setenv("GOLDMINER_SECRET_FILE", "/tmp/secret", 1);
  auto op = MakeStage("stages:reverse");
  ::unsetenv("GOLDMINER_SECRET");
  ::unsetenv("GOLDMINER_SECRET_FILE");
  ASSERT_NE(op, nullptr);
  Sample s = TextSample(0, "abc");
  ASSERT_TRUE(op->Apply(s, RunContext{}).ok());
  EXPECT_EQ(s.fields["secret"], "");
}

TEST_F(ExecOpTest, GivenPythonStageWhenAppliedThenSampleIsTransformed) {
  auto op = MakeStage("stages:reverse", R"(,"env":{"GM_TEST_VALUE":"xyz"})");
  ASSERT_NE(op, nullptr);
  Sample s = TextSample(0, "abc");
  s.label = 7;
  Status st = op->Apply(s, RunContext{});
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(s.data, "cba");
  EXPECT_EQ(s.label, 7);
  EXPECT_EQ(s.key, "range:0");
  EXPECT_EQ(s.fields["env"], "xyz");
}

TEST_F(ExecOpTest, GivenStageReturningArrayWhenAppliedThenTensorIsFloat32) {
  auto op = MakeStage("stages:floats");
  ASSERT_NE(op, nullptr);
  Sample s = TextSample(0, "\x01\x02\x03");
  ASSERT_TRUE(op->Apply(s, RunContext{}).ok());
  ASSERT_EQ(s.tensor.dtype, DType::kFloat32);
  ASSERT_EQ(s.tensor.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(s.tensor.data<float>()[0], 3.0f);
  EXPECT_EQ(s.tensor.data<float>()[2], 1.0f);
}

TEST_F(ExecOpTest, GivenPoolOfTwoWhenManyThreadsApplyThenEachSampleGetsItsOwnResult) {
  auto op = Make(R"({"op":"exec","processes":2,
                     "cmd":["/usr/bin/python3","-m","goldminer.stage","stages:reverse"]})",
                 8);
  ASSERT_NE(op, nullptr);
  constexpr int kThreads = 4, kPerThread = 10;
  std::vector<std::vector<Sample>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        Sample s = TextSample(static_cast<uint64_t>(t * 100 + i),
                              "t" + std::to_string(t) + "-" + std::to_string(i));
        if (op->Apply(s, RunContext{}).ok()) results[t].push_back(std::move(s));
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::string> pids;
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(results[t].size(), static_cast<size_t>(kPerThread));
    for (int i = 0; i < kPerThread; ++i) {
      std::string expected = "t" + std::to_string(t) + "-" + std::to_string(i);
      EXPECT_EQ(results[t][i].data, std::string(expected.rbegin(), expected.rend()));
      pids.insert(results[t][i].fields["pid"]);
    }
  }
  EXPECT_GE(pids.size(), 1u);
  EXPECT_LE(pids.size(), 2u);
}

TEST_F(ExecOpTest, GivenStageThatRaisesThenOnlyThatSampleFailsWithTheExceptionText) {
  auto op = MakeStage("stages:fail_on_odd", R"(,"processes":1)");
  ASSERT_NE(op, nullptr);
  Sample odd = TextSample(1, "x");
  Status st = op->Apply(odd, RunContext{});
  EXPECT_EQ(st.code(), Code::kCorrupt);
  EXPECT_NE(st.message().find("ValueError: odd index 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("goldminer.stage stages:fail_on_odd"), std::string::npos);
  Sample even = TextSample(2, "y");
  EXPECT_TRUE(op->Apply(even, RunContext{}).ok());
}

// Out of memory or descriptors is the worker's state, not bad input: never a
// skipped sample (the engine makes the split again for ResourceExhausted).
TEST_F(ExecOpTest, GivenAStageShortOfMemoryOrDescriptors_ThenTheSampleFailsAsShortOfAResource) {
  for (const auto& [stage, said] : std::vector<std::pair<std::string, std::string>>{
           {"stages:out_of_memory", "MemoryError"},
           {"stages:out_of_descriptors", "Too many open files"}}) {
    auto op = MakeStage(stage, R"(,"processes":1)");
    ASSERT_NE(op, nullptr);
    Sample s = TextSample(1, "x");
    Status st = op->Apply(s, RunContext{});
    EXPECT_EQ(st.code(), Code::kResourceExhausted) << stage << ": " << st.message();
    EXPECT_NE(st.message().find(said), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("short of a resource"), std::string::npos) << st.message();
  }
  auto raises = MakeStage("stages:fail_on_odd", R"(,"processes":1)");  // bad input stays so
  ASSERT_NE(raises, nullptr);
  Sample odd = TextSample(1, "x");
  EXPECT_EQ(raises->Apply(odd, RunContext{}).code(), Code::kCorrupt);
}

TEST_F(ExecOpTest, GivenAChildKilledBySigkillFromOutside_ThenTheSampleFailsAsShortOfAResource) {
  auto op = MakeStage("stages:killed_on_3", R"(,"processes":1)");
  ASSERT_NE(op, nullptr);
  Sample dying = TextSample(3, "b");
  Status st = op->Apply(dying, RunContext{});
  EXPECT_EQ(st.code(), Code::kResourceExhausted) << st.message();
  EXPECT_NE(st.message().find("killed by signal 9"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("out of memory?"), std::string::npos) << st.message();
  Sample next = TextSample(4, "c");
  EXPECT_TRUE(op->Apply(next, RunContext{}).ok());
}

TEST_F(ExecOpTest, GivenChildThatExitsThenErrorNamesExitCodeAndNextSampleGetsFreshChild) {
  auto op = MakeStage("stages:die_on_3", R"(,"processes":1)");
  ASSERT_NE(op, nullptr);
  Sample first = TextSample(1, "a");
  ASSERT_TRUE(op->Apply(first, RunContext{}).ok());
  Sample dying = TextSample(3, "b");
  Status st = op->Apply(dying, RunContext{});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("exited with status 3"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("/usr/bin/python3"), std::string::npos);
  Sample next = TextSample(4, "c");
  Status again = op->Apply(next, RunContext{});
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_NE(next.fields["pid"], first.fields["pid"]);
}

TEST_F(ExecOpTest, GivenStageBurningCpuThenChildCpuIsReportedOnTheSample) {
  auto op = MakeStage("stages:burn");
  ASSERT_NE(op, nullptr);
  Sample s = TextSample(0, "x");
  s.extra_cpu_s = 0.5;
  ASSERT_TRUE(op->Apply(s, RunContext{}).ok());
  EXPECT_GT(s.extra_cpu_s, 0.5);
}

TEST_F(ExecOpTest, GivenPlainDatasetThenItemBecomesTensorAndLabel) {
  auto op = Make(R"({"op":"exec",
      "cmd":["/usr/bin/python3","-m","goldminer.dataset_stage","datasets:plain"]})");
  ASSERT_NE(op, nullptr);
  Sample s = TextSample(3, "");
  Status st = op->Apply(s, RunContext{});
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(s.label, 103);
  ASSERT_EQ(s.tensor.dtype, DType::kInt64);
  EXPECT_EQ(s.tensor.data<int64_t>()[1], 9);
}

TEST_F(ExecOpTest, GivenTorchDatasetThenTensorIsChwFloat32) {
  auto op = Make(R"({"op":"exec","env":{"OMP_NUM_THREADS":"1"},
      "cmd":["/usr/bin/python3","-m","goldminer.dataset_stage","datasets:torch_images"]})");
  ASSERT_NE(op, nullptr);
  Sample s = TextSample(2, "");
  Status st = op->Apply(s, RunContext{});
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(s.label, 2);
  EXPECT_EQ(s.layout, Layout::kCHW);
  ASSERT_EQ(s.tensor.shape, (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(s.tensor.data<float>()[11], 2.0f);
}

TEST_F(ExecOpTest, GivenEchoChildThenPoolWorksWithAnyProgram) {
  auto op = Make(R"({"op":"exec","cmd":["cat"]})");
  ASSERT_NE(op, nullptr);
  Sample s = TextSample(9, "same");
  s.tensor.Reset(DType::kUInt8, {2, 2, 1});
  s.layout = Layout::kHWC;
  ASSERT_TRUE(op->Apply(s, RunContext{}).ok());
  EXPECT_EQ(s.data, "same");
  EXPECT_EQ(s.layout, Layout::kHWC);
}

TEST_F(ExecOpTest, GivenChildBreakingTheProtocolThenSampleFailsWithCorrupt) {
  auto op = Make(R"({"op":"exec","cmd":["/bin/sh","-c","echo garbage; cat >/dev/null"]})");
  ASSERT_NE(op, nullptr);
  Sample s = TextSample(0, "x");
  Status st = op->Apply(s, RunContext{});
  EXPECT_EQ(st.code(), Code::kCorrupt);
  EXPECT_NE(st.message().find("bad magic"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("fresh process"), std::string::npos);
}

TEST_F(ExecOpTest, GivenSilentChildThenTimeoutFailsTheSampleInsteadOfHanging) {
  auto op = Make(R"({"op":"exec","timeout_s":0.2,"cmd":["/bin/sh","-c","cat >/dev/null"]})");
  ASSERT_NE(op, nullptr);
  Sample s = TextSample(0, "x");
  Status st = op->Apply(s, RunContext{});
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_NE(st.message().find("timed out"), std::string::npos) << st.message();
}

TEST_F(ExecOpTest, GivenMissingProgramThenErrorNamesIt) {
  auto op = Make(R"({"op":"exec","cmd":["/nonexistent/stage-program"]})");
  ASSERT_NE(op, nullptr);
  Sample s = TextSample(0, "x");
  Status st = op->Apply(s, RunContext{});
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_NE(st.message().find("/nonexistent/stage-program"), std::string::npos) << st.message();
}

TEST(ExecConfigTest, GivenBadStageJsonThenErrorsNameThePath) {
  auto bad = [](const std::string& text) {
    auto j = *ParseJson(text, "pipeline.json");
    return OpRegistry::BuiltIn()
        .Make(JsonNode(j, "pipeline.json", "$.stages[1]"), OpEnv{})
        .status();
  };
  EXPECT_NE(bad(R"({"op":"exec","cmd":[]})").message().find("$.stages[1].cmd"), std::string::npos);
  EXPECT_NE(
      bad(R"({"op":"exec","cmd":["x"],"processes":0})").message().find("$.stages[1].processes"),
      std::string::npos);
  EXPECT_NE(bad(R"({"op":"exec","cmd":["x"],"env":{"A":1}})").message().find("$.stages[1].env.A"),
            std::string::npos);
  EXPECT_NE(bad(R"({"op":"exec","cmd":["x"],"timeout":1})").message().find("unknown key"),
            std::string::npos);
}

TEST(PathsTest, GivenSourceBuildThenPythonPackageDirHoldsTheStageModule) {
  std::string dir = PythonPackageDir();
  EXPECT_TRUE(std::filesystem::exists(dir + "/goldminer/stage.py")) << dir;
}

TEST(SubprocessTest, GivenChildWhenKilledThenItIsReapedAndDescribed) {
  auto child = Subprocess::Start({"/bin/sleep", "1000"}, {});
  ASSERT_TRUE(child.ok()) << child.status().message();
  EXPECT_TRUE(child->running());
  EXPECT_TRUE(child->CpuSeconds().ok());
  EXPECT_EQ(child->Kill(), "was killed by signal 9 (Killed)");
  EXPECT_FALSE(child->running());
}

}  // namespace
}  // namespace gm
