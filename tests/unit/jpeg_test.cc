#include "worker/image/jpeg.h"

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/unit/test_util.h"

namespace gm {
namespace {

std::string Image(const std::string& name) {
  return testing::ReadAll(testing::SourcePath("tests/data/images/" + name));
}

// Reference decode with TurboJPEG (tjDecompress2, default flags) at scale_num/8.
std::vector<uint8_t> TurboDecode(const std::string& jpeg, int scale_num, int* w, int* h) {
  tjhandle tj = tjInitDecompress();
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  const auto* data = reinterpret_cast<const unsigned char*>(jpeg.data());
  EXPECT_EQ(tjDecompressHeader3(tj, data, jpeg.size(), &width, &height, &subsamp, &colorspace), 0);
  *w = TJSCALED(width, (tjscalingfactor{scale_num, 8}));
  *h = TJSCALED(height, (tjscalingfactor{scale_num, 8}));
  std::vector<uint8_t> out(static_cast<size_t>(*w) * *h * 3);
  EXPECT_EQ(tjDecompress2(tj, data, jpeg.size(), out.data(), *w, 0, *h, TJPF_RGB, 0), 0)
      << tjGetErrorStr2(tj);
  tjDestroy(tj);
  return out;
}

class DecodeMatchesTurboJpeg : public ::testing::TestWithParam<const char*> {};

TEST_P(DecodeMatchesTurboJpeg, GivenValidJpegWhenDecodedThenPixelsEqualTurboJpeg) {
  const std::string jpeg = Image(GetParam());
  int w = 0, h = 0;
  std::vector<uint8_t> expected = TurboDecode(jpeg, 8, &w, &h);

  Tensor t;
  ASSERT_TRUE(DecodeJpeg(jpeg, t).ok());

  EXPECT_EQ(t.dtype, DType::kUInt8);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{h, w, 3}));
  EXPECT_TRUE(t.bytes == expected);
}

INSTANTIATE_TEST_SUITE_P(Images, DecodeMatchesTurboJpeg,
                         ::testing::Values("photo_500x375.jpg", "photo_333x251_444.jpg",
                                           "gray_160x120.jpg", "progressive_200x150.jpg"));

TEST(JpegTest, GivenScaleOneHalfWhenDecodingWholeImageThenEqualsTurboJpegScaledDecode) {
  const std::string jpeg = Image("photo_500x375.jpg");
  int w = 0, h = 0;
  std::vector<uint8_t> expected = TurboDecode(jpeg, 4, &w, &h);
  JpegDecoder decoder(jpeg);
  ASSERT_TRUE(decoder.ReadHeader().ok());

  DecodedRegion r;
  ASSERT_TRUE(decoder.DecodeRegion(4, 0, 0, 1000, 1000, r).ok());

  EXPECT_EQ(r.scaled_width, w);
  EXPECT_EQ(r.scaled_height, h);
  EXPECT_EQ(r.width, w);
  EXPECT_EQ(r.height, h);
  EXPECT_TRUE(r.pixels == expected);
}

TEST(JpegTest, GivenRegionWhenDecodedThenItCoversTheBoxAndMatchesTheFullDecode) {
  const std::string jpeg = Image("photo_500x375.jpg");
  Tensor full;
  ASSERT_TRUE(DecodeJpeg(jpeg, full).ok());
  JpegDecoder decoder(jpeg);
  ASSERT_TRUE(decoder.ReadHeader().ok());

  DecodedRegion r;
  ASSERT_TRUE(decoder.DecodeRegion(8, 123, 77, 200, 150, r).ok());

  // The left edge moves to an iMCU column (16 px for 4:2:0); the right edge stays.
  EXPECT_EQ(r.x, 112);
  EXPECT_EQ(r.x + r.width, 323);
  EXPECT_EQ(r.y, 77);
  EXPECT_EQ(r.height, 150);
  int64_t total = 0, worst = 0;
  for (int y = 0; y < r.height; ++y) {
    for (int x = 0; x < r.width * 3; ++x) {
      int a = r.pixels[static_cast<size_t>(y) * r.width * 3 + x];
      int b = full.bytes[(static_cast<size_t>(y + r.y) * 500 + r.x) * 3 + x];
      total += std::abs(a - b);
      worst = std::max<int64_t>(worst, std::abs(a - b));
    }
  }
  // Skipping rows changes the chroma upsampling context of the first row only.
  EXPECT_LT(static_cast<double>(total) / (r.width * r.height * 3), 0.1);
  EXPECT_LE(worst, 8);
}

