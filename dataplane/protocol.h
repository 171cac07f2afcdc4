// The goldminer data-plane wire protocol (GMP1), spoken between the coordinator,
// data workers and the trainer's client over TCP or Unix stream sockets. See
// goldminer-protocol(7) for the full description.
//
// Every message is one frame:
//
//   header (24 bytes, little-endian)
//     magic        4 bytes  "GMP1"
//     version      u8       kProtocolVersion (1)
//     type         u8       MsgType
//     flags        u16      bit 0 kFrameSealed: a MAC follows the meta; other bits:
//                           senders write 0, receivers ignore them
//     meta_len     u32      bytes of meta; at most FrameLimits::max_meta_bytes
//     reserved     u32      0 (anything else is Corrupt)
//     payload_len  u64      bytes of payload; at most FrameLimits::max_payload_bytes
//   meta           meta_len bytes: a UTF-8 JSON object with the message's fields
//                  (meta_len 0 stands for {})
//   mac            kSealBytes (32), only when kFrameSealed is set: see
//                  dataplane/session.h. Every frame after the handshake is sealed;
//                  handshake frames never are.
//   payload        payload_len raw bytes (BATCH: the data tensor, then the labels)
//
// Receivers validate the header against their limits before allocating anything,
// so a hostile peer cannot make them allocate more than their limits allow.
//
// Thread-safety: plain functions on values are thread-safe; SendFrame/RecvFrame
// use the Socket they are given (one sender and one receiver at a time).
#pragma once

#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/sample.h"
#include "core/status.h"
#include "dataplane/socket.h"

