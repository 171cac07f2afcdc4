// Tests of dataplane/socket.h and dataplane/protocol.h over real loopback TCP and Unix
// sockets: framing, BATCH encoding, malformed input, deadlines and closed peers.
#include "dataplane/protocol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/socket.h"
#include "test_util.h"
#include "tests/unit/socket_pair.h"

namespace gm {
namespace {

constexpr double kWait = 30;  // seconds; generous, only bounds a broken test

using testing::Connection;
using testing::TcpPair;

Connection UnixPair(const std::string& path) {
  auto listener = Listener::ListenUnix(path);
  EXPECT_TRUE(listener.ok()) << listener.status().message();
  auto client = Socket::ConnectUnix(path, kWait);
  EXPECT_TRUE(client.ok()) << client.status().message();
  auto server = listener->Accept(kWait);
  EXPECT_TRUE(server.ok()) << server.status().message();
  return {std::move(*client), std::move(*server)};
}

std::vector<uint8_t> Pattern(size_t size, uint32_t seed) {
  std::vector<uint8_t> out(size);
  uint32_t x = seed;
  for (auto& b : out) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return out;
}

iovec Iov(const std::vector<uint8_t>& v) { return {const_cast<uint8_t*>(v.data()), v.size()}; }

// Sends `bytes` raw on `socket` and closes its write side.
void SendRaw(Socket& socket, std::string bytes) {
  iovec v{bytes.data(), bytes.size()};
  ASSERT_TRUE(socket.SendAll({&v, 1}, Deadline::After(kWait), "raw bytes").ok());
  socket.ShutdownWrite();
}

std::string Header(uint8_t version, uint8_t type, uint32_t meta_len, uint64_t payload_len,
                   uint16_t flags = 0) {
  FrameHeader h;
  h.type = static_cast<MsgType>(type);
  h.meta_len = meta_len;
  h.payload_len = payload_len;
  h.flags = flags;
  std::string out = EncodeFrameHeader(h);
  out[4] = static_cast<char>(version);
  return out;
}

// Round-trips one frame with a multi-buffer payload over `c`.
void ExpectFrameRoundTrip(Connection& c) {
  auto a = Pattern(3 << 20, 1), b = Pattern(1, 2), d = Pattern(2 << 20, 3);
  std::vector<iovec> payload{Iov(a), {nullptr, 0}, Iov(b), Iov(d)};
  nlohmann::json meta = {{"split", 7}, {"name", "shard-000.tar"}, {"list", {1, 2, 3}}};
  Status sent;
  std::thread sender(
      [&] { sent = SendFrame(c.client, MsgType::kAssign, meta, payload, Deadline::After(kWait)); });
  auto frame = RecvFrame(c.server, FrameLimits{}, Deadline::After(kWait));
  sender.join();
  ASSERT_TRUE(sent.ok()) << sent.message();
  ASSERT_TRUE(frame.ok()) << frame.status().message();
  EXPECT_EQ(frame->type, MsgType::kAssign);
  EXPECT_EQ(frame->meta, meta);
  Bytes want(a.begin(), a.end());
  want.insert(want.end(), b.begin(), b.end());
  want.insert(want.end(), d.begin(), d.end());
  EXPECT_EQ(frame->payload, want);
}

Batch MakeBatch(size_t n) {
  Batch b;
  b.epoch = 3;
  b.index = 41;
  b.split = 5;
  b.split_batch = 2;
  b.layout = Layout::kHWC;
  b.data.Reset(DType::kFloat32, {static_cast<int64_t>(n), 8, 6, 3});
  for (size_t i = 0; i < b.data.num_elements(); ++i) b.data.data<float>()[i] = 0.5f * i - 7;
  b.labels.Reset(DType::kInt64, {static_cast<int64_t>(n)});
  for (size_t i = 0; i < n; ++i) {
    b.labels.data<int64_t>()[i] = static_cast<int64_t>(i % 3) - 1;
    b.keys.push_back("shard-" + std::to_string(i) + ".tar#img" + std::to_string(i));
    b.sample_indices.push_back((uint64_t{1} << 32) | i);
  }
  return b;
}

void ExpectSameBatch(const Batch& got, const Batch& want) {
  EXPECT_EQ(got.epoch, want.epoch);
  EXPECT_EQ(got.index, want.index);
  EXPECT_EQ(got.split, want.split);
  EXPECT_EQ(got.split_batch, want.split_batch);
  EXPECT_EQ(got.layout, want.layout);
  EXPECT_EQ(got.data.dtype, want.data.dtype);
  EXPECT_EQ(got.data.shape, want.data.shape);
  EXPECT_EQ(got.data.bytes, want.data.bytes);
  EXPECT_EQ(got.labels.dtype, want.labels.dtype);
  EXPECT_EQ(got.labels.shape, want.labels.shape);
  EXPECT_EQ(got.labels.bytes, want.labels.bytes);
  EXPECT_EQ(got.keys, want.keys);
  EXPECT_EQ(got.sample_indices, want.sample_indices);
}

// A BATCH frame for MakeBatch(n), in memory, with `edit` applied to its meta.
Frame BatchFrame(size_t n, const std::function<void(nlohmann::json&)>& edit) {
  Batch b = MakeBatch(n);
  Frame f;
  f.type = MsgType::kBatch;
  f.meta = EncodeBatchMeta(b);
  edit(f.meta);
  f.payload = b.data.bytes;
  f.payload.insert(f.payload.end(), b.labels.bytes.begin(), b.labels.bytes.end());
  return f;
}

TEST(ProtocolTest, GivenTcpConnection_WhenFrameWithSeveralPayloadBuffersSent_ThenReceivedIntact) {
  Connection c = TcpPair();
  ExpectFrameRoundTrip(c);
}

TEST(ProtocolTest, GivenUnixConnection_WhenFrameWithSeveralPayloadBuffersSent_ThenReceivedIntact) {
  testing::TempDir dir;
  Connection c = UnixPair(dir.path() + "/data.sock");
  EXPECT_EQ(c.client.peer(), "unix:" + dir.path() + "/data.sock");
  ExpectFrameRoundTrip(c);
}

TEST(ProtocolTest, GivenBatchMetas_ThenTheyAreReadOrRefusedNamingTheField) {
  auto h = BatchMeta::Decode({{"rank", 3}, {"split_batches", 2}});
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->rank, 3);
  EXPECT_EQ(h->split_batches, 2u);
  EXPECT_FALSE(h->shm.has_value());
  EXPECT_FALSE(BatchMeta::Decode({{"rank", 0}})->split_batches.has_value());
  auto in_segment = BatchMeta::Decode({{"rank", 1}, {"shm", {{"id", 15}, {"fd", true}}}});
  ASSERT_TRUE(in_segment.ok()) << in_segment.status().message();
  EXPECT_EQ(in_segment->shm, (BatchMeta::Segment{15, true}));
  for (const nlohmann::json& bad :
       {nlohmann::json{{"n", 1}}, nlohmann::json{{"rank", "0"}}, nlohmann::json{{"rank", -1}},
        nlohmann::json{{"rank", 65536}}, nlohmann::json{{"rank", 0.0}}}) {
    auto r = BatchMeta::Decode(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kCorrupt);
    EXPECT_NE(r.status().message().find("\"rank\""), std::string::npos) << r.status().message();
  }
  for (const nlohmann::json& count : {nlohmann::json(0), nlohmann::json("2"), nlohmann::json(-2),
                                      nlohmann::json((1 << 24) + 1)}) {
    auto r = BatchMeta::Decode({{"rank", 0}, {"split_batches", count}});
    ASSERT_FALSE(r.ok()) << count;
    EXPECT_NE(r.status().message().find("\"split_batches\""), std::string::npos)
        << r.status().message();
  }
  for (const nlohmann::json& shm :
       {nlohmann::json(true), nlohmann::json{{"id", 16}, {"fd", true}},
        nlohmann::json{{"id", -1}, {"fd", false}}, nlohmann::json{{"id", 0}},
        nlohmann::json{{"id", 0}, {"fd", 1}}, nlohmann::json{{"fd", true}}}) {
    auto r = BatchMeta::Decode({{"rank", 0}, {"shm", shm}});
    ASSERT_FALSE(r.ok()) << shm;
    EXPECT_EQ(r.status().code(), Code::kCorrupt);
    EXPECT_NE(r.status().message().find("\"shm\""), std::string::npos) << r.status().message();
  }
}

TEST(ProtocolTest, GivenABatchMeta_ThenWhatItAddsToABatchsMetaDecodesToItAgain) {
  for (const BatchMeta& m :
       {BatchMeta{0, std::nullopt, std::nullopt}, BatchMeta{65535, uint64_t{1} << 24, std::nullopt},
        BatchMeta{7, 3, BatchMeta::Segment{0, false}},
        BatchMeta{2, std::nullopt, BatchMeta::Segment{15, true}}}) {
    nlohmann::json meta = EncodeBatchMeta(Batch{});
    m.AddTo(meta);
    auto again = BatchMeta::Decode(nlohmann::json::parse(meta.dump()));
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_EQ(*again, m) << meta;
  }
}

TEST(ProtocolTest, GivenFloatBatch_WhenSentAndDecoded_ThenEveryFieldSurvives) {
  Connection c = TcpPair();
  const Batch batch = MakeBatch(16);
  Status sent;
  std::thread sender([&] { sent = SendBatch(c.client, batch, Deadline::After(kWait)); });
  auto frame = RecvFrame(c.server, FrameLimits{}, Deadline::After(kWait));
  sender.join();
  ASSERT_TRUE(sent.ok()) << sent.message();
  ASSERT_TRUE(frame.ok()) << frame.status().message();
  EXPECT_EQ(frame->meta["dtype"], "float32");
  EXPECT_EQ(frame->meta["layout"], "HWC");
  auto copied = DecodeBatch(*frame);
  ASSERT_TRUE(copied.ok()) << copied.status().message();
  ExpectSameBatch(*copied, batch);
  auto moved = DecodeBatch(std::move(*frame));
  ASSERT_TRUE(moved.ok()) << moved.status().message();
  ExpectSameBatch(*moved, batch);
}

TEST(ProtocolTest, GivenTinySendBuffer_WhenLargePayloadSent_ThenPartialWritesResumeCorrectly) {
  Connection c = TcpPair();
  ASSERT_TRUE(c.client.SetSendBuffer(16384).ok());
  auto a = Pattern(3 << 20, 4), b = Pattern(123457, 5);
  std::vector<iovec> payload{Iov(a), Iov(b)};
  Status sent;
  std::thread sender([&] {
    sent = SendFrame(c.client, MsgType::kBatch, {{"k", 1}}, payload, Deadline::After(kWait));
  });
  auto frame = RecvFrame(c.server, FrameLimits{}, Deadline::After(kWait));
  sender.join();
  ASSERT_TRUE(sent.ok()) << sent.message();
  ASSERT_TRUE(frame.ok()) << frame.status().message();
  ASSERT_EQ(frame->payload.size(), a.size() + b.size());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), frame->payload.begin()));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), frame->payload.begin() + a.size()));
}

