// CPU lists and masks: parsing and printing lists as taskset writes them, the
// checks against this process's CPUs, and children started on given CPUs.
#include "core/host.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/os/cpus.h"
#include "launcher/process.h"
#include "tests/unit/test_util.h"

namespace gm {
namespace {

TEST(HostPortTest, GivenAddressesThenHostAndPortAreSplitAndJoinedBack) {
  EXPECT_EQ(*ParseHostPort("node1:5000", "--x"), (HostPort{"node1", 5000}));
  EXPECT_EQ(*ParseHostPort("[::1]:0", "--x"), (HostPort{"::1", 0}));
  EXPECT_EQ(JoinHostPort("::1", 7), "[::1]:7");
  EXPECT_EQ(*ParseHostPort(JoinHostPort("fe80::2", 80), "--x"), (HostPort{"fe80::2", 80}));
  for (const char* bad : {"node1", ":5000", "node1:", "node1:70000", "::1:5", "h:5x", "h:-1"}) {
    auto r = ParseHostPort(bad, "--coordinator");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--coordinator: \"" + std::string(bad) + "\""),
              std::string::npos)
        << r.status().message();
  }
  // A port a peer must listen on starts at 1.
  auto zero = ParseHostPort("h:0", "data_addr", 1);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("1..65535"), std::string::npos);
}

TEST(HostPortTest, GivenPeersThenTheirHostIsWithoutPortOrBrackets) {
  EXPECT_EQ(HostOfPeer("10.0.0.5:41234"), "10.0.0.5");
  EXPECT_EQ(HostOfPeer("[fe80::1]:41234"), "fe80::1");
  EXPECT_EQ(HostOfPeer("unknown peer"), "unknown peer");
}

TEST(CpuListTest, ParsesRangesAndSinglesIntoSortedDistinctCpus) {
  Result<std::vector<int>> cpus = ParseCpuList("8,0-3,2,10-11", "--cpus");
  ASSERT_TRUE(cpus.ok()) << cpus.status().message();
  EXPECT_EQ(*cpus, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(FormatCpuList(*cpus), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({5}), "5");
  EXPECT_EQ(FormatCpuList({}), "");
}

TEST(CpuListTest, BadListsAreRefusedNamingTheFlagAndTheText) {
  for (const std::string bad : {"", "a", "1-", "-1", "3-1", "1,,2", "4096", "0-99999", "1.5"}) {
    Result<std::vector<int>> cpus = ParseCpuList(bad, "--trainer-cpus");
    ASSERT_FALSE(cpus.ok()) << "'" << bad << "' was accepted";
    EXPECT_EQ(cpus.status().code(), Code::kInvalidArgument);
    EXPECT_NE(cpus.status().message().find("--trainer-cpus: \"" + bad + "\" is not a CPU list"),
              std::string::npos)
        << cpus.status().message();
  }
}

TEST(CpuListTest, CpusOutsideThisProcesssSetAreRefusedNamingBoth) {
  Result<std::vector<int>> allowed = AllowedCpus();
  ASSERT_TRUE(allowed.ok());
  ASSERT_FALSE(allowed->empty());
  EXPECT_TRUE(CheckCpusAllowed(*allowed, "--cpus").ok());
  const Status st = CheckCpusAllowed({allowed->front(), 4095}, "--cpus");
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("--cpus: CPU(s) 4095 are not available to this process (it may use " +
                              FormatCpuList(*allowed) + ")"),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(CheckCpusAllowed({}, "--cpus").ok());
}

// What /proc says a process may run on, as a list.
std::string CpusOfProcFile(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      std::istringstream fields(line.substr(18));
      std::string list;
      fields >> list;
      return list;
    }
  }
  return "";
}

TEST(ScopedCpusTest, TheThreadRunsOnTheGivenCpusWhileItLivesAndGetsItsOwnBack) {
  Result<std::vector<int>> allowed = AllowedCpus();
  ASSERT_TRUE(allowed.ok());
  {
    auto pin = ScopedCpus::Pin({allowed->back()}, "test");
    ASSERT_TRUE(pin.ok()) << pin.status().message();
    Result<std::vector<int>> inside = AllowedCpus();
    ASSERT_TRUE(inside.ok());
    EXPECT_EQ(*inside, std::vector<int>{allowed->back()});
  }
  Result<std::vector<int>> after = AllowedCpus();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, *allowed);
}

TEST(ScopedCpusTest, CpusThisThreadMayNotUseOrNoneAreRefusedAndNothingChanges) {
  Result<std::vector<int>> allowed = AllowedCpus();
  ASSERT_TRUE(allowed.ok());
  auto outside = ScopedCpus::Pin({CPU_SETSIZE - 1}, "the 1-thread run");
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), Code::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("the 1-thread run"), std::string::npos)
      << outside.status().message();
  EXPECT_FALSE(ScopedCpus::Pin({}, "none").ok());
  Result<std::vector<int>> after = AllowedCpus();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, *allowed);
}

TEST(SpawnTest, AChildStartsOnTheGivenCpusAndTheParentKeepsItsOwn) {
  Result<std::vector<int>> allowed = AllowedCpus();
  ASSERT_TRUE(allowed.ok());
  const std::vector<int> one = {allowed->back()};
  testing::TempDir dir;
  const std::string out = dir.path() + "/status";
  ProcessGroup group;
  // The child copies its own status as it starts: the mask it began with.
  Result<pid_t> pid = group.Spawn({"sh", "-c", "cat /proc/self/status > " + out}, {}, one);
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  std::optional<ChildExit> exit = group.WaitAny(30);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code(), 0);
  EXPECT_EQ(CpusOfProcFile(out), FormatCpuList(one));
  Result<std::vector<int>> after = AllowedCpus();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, *allowed) << "the spawning thread's mask was not restored";

  // Without CPUs, the child has ours.
  ASSERT_TRUE(group.Spawn({"sh", "-c", "cat /proc/self/status > " + out}, {}).ok());
  ASSERT_TRUE(group.WaitAny(30).has_value());
  EXPECT_EQ(CpusOfProcFile(out), FormatCpuList(*allowed));
}

TEST(SpawnTest, CpusThisProcessMayNotUseStartNothing) {
  ProcessGroup group;
  Result<pid_t> pid = group.Spawn({"true"}, {}, {4095});
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().code(), Code::kInvalidArgument);
  EXPECT_NE(pid.status().message().find("true: CPUs: CPU(s) 4095 are not available"),
            std::string::npos)
      << pid.status().message();
  EXPECT_EQ(group.running(), 0u);
}

}  // namespace
}  // namespace gm
