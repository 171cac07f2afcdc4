#include "worker/image/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/sample.h"

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

// Coefficients for the SIMD kernels: for each pair of output pixels (2i, 2i + 1)
// and each pair of taps (2j, 2j + 1), 16 int16 lanes laid out as the pixel lanes
// the kernels build: [ka(2j) ka(2j+1)] x 3 channels, 0, 0 for pixel 2i, then the
// same for pixel 2i + 1; pairs 2g and 2g + 1 are side by side (32 lanes), so the
// AVX-512 kernel loads four pixels' at once. A 22-bit coefficient k is split into
// k >> 11 (`hi`) and k & 2047 (`lo`); sum(p * k) == (sum(p * hi) << 11) +
// sum(p * lo) exactly, so two 16-bit multiply-adds give Pillow's 32-bit sums.
struct PairTaps {
  int pairs = 0;                // tap pairs per pixel pair
  std::vector<int> used;        // tap pairs pixel pair i needs
  std::vector<int16_t> hi, lo;  // [((i / 2) * pairs + j) * 32 + (i % 2) * 16 + lane]
  // For each group of four pixels (4g..4g+3) whose taps start within 19 pixels
  // of the first's: the byte permutation that builds the four pixels' lanes out
  // of 64 bytes read at the first pixel's taps (AVX-512 VBMI). Empty `gather`: no
  // such permutation (the kernel reads each pixel's bytes on its own).
  std::vector<uint8_t> gather;  // per group
  std::vector<uint8_t> perm;    // [g * 64 + byte]

  const int16_t* hi_at(int i) const { return &hi[Offset(i)]; }
  const int16_t* lo_at(int i) const { return &lo[Offset(i)]; }
  size_t Offset(int i) const { return static_cast<size_t>(i / 2) * pairs * 32 + (i % 2) * 16; }
};

// Returns false when a coefficient does not fit the split (negative or above
// 2^22: never for the triangle filter, whose weights are in [0, 1]). The VBMI
// permutations (gather, perm) only `with_gather`.
bool MakePairTaps(const Taps& taps, int out_w, bool with_gather, PairTaps* pt) {
  pt->pairs = (taps.ksize + 1) / 2;
  const int npix = out_w / 2;
  const int groups = (npix + 1) / 2;
  pt->used.assign(npix, 0);
  pt->hi.assign(static_cast<size_t>(groups) * pt->pairs * 32, 0);
  pt->lo.assign(pt->hi.size(), 0);
  for (int i = 0; i < npix; ++i) {
    for (int half = 0; half < 2; ++half) {
      const int xx = 2 * i + half;
      const int32_t* k = &taps.k[static_cast<size_t>(xx) * taps.ksize];
      pt->used[i] = std::max(pt->used[i], (taps.count[xx] + 1) / 2);
      for (int t = 0; t < taps.count[xx]; ++t) {
        if (k[t] < 0 || k[t] > (1 << kPrecisionBits)) return false;
        const size_t at = pt->Offset(i) + static_cast<size_t>(t / 2) * 32 + half * 8 + t % 2;
        for (int c = 0; c < 3; ++c) {
          pt->hi[at + 2 * c] = static_cast<int16_t>(k[t] >> 11);
          pt->lo[at + 2 * c] = static_cast<int16_t>(k[t] & 2047);
        }
      }
    }
  }
  if (!with_gather) return true;
  // Lane byte b of pixel q reads byte kPick[b] of its pixel's taps: R, G and B
  // of taps 2j and 2j + 1 into the low bytes of int16 lanes 0-5.
  static constexpr int kPick[6] = {0, 3, 1, 4, 2, 5};
  pt->gather.assign(static_cast<size_t>(out_w / 4), 0);
  pt->perm.assign(pt->gather.size() * 64, 0);
  for (size_t g = 0; g < pt->gather.size(); ++g) {
    const int base = taps.first[4 * g];
    if (taps.first[4 * g + 3] - base > 19) continue;  // 3 * 19 + 5 < 64
    pt->gather[g] = 1;
    for (int q = 0; q < 4; ++q) {
      const int from = (taps.first[4 * g + q] - base) * 3;
      for (int b = 0; b < 6; ++b)
        pt->perm[g * 64 + q * 16 + 2 * b] = static_cast<uint8_t>(from + kPick[b]);
    }
  }
  return true;
}