TEST(ProtocolTest, GivenEncodedFrame_WhenParsedFromMemory_ThenSameFrameAndSizeConsumed) {
  auto bytes = EncodeFrame(MsgType::kCredit, {{"credit", 4}}, "xyz");
  ASSERT_TRUE(bytes.ok());
  std::string stream = *bytes + "trailing";
  size_t consumed = 0;
  auto frame = ParseFrame(stream, FrameLimits{}, &consumed);
  ASSERT_TRUE(frame.ok()) << frame.status().message();
  EXPECT_EQ(consumed, bytes->size());
  EXPECT_EQ(frame->type, MsgType::kCredit);
  EXPECT_EQ(frame->meta["credit"], 4);
  EXPECT_EQ(std::string(frame->payload.begin(), frame->payload.end()), "xyz");
  EXPECT_EQ(MsgTypeName(frame->type), "CREDIT");
}

struct BadFrame {
  const char* name;
  std::string bytes;
  const char* message;  // expected substring of the Corrupt message
};

std::vector<BadFrame> BadFrames() {
  std::string header = Header(kProtocolVersion, 26, 2, 0);
  return {
      {"bad magic", "HTTP" + header.substr(4) + "{}", "bad frame magic \"HTTP\""},
      {"version 1", Header(1, 26, 2, 0) + "{}",
       "frame version 1 is not supported (this side speaks version 3)"},
      {"sealed outside a session",
       Header(kProtocolVersion, 26, 2, 0, kFrameSealed) + "{}" + std::string(32, 'm'),
       "no session was set up"},
      {"unknown type", Header(kProtocolVersion, 99, 2, 0) + "{}", "unknown frame type 99"},
      {"meta too long", Header(kProtocolVersion, 26, (1u << 20) + 1, 0),
       "frame meta of 1048577 bytes exceeds the limit of 1048576"},
      {"payload over limit", Header(kProtocolVersion, 26, 2, 5000000000),
       "frame payload of 5000000000 bytes exceeds the limit of 268435456"},
      {"meta not JSON", Header(kProtocolVersion, 26, 5, 0) + "{nope", "not valid UTF-8 JSON"},
      {"meta array", Header(kProtocolVersion, 26, 7, 0) + "[1,2,3]", "frame meta is JSON array"},
      {"meta bad utf8", Header(kProtocolVersion, 26, 8, 0) + "{\"a\":\"\xff\"}",
       "not valid UTF-8 JSON"},
      {"meta repeats a key", Header(kProtocolVersion, 26, 19, 0) + R"({"rank":5,"rank":0})",
       "gives the key \"rank\" twice in one object"},
      {"meta repeats a nested key",
       Header(kProtocolVersion, 26, 33, 0) + R"({"a":{"b":1},"c":[{"b":1,"b":2}]})",
       "gives the key \"b\" twice"},
      {"meta deep",
       Header(kProtocolVersion, 26, 200, 0) + std::string(100, '[') + std::string(100, ']'),
       "deeper than 64"},
  };
}

