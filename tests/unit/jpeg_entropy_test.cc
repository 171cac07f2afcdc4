// goldminer's Huffman decoder (worker/image/jpeg_entropy.h) against libjpeg-turbo's
// own: the same pixels for every layout, scale and region, and the same
// outcome on corrupt data.
#include "worker/image/jpeg_entropy.h"

#include <gtest/gtest.h>
#include <jpeglib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/test_util.h"
#include "worker/image/jpeg.h"

namespace gm {
namespace {

struct Layout {
  const char* name;
  int components;             // 1 (grayscale) or 3 (YCbCr)
  int h_samp, v_samp;         // of the luma component; chroma has 1x1
  unsigned restart_interval;  // in MCUs; 0: no restart markers
  bool optimize;  // image-specific Huffman tables (long codes) instead of the standard ones
  int quality;
};

const Layout kLayouts[] = {
    {"420", 3, 2, 2, 0, false, 90},         {"422", 3, 2, 1, 0, false, 90},
    {"444", 3, 1, 1, 0, false, 90},         {"440", 3, 1, 2, 0, false, 75},
    {"gray", 1, 1, 1, 0, false, 90},        {"420_q100_opt", 3, 2, 2, 0, true, 100},
    {"420_q30_opt", 3, 2, 2, 0, true, 30},  {"420_rst1", 3, 2, 2, 1, false, 90},
    {"444_rst7_opt", 3, 1, 1, 7, true, 95}, {"gray_rst3", 1, 1, 1, 3, false, 90},
};

// RGB pixels of a real photo (tests/data/images), cut to an odd size so the
// last MCU column and row are partial.
struct Pixels {
  std::vector<uint8_t> rgb;
  int width = 0, height = 0;
};

const Pixels& Photo() {
  static const Pixels photo = [] {
    Tensor t;
    std::string jpeg = testing::ReadAll(testing::SourcePath("tests/data/images/photo_500x375.jpg"));
    EXPECT_TRUE(DecodeJpeg(jpeg, t).ok());
    Pixels p;
    p.width = 493;
    p.height = 371;
    const int src_width = static_cast<int>(t.shape[1]);
    for (int y = 0; y < p.height; ++y) {
      const uint8_t* row = t.bytes.data() + static_cast<size_t>(y) * src_width * 3;
      p.rgb.insert(p.rgb.end(), row, row + static_cast<size_t>(p.width) * 3);
    }
    return p;
  }();
  return photo;
}

std::string Encode(const Pixels& p, const Layout& l) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = static_cast<JDIMENSION>(p.width);
  c.image_height = static_cast<JDIMENSION>(p.height);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  if (l.components == 1) jpeg_set_colorspace(&c, JCS_GRAYSCALE);
  c.comp_info[0].h_samp_factor = l.h_samp;
  c.comp_info[0].v_samp_factor = l.v_samp;
  jpeg_set_quality(&c, l.quality, TRUE);
  c.restart_interval = l.restart_interval;
  c.optimize_coding = l.optimize ? TRUE : FALSE;
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row =
        const_cast<uint8_t*>(p.rgb.data()) + static_cast<size_t>(c.next_scanline) * p.width * 3;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string jpeg(reinterpret_cast<char*>(out), size);
  std::free(out);
  return jpeg;
}

// The longest Huffman code in the file's DHT segments.
int LongestCode(const std::string& jpeg) {
  int longest = 0;
  for (size_t i = 2; i + 4 <= jpeg.size();) {
    if (static_cast<uint8_t>(jpeg[i]) != 0xFF) break;
    const int marker = static_cast<uint8_t>(jpeg[i + 1]);
    const size_t len = static_cast<uint8_t>(jpeg[i + 2]) * 256u + static_cast<uint8_t>(jpeg[i + 3]);
    if (marker == 0xDA) break;  // start of scan
    if (marker == 0xC4) {
      for (size_t t = i + 4; t + 17 <= i + 2 + len;) {
        int symbols = 0;
        for (int l = 1; l <= 16; ++l) {
          const int n = static_cast<uint8_t>(jpeg[t + static_cast<size_t>(l)]);
          if (n > 0) longest = std::max(longest, l);
          symbols += n;
        }
        t += 17 + static_cast<size_t>(symbols);
      }
    }
    i += 2 + len;
  }
  return longest;
}

// Offset of the first byte of entropy-coded data (after the SOS header).
size_t ScanStart(const std::string& jpeg) {
  size_t sos = jpeg.find("\xFF\xDA");
  EXPECT_NE(sos, std::string::npos);
  return sos + 2 + static_cast<uint8_t>(jpeg[sos + 2]) * 256u + static_cast<uint8_t>(jpeg[sos + 3]);
}

struct Outcome {
  bool ok = false;
  std::string message;
  DecodedRegion region;
  bool fast = false;
};

Outcome Decode(const std::string& jpeg, JpegEntropy which, int scale, int x, int y, int w, int h) {
  SetJpegEntropy(which);
  Outcome o;
  JpegDecoder decoder(jpeg);
  Status s = decoder.ReadHeader();
  if (s.ok()) s = decoder.DecodeRegion(scale, x, y, w, h, o.region);
  o.ok = s.ok();
  o.message = s.message();
  o.fast = decoder.fast_entropy();
  SetJpegEntropy(JpegEntropy::kFast);
  return o;
}

Outcome DecodeWhole(const std::string& jpeg, JpegEntropy which) {
  return Decode(jpeg, which, 8, 0, 0, 1 << 20, 1 << 20);
}

class EveryLayout : public ::testing::TestWithParam<Layout> {};

TEST_P(EveryLayout, GivenValidImageWhenDecodedAtAnyScaleAndRegionThenPixelsEqualLibjpegs) {
  const std::string jpeg = Encode(Photo(), GetParam());
  struct Box {
    int scale, x, y, w, h;
  };
  // Whole images at every DCT scale (1/8 stores no AC coefficients), and
  // regions: libjpeg skips the rows above (decoding them without storing) and
  // crops the columns.
  const Box boxes[] = {{8, 0, 0, 9999, 9999}, {4, 0, 0, 9999, 9999},  {2, 0, 0, 9999, 9999},
                       {1, 0, 0, 9999, 9999}, {8, 101, 67, 224, 150}, {8, 0, 200, 80, 171},
                       {4, 33, 40, 60, 50},   {8, 300, 0, 193, 9999}};
  for (const Box& b : boxes) {
    SCOPED_TRACE(::testing::Message() << "scale " << b.scale << "/8, box " << b.x << "," << b.y
                                      << " " << b.w << "x" << b.h);
    Outcome lib = Decode(jpeg, JpegEntropy::kLibjpeg, b.scale, b.x, b.y, b.w, b.h);
    ASSERT_TRUE(lib.ok) << lib.message;
    EXPECT_FALSE(lib.fast);
    for (JpegEntropy which : {JpegEntropy::kFast, JpegEntropy::kFastPortable}) {
      Outcome fast = Decode(jpeg, which, b.scale, b.x, b.y, b.w, b.h);
      ASSERT_TRUE(fast.ok) << fast.message;
      EXPECT_TRUE(fast.fast);
      EXPECT_EQ(fast.region.x, lib.region.x);
      EXPECT_EQ(fast.region.width, lib.region.width);
      EXPECT_EQ(fast.region.height, lib.region.height);
      EXPECT_TRUE(fast.region.pixels == lib.region.pixels);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, EveryLayout, ::testing::ValuesIn(kLayouts),
                         [](const ::testing::TestParamInfo<Layout>& p) {
                           return std::string(p.param.name);
                         });

TEST(JpegEntropyTest, GivenOptimizedTablesThenCodesLongerThanTheLookupWindowAreDecoded) {
  // The canonical (long-code) path runs only if some code is longer than the
  // window; the layouts above rely on this image having such codes.
  const Layout l = {"opt", 3, 2, 2, 0, true, 100};
  const std::string jpeg = Encode(Photo(), l);
  EXPECT_GT(LongestCode(jpeg), kJpegLookBits);
  Outcome fast = DecodeWhole(jpeg, JpegEntropy::kFast);
  Outcome lib = DecodeWhole(jpeg, JpegEntropy::kLibjpeg);
  ASSERT_TRUE(fast.ok && lib.ok);
  EXPECT_TRUE(fast.region.pixels == lib.region.pixels);
}

TEST(JpegEntropyTest, GivenRealPhotosThenPixelsEqualLibjpegs) {
  for (const char* name :
       {"photo_500x375.jpg", "photo_333x251_444.jpg", "gray_160x120.jpg", "cmyk_64x48.jpg"}) {
    SCOPED_TRACE(name);
    const std::string jpeg =
        testing::ReadAll(testing::SourcePath(std::string("tests/data/images/") + name));
    Outcome fast = DecodeWhole(jpeg, JpegEntropy::kFast);
    Outcome lib = DecodeWhole(jpeg, JpegEntropy::kLibjpeg);
    ASSERT_TRUE(fast.ok && lib.ok) << fast.message << " / " << lib.message;
    EXPECT_TRUE(fast.fast);
    EXPECT_TRUE(fast.region.pixels == lib.region.pixels);
  }
}

TEST(JpegEntropyTest, GivenProgressiveOrSwitchedOffThenLibjpegDecodes) {
  const std::string progressive =
      testing::ReadAll(testing::SourcePath("tests/data/images/progressive_200x150.jpg"));
  Outcome o = DecodeWhole(progressive, JpegEntropy::kFast);
  ASSERT_TRUE(o.ok) << o.message;
  EXPECT_FALSE(o.fast);

  const std::string baseline =
      testing::ReadAll(testing::SourcePath("tests/data/images/photo_500x375.jpg"));
  EXPECT_FALSE(DecodeWhole(baseline, JpegEntropy::kLibjpeg).fast);
  EXPECT_TRUE(DecodeWhole(baseline, JpegEntropy::kFast).fast);
}

// Corrupt scan data, decoded by both. Every error libjpeg-turbo reports must
// be reported too, with the same message, and where both decode, the pixels
// must be equal. goldminer's decoder is stricter in three cases, where libjpeg
// decodes without a word (worker/image/jpeg_entropy.h says why): an invalid Huffman
// code (libjpeg reports it only on its careful path, always taken with restart
// markers), bytes skipped before a restart marker, and FF FF .. 00.
struct Mutation {
  std::string name;
  std::string bytes;
};

std::vector<Mutation> Mutations(const std::string& jpeg, uint32_t seed) {
  std::vector<Mutation> out;
  std::mt19937 rng(seed);
  const size_t start = ScanStart(jpeg);
  const size_t end = jpeg.size() - 2;  // the EOI marker stays
  auto pos = [&] { return start + rng() % (end - start); };
  for (int i = 0; i < 40; ++i) {
    std::string b = jpeg;
    const size_t p = pos();
    b[p] = static_cast<char>(b[p] ^ (1 + rng() % 255));
    out.push_back({"byte " + std::to_string(p) + " changed", b});
  }
  for (int i = 0; i < 15; ++i) {
    std::string b = jpeg;
    const size_t p = pos();
    b.insert(p, std::string{'\xFF', static_cast<char>(0xC0 + rng() % 0x3F)});
    out.push_back({"marker inserted at " + std::to_string(p), b});
  }
  for (int i = 0; i < 15; ++i) {
    std::string b = jpeg;
    const size_t p = pos();
    b = b.substr(0, p) + "\xFF\xD9";
    out.push_back({"scan cut at " + std::to_string(p), b});
  }
  for (int i = 0; i < 10; ++i) {
    std::string b = jpeg;
    const size_t p = pos();
    b.erase(p, 1 + rng() % 7);
    out.push_back({"bytes removed at " + std::to_string(p), b});
  }
  // Restart markers renumbered or preceded by garbage.
  for (size_t p = jpeg.find("\xFF\xD3", start); p != std::string::npos && out.size() < 85;
       p = jpeg.find("\xFF\xD3", p + 2)) {
    std::string b = jpeg;
    b[p + 1] = '\xD5';
    out.push_back({"RST3 renumbered at " + std::to_string(p), b});
    std::string c = jpeg;
    c.insert(p, "\x12\x34");
    out.push_back({"garbage before RST3 at " + std::to_string(p), c});
  }
  return out;
}

bool IsExtraneousBytes(const std::string& message) {
  return message.find("extraneous bytes before marker") != std::string::npos;
}

bool IsFillBeforeStuffedZero(const std::string& message) {
  return message ==
         "corrupt JPEG: Corrupt JPEG data: fill bytes (FF FF) before a stuffed zero "
         "in the scan data";
}

void ExpectSameOutcome(const Layout& layout, uint32_t seed) {
  const std::string jpeg = Encode(Photo(), layout);
  int errors = 0, decoded = 0, stricter = 0;
  for (const Mutation& m : Mutations(jpeg, seed)) {
    SCOPED_TRACE(m.name);
    Outcome fast = DecodeWhole(m.bytes, JpegEntropy::kFast);
    Outcome lib = DecodeWhole(m.bytes, JpegEntropy::kLibjpeg);
    // The portable build decides exactly as the BMI2 one.
    Outcome portable = DecodeWhole(m.bytes, JpegEntropy::kFastPortable);
    EXPECT_EQ(portable.ok, fast.ok);
    EXPECT_EQ(portable.message, fast.message);
    EXPECT_TRUE(!fast.ok || portable.region.pixels == fast.region.pixels);
    if (fast.ok && lib.ok) {
      ++decoded;
      EXPECT_TRUE(fast.region.pixels == lib.region.pixels);
    } else if (!lib.ok) {
      ++errors;
      ASSERT_FALSE(fast.ok) << lib.message;
      if (!IsExtraneousBytes(lib.message) || !IsExtraneousBytes(fast.message)) {
        EXPECT_EQ(fast.message, lib.message);
      }
    } else {
      ++stricter;
      if (IsFillBeforeStuffedZero(fast.message)) continue;
      if (layout.restart_interval == 0) {
        EXPECT_EQ(fast.message, "corrupt JPEG: Corrupt JPEG data: bad Huffman code");
      } else {
        EXPECT_TRUE(IsExtraneousBytes(fast.message)) << fast.message;
      }
    }
  }
  // The mutations exercise both outcomes.
  EXPECT_GT(errors + stricter, 10);
  EXPECT_GT(decoded, 3);
}

TEST(JpegEntropyTest, GivenFillBytesBeforeAStuffedZeroThenCorrupt) {
  // libjpeg-turbo takes FF FF 00 for a data byte FF, except that its fast path
  // keeps coefficients of a first try that took the second FF for a marker: the
  // pixels then depend on where in the file it happens. It is reported instead.
  const std::string jpeg = Encode(Photo(), kLayouts[0]);
  size_t stuffed = jpeg.find(std::string("\xFF\x00", 2), ScanStart(jpeg));
  ASSERT_NE(stuffed, std::string::npos);
  std::string bad = jpeg;
  bad.insert(stuffed, "\xFF");
  Outcome o = DecodeWhole(bad, JpegEntropy::kFast);
  EXPECT_FALSE(o.ok);
  EXPECT_TRUE(IsFillBeforeStuffedZero(o.message)) << o.message;
  // A single FF 00 is a data byte, as the unchanged image shows.
  EXPECT_TRUE(DecodeWhole(jpeg, JpegEntropy::kFast).ok);
}

TEST(JpegEntropyTest, GivenCorruptScanWithRestartMarkersThenSameOutcomeAsLibjpeg) {
  ExpectSameOutcome(kLayouts[7], 1);  // 420, a restart marker after every MCU
  ExpectSameOutcome(kLayouts[8], 2);  // 444, every 7 MCUs, optimized tables
}

TEST(JpegEntropyTest, GivenCorruptScanWithoutRestartMarkersThenLibjpegsErrorsAreOursToo) {
  ExpectSameOutcome(kLayouts[0], 3);
  ExpectSameOutcome(kLayouts[5], 4);  // optimized tables: long codes
}

}  // namespace
}  // namespace gm
