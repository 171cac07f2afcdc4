#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "core/digest.h"
#include "core/json.h"
#include "core/os/file_util.h"
#include "core/os/paths.h"
#include "core/os/spawn.h"
#include "core/rng.h"
#include "core/status.h"
#include "tests/unit/test_util.h"

namespace gm {
namespace {

TEST(StatusTest, OkAndErrorCarryCodeAndMessage) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = Status::NotFound("a.jpg: No such file").WithContext("pipeline.json");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.message(), "pipeline.json: a.jpg: No such file");
}

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  GM_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(ResultTest, AssignOrReturnPropagatesTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().message(), "odd");
}

TEST(JsonTest, ParseErrorNamesOriginLineAndColumn) {
  auto r = ParseJson("{\n  \"a\": 1,\n  \"b\": ]\n}", "p.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("p.json:3:"), std::string::npos) << r.status().message();
}

TEST(JsonTest, TypedReadsNameThePathAndWhatWasExpected) {
  auto j = *ParseJson(R"({"stages": [{"op": "x", "size": "224"}], "seed": 1.5})", "p.json");
  JsonNode root(j, "p.json");
  auto stages = *root.Get("stages");
  auto first = *stages.At(0);
  auto size = first.Get("size");
  ASSERT_TRUE(size.ok());
  auto nums = size->AsNumbers(2);
  ASSERT_FALSE(nums.ok());
  EXPECT_EQ(nums.status().message(),
            "p.json: $.stages[0].size: expected an array of 2 numbers, got \"224\"");
  EXPECT_FALSE(root.Int("seed").ok());
  EXPECT_EQ(root.Get("missing").status().message(), "p.json: $: missing required key \"missing\"");
  EXPECT_EQ(*root.IntOr("absent", 7), 7);
}

TEST(JsonTest, CheckKeysCatchesTypos) {
  auto j = *ParseJson(R"({"sead": 1})", "p.json");
  Status s = JsonNode(j, "p.json").CheckKeys({"seed", "version"});
  EXPECT_NE(s.message().find("unknown key \"sead\""), std::string::npos);
}

TEST(SpawnTest, GivenAProgram_ThenItRunsWithTheEnvironmentAndItsExitIsDescribed) {
  auto pid = SpawnProcess(SpawnRequest({"sh", "-c", "exit $GM_SPAWN_CODE"}, {"GM_SPAWN_CODE=3"}));
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  int status = 0;
  ASSERT_EQ(::waitpid(*pid, &status, 0), *pid);
  EXPECT_EQ(DescribeExit(status), "exited with status 3");
  auto missing = SpawnProcess(SpawnRequest({"/nonexistent/program"}));
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/program: cannot start"),
            std::string::npos)
      << missing.status().message();
  EXPECT_EQ(SpawnProcess(SpawnRequest({})).status().code(), Code::kInvalidArgument);
}

TEST(SpawnTest, GivenBlockedAndIgnoredSignalsHere_ThenTheChildStartsWithDefaults) {
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &block, &old), 0);
  struct sigaction ignore {
  }, before{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGPIPE, &ignore, &before), 0);
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  SpawnRequest request({"sh", "-c", "grep -E '^Sig(Blk|Ign)' /proc/self/status"});
  request.stdin_null = true;
  request.dup2 = {{out[1], 1}};
  auto pid = SpawnProcess(request);
  ::close(out[1]);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::sigaction(SIGPIPE, &before, nullptr);
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  std::string text;
  char buf[512];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
  ::close(out[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(*pid, &status, 0), *pid);
  EXPECT_NE(text.find("SigBlk:\t0000000000000000"), std::string::npos) << text;
  const size_t ign = text.find("SigIgn:\t");
  ASSERT_NE(ign, std::string::npos) << text;
  const unsigned long long ignored = std::stoull(text.substr(ign + 8, 16), nullptr, 16);
  EXPECT_EQ(ignored & (1ull << (SIGPIPE - 1)), 0u) << text;  // SIGPIPE back to its default
}