// With AVX2: two output pixels per step, one per 128-bit lane; each 16-bit
// multiply-add takes two taps of all three channels ([R R G G B B 0 0] times the
// taps' coefficients). Taps past a pixel's count have zero weight (the tables are
// zero-padded), and `in` is padded for the 16-byte reads.
__attribute__((target("avx2"))) void HorizontalRowAvx2(const uint8_t* in, const Taps& taps,
                                                       const PairTaps& pt, int x_begin, int out_w,
                                                       uint8_t* out) {
  const __m256i pick = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1, 0,
                                        -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
  const __m256i half = _mm256_set1_epi32(kHalf);
  int xx = x_begin;  // even
  for (; xx + 1 < out_w; xx += 2) {
    const int i = xx / 2;
    const uint8_t* pa = in + taps.first[xx] * 3;
    const uint8_t* pb = in + taps.first[xx + 1] * 3;
    const int16_t* kh = pt.hi_at(i);
    const int16_t* kl = pt.lo_at(i);
    __m256i sh = _mm256_setzero_si256(), sl = _mm256_setzero_si256();
    for (int j = 0, n = pt.used[i]; j < n; ++j) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pa + 6 * j));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + 6 * j));
      const __m256i px =
          _mm256_shuffle_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1), pick);
      sh = _mm256_add_epi32(
          sh,
          _mm256_madd_epi16(px, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kh + 32 * j))));
      sl = _mm256_add_epi32(
          sl,
          _mm256_madd_epi16(px, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kl + 32 * j))));
    }
    __m256i acc = _mm256_add_epi32(_mm256_add_epi32(half, _mm256_slli_epi32(sh, 11)), sl);
    acc = _mm256_srai_epi32(acc, kPrecisionBits);
    __m128i lo = _mm256_castsi256_si128(acc), hi = _mm256_extracti128_si256(acc, 1);
    __m128i packed = _mm_packus_epi16(_mm_packus_epi32(lo, hi), lo);
    int32_t va = _mm_cvtsi128_si32(packed), vb = _mm_extract_epi32(packed, 1);
    std::memcpy(out + 3 * xx, &va, 4);
    std::memcpy(out + 3 * xx + 3, &vb, 4);
  }
  HorizontalRowSse41(in, taps, xx, out_w, out);
}

// With AVX-512BW: the same with four output pixels per step, one per 128-bit
// lane (pixel pairs 2g and 2g + 1), and a masked 12-byte store. With VBMI too,
// the four pixels' bytes come from one 64-byte read and one byte permutation
// (PairTaps::perm) instead of four reads and a shuffle, where the group's taps
// are close enough.
//
// GCC 12's _mm512_inserti32x4 passes an undefined vector to its builtin and
// then warns about it; nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// Adds tap pair j of the group's coefficients times its pixel lanes `px`.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void Accumulate4(
    __m512i px, const int16_t* kh, const int16_t* kl, int j, __m512i& sh, __m512i& sl) {
  sh = _mm512_add_epi32(sh, _mm512_madd_epi16(px, _mm512_loadu_si512(kh + 32 * j)));
  sl = _mm512_add_epi32(sl, _mm512_madd_epi16(px, _mm512_loadu_si512(kl + 32 * j)));
}

// Rounds, clips and stores the group's four pixels.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void Finish4(
    __m512i sh, __m512i sl, uint8_t* out) {
  __m512i acc =
      _mm512_add_epi32(_mm512_add_epi32(_mm512_set1_epi32(kHalf), _mm512_slli_epi32(sh, 11)), sl);
  acc = _mm512_srai_epi32(acc, kPrecisionBits);
  // [R G B 0] x 4 to 12 packed bytes. Sums are never negative (coefficients
  // are not), so unsigned saturation is Clip8.
  const __m128i squeeze = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  _mm_mask_storeu_epi8(out, 0x0FFF, _mm_shuffle_epi8(_mm512_cvtusepi32_epi8(acc), squeeze));
}