namespace gm {

inline constexpr std::string_view kProtocolMagic = "GMP1";
// Version 2: sealed frames after the handshake, per-role keys (dataplane/auth.h).
inline constexpr uint8_t kProtocolVersion = 3;
inline constexpr uint16_t kFrameSealed = 1;          // header flag
inline constexpr size_t kFrameHeaderSize = 24;       // bytes
inline constexpr uint32_t kMaxMetaBytes = 1u << 20;  // bytes; the largest limit allowed
inline constexpr uint64_t kDefaultMaxPayloadBytes = uint64_t{256} << 20;
inline constexpr int kMaxMetaDepth = 64;  // nesting of JSON arrays/objects in meta

// Message types. 1..15: connection set-up; 16..: control and data messages. The
// JSON fields of each are defined by the role that uses it, except BATCH (below).
enum class MsgType : uint8_t {
  kHello = 1,    // server -> client: {version, nonce, role}
  kAuth = 2,     // client -> server: {version, role, client_nonce, mac}
  kWelcome = 3,  // server -> client: {mac}
  kError = 4,    // either way: {message}; the sender closes afterwards
  kRegister = 16,
  kRegistered = 17,
  kHeartbeat = 18,
  kGetSplit = 19,
  kAssign = 20,
  kSplitDone = 21,
  kDrain = 22,
  kAck = 23,
  kSubscribe = 24,
  kCredit = 25,
  kBatch = 26,  // worker -> client: EncodeBatchMeta + data bytes + label bytes
  kEpochEnd = 27,
  kBye = 28,
  kSubscribed = 29,
  kGetPlan = 30,
  kPlan = 31,
  kGetWorkers = 32,
  kWorkers = 33,
  kResume = 34,
  kFault = 35,    // client -> coordinator: a worker proven to lie, or stalled (no reply)
  kOffload = 36,  // the DataLoader offload: connections 4 and 5 of dataplane/messages_offload.h
  kOffloading = 37,
  kOffloadOpen = 38,
  kOffloadOpened = 39,
  kOffloadData = 40,
  kOffloadExit = 41,
  kOffloadNote = 42,  // client -> coordinator: what became of a DataLoader (no reply)
  kPoolReport = 43,   // run -> pool (connection 6 of dataplane/messages_pool.h)
  kPoolGrant = 44,
  kPoolStatus = 45,
  kPoolState = 46,
  // Message fields: dataplane/messages*.h.
};

// "HELLO", "BATCH", ...; "UNKNOWN" for a value that is not a MsgType.
std::string_view MsgTypeName(MsgType type);
// True when `value` is one of the MsgType values above.
bool IsKnownMsgType(uint8_t value);

// What a receiver accepts; frames over a limit are Corrupt.
struct FrameLimits {
  uint32_t max_meta_bytes = kMaxMetaBytes;               // at most kMaxMetaBytes
  uint64_t max_payload_bytes = kDefaultMaxPayloadBytes;  // per connection
  // Once a frame's first byte has arrived, the rest must arrive within this many
  // seconds (and within the receive's own deadline); 0: the receive's deadline
  // only. Bounds how long a peer that starts a frame and stalls holds us.
  double finish_s = 0;
};

// Seconds a started control frame may take to arrive whole.
inline constexpr double kFrameFinishS = 10;
// Limits for the handshake: small meta, no payload.
inline constexpr FrameLimits kHandshakeLimits{64u << 10, 0, kFrameFinishS};
// Limits for control connections (worker and client to the coordinator, client to
// a worker's data port): control messages carry no payload.
inline constexpr FrameLimits kControlLimits{kMaxMetaBytes, 0, kFrameFinishS};

struct FrameHeader {
  uint8_t version = kProtocolVersion;
  MsgType type = MsgType::kError;
  uint16_t flags = 0;
  uint32_t meta_len = 0;
  uint64_t payload_len = 0;
};

struct Frame {
  MsgType type = MsgType::kError;
  uint16_t flags = 0;
  nlohmann::json meta = nlohmann::json::object();  // always an object
  Bytes payload;                                   // not zeroed on resize (see core/sample.h)
};

// Parses the first kFrameHeaderSize bytes of `header` and checks them against
// `limits`. Corrupt, saying what was wrong, on a short header, bad magic, another
// version, an unknown type, a non-zero reserved field or a length over a limit.
Result<FrameHeader> ParseFrameHeader(std::string_view header, const FrameLimits& limits = {});

// The 24 header bytes for `header`.
std::string EncodeFrameHeader(const FrameHeader& header);

// Parses meta bytes: a JSON object (empty bytes: {}). Corrupt on invalid JSON or
// UTF-8, nesting deeper than kMaxMetaDepth, or a value that is not an object.
Result<nlohmann::json> ParseFrameMeta(std::string_view meta);

// Parses one whole frame at the start of `bytes` (the in-memory twin of
// RecvFrame, for frames outside a session). On success `*consumed` (when given)
// is the frame's size; trailing bytes are left alone. Corrupt when the frame is
// invalid, sealed (no session to check it with) or `bytes` ends early.
Result<Frame> ParseFrame(std::string_view bytes, const FrameLimits& limits = {},
                         size_t* consumed = nullptr);

// One whole frame as bytes. Meta must be an object (null, which is what `{}`
// builds, stands for the empty object); InvalidArgument when it is not, or is
// larger than kMaxMetaBytes once serialized.
Result<std::string> EncodeFrame(MsgType type, const nlohmann::json& meta,
                                std::string_view payload = {});

// Sends one frame: header, meta, the seal when the socket has a session, and the
// caller's payload buffers (in order, not copied) in as few sendmsg calls as the
// kernel allows. The buffers must stay
// valid until it returns. InvalidArgument for bad meta; Unavailable/IoError from
// the socket (the connection is then unusable).
// `pass_fd` >= 0 travels with the header (SCM_RIGHTS; Unix sockets): see
// dataplane/shm.h.
Status SendFrame(Socket& socket, MsgType type, const nlohmann::json& meta,
                 std::span<const iovec> payload, Deadline deadline, int pass_fd = -1);
Status SendFrame(Socket& socket, MsgType type, const nlohmann::json& meta, Deadline deadline);

// Receives one frame. Corrupt for an invalid frame, and on a socket with a
// session for a frame that is not sealed or whose MAC is wrong (injected,
// replayed, reordered or altered); Unavailable on timeout or a closed peer. After any failure the
// connection is out of step: close it.
Result<Frame> RecvFrame(Socket& socket, const FrameLimits& limits, Deadline deadline);

// RecvFrame into `frame`, reusing the capacity of frame.payload. Receivers of
// large frames should recycle payload buffers (e.g. hand a consumed batch's
// data.bytes back) unless the process keeps freed blocks in its heap
// (core/os/memory.h): a fresh buffer of tens of MB is new memory from the kernel,
// and its page faults cost twice the transfer itself (38 MB frames on loopback:
// 1.4 GB/s into fresh buffers, 4 GB/s into recycled ones). `frame` is
// unspecified after a failure.
Status RecvFrameInto(Socket& socket, const FrameLimits& limits, Deadline deadline, Frame& frame);

// ---- BATCH ----

inline constexpr uint64_t kMaxBatchSamples = uint64_t{1} << 24;  // n of one BATCH
inline constexpr size_t kMaxBatchDims = 32;                      // entries of "shape"
// Segment ids a client maps per connection (dataplane/shm.h): a BATCH names one
// below this, a CREDIT releases at most this many.
inline constexpr size_t kMaxSegments = 16;
//
// A BATCH frame's meta is {epoch, index, split, split_batch, dtype ("uint8",
// "int32", "int64", "float32"), shape (of data: [n, ...]), layout ("none", "HWC",
// "CHW"), n, keys [n strings], sample_indices [n integers], data_bytes,
// labels_bytes (n * 8)}; its payload is the data tensor's bytes followed by the
// int64 labels, both little-endian.

// The meta for `batch`. Use CheckBatch first when the batch may be inconsistent.
nlohmann::json EncodeBatchMeta(const Batch& batch);
// The payload as two buffers pointing into the batch's tensors (valid while the
// batch is alive and unchanged).
std::array<iovec, 2> BatchPayload(const Batch& batch);
// InvalidArgument when `batch` cannot be sent as it is (data bytes that do not
// match its shape, labels that are not n int64, key or index counts != n).
Status CheckBatch(const Batch& batch);
// CheckBatch, then SendFrame(BATCH, EncodeBatchMeta, BatchPayload).
Status SendBatch(Socket& socket, const Batch& batch, Deadline deadline);

// Rebuilds a Batch from a BATCH frame. Corrupt, naming the field, when the type is
// not BATCH, a field is missing or has the wrong type, or sizes disagree (shape *
// dtype size != data_bytes, labels_bytes != n * 8, keys or sample_indices count
// != n, data_bytes + labels_bytes != payload size). The rvalue form moves the
// payload into the data tensor instead of copying it.
Result<Batch> DecodeBatch(const Frame& frame);
Result<Batch> DecodeBatch(Frame&& frame);
// A BATCH whose data is in `external` (a segment, dataplane/shm.h) and whose
// payload holds the labels only: the batch views external.data (data_bytes of
// it; Corrupt when the segment is smaller) and shares its owner.
Result<Batch> DecodeBatch(const Frame& frame, const Batch::External& external);

// What a BATCH's meta says beside the batch itself (EncodeBatchMeta's fields):
//   rank           the rank whose connection it is for, 0 .. 65535;
//   split_batches  on a split's last batch only: the split's batch count,
//                  1 .. kMaxSplitBatches (dataplane/batch_order.h);
//   shm            {id, fd} when the data is in a segment (dataplane/shm.h) and
//                  the payload holds the labels only: id 0 .. kMaxSegments - 1,
//                  fd true when the segment's descriptor comes with this frame.
// Decode refuses with Corrupt, naming the field, whatever is missing, of another
// type or out of range. The worker's data server encodes it (AddTo), the client
// decodes it (client/client_workers.cc).
struct BatchMeta {
  struct Segment {
    uint64_t id = 0;
    bool fd = false;
    bool operator==(const Segment&) const = default;
  };
  int64_t rank = 0;
  std::optional<uint64_t> split_batches;
  std::optional<Segment> shm;
  // Adds these fields to `meta` (a batch's EncodeBatchMeta).
  void AddTo(nlohmann::json& meta) const;
  static Result<BatchMeta> Decode(const nlohmann::json& meta);
  bool operator==(const BatchMeta&) const = default;
};

}  // namespace gm
