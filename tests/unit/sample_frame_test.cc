#include "worker/sample_frame.h"

#include <gtest/gtest.h>

#include <cstring>

namespace gm {
namespace {

Sample MakeSample() {
  Sample s;
  s.index = (uint64_t{3} << 32) | 17;
  s.key = "shard-3.tar#img17";
  s.label = 42;
  s.data = std::string("\x00\xff\x10jpeg", 7);
  s.ext = "jpg";
  s.fields = {{"cls", "42"}, {"json", "{\"a\":1}"}};
  s.tensor.Reset(DType::kFloat32, {2, 3, 1});
  for (int i = 0; i < 6; ++i) s.tensor.data<float>()[i] = 0.5f * static_cast<float>(i);
  s.layout = Layout::kHWC;
  return s;
}

void Patch(std::string& frame, size_t at, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) frame[at + i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

TEST(SampleFrameTest, GivenSampleWithTensorWhenRoundTrippedThenEveryFieldSurvives) {
  Sample in = MakeSample();
  auto frame = EncodeSampleFrame(in);
  ASSERT_TRUE(frame.ok()) << frame.status().message();
  EXPECT_EQ(frame->substr(0, 4), "GMS1");
  auto out = DecodeSampleFrame(*frame);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->index, in.index);
  EXPECT_EQ(out->key, in.key);
  EXPECT_EQ(out->label, in.label);
  EXPECT_EQ(out->data, in.data);
  EXPECT_EQ(out->ext, in.ext);
  EXPECT_EQ(out->fields, in.fields);
  EXPECT_EQ(out->tensor.dtype, DType::kFloat32);
  EXPECT_EQ(out->tensor.shape, in.tensor.shape);
  EXPECT_EQ(out->tensor.bytes, in.tensor.bytes);
  EXPECT_EQ(out->layout, Layout::kHWC);
}

TEST(SampleFrameTest, GivenASeedWhenEncodedThenGms2CarriesItBeforeTheSampleBody) {
  Sample in = MakeSample();
  auto plain = EncodeSampleFrame(in);
  auto seeded = EncodeSampleFrame(in, 0x0102030405060708ULL);
  ASSERT_TRUE(plain.ok() && seeded.ok());
  EXPECT_EQ(seeded->substr(0, 4), "GMS2");
  ASSERT_EQ(seeded->size(), plain->size() + 8);
  EXPECT_EQ(seeded->substr(8, 8), std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
  EXPECT_EQ(seeded->substr(16), plain->substr(8));
  uint64_t seed = 0;
  auto out = DecodeSampleFrame(*seeded, &seed);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(seed, 0x0102030405060708ULL);
  EXPECT_EQ(out->key, in.key);
  EXPECT_EQ(out->tensor.bytes, in.tensor.bytes);
  // A seeded frame too short to hold its seed is corrupt, not a crash.
  std::string shortest = std::string("GMS2") + std::string("\x04\0\0\0", 4) + "abcd";
  EXPECT_EQ(DecodeSampleFrame(shortest).status().code(), Code::kCorrupt);
}

TEST(SampleFrameTest, GivenNoTensorWhenRoundTrippedThenTensorStaysEmpty) {
  Sample in;
  in.key = "range:5";
  auto out = DecodeSampleFrame(*EncodeSampleFrame(in));
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_TRUE(out->tensor.empty());
  EXPECT_EQ(out->label, -1);
  EXPECT_EQ(out->key, "range:5");
}

TEST(SampleFrameTest, GivenKnownSampleWhenEncodedThenBytesFollowTheDocumentedLayout) {
  Sample s;
  s.index = 1;
  s.key = "k";
  s.tensor.Reset(DType::kInt32, {1});
  s.tensor.data<int32_t>()[0] = 5;
  std::string body;
  body += std::string("\x01\0\0\0\0\0\0\0", 8) + std::string(8, '\xff');  // index 1, label -1
  body += std::string("\x01\0\0\0k", 5) + std::string(4, '\0') + std::string(4, '\0');
  body += std::string(4, '\0');                  // no fields
  body += std::string("\x01\x01\x00\x01", 4);    // tensor int32, none, 1-D
  body += std::string("\x01\0\0\0\0\0\0\0", 8);  // dims [1]
  body += std::string("\x04\0\0\0\0\0\0\0", 8) + std::string("\x05\0\0\0", 4);
  std::string header =
      "GMS1" + std::string(1, static_cast<char>(body.size())) + std::string(3, '\0');
  EXPECT_EQ(*EncodeSampleFrame(s), header + body);
}

TEST(SampleFrameTest, GivenErrorFrameWhenDecodedThenCorruptCarriesTheMessage) {
  auto out = DecodeSampleFrame(EncodeErrorFrame("ValueError: row 7"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Code::kCorrupt);
  EXPECT_EQ(out.status().message(), "ValueError: row 7");
}

TEST(SampleFrameTest, GivenResourceErrorFrameWhenDecodedThenResourceExhaustedCarriesTheMessage) {
  const std::string frame = EncodeErrorFrame("MemoryError", /*resource=*/true);
  EXPECT_EQ(frame.substr(0, 4), "GMR1");
  auto out = DecodeSampleFrame(frame);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(out.status().message(), "MemoryError");
}

TEST(SampleFrameTest, GivenShortOrBadHeaderThenCorrupt) {
  EXPECT_EQ(DecodeSampleFrame("GMS").status().code(), Code::kCorrupt);
  auto bad = DecodeSampleFrame(std::string("XXXX\0\0\0\0", 8));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad magic \"XXXX\""), std::string::npos);
  std::string big = "GMS1" + std::string(4, '\0');
  Patch(big, 4, (uint64_t{1} << 30) + 1, 4);
  auto oversize = DecodeFrameHeader(big);
  ASSERT_FALSE(oversize.ok());
  EXPECT_NE(oversize.status().message().find("1 GiB"), std::string::npos);
}

TEST(SampleFrameTest, GivenTruncatedFramesThenEveryPrefixFailsCleanly) {
  std::string frame = *EncodeSampleFrame(MakeSample());
  for (size_t n = kFrameHeaderBytes; n < frame.size(); ++n) {
    Sample s;
    Status st = DecodeSampleBody(
        std::string_view(frame).substr(kFrameHeaderBytes, n - kFrameHeaderBytes), s);
    EXPECT_EQ(st.code(), Code::kCorrupt) << "prefix " << n;
  }
  auto length_mismatch = DecodeSampleFrame(frame.substr(0, frame.size() - 1));
  EXPECT_NE(length_mismatch.status().message().find("header says"), std::string::npos);
}

TEST(SampleFrameTest, GivenTensorBytesNotMatchingDimsThenCorrupt) {
  std::string frame = *EncodeSampleFrame(MakeSample());
  // The tensor is the last 24 data bytes; the u64 nbytes precedes them.
  Patch(frame, frame.size() - 24 - 8, 20, 8);
  auto out = DecodeSampleFrame(frame);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("cannot hold 20 bytes"), std::string::npos)
      << out.status().message();
}

TEST(SampleFrameTest, GivenNdimLargerThanTheDimsPresentThenCorrupt) {
  std::string frame = *EncodeSampleFrame(MakeSample());
  // ndim sits before 3 dims (24 bytes), nbytes (8) and data (24).
  size_t ndim_at = frame.size() - 24 - 8 - 24 - 1;
  ASSERT_EQ(frame[ndim_at], 3);
  frame[ndim_at] = 9;
  EXPECT_EQ(DecodeSampleFrame(frame).status().code(), Code::kCorrupt);
  frame[ndim_at] = 0;
  EXPECT_NE(DecodeSampleFrame(frame).status().message().find("at least one dimension"),
            std::string::npos);
}

TEST(SampleFrameTest, GivenTrailingBytesOrBadEnumsThenCorrupt) {
  std::string frame = *EncodeSampleFrame(MakeSample());
  std::string trailing = frame + "x";
  Patch(trailing, 4, frame.size() - kFrameHeaderBytes + 1, 4);
  EXPECT_NE(DecodeSampleFrame(trailing).status().message().find("unexpected bytes"),
            std::string::npos);
  size_t dtype_at = frame.size() - 24 - 8 - 24 - 3;
  frame[dtype_at] = 7;
  EXPECT_NE(DecodeSampleFrame(frame).status().message().find("unknown tensor dtype 7"),
            std::string::npos);
}

TEST(SampleFrameTest, GivenTensorWhoseBytesDoNotMatchShapeWhenEncodedThenInvalidArgument) {
  Sample s = MakeSample();
  s.tensor.bytes.pop_back();
  EXPECT_EQ(EncodeSampleFrame(s).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace gm