TEST(ProtocolTest, GivenMalformedFrames_WhenParsedFromMemory_ThenCorruptNamingTheProblem) {
  for (const BadFrame& bad : BadFrames()) {
    auto frame = ParseFrame(bad.bytes);
    ASSERT_FALSE(frame.ok()) << bad.name;
    EXPECT_EQ(frame.status().code(), Code::kCorrupt) << bad.name;
    EXPECT_NE(frame.status().message().find(bad.message), std::string::npos)
        << bad.name << ": " << frame.status().message();
  }
}

TEST(ProtocolTest, GivenMalformedFrames_WhenReceivedFromSocket_ThenCorruptNamingThePeer) {
  for (const BadFrame& bad : BadFrames()) {
    Connection c = TcpPair();
    SendRaw(c.client, bad.bytes);
    auto frame = RecvFrame(c.server, FrameLimits{}, Deadline::After(kWait));
    ASSERT_FALSE(frame.ok()) << bad.name;
    EXPECT_EQ(frame.status().code(), Code::kCorrupt) << bad.name;
    EXPECT_NE(frame.status().message().find(bad.message), std::string::npos)
        << bad.name << ": " << frame.status().message();
    EXPECT_NE(frame.status().message().find("127.0.0.1:"), std::string::npos);
  }
}