TEST(SpawnTest, GivenIgnoreDrainSignals_ThenTheChildOutlivesSigtermAndSigusr2AndEndsOnSigkill) {
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  // The program (found in PATH, through a shell of its own) says what it ignores,
  // then waits; SIGTERM and SIGUSR2 do nothing, SIGKILL ends it.
  SpawnRequest request({"sh", "-c", "grep '^SigIgn' /proc/self/status; exec sleep 30"});
  request.stdin_null = true;
  request.dup2 = {{out[1], 1}};
  request.ignore_drain_signals = true;
  auto pid = SpawnProcess(request);
  ::close(out[1]);
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  std::string text;
  char buf[256];
  while (text.find('\n') == std::string::npos) {
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    ASSERT_GT(n, 0);
    text.append(buf, size_t(n));
  }
  ::close(out[0]);
  const unsigned long long ignored = std::stoull(text.substr(text.find('\t') + 1, 16), nullptr, 16);
  EXPECT_NE(ignored & (1ull << (SIGTERM - 1)), 0u) << text;
  EXPECT_NE(ignored & (1ull << (SIGUSR2 - 1)), 0u) << text;
  EXPECT_EQ(ignored & (1ull << (SIGINT - 1)), 0u) << text;
  ASSERT_EQ(::kill(*pid, SIGTERM), 0);
  ASSERT_EQ(::kill(*pid, SIGUSR2), 0);
  ::usleep(100 * 1000);
  int status = 0;
  EXPECT_EQ(::waitpid(*pid, &status, WNOHANG), 0) << "SIGTERM or SIGUSR2 ended it";
  ASSERT_EQ(::kill(*pid, SIGKILL), 0);
  ASSERT_EQ(::waitpid(*pid, &status, 0), *pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  // A program that does not exist is NotFound, naming it, as without the option.
  SpawnRequest missing({"no-such-program-here"});
  missing.ignore_drain_signals = true;
  auto none = SpawnProcess(missing);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kNotFound) << none.status().message();
  EXPECT_NE(none.status().message().find("no-such-program-here"), std::string::npos);
}

TEST(UniqueFdTest, GivenAnOwnedDescriptor_ThenItIsClosedOnceWhenItsLastOwnerGoes) {
  auto pipe = MakePipe();
  ASSERT_TRUE(pipe.ok()) << pipe.status().message();
  const int fd = pipe->read.get();
  ASSERT_GE(::fcntl(fd, F_GETFD), 0);
  EXPECT_NE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);  // close-on-exec
  {
    UniqueFd moved = std::move(pipe->read);
    EXPECT_FALSE(pipe->read.valid());
    EXPECT_EQ(moved.get(), fd);
    EXPECT_GE(::fcntl(fd, F_GETFD), 0);  // still open: moved, not closed
  }
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);  // closed with its owner
  const int kept = pipe->write.Release();
  pipe->write.Reset();  // holds nothing now: closes nothing
  EXPECT_GE(::fcntl(kept, F_GETFD), 0);
  ::close(kept);
}

TEST(SpawnTest, GivenThisProcess_ThenItsCpuSecondsAreReadAndAMissingOneIsAnError) {
  volatile double x = 0;
  for (int i = 0; i < 50000000; ++i) x = x + i;  // some CPU of our own
  auto cpu = CpuSecondsOfProcess(::getpid());
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  EXPECT_GT(*cpu, 0.0);
  EXPECT_FALSE(CpuSecondsOfProcess(-5).ok());
}

TEST(SpawnTest, GivenAGrandchildThatWorks_ThenTheTreeCountsItsCpuAndTheParentAloneDoesNot) {
  // A shell that waits on a shell whose child spins: the busy process is two levels
  // down, live (a data worker's Python host and the virtual workers it forks).
  // setsid: the shell leads its own process group, which the test ends whole.
  auto pid =
      SpawnProcess(SpawnRequest({"setsid", "sh", "-c", "sh -c 'while :; do :; done' & wait"}));
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  double tree = 0;
  for (int i = 0; i < 600 && tree < 0.3; ++i) {  // until it has used 0.3 s, up to a minute
    ::usleep(100000);
    auto cpu = CpuSecondsOfTree(*pid);
    ASSERT_TRUE(cpu.ok()) << cpu.status().message();
    tree = *cpu;
  }
  auto alone = CpuSecondsOfProcess(*pid);
  ASSERT_TRUE(alone.ok());
  // Several trees from one read: the running one is there, one that is not is not.
  const std::map<pid_t, double> trees = CpuSecondsOfTrees({*pid, -5});
  ASSERT_EQ(trees.size(), 1u);
  EXPECT_GE(trees.at(*pid), 0.3);
  ::kill(-*pid, SIGKILL);
  int status = 0;
  ::waitpid(*pid, &status, 0);
  EXPECT_GE(tree, 0.3);
  EXPECT_LT(*alone, 0.1) << "the waiting shell does no work of its own";
  EXPECT_FALSE(CpuSecondsOfTree(-5).ok());
}

