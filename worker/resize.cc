#include "worker/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace gm {
namespace {

// Pillow's fixed point for 8-bit images: 32 - 8 bits of value - 2 bits of headroom.
constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);

inline uint8_t Clip8(int32_t v) {
  if (v >= (1 << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kPrecisionBits);
}

double Triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Filter taps of one axis: output i reads `count[i]` inputs from `first[i]`
// (absolute index in the view) with weights k[i * ksize ...].
struct Taps {
  int ksize = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> k;
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc on the axis segment
// [lo, lo + in_size), with the box [in0, in1) given relative to lo.
Taps Precompute(int lo, int in_size, float in0, float in1, int out_size) {
  double scale = static_cast<double>(in1 - in0) / out_size;
  double filterscale = std::max(scale, 1.0);
  double support = 1.0 * filterscale;
  Taps taps;
  taps.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  taps.first.resize(out_size);
  taps.count.resize(out_size);
  taps.k.assign(static_cast<size_t>(out_size) * taps.ksize, 0);
  std::vector<double> w(taps.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    double center = in0 + (xx + 0.5) * scale;
    double ss = 1.0 / filterscale;
    int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
    xmax = std::clamp(xmax, 0, taps.ksize);
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[x] = Triangle((x + xmin - center + 0.5) * ss);
      ww += w[x];
    }
    int32_t* k = &taps.k[static_cast<size_t>(xx) * taps.ksize];
    for (int x = 0; x < xmax; ++x) {
      double v = ww != 0.0 ? w[x] / ww : w[x];
      k[x] = static_cast<int32_t>(v < 0 ? -0.5 + v * (1 << kPrecisionBits)
                                        : 0.5 + v * (1 << kPrecisionBits));
    }
    taps.first[xx] = lo + xmin;
    taps.count[xx] = xmax;
  }
  return taps;
}

// The kernels use GCC/Clang vector extensions; on x86-64 they are also built for
// AVX2 and picked at load time (the baseline, SSE2, has no 32-bit vector multiply).
#if defined(__has_feature)
#define GM_HAS_FEATURE(x) __has_feature(x)
#else
#define GM_HAS_FEATURE(x) 0
#endif
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !GM_HAS_FEATURE(address_sanitizer)
#define GM_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define GM_KERNEL
#endif

using I32x4 = int32_t __attribute__((vector_size(16)));
using U8x4 = uint8_t __attribute__((vector_size(4)));
using I32x16 = int32_t __attribute__((vector_size(64)));
using U8x16 = uint8_t __attribute__((vector_size(16)));

// Resamples rows [row0, row0 + rows) of `src` horizontally into `dst` (packed,
// with one spare byte at the end). A pixel is handled as 4 lanes (RGB + one
// ignored byte), so each row is first copied into a buffer with a spare byte.
GM_KERNEL void Horizontal(const RgbView& src, int row0, int rows, const Taps& taps, int out_w,
                          uint8_t* dst) {
  std::vector<uint8_t> row(static_cast<size_t>(src.width) * 3 + 1, 0);
  const I32x4 half = {kHalf, kHalf, kHalf, kHalf};
  for (int r = 0; r < rows; ++r) {
    std::memcpy(row.data(), src.data + (row0 + r) * src.stride, row.size() - 1);
    uint8_t* out = dst + static_cast<size_t>(r) * out_w * 3;
    for (int xx = 0; xx < out_w; ++xx) {
      const int32_t* k = &taps.k[static_cast<size_t>(xx) * taps.ksize];
      const uint8_t* p = row.data() + taps.first[xx] * 3;
      I32x4 acc = half;
      for (int t = 0, n = taps.count[xx]; t < n; ++t) {
        U8x4 px;
        std::memcpy(&px, p + 3 * t, 4);
        acc += __builtin_convertvector(px, I32x4) * k[t];
      }
      // Triangle weights are >= 0 and sum to 1, so acc >> bits is within [0, 255].
      acc >>= kPrecisionBits;
      U8x4 v = __builtin_convertvector(acc, U8x4);
      std::memcpy(out + 3 * xx, &v, 4);  // the 4th byte is overwritten next
    }
  }
}

// Resamples `src` (whose rows are the taps' rows, starting at row `row0`)
// vertically into `dst` (packed, out_h rows of src.width pixels).
GM_KERNEL void Vertical(const RgbView& src, int row0, const Taps& taps, int out_h, uint8_t* dst) {
  const size_t n = static_cast<size_t>(src.width) * 3;
  const size_t blocks = n / 16;
  for (int yy = 0; yy < out_h; ++yy) {
    const int32_t* k = &taps.k[static_cast<size_t>(yy) * taps.ksize];
    const int count = taps.count[yy];
    const uint8_t* in0 = src.data + (taps.first[yy] - row0) * src.stride;
    uint8_t* out = dst + yy * n;
    for (size_t b = 0; b < blocks; ++b) {
      I32x16 acc = {};
      acc += kHalf;
      for (int t = 0; t < count; ++t) {
        U8x16 px;
        std::memcpy(&px, in0 + t * src.stride + b * 16, 16);
        acc += __builtin_convertvector(px, I32x16) * k[t];
      }
      acc >>= kPrecisionBits;
      U8x16 v = __builtin_convertvector(acc, U8x16);
      std::memcpy(out + b * 16, &v, 16);
    }
    for (size_t i = blocks * 16; i < n; ++i) {
      int32_t s = kHalf;
      for (int t = 0; t < count; ++t) s += in0[t * src.stride + static_cast<ptrdiff_t>(i)] * k[t];
      out[i] = Clip8(s);
    }
  }
}

}  // namespace

