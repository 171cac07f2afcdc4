// Tests of dataplane/auth.h: secrets, secret files and the mutual handshake over
// real loopback TCP and Unix sockets.
#include "dataplane/auth.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "dataplane/offload_proof.h"
#include "dataplane/protocol.h"
#include "dataplane/socket.h"
#include "test_util.h"
#include "tests/unit/socket_pair.h"

namespace gm {
namespace {

constexpr double kWait = 30;  // seconds; only bounds a broken test
const std::string kSecret(64, 'a');
const std::string kOtherSecret(64, 'b');

using testing::Connection;
using testing::TcpPair;

struct Outcome {
  Status server;
  Status client;
  std::string client_role;  // as the server saw it
  std::string server_role;  // as the client saw it
};

// Runs both handshakes at once, the server's in a thread.
Outcome Handshake(Connection& c, const std::string& server_secret,
                  const std::string& client_secret) {
  Outcome out;
  std::thread server([&] {
    out.server = ServerHandshake(c.server, server_secret, "coordinator", Deadline::After(kWait),
                                 &out.client_role);
    if (!out.server.ok()) c.server.Close();
  });
  out.client =
      ClientHandshake(c.client, client_secret, "worker", Deadline::After(kWait), &out.server_role);
  server.join();
  return out;
}

// Runs the server's handshake against `client`, a hand-written peer.
Status ServerAgainst(Connection& c, const std::function<void(Socket&)>& client) {
  Status status;
  std::thread server([&] {
    status = ServerHandshake(c.server, kSecret, "coordinator", Deadline::After(kWait), nullptr);
    c.server.Close();
  });
  client(c.client);
  server.join();
  return status;
}

// Sets an environment variable for the lifetime of the object.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
    ::setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_.c_str()); }

 private:
  std::string name_;
};

TEST(AuthTest, GivenSameSecret_WhenHandshakingOverTcp_ThenBothSucceedAndLearnRoles) {
  Connection c = TcpPair();
  Outcome out = Handshake(c, kSecret, kSecret);
  ASSERT_TRUE(out.server.ok()) << out.server.message();
  ASSERT_TRUE(out.client.ok()) << out.client.message();
  EXPECT_EQ(out.client_role, "worker");
  EXPECT_EQ(out.server_role, "coordinator");
  // The connection carries frames afterwards.
  ASSERT_TRUE(SendFrame(c.client, MsgType::kRegister, {{"pid", 42}}, Deadline::After(kWait)).ok());
  auto frame = RecvFrame(c.server, FrameLimits{}, Deadline::After(kWait));
  ASSERT_TRUE(frame.ok()) << frame.status().message();
  EXPECT_EQ(frame->meta["pid"], 42);
}