TEST(JpegTest, GivenCmykJpegWhenDecodedThenRgbMatchesPillowConversion) {
  Tensor t;
  ASSERT_TRUE(DecodeJpeg(Image("cmyk_64x48.jpg"), t).ok());

  ASSERT_EQ(t.shape, (std::vector<int64_t>{48, 64, 3}));
  // Channel means of Pillow's Image.open(...).convert("RGB").
  const double expected[3] = {219.94, 224.03, 229.44};
  for (int c = 0; c < 3; ++c) {
    double sum = 0;
    for (size_t i = c; i < t.bytes.size(); i += 3) sum += t.bytes[i];
    EXPECT_NEAR(sum / (48 * 64), expected[c], 0.5) << "channel " << c;
  }
}

struct BadInput {
  const char* file;
  const char* reason;
};

class BadJpeg : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadJpeg, GivenBadBytesWhenDecodedThenCorruptWithReadableReason) {
  const std::string data = Image(GetParam().file);
  Tensor t;

  Status s = DecodeJpeg(data, t);

  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find(GetParam().reason), std::string::npos) << s.message();
}

INSTANTIATE_TEST_SUITE_P(Files, BadJpeg,
                         ::testing::Values(BadInput{"truncated.jpg", "truncated JPEG"},
                                           BadInput{"empty.jpg", "zero bytes"},
                                           BadInput{"png_named.jpg", "not a JPEG (PNG signature)"},
                                           BadInput{"random_bytes.jpg", "not a JPEG"}));

TEST(JpegTest, GivenHeaderCutShortWhenReadingHeaderThenTruncated) {
  const std::string jpeg = Image("photo_500x375.jpg").substr(0, 100);
  JpegDecoder decoder(jpeg);

  Status s = decoder.ReadHeader();

  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("truncated JPEG"), std::string::npos) << s.message();
}

TEST(JpegTest, GivenFlippedBitsInScanDataWhenDecodedThenErrorOrImageButNoCrash) {
  std::string jpeg = Image("photo_500x375.jpg");
  int corrupt = 0;
  for (size_t pos = 700; pos < jpeg.size(); pos += 997) {
    std::string bad = jpeg;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x5A);
    bad[pos + 1] = static_cast<char>(0xFF);  // a bogus marker in the entropy data
    Tensor t;
    Status s = DecodeJpeg(bad, t);
    if (!s.ok()) {
      ++corrupt;
      EXPECT_EQ(s.code(), Code::kCorrupt);
      EXPECT_FALSE(s.message().empty());
    } else {
      EXPECT_EQ(t.shape, (std::vector<int64_t>{375, 500, 3}));
    }
  }
  EXPECT_GT(corrupt, 0);
}

TEST(JpegTest, GivenSignatureCheckWhenOtherFormatsThenNamesThem) {
  EXPECT_TRUE(CheckJpegSignature("\xFF\xD8\xFF\xD9").ok());
  EXPECT_NE(CheckJpegSignature("\xFF\xD8\xFF").message().find("no end-of-image marker"),
            std::string::npos);
  std::string trailer = "\xFF\xD8\xFF\xD9" + std::string(kMaxJpegTrailer - 2, '\0');
  EXPECT_TRUE(CheckJpegSignature(trailer).ok());
  EXPECT_FALSE(CheckJpegSignature(trailer + "xyz").ok());
  EXPECT_NE(CheckJpegSignature("GIF89a").message().find("GIF"), std::string::npos);
  EXPECT_NE(CheckJpegSignature("BM....").message().find("BMP"), std::string::npos);
  EXPECT_NE(CheckJpegSignature("x").message().find("0x78"), std::string::npos);
  EXPECT_NE(CheckJpegSignature("RIFF\xff").message().find("not a JPEG"), std::string::npos);
  EXPECT_NE(
      CheckJpegSignature(std::string_view("RIFF\x10\0\0\0WEBPVP8 ", 16)).message().find("WebP"),
      std::string::npos);
}

}  // namespace
}  // namespace gm