void ResizeBilinear(const RgbView& src, const SourceBox& box, int out_w, int out_h, uint8_t* dst) {
  const int lx = std::max(0, static_cast<int>(std::floor(box.x0)));
  const int ly = std::max(0, static_cast<int>(std::floor(box.y0)));
  const int nx = std::min(src.width, static_cast<int>(std::ceil(box.x1))) - lx;
  const int ny = std::min(src.height, static_cast<int>(std::ceil(box.y1))) - ly;
  const float bx0 = static_cast<float>(box.x0 - lx), bx1 = static_cast<float>(box.x1 - lx);
  const float by0 = static_cast<float>(box.y0 - ly), by1 = static_cast<float>(box.y1 - ly);
  // Pillow skips a pass whose coefficients would be the identity.
  const bool need_h = out_w != nx || bx0 != 0 || bx1 != static_cast<float>(out_w);
  const bool need_v = out_h != ny || by0 != 0 || by1 != static_cast<float>(out_h);

  Taps vt;
  int row0 = ly, rows = ny;
  if (need_v) {
    vt = Precompute(ly, ny, by0, by1, out_h);
    row0 = vt.first[0];
    rows = vt.first[out_h - 1] + vt.count[out_h - 1] - row0;
  }
  std::vector<uint8_t> tmp;
  RgbView mid{src.data + row0 * src.stride + lx * 3, nx, rows, src.stride};
  if (need_h) {
    Taps ht = Precompute(0, nx, bx0, bx1, out_w);
    tmp.resize(static_cast<size_t>(out_w) * rows * 3 + 1);
    RgbView shifted{src.data + lx * 3, nx, src.height, src.stride};
    Horizontal(shifted, row0, rows, ht, out_w, tmp.data());
    mid = RgbView{tmp.data(), out_w, rows, static_cast<ptrdiff_t>(out_w) * 3};
  }
  if (need_v) {
    // `mid` starts at row `row0` of the source.
    Vertical(mid, row0, vt, out_h, dst);
  } else {
    CropRgb(mid, 0, 0, mid.width, out_h, dst);
  }
}

void CropRgb(const RgbView& src, int x, int y, int w, int h, uint8_t* dst) {
  const size_t row_bytes = static_cast<size_t>(w) * 3;
  for (int r = 0; r < h; ++r) {
    std::memcpy(dst + r * row_bytes, src.data + (y + r) * src.stride + x * 3, row_bytes);
  }
}

void FlipHorizontal(uint8_t* data, int width, int height, int pixel_bytes) {
  const size_t row_bytes = static_cast<size_t>(width) * pixel_bytes;
  for (int r = 0; r < height; ++r) {
    uint8_t* row = data + r * row_bytes;
    for (int a = 0, b = width - 1; a < b; ++a, --b) {
      std::swap_ranges(row + a * pixel_bytes, row + (a + 1) * pixel_bytes, row + b * pixel_bytes);
    }
  }
}

}  // namespace gm
