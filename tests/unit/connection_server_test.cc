// Tests of dataplane/connection_server.h over real loopback connections, with
// the real handshake. Waits have generous deadlines; nothing depends on how fast
// this machine is.
#include "dataplane/connection_server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "dataplane/auth.h"
#include "dataplane/protocol.h"

namespace gm {
namespace {

constexpr double kWaitS = 10;
constexpr char kKey[] = "00112233445566778899aabbccddeeff";

template <typename F>
bool WaitFor(F done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// True when the peer closed `s` (a read sees end of file or an error) within kWaitS.
bool ClosedByPeer(Socket& s, double wait_s = kWaitS) {
  pollfd p{s.fd(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait_s * 1000)) != 1) return false;
  char byte = 0;
  const ssize_t got = ::recv(s.fd(), &byte, 1, MSG_DONTWAIT);
  return got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// A server whose `serve` runs the handshake with one key, records what it saw,
// then reads frames until the peer closes or the connection is shut down.
class ConnectionServerTest : public ::testing::Test {
 protected:
  std::unique_ptr<ConnectionServer> StartServer(HandshakeLimits limits = {}) {
    ConnectionServer::Options options;
    options.name = "test server";
    options.hello_role = "tester";
    options.limits = limits;
    auto server = ConnectionServer::Start(options, [this](const ConnectionServer::Connection& c) {
      ++served_;
      Socket& socket = *c.socket();
      Status st = ServerHandshake(
          socket, [](std::string_view) -> Result<std::string> { return std::string(kKey); },
          "tester", Deadline::After(kWaitS), nullptr, &c.hello_nonce());
      if (!st.ok()) {
        ++refused_;
        return;
      }
      c.Authenticated();
      {
        std::lock_guard<std::mutex> lock(mu_);
        tags_.push_back(c.tag());
        if (keep_) kept_.push_back(c.socket());
      }
      ++authenticated_;
      while (RecvFrame(socket, FrameLimits{1024, 0, kWaitS}, Deadline::Never()).ok()) {
      }
      ++ended_;
    });
    EXPECT_TRUE(server.ok()) << server.status().message();
    return server.ok() ? std::move(*server) : nullptr;
  }

  static int ListenTcp(ConnectionServer& server, int tag = 0) {
    auto listener = Listener::ListenTcp("127.0.0.1", 0);
    EXPECT_TRUE(listener.ok()) << listener.status().message();
    const int port = listener->port();
    EXPECT_TRUE(server.Listen(std::move(*listener), tag).ok());
    return port;
  }

  static Result<Socket> Dial(int port) {
    GM_ASSIGN_OR_RETURN(Socket s, Socket::ConnectTcp("127.0.0.1", port, kWaitS));
    std::string server_role;
    GM_RETURN_IF_ERROR(ClientHandshake(s, kKey, "someone", Deadline::After(kWaitS), &server_role));
    EXPECT_EQ(server_role, "tester");
    return s;
  }

  std::atomic<int> served_{0}, refused_{0}, authenticated_{0}, ended_{0};
  std::mutex mu_;
  std::vector<int> tags_;
  bool keep_ = false;
  std::vector<std::shared_ptr<Socket>> kept_;
};

TEST_F(ConnectionServerTest, GivenAPeerThatAnswersHelloThenServeRunsTheHandshakeOnItsOwnThread) {
  auto server = StartServer();
  const int port = ListenTcp(*server, 7);
  auto a = Dial(port);
  auto b = Dial(port);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_TRUE(WaitFor([&] { return authenticated_ == 2; }));
  EXPECT_EQ(server->open(), 2u);  // both served at once, each on its own thread
  {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(tags_, (std::vector<int>{7, 7}));
  }
  a->Close();
  ASSERT_TRUE(WaitFor([&] { return ended_ == 1 && server->open() == 1; }));
  EXPECT_EQ(server->dropped(), 0u);
}

TEST_F(ConnectionServerTest, GivenTwoListenersThenEachConnectionCarriesItsListenersTag) {
  auto server = StartServer();
  const int tcp = ListenTcp(*server, 0);
  const std::string path = "@goldminer-test/connection-server-" + std::to_string(::getpid());
  auto unix_listener = Listener::ListenUnix(path);
  ASSERT_TRUE(unix_listener.ok()) << unix_listener.status().message();
  ASSERT_TRUE(server->Listen(std::move(*unix_listener), 1).ok());
  auto over_tcp = Dial(tcp);
  ASSERT_TRUE(over_tcp.ok()) << over_tcp.status().message();
  ASSERT_TRUE(WaitFor([&] { return authenticated_ == 1; }));
  auto s = Socket::ConnectUnix(path, kWaitS);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_TRUE(ClientHandshake(*s, kKey, "someone", Deadline::After(kWaitS), nullptr).ok());
  ASSERT_TRUE(WaitFor([&] { return authenticated_ == 2; }));
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(tags_, (std::vector<int>{0, 1}));
}

TEST_F(ConnectionServerTest, GivenAPeerThatConnectsAndClosesThenItIsNeverServed) {
  auto server = StartServer();
  const int port = ListenTcp(*server);
  for (int i = 0; i < 20; ++i) {
    auto s = Socket::ConnectTcp("127.0.0.1", port, kWaitS);
    ASSERT_TRUE(s.ok());
    s->Close();  // before any answer: it leaves the lobby without a thread
  }
  auto real = Dial(port);  // a real peer after them still gets in
  ASSERT_TRUE(real.ok()) << real.status().message();
  ASSERT_TRUE(WaitFor([&] { return authenticated_ == 1; }));
  EXPECT_EQ(served_, 1);
}

TEST_F(ConnectionServerTest, GivenTheConnectionBoundThenTheNextIsClosedAndCountedAsDropped) {
  HandshakeLimits limits;
  limits.max_connections = 2;
  auto server = StartServer(limits);
  const int port = ListenTcp(*server);
  auto a = Dial(port);
  auto b = Dial(port);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(WaitFor([&] { return authenticated_ == 2; }));
  // The third answers HELLO and is closed at admission, before its handshake ends.
  auto c = Socket::ConnectTcp("127.0.0.1", port, kWaitS);
  ASSERT_TRUE(c.ok());
  Status st = ClientHandshake(*c, kKey, "someone", Deadline::After(kWaitS), nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(ClosedByPeer(*c));
  EXPECT_EQ(server->dropped(), 1u);
  EXPECT_EQ(served_, 2);
  a->Close();  // room again: a new peer gets in
  ASSERT_TRUE(WaitFor([&] { return server->open() == 1; }));
  auto d = Dial(port);
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_TRUE(WaitFor([&] { return authenticated_ == 3; }));
}

TEST_F(ConnectionServerTest, GivenAFailedHandshakeThenTheConnectionIsClosedAndTheServerGoesOn) {
  auto server = StartServer();
  const int port = ListenTcp(*server);
  auto s = Socket::ConnectTcp("127.0.0.1", port, kWaitS);
  ASSERT_TRUE(s.ok());
  Status st = ClientHandshake(*s, "ffeeddccbbaa99887766554433221100", "someone",
                              Deadline::After(kWaitS), nullptr);
  EXPECT_FALSE(st.ok());
  ASSERT_TRUE(WaitFor([&] { return refused_ == 1 && server->open() == 0; }));
  EXPECT_TRUE(ClosedByPeer(*s));
  auto real = Dial(port);
  EXPECT_TRUE(real.ok()) << real.status().message();
}

TEST_F(ConnectionServerTest, GivenServeKeepsTheSocketThenItStaysOpenUntilReleased) {
  keep_ = true;
  auto server = StartServer();
  const int port = ListenTcp(*server);
  auto a = Dial(port);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(WaitFor([&] { return authenticated_ == 1; }));
  a->ShutdownWrite();  // serve sees the end and returns
  ASSERT_TRUE(WaitFor([&] { return ended_ == 1 && server->open() == 0; }));
  EXPECT_FALSE(ClosedByPeer(*a, 0.2));  // still held by what serve kept
  {
    std::lock_guard<std::mutex> lock(mu_);
    kept_.clear();
  }
  EXPECT_TRUE(ClosedByPeer(*a));
}

TEST_F(ConnectionServerTest, GivenStopThenBlockedConnectionsEndAndListenIsRefused) {
  auto server = StartServer();
  const int port = ListenTcp(*server);
  auto a = Dial(port);
  auto b = Dial(port);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(WaitFor([&] { return authenticated_ == 2; }));
  server->Stop();  // the serving threads block in a receive with no deadline
  EXPECT_EQ(ended_, 2);
  EXPECT_EQ(server->open(), 0u);
  EXPECT_TRUE(ClosedByPeer(*a));
  auto listener = Listener::ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  EXPECT_EQ(server->Listen(std::move(*listener)).code(), Code::kCancelled);
  server->Stop();                                               // idempotent
  EXPECT_FALSE(Socket::ConnectTcp("127.0.0.1", port, 1).ok());  // no longer listening
}

}  // namespace
}  // namespace gm
