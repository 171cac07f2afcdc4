// The injection library's life in a process, without a GPU: injection.cc built
// against a fake libcupti (tests/cupti/fake_cupti.cc), loaded with dlopen and
// started with InitializeInjection in a forked child, as the driver would. The log
// the child leaves is read with the profiler's parser. Covers the flush at exit,
// the flush on SIGTERM (how `goldminer profile` stops a trainer), a trainer's own
// SIGTERM handler, forked children, a refused timestamp callback (times converted
// by the clock pairs) and refused activity kinds.
#include <cupti_version.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "profiler/gpu_log.h"
#include "tests/unit/test_util.h"

namespace gm {
namespace {

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

struct ChildRun {
  pid_t pid = 0;
  int status = 0;
  uint64_t begin_ns = 0;  // before the fork
  uint64_t end_ns = 0;    // after the child was reaped
  std::string log_text;   // gpu.<pid>.log, "" when absent
};

// Forks a child that sets `env` ("NAME=VALUE"), loads the library, calls
// InitializeInjection, then runs `then` and exits 0.
ChildRun RunChild(const testing::TempDir& dir, std::vector<std::string> env,
                  const std::function<void()>& then) {
  ChildRun run;
  std::fflush(nullptr);
  run.begin_ns = NowNs();
  run.pid = fork();
  if (run.pid == 0) {
    setenv("GOLDMINER_PROFILE_DIR", dir.path().c_str(), 1);
    for (std::string& e : env) putenv(e.data());
    void* lib = dlopen(GM_FAKE_INJECTION_LIB, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) _exit(90);
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
    if (init == nullptr || init() != 1) _exit(91);
    then();
    std::exit(0);
  }
  waitpid(run.pid, &run.status, 0);
  run.end_ns = NowNs();
  std::string path = dir.path() + "/gpu." + std::to_string(run.pid) + ".log";
  if (access(path.c_str(), F_OK) == 0) run.log_text = testing::ReadAll(path);
  return run;
}

GpuLog Parse(const ChildRun& run) {
  Result<GpuLog> log = ParseGpuLog(run.log_text, "gpu.log");
  EXPECT_TRUE(log.ok()) << log.status().message() << "\n" << run.log_text;
  return log.ok() ? *log : GpuLog{};
}

// The fake's buffer: a kernel, a memcpy and a memset inside the child's lifetime.
void ExpectFakeActivity(const GpuLog& log, const ChildRun& run) {
  ASSERT_EQ(log.activities.size(), 3u);
  EXPECT_EQ(log.activities[0].kind, GpuActivityKind::kKernel);
  EXPECT_EQ(log.activities[0].name, "_Z4fakev");
  EXPECT_EQ(log.activities[0].stream, 7u);
  EXPECT_EQ(log.activities[1].kind, GpuActivityKind::kMemcpy);
  EXPECT_EQ(log.activities[1].name, "HtoD");
  EXPECT_EQ(log.activities[1].bytes, 4096u);
  EXPECT_EQ(log.activities[2].kind, GpuActivityKind::kMemset);
  for (const GpuActivity& a : log.activities) {
    EXPECT_GE(a.start_ns, run.begin_ns);
    EXPECT_LE(a.end_ns, run.end_ns + 1000);
    EXPECT_NEAR(static_cast<double>(a.end_ns - a.start_ns), 1000.0, 10.0);
  }
  EXPECT_EQ(log.dropped_records, 1u);
  EXPECT_EQ(log.pid, run.pid);
}

TEST(CuptiInjectionTest, ExitFlushesTheLastBuffersOnTheMonotonicClock) {
  testing::TempDir dir;
  ChildRun run = RunChild(dir, {}, [] {});
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
  EXPECT_NE(run.log_text.find("\n# clock=monotonic\n"), std::string::npos) << run.log_text;
  EXPECT_NE(run.log_text.find("\n# untimed=1\n"), std::string::npos) << run.log_text;
  GpuLog log = Parse(run);
  ExpectFakeActivity(log, run);
  EXPECT_TRUE(log.errors.empty());
}

TEST(CuptiInjectionTest, SigtermFlushesThenTheTrainerDiesOfIt) {
  // Given a trainer that leaves SIGTERM alone, stopped by SIGTERM as profile does.
  testing::TempDir dir;
  ChildRun run = RunChild(dir, {}, [] {
    kill(getpid(), SIGTERM);
    for (;;) pause();
  });
  // Then it still dies of SIGTERM, and its last buffers are in the log.
  ASSERT_TRUE(WIFSIGNALED(run.status)) << run.status;
  EXPECT_EQ(WTERMSIG(run.status), SIGTERM);
  EXPECT_NE(run.log_text.find("\n# signal=15\n"), std::string::npos) << run.log_text;
  ExpectFakeActivity(Parse(run), run);
}

void ExitSeven(int) { std::exit(7); }

TEST(CuptiInjectionTest, TheTrainersOwnSigtermHandlerIsKept) {
  testing::TempDir dir;
  ChildRun run = RunChild(dir, {}, [] {
    signal(SIGTERM, ExitSeven);  // installed after cuInit, as a framework may do
    kill(getpid(), SIGTERM);
    for (;;) pause();
  });
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 7) << run.status;
  EXPECT_EQ(run.log_text.find("# signal="), std::string::npos) << run.log_text;
  ExpectFakeActivity(Parse(run), run);  // flushed at exit
}

TEST(CuptiInjectionTest, AForkedChildDiesOfSigtermAndFlushesNothing) {
  // Given a trainer that forks a worker after CUDA started, and stops it by SIGTERM.
  testing::TempDir dir;
  ChildRun run = RunChild(dir, {}, [] {
    pid_t worker = fork();
    if (worker == 0) {
      for (;;) pause();
    }
    kill(worker, SIGTERM);
    int status = 0;
    waitpid(worker, &status, 0);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGTERM) std::exit(8);
  });
  // Then the worker died of the signal, and the trainer flushed once, at its exit.
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
  EXPECT_EQ(run.log_text.find("# signal="), std::string::npos) << run.log_text;
  ExpectFakeActivity(Parse(run), run);
}