// Copies bytes both ways between `a` and `b` until either end closes: what a
// local process that took a worker's same-host name would do to relay a client
// to the worker's TCP port.
void Relay(Socket& a, Socket& b) {
  char buf[4096];
  for (;;) {
    pollfd fds[2] = {{a.fd(), POLLIN, 0}, {b.fd(), POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(kWait * 1000)) <= 0) return;
    for (int i = 0; i < 2; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      Socket& from = i == 0 ? a : b;
      Socket& to = i == 0 ? b : a;
      const ssize_t n = ::read(from.fd(), buf, sizeof buf);
      if (n <= 0 || ::send(to.fd(), buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) return;
    }
  }
}

TEST(AuthTest, GivenARelayFromUnixToTcp_WhenHandshakingThroughIt_ThenBothSidesRefuse) {
  auto tcp = Listener::ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(tcp.ok()) << tcp.status().message();
  const std::string name = "@goldminer-test-relay-" + std::to_string(::getpid());
  auto unix_listener = Listener::ListenUnix(name);
  ASSERT_TRUE(unix_listener.ok()) << unix_listener.status().message();
  auto client = Socket::ConnectUnix(name, kWait);
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_EQ(client->transport(), "unix");
  Status server_status;
  std::thread server([&] {
    auto accepted = tcp->Accept(kWait);
    ASSERT_TRUE(accepted.ok());
    EXPECT_EQ(accepted->transport(), "tcp");
    server_status = ServerHandshake(*accepted, kSecret, "worker", Deadline::After(kWait), nullptr);
  });
  std::thread relay([&] {
    auto inner = unix_listener->Accept(kWait);
    auto outer = Socket::ConnectTcp("127.0.0.1", tcp->port(), kWait);
    ASSERT_TRUE(inner.ok() && outer.ok());
    Relay(*inner, *outer);
  });
  Status client_status =
      ClientHandshake(*client, kSecret, "worker", Deadline::After(kWait), nullptr);
  client->Close();
  server.join();
  relay.join();
  EXPECT_EQ(server_status.code(), Code::kInvalidArgument) << server_status.message();
  EXPECT_NE(server_status.message().find("authentication failed"), std::string::npos);
  EXPECT_FALSE(client_status.ok()) << "the client completed a handshake through the relay";
  // The client's message names the relay as a cause, not only the key.
  EXPECT_NE(client_status.message().find("through a relay between a Unix socket and a TCP port"),
            std::string::npos)
      << client_status.message();
}

TEST(AuthTest, GivenAUnixSocket_ThenThePeerCredentialsAreThisProcess) {
  const std::string name = "@goldminer-test-cred-" + std::to_string(::getpid());
  auto listener = Listener::ListenUnix(name);
  ASSERT_TRUE(listener.ok());
  auto client = Socket::ConnectUnix(name, kWait);
  ASSERT_TRUE(client.ok());
  auto cred = client->peer_credentials();
  ASSERT_TRUE(cred.ok()) << cred.status().message();
  EXPECT_EQ(cred->uid, ::geteuid());
  EXPECT_EQ(cred->pid, ::getpid());
  Connection tcp = testing::TcpPair();
  EXPECT_FALSE(tcp.client.peer_credentials().ok());
}

TEST(AuthTest, GivenSameSecret_WhenHandshakingOverUnixSocket_ThenBothSucceed) {
  testing::TempDir dir;
  auto listener = Listener::ListenUnix(dir.path() + "/coordinator.sock");
  ASSERT_TRUE(listener.ok()) << listener.status().message();
  auto client = Socket::ConnectUnix(dir.path() + "/coordinator.sock", kWait);
  ASSERT_TRUE(client.ok()) << client.status().message();
  auto server = listener->Accept(kWait);
  ASSERT_TRUE(server.ok());
  Connection c{std::move(*client), std::move(*server)};
  Outcome out = Handshake(c, kSecret, kSecret);
  EXPECT_TRUE(out.server.ok()) << out.server.message();
  EXPECT_TRUE(out.client.ok()) << out.client.message();
}

TEST(AuthTest, GivenWrongClientSecret_WhenHandshaking_ThenBothSidesFailAuthentication) {
  Connection c = TcpPair();
  Outcome out = Handshake(c, kSecret, kOtherSecret);
  EXPECT_EQ(out.server.code(), Code::kInvalidArgument);
  EXPECT_NE(out.server.message().find("authentication failed"), std::string::npos)
      << out.server.message();
  EXPECT_NE(out.server.message().find("role \"worker\""), std::string::npos);
  EXPECT_EQ(out.client.code(), Code::kInvalidArgument);
  EXPECT_NE(out.client.message().find("authentication failed"), std::string::npos)
      << out.client.message();
  EXPECT_NE(out.client.message().find(std::string(kSecretFileEnv)), std::string::npos);
  EXPECT_EQ(out.client.message().find(kSecret), std::string::npos);  // never echoed
}

TEST(AuthTest, GivenImpostorServer_WhenItCannotProveTheSecret_ThenClientRefusesIt) {
  Connection c = TcpPair();
  std::thread impostor([&] {
    // Speaks the protocol but does not know the secret: echoes a made-up MAC.
    auto nonce = RandomHex(32);
    ASSERT_TRUE(
        SendFrame(c.server, MsgType::kHello,
                  {{"version", kProtocolVersion}, {"nonce", *nonce}, {"role", "coordinator"}},
                  Deadline::After(kWait))
            .ok());
    auto auth = RecvFrame(c.server, kHandshakeLimits, Deadline::After(kWait));
    ASSERT_TRUE(auth.ok());
    ASSERT_TRUE(SendFrame(c.server, MsgType::kWelcome, {{"mac", std::string(64, '0')}},
                          Deadline::After(kWait))
                    .ok());
  });
  Status client = ClientHandshake(c.client, kSecret, "client", Deadline::After(kWait), nullptr);
  impostor.join();
  EXPECT_EQ(client.code(), Code::kInvalidArgument);
  EXPECT_NE(client.message().find("authentication failed: the server"), std::string::npos)
      << client.message();
}

TEST(AuthTest, GivenClientThatSendsNothing_WhenServerDeadlinePasses_ThenServerGivesUp) {
  Connection c = TcpPair();
  Status status = ServerHandshake(c.server, kSecret, "coordinator", Deadline::After(0.2), nullptr);
  EXPECT_EQ(status.code(), Code::kUnavailable);
  EXPECT_NE(status.message().find("timed out waiting for a frame header"), std::string::npos)
      << status.message();
}

TEST(AuthTest, GivenPeerSpeakingGarbage_WhenServerHandshakes_ThenCorruptAndPeerToldWhy) {
  Connection c = TcpPair();
  std::string reason;
  Status status = ServerAgainst(c, [&](Socket& s) {
    std::string junk = "GET / HTTP/1.1\r\nHost: xy";  // exactly one header long
    iovec v{junk.data(), junk.size()};
    ASSERT_TRUE(s.SendAll({&v, 1}, Deadline::After(kWait), "junk").ok());
    auto hello = RecvFrame(s, kHandshakeLimits, Deadline::After(kWait));
    ASSERT_TRUE(hello.ok());
    auto error = RecvFrame(s, kHandshakeLimits, Deadline::After(kWait));
    ASSERT_TRUE(error.ok()) << error.status().message();
    EXPECT_EQ(error->type, MsgType::kError);
    reason = error->meta.value("message", "");
  });
  EXPECT_EQ(status.code(), Code::kCorrupt);
  EXPECT_NE(status.message().find("bad frame magic \"GET \""), std::string::npos)
      << status.message();
  EXPECT_NE(reason.find("bad frame magic"), std::string::npos) << reason;
}

TEST(AuthTest, GivenClientOfAnotherVersion_WhenHandshaking_ThenErrorNamesBothVersions) {
  Connection c = TcpPair();
  std::string reason;
  Status status = ServerAgainst(c, [&](Socket& s) {
    ASSERT_TRUE(RecvFrame(s, kHandshakeLimits, Deadline::After(kWait)).ok());
    ASSERT_TRUE(
        SendFrame(s, MsgType::kAuth, {{"version", 4}, {"role", "worker"}}, Deadline::After(kWait))
            .ok());
    auto error = RecvFrame(s, kHandshakeLimits, Deadline::After(kWait));
    ASSERT_TRUE(error.ok()) << error.status().message();
    EXPECT_EQ(error->type, MsgType::kError);
    reason = error->meta.value("message", "");
  });
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  for (const std::string& text : {status.message(), reason}) {
    EXPECT_NE(text.find("peer speaks version 4, this side speaks version 3"), std::string::npos)
        << text;
  }
}

TEST(AuthTest, GivenServerThatRefuses_WhenClientHandshakes_ThenClientReportsTheReason) {
  Connection c = TcpPair();
  std::thread server([&] {
    ASSERT_TRUE(SendFrame(c.server, MsgType::kError, {{"message", "the run is over"}},
                          Deadline::After(kWait))
                    .ok());
  });
  Status client = ClientHandshake(c.client, kSecret, "worker", Deadline::After(kWait), nullptr);
  server.join();
  EXPECT_EQ(client.code(), Code::kInvalidArgument);  // final: DialHandshake does not dial again
  EXPECT_NE(client.message().find("the run is over"), std::string::npos) << client.message();
}

// A server on loopback that sends HELLO and closes the first `drops` connections
// (as a full lobby evicts them), then handshakes with `key` on the next one.
// Returns how many connections it accepted.
struct DroppingServer {
  Listener listener;
  int accepted = 0;
  Status last;

  void Serve(int drops, const std::string& key) {
    for (;;) {
      auto s = listener.Accept(kWait);
      if (!s.ok()) return;
      ++accepted;
      if (accepted <= drops) {
        (void)SendServerHello(*s, "coordinator", Deadline::After(kWait));
        continue;  // closed without a word
      }
      last = ServerHandshake(*s, key, "coordinator", Deadline::After(kWait), nullptr);
      return;
    }
  }
};

Result<Socket> DialLoopback(int port, double within_s, std::string* role) {
  return DialHandshake([port] { return Socket::ConnectTcp("127.0.0.1", port, kWait); }, kSecret,
                       "worker", Deadline::After(within_s), role);
}

TEST(DialHandshakeTest, GivenAServerThatDropsTwoConnections_ThenTheThirdIsAuthenticated) {
  auto listener = Listener::ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status().message();
  DroppingServer server{std::move(*listener), 0, Status::Ok()};
  std::thread thread([&] { server.Serve(2, kSecret); });
  std::string role;
  Result<Socket> socket = DialLoopback(server.listener.port(), kWait, &role);
  thread.join();
  ASSERT_TRUE(socket.ok()) << socket.status().message();
  EXPECT_EQ(server.accepted, 3);
  EXPECT_TRUE(server.last.ok()) << server.last.message();
  EXPECT_EQ(role, "coordinator");
}

TEST(DialHandshakeTest, GivenAServerThatRefusesTheKey_ThenItIsNotDialledAgain) {
  auto listener = Listener::ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status().message();
  DroppingServer server{std::move(*listener), 0, Status::Ok()};
  std::thread thread([&] { server.Serve(0, kOtherSecret); });
  Result<Socket> socket = DialLoopback(server.listener.port(), kWait, nullptr);
  thread.join();
  ASSERT_FALSE(socket.ok());
  EXPECT_EQ(socket.status().code(), Code::kInvalidArgument);
  EXPECT_NE(socket.status().message().find("authentication failed"), std::string::npos)
      << socket.status().message();
  EXPECT_EQ(server.accepted, 1);
}

TEST(DialHandshakeTest, GivenAServerThatAlwaysDrops_ThenTheLastFailureComesAtTheDeadline) {
  auto listener = Listener::ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status().message();
  DroppingServer server{std::move(*listener), 0, Status::Ok()};
  std::atomic<bool> done{false};
  std::thread thread([&] {
    while (!done) {
      auto s = server.listener.Accept(0.05);
      if (!s.ok()) continue;
      ++server.accepted;
      (void)SendServerHello(*s, "coordinator", Deadline::After(kWait));
    }
  });
  Result<Socket> socket = DialLoopback(server.listener.port(), 0.3, nullptr);
  done = true;
  thread.join();
  ASSERT_FALSE(socket.ok());
  EXPECT_EQ(socket.status().code(), Code::kUnavailable) << socket.status().message();
  EXPECT_GE(server.accepted, 2);  // dialled again at least once within 0.3 s (pauses of 20, 40 ms)
}

TEST(AuthTest, GivenKnownVector_WhenHmacComputed_ThenMatchesRfc4231) {
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(AuthTest, GivenNewSecrets_ThenEachIs64HexCharsAndDistinct) {
  auto a = NewSecret(), b = NewSecret();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(CheckSecret(*a, "new").ok());
  EXPECT_NE(*a, *b);
  Status short_secret = CheckSecret("abc123", "GOLDMINER_SECRET");
  EXPECT_EQ(short_secret.code(), Code::kInvalidArgument);
  EXPECT_NE(short_secret.message().find("GOLDMINER_SECRET: the secret must be 64"),
            std::string::npos);
  EXPECT_EQ(short_secret.message().find("abc123"), std::string::npos);
}

TEST(AuthTest, GivenWrittenSecretFile_ThenMode0600AndReadBack) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/secret";
  ASSERT_TRUE(WriteSecretFile(path, kSecret).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  auto secret = ReadSecretFile(path);
  ASSERT_TRUE(secret.ok()) << secret.status().message();
  EXPECT_EQ(*secret, kSecret);
}

TEST(AuthTest, GivenSecretFileReadableByOthers_WhenRead_ThenRefusedWithChmodHint) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/secret";
  ASSERT_TRUE(WriteSecretFile(path, kSecret).ok());
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto secret = ReadSecretFile(path);
  ASSERT_FALSE(secret.ok());
  EXPECT_EQ(secret.status().code(), Code::kInvalidArgument);
  EXPECT_NE(secret.status().message().find("mode 0644"), std::string::npos);
  EXPECT_NE(secret.status().message().find("chmod 600 " + path), std::string::npos)
      << secret.status().message();
  ASSERT_EQ(::chmod(path.c_str(), 0400), 0);
  EXPECT_TRUE(ReadSecretFile(path).ok());
}

TEST(AuthTest, GivenEnvironment_WhenLoadingSecret_ThenFileWinsOverValue) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/secret";
  ASSERT_TRUE(WriteSecretFile(path, kSecret).ok());
  {
    ScopedEnv value(std::string(kSecretEnv), kOtherSecret);
    auto secret = LoadSecret();
    ASSERT_TRUE(secret.ok()) << secret.status().message();
    EXPECT_EQ(*secret, kOtherSecret);
    ScopedEnv file(std::string(kSecretFileEnv), path);
    secret = LoadSecret();
    ASSERT_TRUE(secret.ok()) << secret.status().message();
    EXPECT_EQ(*secret, kSecret);
  }
  auto none = LoadSecret();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kNotFound);
  EXPECT_NE(none.status().message().find("GOLDMINER_SECRET_FILE"), std::string::npos);
}

}  // namespace
}  // namespace gm