TEST(PathsTest, GivenAPackageOthersCanWriteOrThatIsMissing_ThenItIsRefusedNamingItAndTheFix) {
  testing::TempDir dir;
  const std::string pkg = dir.path() + "/python/goldminer";
  std::filesystem::create_directories(pkg);
  ASSERT_EQ(::chmod((dir.path() + "/python").c_str(), 0755), 0);
  ASSERT_EQ(::chmod(pkg.c_str(), 0755), 0);
  EXPECT_TRUE(CheckTrustedPath(pkg, "the package").ok());
  ASSERT_EQ(::chmod(pkg.c_str(), 0777), 0);  // anyone may put code in it
  Status open = CheckTrustedPath(pkg, "the package");
  EXPECT_EQ(open.code(), Code::kInvalidArgument);
  EXPECT_NE(open.message().find("the package: " + pkg +
                                " is writable by group or others (mode "
                                "0777)"),
            std::string::npos)
      << open.message();
  EXPECT_NE(open.message().find("chmod go-w"), std::string::npos);
  ASSERT_EQ(::chmod(pkg.c_str(), 0755), 0);
  ASSERT_EQ(::chmod((dir.path() + "/python").c_str(), 0775), 0);  // its folder, by our group
  EXPECT_TRUE(CheckTrustedPath(pkg, "the package").ok());
  ASSERT_EQ(::chown((dir.path() + "/python").c_str(), ::geteuid(), 65534), 0);  // another group
  EXPECT_FALSE(CheckTrustedPath(pkg, "the package").ok());
  ASSERT_EQ(::chmod((dir.path() + "/python").c_str(), 01777), 0);  // sticky, like /tmp: fine
  EXPECT_TRUE(CheckTrustedPath(pkg, "the package").ok());
  // A folder two levels up that anyone may write to: the package's folder could
  // be renamed away and replaced.
  ASSERT_EQ(::chmod((dir.path() + "/python").c_str(), 0755), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0777), 0);
  Status high = CheckTrustedPath(pkg, "the package");
  EXPECT_NE(high.message().find("the package: " + dir.path() + " is writable by group or others"),
            std::string::npos)
      << high.message();
  ASSERT_EQ(::chmod(dir.path().c_str(), 0700), 0);
  // Through a link in a trusted folder to the package: the folders above the
  // package itself are checked too.
  const std::string link = dir.path() + "/link";
  std::filesystem::create_directory_symlink(pkg, link);
  EXPECT_TRUE(CheckTrustedPath(link, "the package").ok());
  ASSERT_EQ(::chmod((dir.path() + "/python").c_str(), 0777), 0);
  EXPECT_FALSE(CheckTrustedPath(link, "the package").ok());
  // A file inside the package that others may rewrite.
  ASSERT_EQ(::chmod((dir.path() + "/python").c_str(), 0755), 0);
  const std::string module = pkg + "/sub/loader.py";
  std::filesystem::create_directories(pkg + "/sub");
  dir.Write("python/goldminer/sub/loader.py", "x = 1\n");
  ASSERT_EQ(::chmod(module.c_str(), 0644), 0);
  EXPECT_TRUE(CheckTrustedPath(pkg, "the package").ok());
  ASSERT_EQ(::chmod(module.c_str(), 0666), 0);
  Status inside = CheckTrustedPath(pkg, "the package");
  EXPECT_NE(inside.message().find("the package: " + module + " is writable"), std::string::npos)
      << inside.message();
  Status missing = CheckTrustedPath(dir.path() + "/nowhere", "the library");
  EXPECT_NE(missing.message().find("the library: " + dir.path() + "/nowhere does not exist"),
            std::string::npos)
      << missing.message();
}

TEST(FileUtilTest, MissingFileIsNotFoundAndNamesThePath) {
  auto r = ReadFile("/nonexistent/dir/x.json");
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/dir/x.json"), std::string::npos);
}

