#include "worker/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

// Vertical() is written for the auto-vectorizer; on x86-64 it is also built for
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

// Output pixels [x_begin, x_end) of one row of the horizontal pass. `in` is
// padded after its last pixel: the SIMD versions read a pixel as 4 bytes (RGB +
// one ignored byte), and write 4 bytes whose 4th is overwritten by the next pixel
// (or lands in dst's spare byte).
void HorizontalRowScalar(const uint8_t* in, const Taps& taps, int x_begin, int x_end,
                         uint8_t* out) {
  for (int xx = x_begin; xx < x_end; ++xx) {
    const int32_t* k = &taps.k[static_cast<size_t>(xx) * taps.ksize];
    const uint8_t* p = in + taps.first[xx] * 3;
    int32_t s0 = kHalf, s1 = kHalf, s2 = kHalf;
    for (int t = 0, n = taps.count[xx]; t < n; ++t) {
      s0 += p[3 * t + 0] * k[t];
      s1 += p[3 * t + 1] * k[t];
      s2 += p[3 * t + 2] * k[t];
    }
    out[3 * xx + 0] = Clip8(s0);
    out[3 * xx + 1] = Clip8(s1);
    out[3 * xx + 2] = Clip8(s2);
  }
}

#if defined(__x86_64__)
// The same with SSE4.1: one 4-lane multiply-add per tap.
__attribute__((target("sse4.1"))) void HorizontalRowSse41(const uint8_t* in, const Taps& taps,
                                                          int x_begin, int x_end, uint8_t* out) {
  const __m128i half = _mm_set1_epi32(kHalf);
  for (int xx = x_begin; xx < x_end; ++xx) {
    const int32_t* k = &taps.k[static_cast<size_t>(xx) * taps.ksize];
    const uint8_t* p = in + taps.first[xx] * 3;
    __m128i acc = half;
    for (int t = 0, n = taps.count[xx]; t < n; ++t) {
      int32_t bytes;
      std::memcpy(&bytes, p + 3 * t, 4);
      __m128i px = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(bytes));
      acc = _mm_add_epi32(acc, _mm_mullo_epi32(px, _mm_set1_epi32(k[t])));
    }
    acc = _mm_srai_epi32(acc, kPrecisionBits);
    __m128i packed = _mm_packus_epi16(_mm_packus_epi32(acc, acc), acc);
    int32_t v = _mm_cvtsi128_si32(packed);
    std::memcpy(out + 3 * xx, &v, 4);
  }
}

// With AVX2: two output pixels per step, 8 lanes; taps past a pixel's count have
// zero weight (the table is zero-padded to ksize, and `in` is padded to match).
__attribute__((target("avx2"))) void HorizontalRowAvx2(const uint8_t* in, const Taps& taps,
                                                       int x_begin, int x_end, uint8_t* out) {
  const __m256i half = _mm256_set1_epi32(kHalf);
  int xx = x_begin;
  for (; xx + 1 < x_end; xx += 2) {
    const int32_t* ka = &taps.k[static_cast<size_t>(xx) * taps.ksize];
    const int32_t* kb = ka + taps.ksize;
    const uint8_t* pa = in + taps.first[xx] * 3;
    const uint8_t* pb = in + taps.first[xx + 1] * 3;
    __m256i acc = half;
    for (int t = 0, n = std::max(taps.count[xx], taps.count[xx + 1]); t < n; ++t) {
      int32_t a, b;
      std::memcpy(&a, pa + 3 * t, 4);
      std::memcpy(&b, pb + 3 * t, 4);
      __m256i px =
          _mm256_cvtepu8_epi32(_mm_unpacklo_epi32(_mm_cvtsi32_si128(a), _mm_cvtsi32_si128(b)));
      __m256i k = _mm256_setr_m128i(_mm_set1_epi32(ka[t]), _mm_set1_epi32(kb[t]));
      acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(px, k));
    }
    acc = _mm256_srai_epi32(acc, kPrecisionBits);
    __m128i lo = _mm256_castsi256_si128(acc), hi = _mm256_extracti128_si256(acc, 1);
    __m128i packed = _mm_packus_epi16(_mm_packus_epi32(lo, hi), lo);
    int32_t va = _mm_cvtsi128_si32(packed), vb = _mm_extract_epi32(packed, 1);
    std::memcpy(out + 3 * xx, &va, 4);
    std::memcpy(out + 3 * xx + 3, &vb, 4);
  }
  HorizontalRowSse41(in, taps, xx, x_end, out);
}
#endif

// Resamples rows [row0, row0 + rows) of `src` horizontally into `dst` (packed,
// with one spare byte at the end).
void Horizontal(const RgbView& src, int row0, int rows, const Taps& taps, int out_w, uint8_t* dst) {
  auto* row_fn = &HorizontalRowScalar;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) {
    row_fn = &HorizontalRowAvx2;
  } else if (__builtin_cpu_supports("sse4.1")) {
    row_fn = &HorizontalRowSse41;
  }