namespace gm {
namespace {

// Frames after the handshake are sealed (dataplane/session.h): these tests send
// through an authenticated pair and tamper with what travels.

// A socket's raw bytes for one frame as `sender`'s session would seal it.
std::string SealedBytes(Socket& sender, MsgType type, const nlohmann::json& meta) {
  std::string text = meta.dump();
  FrameHeader h;
  h.type = type;
  h.flags = kFrameSealed;
  h.meta_len = static_cast<uint32_t>(text.size());
  std::string header = EncodeFrameHeader(h);
  SealMac mac = sender.session()->Seal(header, text);
  return header + text + std::string(reinterpret_cast<const char*>(mac.data()), mac.size());
}

void SendRawBytes(Socket& s, const std::string& bytes) {
  iovec v{const_cast<char*>(bytes.data()), bytes.size()};
  ASSERT_TRUE(s.SendAll({&v, 1}, Deadline::After(kWait), "raw frame").ok());
}

TEST(SessionTest, GivenAnAuthenticatedPair_WhenFramesGoBothWays_ThenTheyArriveSealedAndChecked) {
  Connection c = TcpPair();
  Outcome out = Handshake(c, kSecret, kSecret);
  ASSERT_TRUE(out.server.ok() && out.client.ok());
  ASSERT_NE(c.client.session(), nullptr);
  ASSERT_NE(c.server.session(), nullptr);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(SendFrame(c.client, MsgType::kHeartbeat, {{"i", i}}, Deadline::After(kWait)).ok());
    auto got = RecvFrame(c.server, kControlLimits, Deadline::After(kWait));
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(got->meta["i"], i);
    EXPECT_EQ(got->flags & kFrameSealed, kFrameSealed);
  }
  ASSERT_TRUE(
      SendFrame(c.server, MsgType::kWorkers, {{"workers", {"a:1"}}}, Deadline::After(kWait)).ok());
  auto back = RecvFrame(c.client, kControlLimits, Deadline::After(kWait));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->meta["workers"][0], "a:1");
  EXPECT_EQ(c.client.session()->frames_sent(), 3u);
  EXPECT_EQ(c.server.session()->frames_received(), 3u);
}

