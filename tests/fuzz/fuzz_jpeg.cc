// libFuzzer target: JPEG decoding, whole-image and fused with a random crop.
// Any input must end in a Status (OK or Corrupt), never a crash, hang or leak.
// Whole images are decoded with goldminer's Huffman decoder and with
// libjpeg-turbo's: an error of libjpeg's must be one of ours too, and where both
// decode, the pixels must be equal (worker/image/jpeg_entropy.h; the three cases where
// goldminer's decoder is stricter are those tests/unit/jpeg_entropy_test.cc
// names).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/json.h"
#include "worker/image/jpeg.h"
#include "worker/image/jpeg_entropy.h"
#include "worker/op.h"

namespace {

std::unique_ptr<gm::Op> MakeStage(const char* text, uint64_t stage) {
  auto json = gm::ParseJson(text, "fuzz_jpeg");
  if (!json.ok()) std::abort();
  auto op = gm::OpRegistry::BuiltIn().Make(gm::JsonNode(*json, "fuzz_jpeg"), gm::OpEnv{});
  if (!op.ok()) std::abort();
  (*op)->set_stage(stage);
  return std::move(*op);
}

// decode_jpeg + random_resized_crop(64), fused.
const gm::Op& FusedOp() {
  static const std::unique_ptr<gm::Op> fused = [] {
    auto decode = MakeStage(R"({"op": "decode_jpeg"})", 0);
    auto crop = MakeStage(R"({"op": "random_resized_crop", "size": 64})", 1);
    auto op = gm::FuseDecode(decode, crop);
    if (op == nullptr) std::abort();
    return op;
  }();
  return *fused;
}

void CheckStatus(const gm::Status& s) {
  if (!s.ok() && s.code() != gm::Code::kCorrupt) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  gm::Tensor full, reference;
  gm::SetJpegEntropy(gm::JpegEntropy::kFast);
  gm::Status ours = gm::DecodeJpeg(bytes, full);
  CheckStatus(ours);
  gm::SetJpegEntropy(gm::JpegEntropy::kLibjpeg);
  gm::Status libjpeg = gm::DecodeJpeg(bytes, reference);
  gm::Tensor portable;
  gm::SetJpegEntropy(gm::JpegEntropy::kFastPortable);  // the build without BMI2
  gm::Status ours_portable = gm::DecodeJpeg(bytes, portable);
  gm::SetJpegEntropy(gm::JpegEntropy::kFast);
  CheckStatus(libjpeg);
  if (ours_portable.ok() != ours.ok() || (ours.ok() && portable.bytes != full.bytes)) std::abort();
  if (!libjpeg.ok() && ours.ok()) std::abort();
  if (libjpeg.ok() && ours.ok() && full.bytes != reference.bytes) std::abort();
  if (libjpeg.ok() && !ours.ok() && ours.message().find("bad Huffman code") == std::string::npos &&
      ours.message().find("extraneous bytes before marker") == std::string::npos &&
      ours.message().find("fill bytes (FF FF) before a stuffed zero") == std::string::npos) {
    std::abort();
  }

  gm::Sample sample;
  sample.index = size;
  sample.data = bytes;
  gm::Status s = FusedOp().Apply(sample, gm::RunContext{1, 0});
  CheckStatus(s);
  if (s.ok() && sample.tensor.shape != std::vector<int64_t>{64, 64, 3}) std::abort();
  return 0;
}
