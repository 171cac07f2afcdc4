// Tests of dataplane/lobby.h over real TCP connections on loopback. Waits have
// generous deadlines; nothing depends on how fast this machine is.
#include "dataplane/lobby.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

namespace gm {
namespace {

constexpr double kWaitS = 10;

class LobbyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto listener = Listener::ListenTcp("127.0.0.1", 0);
    ASSERT_TRUE(listener.ok()) << listener.status().message();
    listener_ = std::move(*listener);
  }

  // Connects, and lets the lobby take the accepted end.
  Socket ConnectAndAdd(Lobby& lobby) {
    auto client = Socket::ConnectTcp("127.0.0.1", listener_.port(), kWaitS);
    EXPECT_TRUE(client.ok()) << client.status().message();
    auto accepted = listener_.Accept(kWaitS);
    EXPECT_TRUE(accepted.ok()) << accepted.status().message();
    lobby.Add(std::move(*accepted), [this](Socket s) {
      char byte = 0;
      if (::recv(s.fd(), &byte, 1, 0) == 1) first_bytes_.push_back(byte);
      ++ready_;  // after the write: a reader that sees the count sees the byte
    });
    return client.ok() ? std::move(*client) : Socket();
  }

  // Waits until `done` holds (true) or kWaitS passes (false).
  template <typename F>
  static bool WaitFor(F done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  // True when the peer closed `s` (a read sees end of file or an error).
  static bool ClosedByPeer(Socket& s) {
    pollfd p{s.fd(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(kWaitS * 1000)) != 1) return false;
    char byte = 0;
    const ssize_t got = ::recv(s.fd(), &byte, 1, MSG_DONTWAIT);
    return got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }

  Listener listener_;
  std::atomic<int> ready_{0};
  // Written by whichever thread hands a connection on (the lobby's, or the one
  // calling Add when the lobby is full), one at a time in these tests.
  std::vector<char> first_bytes_;
};

TEST_F(LobbyTest, GivenAFirstByte_ThenTheConnectionIsHandedOnWithItsBytes) {
  auto lobby = Lobby::Start(kWaitS, 16);
  ASSERT_TRUE(lobby.ok()) << lobby.status().message();
  Socket client = ConnectAndAdd(**lobby);
  EXPECT_EQ((*lobby)->waiting(), 1u);
  ASSERT_EQ(::send(client.fd(), "H", 1, 0), 1);
  ASSERT_TRUE(WaitFor([&] { return ready_.load() == 1; }));
  EXPECT_EQ(first_bytes_, std::vector<char>{'H'});  // peeked, not consumed, by the lobby
  EXPECT_EQ((*lobby)->waiting(), 0u);
  EXPECT_EQ((*lobby)->closed_early(), 0u);
}

TEST_F(LobbyTest, GivenConnectionsThatCloseFirst_ThenTheyAreClosedAndNeverHandedOn) {
  auto lobby = Lobby::Start(kWaitS, 1024);
  ASSERT_TRUE(lobby.ok()) << lobby.status().message();
  for (int i = 0; i < 200; ++i) {
    Socket client = ConnectAndAdd(**lobby);
  }  // each closes at the end of its iteration, before sending anything
  ASSERT_TRUE(WaitFor([&] { return (*lobby)->closed_early() == 200; })) << (*lobby)->closed_early();
  EXPECT_EQ((*lobby)->waiting(), 0u);
  // A real peer in their wake gets through.
  Socket real = ConnectAndAdd(**lobby);
  ASSERT_EQ(::send(real.fd(), "H", 1, 0), 1);
  ASSERT_TRUE(WaitFor([&] { return ready_.load() == 1; }));
}

TEST_F(LobbyTest, GivenASilentPeer_ThenItIsClosedAtTheDeadline) {
  auto lobby = Lobby::Start(/*deadline_s=*/0.2, 16);
  ASSERT_TRUE(lobby.ok()) << lobby.status().message();
  Socket client = ConnectAndAdd(**lobby);
  EXPECT_TRUE(ClosedByPeer(client));
  ASSERT_TRUE(WaitFor([&] { return (*lobby)->closed_early() == 1; }));
  EXPECT_EQ(ready_.load(), 0);
}

TEST_F(LobbyTest, GivenAFullLobby_ThenTheOldestIsClosedToMakeRoom) {
  auto lobby = Lobby::Start(kWaitS, 2);
  ASSERT_TRUE(lobby.ok()) << lobby.status().message();
  Socket first = ConnectAndAdd(**lobby);
  Socket second = ConnectAndAdd(**lobby);
  Socket third = ConnectAndAdd(**lobby);
  EXPECT_TRUE(ClosedByPeer(first));
  EXPECT_EQ((*lobby)->waiting(), 2u);
  ASSERT_EQ(::send(third.fd(), "H", 1, 0), 1);
  ASSERT_TRUE(WaitFor([&] { return ready_.load() == 1; }));
  EXPECT_EQ((*lobby)->waiting(), 1u);  // the second still waits
}

TEST_F(LobbyTest, GivenAFullLobbyWhoseOldestHasSpoken_ThenItIsHandedOnNotClosed) {
  // The lobby's thread may or may not have seen the byte when the next connection
  // comes to a full lobby; either way the one that spoke goes through. Repeated, so
  // that both orders are likely to occur.
  for (int i = 0; i < 50; ++i) {
    ready_ = 0;
    first_bytes_.clear();
    auto lobby = Lobby::Start(kWaitS, 1);
    ASSERT_TRUE(lobby.ok()) << lobby.status().message();
    Socket spoke = ConnectAndAdd(**lobby);
    ASSERT_EQ(::send(spoke.fd(), "H", 1, 0), 1);
    Socket next = ConnectAndAdd(**lobby);
    ASSERT_TRUE(WaitFor([&] { return ready_.load() == 1; })) << "round " << i;
    EXPECT_EQ(first_bytes_, std::vector<char>{'H'}) << "round " << i;
    EXPECT_EQ((*lobby)->closed_early(), 0u) << "round " << i;
    EXPECT_EQ((*lobby)->waiting(), 1u) << "round " << i;  // the next one waits
  }
}

}  // namespace
}  // namespace gm