TEST(ProtocolTest, GivenNonZeroReservedField_WhenHeaderParsed_ThenCorrupt) {
  std::string header = Header(kProtocolVersion, 26, 0, 0);
  header[12] = 7;
  auto h = ParseFrameHeader(header);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("reserved field is 7"), std::string::npos);
  EXPECT_FALSE(ParseFrameHeader(header.substr(0, 23)).ok());
}

TEST(ProtocolTest, GivenStreamCutMidPayload_WhenReceived_ThenUnavailableAndParseCorrupt) {
  std::string truncated = Header(kProtocolVersion, 26, 2, 100) + "{}" + std::string(10, 'x');
  Connection c = TcpPair();
  SendRaw(c.client, truncated);
  auto frame = RecvFrame(c.server, FrameLimits{}, Deadline::After(kWait));
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.status().code(), Code::kUnavailable);
  EXPECT_NE(frame.status().message().find("peer closed the connection"), std::string::npos);
  EXPECT_NE(frame.status().message().find("10 of 100 bytes"), std::string::npos);
  auto parsed = ParseFrame(truncated);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), Code::kCorrupt);
  EXPECT_NE(parsed.status().message().find("truncated"), std::string::npos);
}

TEST(ProtocolTest, GivenPeerThatClosed_WhenReceiving_ThenUnavailablePeerClosed) {
  Connection c = TcpPair();
  c.client.Close();
  auto frame = RecvFrame(c.server, FrameLimits{}, Deadline::After(kWait));
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.status().code(), Code::kUnavailable);
  EXPECT_EQ(frame.status().message().rfind("peer closed the connection", 0), 0u);
}

