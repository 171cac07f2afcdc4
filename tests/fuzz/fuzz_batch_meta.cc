// libFuzzer target: BATCH's typed fields beside the batch (BatchMeta in
// dataplane/protocol.h: rank, split_batches, shm). Arbitrary bytes are parsed as
// JSON meta (as ParseFrameMeta does for a frame) and decoded. Any input must yield
// a BatchMeta or a Corrupt status: never a crash, a hang or an exception; a decoded
// one must be within its ranges, and what it adds to a batch's meta must decode to
// the same values.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dataplane/batch_order.h"
#include "dataplane/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto meta = gm::ParseFrameMeta(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!meta.ok()) return 0;
  auto m = gm::BatchMeta::Decode(*meta);
  if (!m.ok()) {
    if (m.status().code() != gm::Code::kCorrupt) __builtin_trap();
    return 0;
  }
  if (m->rank < 0 || m->rank > 65535) __builtin_trap();
  if (m->split_batches && (*m->split_batches < 1 || *m->split_batches > gm::kMaxSplitBatches))
    __builtin_trap();
  if (m->shm && m->shm->id >= gm::kMaxSegments) __builtin_trap();
  nlohmann::json again_meta = gm::EncodeBatchMeta(gm::Batch{});
  m->AddTo(again_meta);
  auto again = gm::BatchMeta::Decode(again_meta);
  if (!again.ok() || !(*again == *m)) __builtin_trap();
  return 0;
}
