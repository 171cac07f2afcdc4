// libFuzzer target: the data-plane frame parser (dataplane/protocol.h). Arbitrary
// bytes go to ParseFrameHeader, to ParseFrame (the in-memory twin of RecvFrame)
// and, for frames that parse, to DecodeBatch. Any input must yield a value or a
// Corrupt status: never a crash, a hang or an allocation beyond the input's size.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "dataplane/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // Small limits so that the payload check is reached by short inputs too.
  const gm::FrameLimits limits{4096, 1 << 16};
  auto header = gm::ParseFrameHeader(bytes, limits);
  size_t consumed = 0;
  auto frame = gm::ParseFrame(bytes, limits, &consumed);
  if (frame.ok() && !header.ok()) __builtin_trap();
  if (!frame.ok()) {
    if (frame.status().code() != gm::Code::kCorrupt) __builtin_trap();
    return 0;
  }
  if (consumed > size || !frame->meta.is_object()) __builtin_trap();
  // The fields beside the batch (rank, split_batches, shm): a value or Corrupt.
  if (auto h = gm::BatchMeta::Decode(frame->meta);
      !h.ok() && h.status().code() != gm::Code::kCorrupt)
    __builtin_trap();
  auto copied = gm::DecodeBatch(*frame);
  auto moved = gm::DecodeBatch(std::move(*frame));
  if (copied.ok() != moved.ok()) __builtin_trap();
  if (copied.ok()) {
    // A decoded batch is consistent: it must be sendable and decode the same again.
    if (!gm::CheckBatch(*copied).ok() || copied->data.bytes != moved->data.bytes) __builtin_trap();
    const gm::Batch& b = *copied;
    std::string payload(b.data.bytes.begin(), b.data.bytes.end());
    payload.append(b.labels.bytes.begin(), b.labels.bytes.end());
    auto again = gm::EncodeFrame(gm::MsgType::kBatch, gm::EncodeBatchMeta(b), payload);
    if (!again.ok()) __builtin_trap();
    auto reparsed = gm::ParseFrame(*again);
    if (!reparsed.ok() || !gm::DecodeBatch(*reparsed).ok()) __builtin_trap();
  } else if (copied.status().code() != gm::Code::kCorrupt) {
    __builtin_trap();
  }
  return 0;
}