#endif
  const size_t row_bytes = static_cast<size_t>(src.width) * 3;
  // Padding for the 4-byte reads and the AVX2 version's zero-weight taps.
  std::vector<uint8_t> row(row_bytes + (static_cast<size_t>(taps.ksize) + 1) * 3 + 1, 0);
  for (int r = 0; r < rows; ++r) {
    std::memcpy(row.data(), src.data + (row0 + r) * src.stride, row_bytes);
    row_fn(row.data(), taps, 0, out_w, dst + static_cast<size_t>(r) * out_w * 3);
  }
}

// Resamples `src` (whose rows are the taps' rows, starting at row `row0`)
// vertically into `dst` (packed, out_h rows of src.width pixels). Works in
// blocks of a fixed size so the compiler vectorizes without a scalar epilogue.
GM_KERNEL void Vertical(const RgbView& src, int row0, const Taps& taps, int out_h, uint8_t* dst) {
  constexpr size_t kBlock = 32;
  const size_t n = static_cast<size_t>(src.width) * 3;
  const size_t blocks = n / kBlock;
  for (int yy = 0; yy < out_h; ++yy) {
    const int32_t* k = &taps.k[static_cast<size_t>(yy) * taps.ksize];
    const int count = taps.count[yy];
    const uint8_t* in0 = src.data + (taps.first[yy] - row0) * src.stride;
    uint8_t* out = dst + yy * n;
    for (size_t b = 0; b < blocks; ++b) {
      int32_t acc[kBlock];
      for (size_t i = 0; i < kBlock; ++i) acc[i] = kHalf;
      for (int t = 0; t < count; ++t) {
        const uint8_t* in = in0 + t * src.stride + b * kBlock;
        const int32_t kt = k[t];
        for (size_t i = 0; i < kBlock; ++i) acc[i] += in[i] * kt;
      }
      for (size_t i = 0; i < kBlock; ++i)
        out[b * kBlock + i] = static_cast<uint8_t>(acc[i] >> kPrecisionBits);
    }
    for (size_t i = blocks * kBlock; i < n; ++i) {
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

namespace {

// Blends every byte of `px` with `other` (per pixel when other_per_pixel, else
// other[0]) as torchvision's _blend.
void Blend(uint8_t* px, size_t n, float f, const float* other, bool other_per_pixel) {
  for (size_t i = 0; i < n; ++i) {
    const float o = other_per_pixel ? other[i / 3] : other[0];
    px[i] = static_cast<uint8_t>(std::clamp(f * px[i] + (1.0f - f) * o, 0.0f, 255.0f));
  }
}

void Grayscale(const uint8_t* px, size_t pixels, float* gray) {
  for (size_t i = 0; i < pixels; ++i, px += 3) {
    gray[i] = std::floor(0.299f * px[0] + 0.587f * px[1] + 0.114f * px[2]);
  }
}

template <typename In>
void ScaleChannelsImpl(const In* in, size_t pixels, bool interleaved, const float scale[3],
                       const float offset[3], float* out) {
  if (interleaved) {
    for (size_t i = 0; i < pixels; ++i) {
      for (int c = 0; c < 3; ++c) {
        out[3 * i + c] = static_cast<float>(in[3 * i + c]) * scale[c] + offset[c];
      }
    }
    return;
  }
  for (size_t c = 0; c < 3; ++c) {
    for (size_t i = c * pixels; i < (c + 1) * pixels; ++i) {
      out[i] = static_cast<float>(in[i]) * scale[c] + offset[c];
    }
  }
}

}  // namespace

void JitterColor(uint8_t* px, size_t pixels, float brightness, float contrast, float saturation) {
  const size_t n = pixels * 3;
  const float black = 0.0f;
  if (brightness != 1.0f) Blend(px, n, brightness, &black, false);
  if (contrast == 1.0f && saturation == 1.0f) return;
  std::vector<float> gray(pixels);
  if (contrast != 1.0f) {
    Grayscale(px, pixels, gray.data());
    double sum = 0;
    for (float g : gray) sum += g;
    const float mean = static_cast<float>(sum / static_cast<double>(pixels));
    Blend(px, n, contrast, &mean, false);
  }
  if (saturation != 1.0f) {
    Grayscale(px, pixels, gray.data());
    Blend(px, n, saturation, gray.data(), true);
  }
}

void ScaleChannels(const uint8_t* in, size_t pixels, bool interleaved, const float scale[3],
                   const float offset[3], float* out) {
  ScaleChannelsImpl(in, pixels, interleaved, scale, offset, out);
}

void ScaleChannels(const float* in, size_t pixels, bool interleaved, const float scale[3],
                   const float offset[3], float* out) {
  ScaleChannelsImpl(in, pixels, interleaved, scale, offset, out);
}

namespace {

// One row: pixels [x_begin, w) of the output, scalar.
void NormalizeRowScalar(const uint8_t* in, int w, int x_begin, bool mirror, const float scale[3],
                        const float offset[3], float* r, float* g, float* b) {
  for (int x = x_begin; x < w; ++x) {
    const uint8_t* p = in + 3 * static_cast<ptrdiff_t>(mirror ? w - 1 - x : x);
    r[x] = static_cast<float>(p[0]) * scale[0] + offset[0];
    g[x] = static_cast<float>(p[1]) * scale[1] + offset[1];
    b[x] = static_cast<float>(p[2]) * scale[2] + offset[2];
  }
}

#if defined(__x86_64__)
// Eight pixels at a time: 24 bytes deinterleaved with byte shuffles, widened to
// 8 floats per channel, multiplied then added (AVX2 alone has no FMA, so the
// compiler cannot contract the two), lanes reversed for a mirrored row. Returns
// the first pixel left for the scalar loop.
// One channel of 8 pixels: the bytes the two shuffles pick, as scaled floats.
__attribute__((target("avx2"), always_inline)) inline __m256 Channel8(
    __m128i lo, __m128i hi, __m128i pick_lo, __m128i pick_hi, __m256 scale, __m256 offset,
    bool mirror, __m256i reverse) {
  const __m128i bytes = _mm_or_si128(_mm_shuffle_epi8(lo, pick_lo), _mm_shuffle_epi8(hi, pick_hi));
  const __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)), scale),
                                 offset);
  return mirror ? _mm256_permutevar8x32_ps(v, reverse) : v;
}