TEST(ProtocolTest, GivenPeerThatClosed_WhenSending_ThenUnavailableAndNoSigpipe) {
  Connection c = TcpPair();
  c.server.Close();
  auto chunk = Pattern(1 << 20, 6);
  iovec v = Iov(chunk);
  Status sent;
  // The first sends may land in the kernel buffer before the reset arrives.
  for (int i = 0; i < 1000 && sent.ok(); ++i) {
    sent = SendFrame(c.client, MsgType::kBatch, {}, {&v, 1}, Deadline::After(kWait));
  }
  ASSERT_FALSE(sent.ok());
  EXPECT_EQ(sent.code(), Code::kUnavailable);
  EXPECT_NE(sent.message().find("peer closed the connection"), std::string::npos);
}

TEST(ProtocolTest, GivenSilentPeer_WhenShortDeadlinePasses_ThenUnavailableTimedOut) {
  Connection c = TcpPair();
  auto frame = RecvFrame(c.server, FrameLimits{}, Deadline::After(0.2));
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.status().code(), Code::kUnavailable);
  EXPECT_NE(frame.status().message().find("timed out waiting for a frame header"),
            std::string::npos);
}

TEST(ProtocolTest, GivenNoConnection_WhenAcceptDeadlinePasses_ThenUnavailable) {
  auto listener = Listener::ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  EXPECT_GT(listener->port(), 0);
  auto socket = listener->Accept(0.2);
  ASSERT_FALSE(socket.ok());
  EXPECT_EQ(socket.status().code(), Code::kUnavailable);
  EXPECT_NE(socket.status().message().find("waiting for a connection"), std::string::npos);
}

// The attack: another local process connects to our loopback port before our
// own client does (the profile's delivery measurement listens on one). Accept
// would hand us the stranger; AcceptFrom closes it and waits for ours.
TEST(ProtocolTest,
     GivenAStrangerConnectedFirst_WhenAcceptingFromOurClient_ThenOursAndTheStrangerClosed) {
  auto listener = Listener::ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  auto stranger = Socket::ConnectTcp("127.0.0.1", listener->port(), kWait);
  ASSERT_TRUE(stranger.ok());
  auto ours = Socket::ConnectTcp("127.0.0.1", listener->port(), kWait);
  ASSERT_TRUE(ours.ok());
  auto accepted = listener->AcceptFrom(*ours, kWait);
  ASSERT_TRUE(accepted.ok()) << accepted.status().message();
  const char byte = 'x';
  const iovec iov{const_cast<char*>(&byte), 1};
  ASSERT_TRUE(ours->SendAll({&iov, 1}, Deadline::After(kWait), "a byte").ok());
  char got = 0;
  ASSERT_TRUE(accepted->RecvExact(&got, 1, Deadline::After(kWait), "a byte").ok());
  EXPECT_EQ(got, 'x') << "the accepted socket is our client's";
  Status closed = stranger->RecvExact(&got, 1, Deadline::After(kWait), "a byte");
  EXPECT_EQ(closed.code(), Code::kUnavailable) << "the stranger was closed: " << closed.message();
}