TEST(CuptiInjectionTest, RefusedTimestampCallbackTimesAreConvertedByTheClockPairs) {
  testing::TempDir dir;
  ChildRun run = RunChild(dir, {"FAKE_CUPTI_REFUSE_TIMESTAMP=1"}, [] {});
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
  EXPECT_NE(run.log_text.find("\n# clock=cupti\n"), std::string::npos) << run.log_text;
  GpuLog log = Parse(run);
  // CLOCK_REALTIME times, put back on CLOCK_MONOTONIC within the child's lifetime.
  ExpectFakeActivity(log, run);
  ASSERT_EQ(log.errors.size(), 1u);
  EXPECT_EQ(log.errors[0],
            "cuptiActivityRegisterTimestampCallback failed: CUPTI_ERROR_UNKNOWN (999)");
}

TEST(CuptiInjectionTest, RefusedActivityKindsAreErrorsAndNothingIsRecorded) {
  testing::TempDir dir;
  ChildRun run = RunChild(dir, {"FAKE_CUPTI_REFUSE_ENABLE=1"}, [] {});
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
  GpuLog log = Parse(run);
  EXPECT_TRUE(log.activities.empty());
  ASSERT_EQ(log.errors.size(), 4u) << run.log_text;
  EXPECT_EQ(log.errors[0],
            "cuptiActivityEnable(CONCURRENT_KERNEL) failed: CUPTI_ERROR_UNKNOWN (999)");
  EXPECT_EQ(log.errors[3],
            "no GPU activity will be recorded: CUPTI enabled no activity kind (libcuda.so.1, "
            "the NVIDIA driver, is not loaded in this process)");
}

TEST(CuptiInjectionTest, AnotherCuptiVersionInTheProcessIsRefused) {
  testing::TempDir dir;
  ChildRun run = RunChild(dir, {"FAKE_CUPTI_OTHER_VERSION=1"}, [] {});
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
  GpuLog log = Parse(run);
  EXPECT_TRUE(log.activities.empty());
  ASSERT_EQ(log.errors.size(), 1u) << run.log_text;
  std::string built = std::to_string(CUPTI_API_VERSION);
  std::string other = std::to_string(CUPTI_API_VERSION + 1);
  EXPECT_EQ(log.errors[0], "no GPU activity will be recorded: the process uses CUPTI API version " +
                               other + ", this library was built with " + built +
                               " and would misread its records");
}

TEST(CuptiInjectionTest, WithoutAProfileDirectoryNothingHappens) {
  testing::TempDir dir;
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    unsetenv("GOLDMINER_PROFILE_DIR");
    if (chdir(dir.path().c_str()) != 0) _exit(89);
    void* lib = dlopen(GM_FAKE_INJECTION_LIB, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) _exit(90);
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
    std::exit(init != nullptr && init() == 1 ? 0 : 91);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::string path = dir.path() + "/gpu." + std::to_string(pid) + ".log";
  EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " exists";
}

}  // namespace
}  // namespace gm