// The group of output pixels xx..xx+3, each pixel's bytes read on their own.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void Group4(
    const uint8_t* in, const Taps& taps, const PairTaps& pt, int xx, uint8_t* out) {
  alignas(64) static constexpr int8_t kPick[64] = {
      0,  -1, 3,  -1, 1, -1, 4,  -1, 2,  -1, 5, -1, -1, -1, -1, -1, 0,  -1, 3,  -1, 1, -1,
      4,  -1, 2,  -1, 5, -1, -1, -1, -1, -1, 0, -1, 3,  -1, 1,  -1, 4,  -1, 2,  -1, 5, -1,
      -1, -1, -1, -1, 0, -1, 3,  -1, 1,  -1, 4, -1, 2,  -1, 5,  -1, -1, -1, -1, -1};
  const __m512i pick = _mm512_load_si512(kPick);
  const uint8_t* p[4];
  for (int q = 0; q < 4; ++q) p[q] = in + taps.first[xx + q] * 3;
  const int i = xx / 2;
  __m512i sh = _mm512_setzero_si512(), sl = _mm512_setzero_si512();
  for (int j = 0, n = std::max(pt.used[i], pt.used[i + 1]); j < n; ++j) {
    __m512i px =
        _mm512_zextsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[0] + 6 * j)));
    px = _mm512_inserti32x4(px, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[1] + 6 * j)), 1);
    px = _mm512_inserti32x4(px, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[2] + 6 * j)), 2);
    px = _mm512_inserti32x4(px, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[3] + 6 * j)), 3);
    Accumulate4(_mm512_shuffle_epi8(px, pick), pt.hi_at(i), pt.lo_at(i), j, sh, sl);
  }
  Finish4(sh, sl, out + 3 * xx);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void HorizontalRowAvx512(
    const uint8_t* in, const Taps& taps, const PairTaps& pt, int out_w, uint8_t* out) {
  int xx = 0;
  for (; xx + 3 < out_w; xx += 4) Group4(in, taps, pt, xx, out);
  // The last pixels: the AVX2 kernel on the remaining pair, then a single pixel.
  if (xx < out_w) HorizontalRowAvx2(in, taps, pt, xx, out_w, out);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) void HorizontalRowAvx512Vbmi(
    const uint8_t* in, const Taps& taps, const PairTaps& pt, int out_w, uint8_t* out) {
  // Zero the high byte of each int16 lane and lanes 6-7 of each pixel.
  constexpr __mmask64 kLowBytes = 0x0555055505550555ULL;
  int xx = 0;
  for (; xx + 3 < out_w; xx += 4) {
    const size_t g = static_cast<size_t>(xx / 4);
    if (!pt.gather[g]) {
      Group4(in, taps, pt, xx, out);
      continue;
    }
    const __m512i perm = _mm512_loadu_si512(&pt.perm[g * 64]);
    const uint8_t* p0 = in + taps.first[xx] * 3;
    const int i = xx / 2;
    __m512i sh = _mm512_setzero_si512(), sl = _mm512_setzero_si512();
    for (int j = 0, n = std::max(pt.used[i], pt.used[i + 1]); j < n; ++j) {
      const __m512i px =
          _mm512_maskz_permutexvar_epi8(kLowBytes, perm, _mm512_loadu_si512(p0 + 6 * j));
      Accumulate4(px, pt.hi_at(i), pt.lo_at(i), j, sh, sl);
    }
    Finish4(sh, sl, out + 3 * xx);
  }
  if (xx < out_w) HorizontalRowAvx2(in, taps, pt, xx, out_w, out);
}
#pragma GCC diagnostic pop
#endif