// Each case: what an attacker who can write into the connection sends, given the
// bytes of one genuine sealed frame; the receiver must refuse at the frame it breaks.
struct Tamper {
  const char* name;
  std::function<std::string(const std::string& genuine)> bytes;
  int good_frames_first;  // genuine frames the receiver accepts before the refusal
};

TEST(SessionTest,
     GivenInjectedReplayedOrAlteredFrames_WhenReceived_ThenCorruptAndNothingOfThemIsRead) {
  const std::vector<Tamper> cases = {
      {"replayed", [](const std::string& g) { return g + g; }, 1},
      {"unsealed",
       [](const std::string&) {
         return *EncodeFrame(MsgType::kHeartbeat, {{"i", 9}});
       },
       0},
      {"altered meta",
       [](const std::string& g) {
         std::string t = g;
         t[kFrameHeaderSize + 5] ^= 1;  // inside {"i":0}
         return t;
       },
       0},
      {"altered header",
       [](const std::string& g) {
         std::string t = g;
         t[5] = static_cast<char>(MsgType::kBye);  // the type
         return t;
       },
       0},
      {"mac of another key",
       [](const std::string& g) {
         std::string t = g;
         t.back() ^= 0x40;
         return t;
       },
       0},
  };
  for (const Tamper& tc : cases) {
    Connection c = TcpPair();
    Outcome out = Handshake(c, kSecret, kSecret);
    ASSERT_TRUE(out.server.ok() && out.client.ok()) << tc.name;
    SendRawBytes(c.client, tc.bytes(SealedBytes(c.client, MsgType::kHeartbeat, {{"i", 0}})));
    for (int i = 0; i < tc.good_frames_first; ++i) {
      auto good = RecvFrame(c.server, kControlLimits, Deadline::After(kWait));
      ASSERT_TRUE(good.ok()) << tc.name << ": " << good.status().message();
    }
    auto bad = RecvFrame(c.server, kControlLimits, Deadline::After(kWait));
    ASSERT_FALSE(bad.ok()) << tc.name;
    EXPECT_EQ(bad.status().code(), Code::kCorrupt) << tc.name << ": " << bad.status().message();
  }
}