TEST(ProtocolTest, GivenOnlyStrangers_WhenAcceptingFromOurClient_ThenUnavailableAfterTheBound) {
  auto listener = Listener::ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  std::vector<Socket> strangers;
  for (int i = 0; i <= Listener::kMaxStrangers; ++i) {
    auto s = Socket::ConnectTcp("127.0.0.1", listener->port(), kWait);
    ASSERT_TRUE(s.ok());
    strangers.push_back(std::move(*s));
  }
  auto elsewhere = Listener::ListenTcp("127.0.0.1", 0);  // ours went to another port
  ASSERT_TRUE(elsewhere.ok());
  auto ours = Socket::ConnectTcp("127.0.0.1", elsewhere->port(), kWait);
  ASSERT_TRUE(ours.ok());
  auto accepted = listener->AcceptFrom(*ours, kWait);
  ASSERT_FALSE(accepted.ok());
  EXPECT_EQ(accepted.status().code(), Code::kUnavailable);
  EXPECT_NE(accepted.status().message().find("other connections came before our own"),
            std::string::npos)
      << accepted.status().message();
  // Fewer strangers than the bound and ours never comes: the deadline ends it.
  auto quiet = Listener::ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(quiet.ok());
  auto one = Socket::ConnectTcp("127.0.0.1", quiet->port(), kWait);
  ASSERT_TRUE(one.ok());
  auto timed_out = quiet->AcceptFrom(*ours, 0.2);
  ASSERT_FALSE(timed_out.ok());
  EXPECT_NE(timed_out.status().message().find("waiting for a connection"), std::string::npos);
}

TEST(ProtocolTest, GivenNothingListening_WhenConnecting_ThenUnavailableNamingTheAddress) {
  int port = 0;
  {
    auto listener = Listener::ListenTcp("127.0.0.1", 0);
    ASSERT_TRUE(listener.ok());
    port = listener->port();
  }
  auto tcp = Socket::ConnectTcp("127.0.0.1", port, kWait);
  ASSERT_FALSE(tcp.ok());
  EXPECT_EQ(tcp.status().code(), Code::kUnavailable);
  EXPECT_NE(tcp.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos);
  testing::TempDir dir;
  auto unix_socket = Socket::ConnectUnix(dir.path() + "/none.sock", kWait);
  ASSERT_FALSE(unix_socket.ok());
  EXPECT_NE(unix_socket.status().message().find("none.sock"), std::string::npos);
}

TEST(ProtocolTest, GivenStaleOrForeignFileAtSocketPath_WhenListening_ThenReplacedOrRefused) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/s.sock";
  {
    auto first = Listener::ListenUnix(path);
    ASSERT_TRUE(first.ok());
    EXPECT_FALSE(Listener::ListenUnix(path).ok());  // a live listener holds it
  }
  ASSERT_TRUE(Listener::ListenUnix(path).ok());
  std::string file = dir.Write("plain", "x");
  auto refused = Listener::ListenUnix(file);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("not a socket"), std::string::npos);
  EXPECT_EQ(testing::ReadAll(file), "x");
}

TEST(ProtocolTest, GivenNonObjectMeta_WhenSending_ThenInvalidArgument) {
  Connection c = TcpPair();
  Status sent =
      SendFrame(c.client, MsgType::kAck, nlohmann::json::array({1}), Deadline::After(kWait));
  EXPECT_EQ(sent.code(), Code::kInvalidArgument);
  EXPECT_FALSE(EncodeFrame(MsgType::kAck, 3).ok());
}