// Resamples rows [row0, row0 + rows) of `src` horizontally into `dst` (packed,
// with one spare byte at the end), with the best kernel `isa` allows.
void Horizontal(const RgbView& src, int row0, int rows, const Taps& taps, int out_w, ResizeIsa isa,
                uint8_t* dst) {
  const size_t row_bytes = static_cast<size_t>(src.width) * 3;
  // The SIMD kernels read up to `pad` bytes past a row's last pixel (64 bytes
  // from a pixel, zero-weight taps up to ksize). A row followed by that much of
  // the view is read in place; the last ones are copied into a padded buffer.
  const size_t pad = (static_cast<size_t>(taps.ksize) + 2) * 3 + 64;
  const uint8_t* view_end = src.data + (src.height - 1) * src.stride + row_bytes;
  std::vector<uint8_t> padded(row_bytes + pad, 0);
  const auto each_row = [&](auto&& row_fn) {
    for (int r = 0; r < rows; ++r) {
      const uint8_t* in = src.data + (row0 + r) * src.stride;
      if (in + row_bytes + pad > view_end) {
        std::memcpy(padded.data(), in, row_bytes);
        in = padded.data();
      }
      row_fn(in, dst + static_cast<size_t>(r) * out_w * 3);
    }
  };
#if defined(__x86_64__)
  PairTaps pt;
  const bool simd = isa != ResizeIsa::kScalar;
  const bool avx512 = (isa == ResizeIsa::kBest || isa == ResizeIsa::kAvx512) &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  const bool vbmi = avx512 && isa == ResizeIsa::kBest && __builtin_cpu_supports("avx512vbmi");
  if (simd && __builtin_cpu_supports("avx2") && MakePairTaps(taps, out_w, vbmi, &pt)) {
    if (vbmi) {
      each_row([&](const uint8_t* in, uint8_t* out) {
        HorizontalRowAvx512Vbmi(in, taps, pt, out_w, out);
      });
    } else if (avx512) {
      each_row(
          [&](const uint8_t* in, uint8_t* out) { HorizontalRowAvx512(in, taps, pt, out_w, out); });
    } else {
      each_row(
          [&](const uint8_t* in, uint8_t* out) { HorizontalRowAvx2(in, taps, pt, 0, out_w, out); });
    }
    return;
  }
  if (simd && __builtin_cpu_supports("sse4.1")) {
    each_row([&](const uint8_t* in, uint8_t* out) { HorizontalRowSse41(in, taps, 0, out_w, out); });
    return;
  }
#else
  (void)isa;
#endif
  each_row([&](const uint8_t* in, uint8_t* out) { HorizontalRowScalar(in, taps, 0, out_w, out); });
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

#if defined(__x86_64__)
// (GCC 12's AVX-512 shift intrinsics pass an undefined vector to their builtins
// and then warn about it; as for the horizontal kernels.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// With AVX-512BW: 32 bytes of a row at a time in 16-bit multiply-adds. The rows
// of taps 2j and 2j + 1 are interleaved (int16 pairs) and multiplied by their two
// coefficients, split as in the horizontal pass (PairTaps), so the sums are
// Pillow's exactly. False, having written nothing, when a coefficient does not
// fit the split.
__attribute__((target("avx512f,avx512bw,avx512vl"))) bool VerticalAvx512(const RgbView& src,
                                                                         int row0, const Taps& taps,
                                                                         int out_h, uint8_t* dst) {
  const int pairs = (taps.ksize + 1) / 2;
  // Per output row and tap pair: the two coefficients' top (hi) and bottom (lo)
  // 11 bits as int16 pairs in one int32.
  std::vector<int32_t> hi(static_cast<size_t>(out_h) * pairs, 0), lo(hi.size(), 0);
  for (int yy = 0; yy < out_h; ++yy) {
    const int32_t* k = &taps.k[static_cast<size_t>(yy) * taps.ksize];
    for (int t = 0; t < taps.count[yy]; ++t) {
      if (k[t] < 0 || k[t] > (1 << kPrecisionBits)) return false;
      const size_t at = static_cast<size_t>(yy) * pairs + t / 2;
      hi[at] |= (k[t] >> 11) << (16 * (t % 2));
      lo[at] |= (k[t] & 2047) << (16 * (t % 2));
    }
  }
  const size_t n = static_cast<size_t>(src.width) * 3;
  const __m512i half = _mm512_set1_epi32(kHalf);
  for (int yy = 0; yy < out_h; ++yy) {
    const int count = taps.count[yy];
    const uint8_t* in0 = src.data + (taps.first[yy] - row0) * src.stride;
    uint8_t* out = dst + yy * n;
    size_t x = 0;
    for (; x + 32 <= n; x += 32) {
      __m512i sh_lo = _mm512_setzero_si512(), sh_hi = sh_lo, sl_lo = sh_lo, sl_hi = sh_lo;
      for (int t = 0; t < count; t += 2) {
        const __m512i a = _mm512_cvtepu8_epi16(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in0 + t * src.stride + x)));
        const __m512i b =
            t + 1 < count ? _mm512_cvtepu8_epi16(_mm256_loadu_si256(
                                reinterpret_cast<const __m256i*>(in0 + (t + 1) * src.stride + x)))
                          : _mm512_setzero_si512();
        // Per 128-bit lane: bytes 0-3 (lo) and 4-7 (hi) of the lane's eight, paired.
        const __m512i ab_lo = _mm512_unpacklo_epi16(a, b), ab_hi = _mm512_unpackhi_epi16(a, b);
        const size_t at = static_cast<size_t>(yy) * pairs + t / 2;
        const __m512i kh = _mm512_set1_epi32(hi[at]), kl = _mm512_set1_epi32(lo[at]);
        sh_lo = _mm512_add_epi32(sh_lo, _mm512_madd_epi16(ab_lo, kh));
        sh_hi = _mm512_add_epi32(sh_hi, _mm512_madd_epi16(ab_hi, kh));
        sl_lo = _mm512_add_epi32(sl_lo, _mm512_madd_epi16(ab_lo, kl));
        sl_hi = _mm512_add_epi32(sl_hi, _mm512_madd_epi16(ab_hi, kl));
      }
      const __m512i r_lo = _mm512_srai_epi32(
          _mm512_add_epi32(_mm512_add_epi32(half, _mm512_slli_epi32(sh_lo, 11)), sl_lo),
          kPrecisionBits);
      const __m512i r_hi = _mm512_srai_epi32(
          _mm512_add_epi32(_mm512_add_epi32(half, _mm512_slli_epi32(sh_hi, 11)), sl_hi),
          kPrecisionBits);
      // Packing lane by lane puts each lane's bytes 0-3 and 4-7 back in order;
      // saturation is Clip8 (sums are never negative).
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x),
                          _mm512_cvtusepi16_epi8(_mm512_packus_epi32(r_lo, r_hi)));
    }
    const int32_t* k = &taps.k[static_cast<size_t>(yy) * taps.ksize];
    for (; x < n; ++x) {
      int32_t s = kHalf;
      for (int t = 0; t < count; ++t) s += in0[t * src.stride + static_cast<ptrdiff_t>(x)] * k[t];
      out[x] = Clip8(s);
    }
  }
  return true;
}
#pragma GCC diagnostic pop
#endif

}  // namespace

void ResizeBilinear(const RgbView& src, const SourceBox& box, int out_w, int out_h, uint8_t* dst,
                    ResizeIsa isa) {
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
  Bytes tmp;  // every byte Vertical reads is written first: no zero fill
  RgbView mid{src.data + row0 * src.stride + lx * 3, nx, rows, src.stride};
  if (need_h) {
    Taps ht = Precompute(0, nx, bx0, bx1, out_w);
    tmp.resize(static_cast<size_t>(out_w) * rows * 3 + 1);
    RgbView shifted{src.data + lx * 3, nx, src.height, src.stride};
    Horizontal(shifted, row0, rows, ht, out_w, isa, tmp.data());
    mid = RgbView{tmp.data(), out_w, rows, static_cast<ptrdiff_t>(out_w) * 3};
  }
  if (need_v) {
    // `mid` starts at row `row0` of the source.
    bool done = false;
#if defined(__x86_64__)
    if ((isa == ResizeIsa::kBest || isa == ResizeIsa::kAvx512) &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
      done = VerticalAvx512(mid, row0, vt, out_h, dst);
    }
#endif
    if (!done) Vertical(mid, row0, vt, out_h, dst);
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

}  // namespace gm
