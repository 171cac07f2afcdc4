// The same-host transport (dataplane/shm.h): segments, descriptors on Unix
// sockets, the worker's pool, and a worker's data port against clients that
// misbehave (written as attacks first).
#include "dataplane/shm.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/auth.h"
#include "dataplane/data_server.h"
#include "dataplane/messages_control.h"
#include "dataplane/protocol.h"

namespace gm {
namespace {

constexpr double kWaitS = 20;  // bounds a broken test only

struct UnixPair {
  Socket a, b;
};

UnixPair Pair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  return {Socket(fds[0], "unix:a"), Socket(fds[1], "unix:b")};
}

// Sends a frame with `fd` attached, as a worker passes a segment.
Status SendWithFd(Socket& s, int fd) {
  const std::string payload = "x";
  const iovec v{const_cast<char*>(payload.data()), payload.size()};
  return SendFrame(s, MsgType::kBatch, {{"fd", fd >= 0}}, std::span<const iovec>(&v, 1),
                   Deadline::After(kWaitS), fd);
}

TEST(ShmTest, GivenASegmentPassedOverAUnixSocketThenThePeerMapsTheSameBytes) {
  auto seg = Segment::Create(4096);
  ASSERT_TRUE(seg.ok()) << seg.status().message();
  std::memcpy((*seg)->data(), "goldminer", 9);
  UnixPair p = Pair();
  p.b.AcceptFds();
  ASSERT_TRUE(SendWithFd(p.a, (*seg)->fd()).ok());
  auto frame = RecvFrame(p.b, FrameLimits{}, Deadline::After(kWaitS));
  ASSERT_TRUE(frame.ok()) << frame.status().message();
  const int fd = p.b.TakeFd();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(p.b.TakeFd(), -1);
  auto mapped = Segment::Map(fd, 9, 1 << 20);
  ASSERT_TRUE(mapped.ok()) << mapped.status().message();
  EXPECT_EQ(std::string(reinterpret_cast<char*>((*mapped)->data()), 9), "goldminer");
  (*mapped)->data()[0] = 'G';  // shared both ways: the worker rewrites it for the next batch
  EXPECT_EQ((*seg)->data()[0], 'G');
}

TEST(ShmTest, GivenADescriptorThatIsNotASealedSegmentOfTheRightSizeThenMapRefusesIt) {
  // An unsealed memfd could be shrunk under the mapping (SIGBUS in the trainer).
  const int unsealed = ::memfd_create("attack", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(::ftruncate(unsealed, 4096), 0);
  auto r = Segment::Map(unsealed, 1, 1 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a memfd sealed"), std::string::npos);
  // Sealed against shrinking and growing, but its seals not sealed: the sender
  // could still change them.
  const int open_seals = ::memfd_create("attack", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(open_seals, 0);
  ASSERT_EQ(::ftruncate(open_seals, 4096), 0);
  ASSERT_EQ(::fcntl(open_seals, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  auto r3 = Segment::Map(open_seals, 1, 1 << 20);
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.status().message().find("with its seals sealed"), std::string::npos);
  // A regular file cannot be sealed at all.
  char path[] = "/tmp/gm-shm-test-XXXXXX";
  const int file = ::mkstemp(path);
  ASSERT_GE(file, 0);
  ::unlink(path);
  ASSERT_EQ(::ftruncate(file, 4096), 0);
  EXPECT_FALSE(Segment::Map(file, 1, 1 << 20).ok());
  // Sealed, but smaller than the frame says, or larger than the limit.
  auto small = Segment::Create(100);
  ASSERT_TRUE(small.ok());
  auto r2 = Segment::Map(::dup((*small)->fd()), 101, 1 << 20);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("needs 101"), std::string::npos);
  EXPECT_FALSE(Segment::Map(::dup((*small)->fd()), 1, 99).ok());
  EXPECT_TRUE(Segment::Map(::dup((*small)->fd()), 100, 100).ok());
}

TEST(ShmTest, GivenAPeerThatPassesDescriptorsNoFrameClaimsThenTheReceiverBoundsThem) {
  UnixPair p = Pair();
  p.b.AcceptFds();
  auto seg = Segment::Create(64);
  ASSERT_TRUE(seg.ok());
  Status last;
  for (size_t i = 0; i <= Socket::kMaxPendingFds; ++i) {
    ASSERT_TRUE(SendWithFd(p.a, (*seg)->fd()).ok());
    last = RecvFrame(p.b, FrameLimits{}, Deadline::After(kWaitS)).status();
  }
  EXPECT_EQ(last.code(), Code::kCorrupt) << last.message();
  EXPECT_NE(last.message().find("descriptors that no frame claimed"), std::string::npos);
  // A socket that does not take descriptors never keeps one (the kernel closes it).
  UnixPair q = Pair();
  ASSERT_TRUE(SendWithFd(q.a, (*seg)->fd()).ok());
  ASSERT_TRUE(RecvFrame(q.b, FrameLimits{}, Deadline::After(kWaitS)).ok());
  EXPECT_EQ(q.b.TakeFd(), -1);
}

TEST(ShmTest, GivenAPoolThenSegmentsAreBoundedReusedAndReleasedOnlyWhenLent) {
  SegmentPool pool(2);
  auto a = pool.Acquire(1000);
  auto b = pool.Acquire(1000);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(a->fresh && b->fresh);
  EXPECT_NE(a->id, b->id);
  EXPECT_FALSE(pool.Acquire(10));  // full: the caller sends inline
  EXPECT_EQ(pool.lent(), 2u);
  EXPECT_TRUE(pool.Release(a->id).ok());
  Status twice = pool.Release(a->id);
  EXPECT_EQ(twice.code(), Code::kCorrupt);
  EXPECT_EQ(pool.Release(7).code(), Code::kCorrupt);
  auto again = pool.Acquire(500);  // fits the free one: same segment, fd already passed
  ASSERT_TRUE(again);
  EXPECT_EQ(again->id, a->id);
  EXPECT_FALSE(again->fresh);
  ASSERT_TRUE(pool.Release(again->id).ok());
  auto bigger = pool.Acquire(5000);  // too small: replaced under the same id, passed anew
  ASSERT_TRUE(bigger);
  EXPECT_EQ(bigger->id, a->id);
  EXPECT_TRUE(bigger->fresh);
  EXPECT_GE(bigger->segment->size(), 5000u);
}

// A worker's data port with its same-host socket, and a raw client on it.
class SameHostPortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = DataServer::Start("127.0.0.1", 0, worker_key_);
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(*server);
    ASSERT_TRUE(server_->ListenSameHost(server_->address()).ok());
  }

  Socket Connect(bool shm, uint64_t session = 1) {
    auto s = Socket::ConnectUnix(SameHostName(server_->address()), kWaitS);
    EXPECT_TRUE(s.ok()) << s.status().message();
    EXPECT_TRUE(ClientHandshake(*s, TicketKey(worker_key_, 0, session), TicketRole(0, session),
                                Deadline::After(kWaitS), nullptr)
                    .ok());
    s->AcceptFds();
    EXPECT_TRUE(SendFrame(*s, MsgType::kSubscribe, SubscribeMsg{0, -1, shm}.Encode(),
                          Deadline::After(kWaitS))
                    .ok());
    return std::move(*s);
  }

  static Batch MakeBatch(uint64_t i) {
    Batch b;
    b.split_batch = i;
    b.data.Reset(DType::kUInt8, {1, 1000});
    std::memset(b.data.bytes.data(), static_cast<int>(i), 1000);
    b.labels.Reset(DType::kInt64, {1});
    b.labels.data<int64_t>()[0] = static_cast<int64_t>(i);
    b.keys = {"k" + std::to_string(i)};
    b.sample_indices = {i};
    b.layout = Layout::kNone;
    return b;
  }

  // A segment for batch `i` (MakeBatch's bytes written into it, as the batcher
  // collates), once the port has attached the rank's connection.
  std::optional<Batch::External> ReserveFor(uint64_t i) {
    std::optional<Batch::External> into;
    for (int tries = 0; !into && tries < 500; ++tries) {
      into = server_->ReserveSegment(0, 1000);
      if (!into) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (into) std::memset(into->data, static_cast<int>(i), 1000);
    return into;
  }

  // Sends CREDIT {n, release} as the client.
  static Status GrantCredit(Socket& s, uint64_t n, std::vector<uint64_t> release = {}) {
    CreditMsg credit;
    credit.n = n;
    credit.release = std::move(release);
    return SendFrame(s, MsgType::kCredit, credit.Encode(), Deadline::After(kWaitS));
  }

  // Grants one credit, sends `batch` to rank 0 and receives its frame.
  Result<Frame> SendOne(Socket& s, const Batch& batch) {
    GM_RETURN_IF_ERROR(GrantCredit(s, 1));
    GM_RETURN_IF_ERROR(server_->SendToRank(0, batch));
    return RecvFrame(s, FrameLimits{}, Deadline::After(kWaitS));
  }

  // SendOne, and the batch must come in a fresh segment (its descriptor
  // passed); returns the first byte of the batch's data as the client maps it,
  // -1 on any failure (reported).
  int SendAndReceiveInSegment(Socket& s, const Batch& batch) {
    auto f = SendOne(s, batch);
    EXPECT_TRUE(f.ok()) << f.status().message();
    if (!f.ok() || !f->meta.contains("shm") || !f->meta["shm"]["fd"].get<bool>()) {
      ADD_FAILURE() << "the batch did not come in a fresh segment";
      return -1;
    }
    auto seg = Segment::Map(s.TakeFd(), 1000, 1 << 20);
    EXPECT_TRUE(seg.ok()) << seg.status().message();
    if (!seg.ok()) return -1;
    auto b = DecodeBatch(*f, Batch::External{(*seg)->data(), (*seg)->size(), nullptr});
    EXPECT_TRUE(b.ok()) << b.status().message();
    if (!b.ok()) return -1;
    EXPECT_EQ(b->data_ptr()[999], b->data_ptr()[0]);
    return b->data_ptr()[0];
  }

  static Batch InSegment(uint64_t i, Batch::External into) {
    Batch b = MakeBatch(i);
    b.data.bytes.clear();
    b.external = std::move(into);
    return b;
  }

  const std::string worker_key_ = std::string(64, 'a');
  std::unique_ptr<DataServer> server_;
};

TEST_F(SameHostPortTest, GivenAClientThatNeverReleasesThenBatchesGoInlineOnceTheSegmentsAreLent) {
  Socket s = Connect(true);
  const uint64_t n = kLentSegments + 3;
  ASSERT_TRUE(GrantCredit(s, n).ok());
  std::thread sender([&] {
    for (uint64_t i = 0; i < n; ++i) EXPECT_TRUE(server_->SendToRank(0, MakeBatch(i)).ok());
  });
  std::vector<std::shared_ptr<Segment>> mapped(kMaxSegments);
  for (uint64_t i = 0; i < n; ++i) {
    auto f = RecvFrame(s, FrameLimits{}, Deadline::After(kWaitS));
    ASSERT_TRUE(f.ok()) << f.status().message();
    const bool in_segment = f->meta.contains("shm");
    EXPECT_EQ(in_segment, i < kLentSegments) << "batch " << i;
    if (in_segment) {
      const uint64_t id = f->meta["shm"]["id"].get<uint64_t>();
      ASSERT_TRUE(f->meta["shm"]["fd"].get<bool>());
      auto seg = Segment::Map(s.TakeFd(), 1000, 1 << 20);
      ASSERT_TRUE(seg.ok()) << seg.status().message();
      mapped[id] = *seg;
      auto b = DecodeBatch(*f, Batch::External{mapped[id]->data(), mapped[id]->size(), nullptr});
      ASSERT_TRUE(b.ok()) << b.status().message();
      EXPECT_EQ(b->data_ptr()[999], static_cast<uint8_t>(i));
      EXPECT_EQ(f->payload.size(), 8u);  // the labels only
    } else {
      auto b = DecodeBatch(std::move(*f));
      ASSERT_TRUE(b.ok()) << b.status().message();
      EXPECT_EQ(b->data.bytes[999], static_cast<uint8_t>(i));
    }
  }
  sender.join();
  EXPECT_EQ(server_->shm_batches_sent(), kLentSegments);
  EXPECT_EQ(server_->batches_sent(), n);
}

TEST_F(SameHostPortTest, GivenAClientThatReleasesASegmentItWasNotLentThenItIsDropped) {
  Socket s = Connect(true);
  ASSERT_TRUE(GrantCredit(s, 1, {3}).ok());
  // The port hangs up: the client's next receive sees the connection closed.
  auto f = RecvFrame(s, FrameLimits{}, Deadline::After(kWaitS));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kUnavailable) << f.status().message();
}

TEST_F(SameHostPortTest, GivenAReleasedSegmentThenTheNextBatchReusesItWithoutPassingItAgain) {
  Socket s = Connect(true);
  auto first = SendOne(s, MakeBatch(1));
  ASSERT_TRUE(first.ok()) << first.status().message();
  const int fd = s.TakeFd();
  ASSERT_GE(fd, 0);
  ::close(fd);
  ASSERT_TRUE(GrantCredit(s, 1, {first->meta["shm"]["id"].get<uint64_t>()}).ok());
  // The release travels with the credit, so the port has both before the next send.
  std::thread sender([&] { EXPECT_TRUE(server_->SendToRank(0, MakeBatch(2)).ok()); });
  auto second = RecvFrame(s, FrameLimits{}, Deadline::After(kWaitS));
  sender.join();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->meta["shm"]["id"], first->meta["shm"]["id"]);
  EXPECT_FALSE(second->meta["shm"]["fd"].get<bool>());
  EXPECT_EQ(s.TakeFd(), -1);
}

TEST_F(SameHostPortTest, GivenAClientThatDoesNotAskForSegmentsThenBatchesComeInline) {
  Socket s = Connect(false);
  auto f = SendOne(s, MakeBatch(4));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_FALSE(f->meta.contains("shm"));
  EXPECT_EQ(server_->shm_batches_sent(), 0u);
}

TEST_F(SameHostPortTest, GivenABatchCollatedInAReservedSegmentThenItIsSentInPlaceWithItsBytes) {
  Socket s = Connect(true);
  std::optional<Batch::External> into = ReserveFor(7);
  ASSERT_TRUE(into);
  EXPECT_EQ(SendAndReceiveInSegment(s, InSegment(7, *into)), 7);
  EXPECT_EQ(server_->in_place_batches_sent(), 1u);
  EXPECT_EQ(server_->shm_batches_sent(), 1u);
}

TEST_F(SameHostPortTest,
       GivenAReservationDroppedUnsentThenItsSegmentAndDescriptorGoWithTheNextBatch) {
  Socket s = Connect(true);
  {
    std::optional<Batch::External> into = ReserveFor(1);  // segment 0, never sent
    ASSERT_TRUE(into);
  }
  auto f = SendOne(s, MakeBatch(2));
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_TRUE(f->meta.contains("shm"));
  EXPECT_EQ(f->meta["shm"]["id"].get<uint64_t>(), 0u);  // the dropped one, free again
  // The client never saw that segment: its descriptor comes with this batch.
  EXPECT_TRUE(f->meta["shm"]["fd"].get<bool>());
  const int fd = s.TakeFd();
  EXPECT_GE(fd, 0);
  if (fd >= 0) ::close(fd);
  EXPECT_EQ(server_->in_place_batches_sent(), 0u);
}

TEST_F(SameHostPortTest,
       GivenASplitStream_ThenOlderSessionsAreRefusedAndANewerOneAfterItsFirstBatchEndsIt) {
  Socket s1 = Connect(false, 1);
  ASSERT_TRUE(GrantCredit(s1, 2).ok());
  SplitStream stream{1, 0};
  ASSERT_TRUE(server_->SendToRank(0, MakeBatch(0), std::nullopt, &stream).ok());
  ASSERT_TRUE(RecvFrame(s1, FrameLimits{}, Deadline::After(kWaitS)).ok());
  EXPECT_EQ(stream.sent_to, 1u);
  // A restarted trainer (session 3) replaces session 1: the rest of this split
  // is not sent to it (the coordinator has it made again from what was
  // acknowledged), and its credit is left for the next split.
  Socket s3 = Connect(false, 3);
  EXPECT_FALSE(RecvFrame(s1, FrameLimits{}, Deadline::After(kWaitS)).ok());  // replaced
  ASSERT_TRUE(GrantCredit(s3, 1).ok());
  Status aborted = server_->SendToRank(0, MakeBatch(1), std::nullopt, &stream);
  EXPECT_EQ(aborted.code(), Code::kAborted) << aborted.message();
  // A split handed out when the coordinator's newest session was 5: session 3's
  // connection is hung up and waits for session 5's, and older tickets are
  // refused from then on.
  SplitStream fresh{5, 0};
  std::thread sender(
      [&] { EXPECT_TRUE(server_->SendToRank(0, MakeBatch(2), std::nullopt, &fresh).ok()); });
  EXPECT_FALSE(RecvFrame(s3, FrameLimits{}, Deadline::After(kWaitS)).ok());  // hung up
  Socket s4 = Connect(false, 4);
  auto refused = RecvFrame(s4, FrameLimits{}, Deadline::After(kWaitS));
  ASSERT_TRUE(refused.ok()) << refused.status().message();
  EXPECT_EQ(refused->type, MsgType::kError);
  EXPECT_NE(refused->meta.value("message", "").find("session 4 was replaced by session 5"),
            std::string::npos)
      << refused->meta.dump();
  Socket s5 = Connect(false, 5);
  ASSERT_TRUE(GrantCredit(s5, 1).ok());
  auto got = RecvFrame(s5, FrameLimits{}, Deadline::After(kWaitS));
  sender.join();
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->meta["split_batch"], 2);
  EXPECT_EQ(fresh.sent_to, 5u);
}

