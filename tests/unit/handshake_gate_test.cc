// HandshakeGate over real sockets: a flood of pending connections evicts its
// own oldest, authenticated ones are never evicted, and the total is capped.
#include "dataplane/handshake_gate.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>
#include <vector>

namespace gm {
namespace {

// A connected pair; the gate shuts down `ours`, the test reads from `theirs`.
struct Pair {
  int ours = -1, theirs = -1;
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    ours = fds[0];
    theirs = fds[1];
  }
  ~Pair() {
    ::close(ours);
    ::close(theirs);
  }
  bool ShutDown() const {  // the peer sees end of file once ours is shut down
    char c;
    return ::recv(theirs, &c, 1, MSG_DONTWAIT) == 0;
  }
};

TEST(HandshakeGateTest, GivenAFloodFromOneHostThenItsOldestPendingConnectionsAreEvicted) {
  HandshakeGate gate({100, 10, 3});
  std::vector<Pair> pairs(6);
  std::vector<uint64_t> ids;
  Pair trusted;
  auto trusted_id = gate.Admit(trusted.ours, "10.0.0.9:5000");
  ASSERT_TRUE(trusted_id);
  gate.Authenticated(*trusted_id);
  for (Pair& p : pairs) {
    auto id = gate.Admit(p.ours, "10.0.0.1:" + std::to_string(1000 + ids.size()));
    ASSERT_TRUE(id);
    ids.push_back(*id);
  }
  // 3 pending per host: the first three were evicted as the next three came.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(pairs[static_cast<size_t>(i)].ShutDown()) << i;
  for (int i = 3; i < 6; ++i) EXPECT_FALSE(pairs[static_cast<size_t>(i)].ShutDown()) << i;
  EXPECT_FALSE(trusted.ShutDown());
  EXPECT_EQ(gate.dropped(), 3u);
  // Another host is not affected by the first one's flood.
  Pair other;
  ASSERT_TRUE(gate.Admit(other.ours, "10.0.0.2:1"));
  EXPECT_FALSE(other.ShutDown());
  EXPECT_EQ(gate.open(), 8u);
  for (uint64_t id : ids) gate.Closed(id);
  EXPECT_EQ(gate.open(), 2u);
}

TEST(HandshakeGateTest, GivenADescriptorLimit_ThenTheConnectionCapAndLobbyStayBelowItWithAReserve) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  struct Case {
    rlim_t soft;
    size_t connections, lobby;
  };
  for (const Case& c : std::vector<Case>{
           {20000, 4096, 256}, {4096, 3712, 256}, {1024, 717, 179}, {300, 138, 34}, {100, 16, 4}}) {
    if (c.soft > saved.rlim_max) continue;
    rlimit low = saved;
    low.rlim_cur = c.soft;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
    EXPECT_EQ(DefaultMaxConnections(), c.connections) << "soft limit " << c.soft;
    EXPECT_EQ(DefaultLobbySize(), c.lobby) << "soft limit " << c.soft;
    EXPECT_EQ(HandshakeLimits{}.max_connections, c.connections);
    if (c.soft >= 148) {
      EXPECT_LE(c.connections + c.lobby + kDescriptorReserve, c.soft) << "soft limit " << c.soft;
    }
  }
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
}

TEST(HandshakeGateTest, GivenTheTotalBoundThenNewConnectionsAreRefused) {
  HandshakeGate gate({2, 10, 10});
  Pair a, b, c;
  auto ida = gate.Admit(a.ours, "h:1");
  ASSERT_TRUE(ida);
  ASSERT_TRUE(gate.Admit(b.ours, "h:2"));
  EXPECT_FALSE(gate.Admit(c.ours, "h:3"));
  gate.Closed(*ida);
  EXPECT_TRUE(gate.Admit(c.ours, "h:3"));
}

}  // namespace
}  // namespace gm