TEST(FileUtilTest, AtomicWriteThenRead) {
  testing::TempDir dir;
  std::string p = dir.path() + "/a.txt";
  ASSERT_TRUE(WriteFileAtomic(p, "hello").ok());
  EXPECT_EQ(*ReadFile(p), "hello");
}

// Symbolic links are never followed: not at the target, not at the temporary name.
TEST(FileUtilTest, AtomicWriteRefusesASymlinkAndDoesNotFollowAPlantedTemporary) {
  testing::TempDir dir;
  const std::string victim = dir.path() + "/victim";
  ASSERT_TRUE(WriteFileAtomic(victim, "keep").ok());
  const std::string link = dir.path() + "/out.json";
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  Status st = WriteFileAtomic(link, "overwrite");
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("symbolic link"), std::string::npos) << st.message();
  const std::string target = dir.path() + "/real.json";
  const std::string planted = target + ".tmp." + std::to_string(::getpid());
  ASSERT_EQ(::symlink(victim.c_str(), planted.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomic(target, "new").ok());
  EXPECT_EQ(*ReadFile(target), "new");
  EXPECT_EQ(*ReadFile(victim), "keep");
}

TEST(FileUtilTest, TempDirIsPrivateAndRemovedWithItsContents) {
  std::string path;
  {
    Result<TempDir> dir = TempDir::Make("goldminer-core-test-");
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    path = dir->path();
    EXPECT_NE(path.find("/goldminer-core-test-"), std::string::npos);
    EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_all);
    ASSERT_TRUE(WriteFileAtomic(path + "/f", "x").ok());
    TempDir moved = std::move(*dir);  // the moved-from owner removes nothing
    EXPECT_EQ(moved.path(), path);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(FileUtilTest, TempDirUnderAMissingTmpdirIsAnIoErrorNamingIt) {
  const char* old = std::getenv("TMPDIR");
  std::string saved = old ? old : "";
  setenv("TMPDIR", "/nonexistent-goldminer-dir", 1);
  Result<TempDir> dir = TempDir::Make("x-");
  if (old)
    setenv("TMPDIR", saved.c_str(), 1);
  else
    unsetenv("TMPDIR");
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), Code::kIoError);
  EXPECT_NE(dir.status().message().find("/nonexistent-goldminer-dir/x-"), std::string::npos);
}

TEST(RngTest, StreamsDependOnlyOnTheirKey) {
  Rng a = Rng::ForSample(1, 0, 42, 3), b = Rng::ForSample(1, 0, 42, 3);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.Next(), b.Next());
  Rng c = Rng::ForSample(1, 1, 42, 3);
  EXPECT_NE(Rng::ForSample(1, 0, 42, 3).Next(), c.Next());
}

TEST(RngTest, UniformAndBelowStayInRange) {
  Rng r(7);
  for (int i = 0; i < 10000; ++i) {
    double u = r.Uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    EXPECT_LT(r.Below(10), 10u);
  }
}

TEST(DigestTest, Sha256OfAbcMatchesTheStandardVector) {
  Sha256 h;
  h.Update("abc");
  EXPECT_EQ(h.FinishHex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace gm

namespace gm {
namespace {

// Found by fuzz_pipeline: nlohmann/json throws out_of_range, not parse_error, for
// a number that overflows a double.
TEST(JsonTest, NumberOverflowIsAnErrorNotAnException) {
  auto r = ParseJson(R"({"version": 8)" + std::string(400, '8') + "E88888}", "p.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("p.json"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace gm

namespace gm {
namespace {

// Found by fuzz_pipeline: a huge float cast to int64 was undefined behaviour.
TEST(JsonTest, IntegersOutsideInt64AreErrorsNotCasts) {
  auto j = *ParseJson(R"({"a": 1.6e35, "b": 18446744073709551615, "c": 7.0, "d": -2.5})", "p.json");
  JsonNode root(j, "p.json");
  EXPECT_FALSE(root.Int("a").ok());
  EXPECT_FALSE(root.Int("b").ok());
  EXPECT_EQ(*root.Int("c"), 7);
  EXPECT_FALSE(root.Int("d").ok());
}

}  // namespace
}  // namespace gm