TEST(ProtocolTest, GivenInconsistentBatchMeta_WhenDecoded_ThenCorruptNamingTheField) {
  struct Case {
    const char* name;
    std::function<void(nlohmann::json&)> edit;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"shape", [](nlohmann::json& m) { m["shape"][1] = 9; }, "\"data_bytes\" is"},
      {"labels", [](nlohmann::json& m) { m["labels_bytes"] = 8; }, "\"labels_bytes\" is 8"},
      {"keys", [](nlohmann::json& m) { m["keys"].erase(0); }, "\"keys\" has 3 elements"},
      {"indices", [](nlohmann::json& m) { m["sample_indices"] = {1}; }, "\"sample_indices\""},
      {"n", [](nlohmann::json& m) { m["n"] = 5; }, "does not start with n = 5"},
      {"dtype", [](nlohmann::json& m) { m["dtype"] = "float16"; }, "unknown dtype"},
      {"layout", [](nlohmann::json& m) { m["layout"] = 1; }, "\"layout\" must be a string"},
      {"epoch", [](nlohmann::json& m) { m["epoch"] = -1; }, "\"epoch\" must be"},
      {"missing", [](nlohmann::json& m) { m.erase("split"); }, "missing \"split\""},
      {"overflow",
       [](nlohmann::json& m) {
         m["shape"] = {4, uint64_t{1} << 62, 1 << 20};
       },
       "overflows"},
      // 0 bytes, but the other dimensions multiply past 2^63 (strided code wraps).
      {"overflow past a zero",
       [](nlohmann::json& m) {
         m["shape"] = {4, 0, uint64_t{1} << 40, uint64_t{1} << 40};
         m["data_bytes"] = 0;
       },
       "overflows"},
      // n * 8 would wrap to the labels' bytes of a small batch.
      {"n wraps", [](nlohmann::json& m) { m["n"] = uint64_t{1} << 61; }, "more than 16777216"},
      {"dims", [](nlohmann::json& m) { m["shape"] = std::vector<int>(40, 1); }, "dimensions"},
  };
  for (const Case& c : cases) {
    auto batch = DecodeBatch(BatchFrame(4, c.edit));
    ASSERT_FALSE(batch.ok()) << c.name;
    EXPECT_EQ(batch.status().code(), Code::kCorrupt) << c.name;
    EXPECT_NE(batch.status().message().find(c.message), std::string::npos)
        << c.name << ": " << batch.status().message();
  }
  Frame short_payload = BatchFrame(4, [](nlohmann::json&) {});
  short_payload.payload.pop_back();
  EXPECT_FALSE(DecodeBatch(short_payload).ok());
  Frame not_batch = BatchFrame(4, [](nlohmann::json&) {});
  not_batch.type = MsgType::kAck;
  EXPECT_FALSE(DecodeBatch(not_batch).ok());
}

TEST(ProtocolTest, GivenInconsistentBatch_WhenSending_ThenInvalidArgumentBeforeAnyByte) {
  Connection c = TcpPair();
  Batch batch = MakeBatch(4);
  batch.keys.pop_back();
  Status sent = SendBatch(c.client, batch, Deadline::After(kWait));
  EXPECT_EQ(sent.code(), Code::kInvalidArgument);
  EXPECT_TRUE(CheckBatch(MakeBatch(4)).ok());
  EXPECT_TRUE(CheckBatch(Batch{}).ok());
}

TEST(ProtocolTest, GivenEmptyBatch_WhenEncodedAndDecoded_ThenStillEmpty) {
  Batch empty;
  empty.epoch = 2;
  auto bytes = EncodeFrame(MsgType::kBatch, EncodeBatchMeta(empty));
  ASSERT_TRUE(bytes.ok());
  auto frame = ParseFrame(*bytes);
  ASSERT_TRUE(frame.ok());
  auto batch = DecodeBatch(*frame);
  ASSERT_TRUE(batch.ok()) << batch.status().message();
  EXPECT_EQ(batch->size(), 0u);
  EXPECT_EQ(batch->epoch, 2u);
}

}  // namespace
}  // namespace gm