TEST(SessionTest, GivenTwoConnectionsWithTheSameKey_ThenAFrameOfOneIsRefusedOnTheOther) {
  Connection a = TcpPair(), b = TcpPair();
  ASSERT_TRUE(Handshake(a, kSecret, kSecret).client.ok());
  ASSERT_TRUE(Handshake(b, kSecret, kSecret).client.ok());
  // The same key, but each session's keys come from its own nonces.
  SendRawBytes(b.client, SealedBytes(a.client, MsgType::kHeartbeat, {{"i", 0}}));
  auto got = RecvFrame(b.server, kControlLimits, Deadline::After(kWait));
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("fails its MAC"), std::string::npos)
      << got.status().message();
}

TEST(RoleKeyTest, GivenTheRunSecret_ThenRoleKeysAndTicketsDifferAndTicketRolesRoundTrip) {
  const std::string worker = RoleKey(kSecret, kWorkerRole), client = RoleKey(kSecret, kClientRole);
  EXPECT_NE(worker, client);
  EXPECT_NE(worker, kSecret);
  EXPECT_TRUE(CheckSecret(worker, "worker key").ok());  // a key file holds it like a secret
  EXPECT_NE(TicketKey(worker, 0, 1), TicketKey(worker, 0, 2));
  EXPECT_NE(TicketKey(worker, 0, 1), TicketKey(worker, 1, 1));
  int64_t rank = -1;
  uint64_t session = 0;
  ASSERT_TRUE(ParseTicketRole(TicketRole(65535, 12345), &rank, &session));
  EXPECT_EQ(rank, 65535);
  EXPECT_EQ(session, 12345u);
  for (const char* bad : {"client", "client:", "client:1", "client:1:", "client:-1:2",
                          "client:65536:1", "client:01:1", "client:1:x", "worker:1:1",
                          "client:1:2:3", "client:1:99999999999999999999"}) {
    EXPECT_FALSE(ParseTicketRole(bad, &rank, &session)) << bad;
  }
}