__attribute__((target("avx2"))) int NormalizeRowAvx2(const uint8_t* in, int w, bool mirror,
                                                     const float scale[3], const float offset[3],
                                                     float* r, float* g, float* b) {
  const __m128i lo_r = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i hi_r = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i lo_g = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i hi_g = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i lo_b = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i hi_b = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i reverse = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
  const __m256 s0 = _mm256_set1_ps(scale[0]), s1 = _mm256_set1_ps(scale[1]),
               s2 = _mm256_set1_ps(scale[2]);
  const __m256 o0 = _mm256_set1_ps(offset[0]), o1 = _mm256_set1_ps(offset[1]),
               o2 = _mm256_set1_ps(offset[2]);
  int x = 0;
  for (; x + 8 <= w; x += 8) {
    // The eight source pixels, in ascending order: x.. or, mirrored, w-8-x...
    const uint8_t* p = in + 3 * static_cast<ptrdiff_t>(mirror ? w - 8 - x : x);
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 16));
    _mm256_storeu_ps(r + x, Channel8(lo, hi, lo_r, hi_r, s0, o0, mirror, reverse));
    _mm256_storeu_ps(g + x, Channel8(lo, hi, lo_g, hi_g, s1, o1, mirror, reverse));
    _mm256_storeu_ps(b + x, Channel8(lo, hi, lo_b, hi_b, s2, o2, mirror, reverse));
  }
  return x;
}
#endif

}  // namespace

void NormalizeHwcToChw(const uint8_t* in, int h, int w, bool mirror, const float scale[3],
                       const float offset[3], float* out) {
  const size_t plane = static_cast<size_t>(h) * static_cast<size_t>(w);
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2");
#endif
  for (int y = 0; y < h; ++y) {
    const uint8_t* row = in + static_cast<size_t>(y) * static_cast<size_t>(w) * 3;
    float* r = out + static_cast<size_t>(y) * static_cast<size_t>(w);
    float* g = r + plane;
    float* b = g + plane;
    int x = 0;
#if defined(__x86_64__)
    if (avx2) x = NormalizeRowAvx2(row, w, mirror, scale, offset, r, g, b);
#endif
    NormalizeRowScalar(row, w, x, mirror, scale, offset, r, g, b);
  }
}

namespace {

#if defined(__x86_64__)
__attribute__((target("avx2"))) void CopyStreamingAvx2(uint8_t* dst, const uint8_t* src,
                                                       size_t bytes) {
  // Up to the first 32-byte boundary of dst with memcpy, then aligned streaming
  // stores, then the tail.
  const size_t head = std::min(bytes, (32 - reinterpret_cast<uintptr_t>(dst) % 32) % 32);
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 128 <= bytes; i += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 64));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 96), d);
  }
  _mm_sfence();
  std::memcpy(dst + i, src + i, bytes - i);
}
#endif

}  // namespace

void CopyStreaming(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  if (bytes >= 4096 && __builtin_cpu_supports("avx2")) {
    CopyStreamingAvx2(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), bytes);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

}  // namespace gm
