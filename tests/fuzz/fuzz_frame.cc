// libFuzzer target: decodes arbitrary bytes as a sample frame (worker/sample_frame.h).
// Any input must yield a Sample or a Corrupt status: never a crash, a hang or an
// allocation beyond the frame's own size.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "worker/sample_frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto sample = gm::DecodeSampleFrame(bytes);
  if (sample.ok()) {
    // A decoded sample must encode again, and that frame must decode to the same
    // values (bytes may differ: fields are re-emitted in sorted order, once each).
    auto again = gm::EncodeSampleFrame(*sample);
    if (!again.ok()) __builtin_trap();
    auto twice = gm::DecodeSampleFrame(*again);
    if (!twice.ok() || twice->fields != sample->fields || twice->data != sample->data ||
        twice->tensor.bytes != sample->tensor.bytes ||
        twice->tensor.shape != sample->tensor.shape) {
      __builtin_trap();
    }
  }
  return 0;
}