TEST(AuthTest, GivenOffloadRolesThenTheyParseAndTheirTicketsDifferFromBatchTickets) {
  int64_t rank = -1;
  uint64_t channel = 0;
  ASSERT_TRUE(ParseOffloadRole(OffloadRole(3, 17), &rank, &channel));
  EXPECT_EQ(rank, 3);
  EXPECT_EQ(channel, 17u);
  for (const char* bad : {"offload", "offload:1", "offload:-1:2", "offload:65536:1", "client:1:2",
                          "offload:1:2:3", "offload:1:x"}) {
    EXPECT_FALSE(ParseOffloadRole(bad, &rank, &channel)) << bad;
  }
  EXPECT_FALSE(ParseTicketRole(OffloadRole(1, 2), &rank, &channel));
  const std::string key(64, 'b');
  EXPECT_NE(OffloadTicketKey(key, 1, 2), TicketKey(key, 1, 2));
  EXPECT_EQ(OffloadTicketKey(key, 1, 2).size(), 64u);
  EXPECT_NE(OffloadTicketKey(key, 1, 2), OffloadTicketKey(key, 1, 3));
}

TEST(OffloadProofTest, GivenTheIssuersProofThenItHoldsForItsRankAndChannelOnly) {
  auto issuer = OffloadIssuer::Create();
  ASSERT_TRUE(issuer.ok()) << issuer.status().message();
  EXPECT_EQ(issuer->public_key().size(), kOffloadKeyHexChars);
  auto proof = issuer->Proof(2, 9);
  ASSERT_TRUE(proof.ok()) << proof.status().message();
  EXPECT_EQ(proof->size(), kOffloadProofHexChars);
  EXPECT_TRUE(CheckOffloadProof(issuer->public_key(), 2, 9, *proof).ok());
  // Another channel, another rank, another issuer, a flipped bit, no key: refused.
  EXPECT_FALSE(CheckOffloadProof(issuer->public_key(), 2, 10, *proof).ok());
  EXPECT_FALSE(CheckOffloadProof(issuer->public_key(), 3, 9, *proof).ok());
  auto other = OffloadIssuer::Create();
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->public_key(), issuer->public_key());
  EXPECT_FALSE(CheckOffloadProof(other->public_key(), 2, 9, *proof).ok());
  std::string flipped = *proof;
  flipped[10] = flipped[10] == '0' ? '1' : '0';
  EXPECT_FALSE(CheckOffloadProof(issuer->public_key(), 2, 9, flipped).ok());
  const Status none = CheckOffloadProof("", 2, 9, *proof);
  EXPECT_EQ(none.code(), Code::kInvalidArgument);
  EXPECT_NE(none.message().find("offload channel 9 of rank 2 is not one this run's coordinator"),
            std::string::npos)
      << none.message();
  // Malformed hex (upper case, short, not hex) is refused, never read.
  std::string upper = *proof;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_FALSE(CheckOffloadProof(issuer->public_key(), 2, 9, upper).ok());
  EXPECT_FALSE(CheckOffloadProof(issuer->public_key(), 2, 9, proof->substr(2)).ok());
  EXPECT_FALSE(CheckOffloadProof(std::string(64, 'z'), 2, 9, *proof).ok());
}

TEST(OffloadProofTest, GivenTheRunsSecret_ThenACoordinatorStartedAgainIssuesTheSameProofs) {
  const std::string secret = *NewSecret();
  auto first = OffloadIssuer::FromSecret(secret);
  auto again = OffloadIssuer::FromSecret(secret);
  ASSERT_TRUE(first.ok() && again.ok()) << first.status().message();
  EXPECT_EQ(first->public_key(), again->public_key());
  auto proof = first->Proof(0, 4);
  ASSERT_TRUE(proof.ok());
  EXPECT_TRUE(CheckOffloadProof(again->public_key(), 0, 4, *proof).ok());
  // Another run's secret: another key. The worker key derived from the secret
  // does not give it.
  auto other = OffloadIssuer::FromSecret(*NewSecret());
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->public_key(), first->public_key());
  auto from_worker_key = OffloadIssuer::FromSecret(RoleKey(secret, kWorkerRole));
  ASSERT_TRUE(from_worker_key.ok());
  EXPECT_NE(from_worker_key->public_key(), first->public_key());
  EXPECT_EQ(OffloadIssuer::FromSecret("short").status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace gm
