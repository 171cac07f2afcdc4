// JPEG decoding to 8-bit RGB with libjpeg-turbo: full images, and regions of an
// image at a reduced DCT scale (the fast path of fused decode + crop). The
// Huffman data of baseline images is decoded by goldminer's own decoder inside
// libjpeg (worker/image/jpeg_entropy.h): the same pixels, faster.
//
// Every libjpeg error AND warning (corrupt data, premature end of data) becomes a
// Status::Corrupt with a readable reason; nothing throws or aborts. Grayscale
// images are expanded to RGB and CMYK/YCCK images converted to RGB. Images over
// kMaxJpegPixels or with more than kMaxJpegScans progressive scans are refused, so
// hostile input cannot exhaust memory or time.
//
// A JpegDecoder is single-use and not thread-safe; use one per image. The free
// functions are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/sample.h"
#include "core/status.h"

namespace gm {

inline constexpr int64_t kMaxJpegPixels = int64_t{1} << 28;
inline constexpr int kMaxJpegScans = 500;
// Bytes allowed after the end-of-image marker (padding, vendor trailers).
inline constexpr size_t kMaxJpegTrailer = 4096;

// Rejects data that is plainly not a JPEG before libjpeg sees it, with a reason
// such as "zero bytes (empty file)", "not a JPEG (PNG signature)" or "truncated
// JPEG (no end-of-image marker)" (FF D9 must be within the last kMaxJpegTrailer
// bytes).
Status CheckJpegSignature(std::string_view data);

// Pixels decoded from a region: rows of `width` RGB pixels, packed.
struct DecodedRegion {
  Bytes pixels;
  int x = 0, y = 0;                         // top-left of the region in the scaled image
  int width = 0, height = 0;                // region size in pixels
  int scaled_width = 0, scaled_height = 0;  // size of the whole scaled image
};

class JpegDecoder {
 public:
  // `data` must outlive the decoder.
  explicit JpegDecoder(std::string_view data);
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Reads the markers up to the first scan. Corrupt on bad data.
  Status ReadHeader();
  // Image size in pixels; valid after ReadHeader() succeeded.
  int width() const { return width_; }
  int height() const { return height_; }

  // Decodes the box (x, y, w, h), given in pixels of the image scaled by
  // scale_num / 8 (1..8), clamped to the scaled image. The returned region may
  // start left of x (libjpeg aligns the left edge to an iMCU column) and covers
  // at least the requested box. Call at most once, after ReadHeader().
  Status DecodeRegion(int scale_num, int x, int y, int w, int h, DecodedRegion& out);

  // Whether DecodeRegion() decoded the scan with goldminer's Huffman decoder
  // (worker/image/jpeg_entropy.h) rather than libjpeg's.
  bool fast_entropy() const;

  // Size of the image scaled by scale_num / 8, as libjpeg rounds it (up).
  static int ScaledSize(int size, int scale_num) { return (size * scale_num + 7) / 8; }

  struct State;  // libjpeg state; defined in jpeg.cc

 private:
  std::unique_ptr<State> state_;
  std::string_view data_;
  int width_ = 0;
  int height_ = 0;
};

// Decodes a whole JPEG into `out` as uint8 [H, W, 3]. Same output as TurboJPEG's
// tjDecompress2 to TJPF_RGB with default flags (islow IDCT, fancy upsampling).
Status DecodeJpeg(std::string_view data, Tensor& out);

}  // namespace gm