TEST_F(SameHostPortTest, GivenNoSegmentClientOrNoClientThenNothingIsReserved) {
  EXPECT_FALSE(server_->ReserveSegment(0, 1000));  // no connection for the rank yet
  Socket s = Connect(false);
  ASSERT_TRUE(GrantCredit(s, 1).ok());
  ASSERT_TRUE(server_->SendToRank(0, MakeBatch(3)).ok());  // the rank is attached now
  EXPECT_FALSE(server_->ReserveSegment(0, 1000));          // it asked for bytes
  ASSERT_TRUE(RecvFrame(s, FrameLimits{}, Deadline::After(kWaitS)).ok());
}

TEST_F(SameHostPortTest, GivenTheRanksConnectionReplacedAfterReservingThenTheNewOneGetsTheBytes) {
  Socket old_conn = Connect(true, 1);
  std::optional<Batch::External> into = ReserveFor(9);
  ASSERT_TRUE(into);
  // A newer session of the rank takes over; the reserved segment was the old one's.
  Socket s = Connect(true, 2);
  EXPECT_EQ(SendAndReceiveInSegment(s, InSegment(9, *into)), 9);
  EXPECT_EQ(server_->in_place_batches_sent(), 0u);  // copied into the new connection's segment
}

}  // namespace
}  // namespace gm
