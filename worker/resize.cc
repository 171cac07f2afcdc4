#include "worker/resize.h"

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

namespace {

// Reverses pixels [a, b) of `row` in place, N bytes each.
template <int N>
void ReversePixels(uint8_t* row, int a, int b) {
  for (--b; a < b; ++a, --b) {
    uint8_t t[N];
    std::memcpy(t, row + a * N, N);
    std::memcpy(row + a * N, row + b * N, N);
    std::memcpy(row + b * N, t, N);
  }
}

#if defined(__x86_64__)
// Stores bytes 0-14 of `v` at `p` (two overlapping 8-byte stores): a 16-byte
// store would write a byte the next block's read then takes partly from the
// store buffer, which stalls the read.
__attribute__((target("ssse3"), always_inline)) inline void Store15(uint8_t* p, __m128i v) {
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), v);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p + 7), _mm_srli_si128(v, 7));
}

// The five RGB pixels in bytes 1-15 of `v`, in reverse order, in bytes 0-14.
__attribute__((target("ssse3"), always_inline)) inline __m128i ReverseFiveRgb(__m128i v) {
  return _mm_shuffle_epi8(v, _mm_setr_epi8(13, 14, 15, 10, 11, 12, 7, 8, 9, 4, 5, 6, 1, 2, 3, -1));
}

// An RGB row five pixels (15 bytes) at a time from each end: a 16-byte read at
// the left block's start and one ending at the right block's end, each block's
// pixels reversed into the other's place with one shuffle and written as 15
// bytes. The ends stay at least 10 pixels apart, so the blocks never overlap.
__attribute__((target("ssse3"))) void FlipRgbRowSsse3(uint8_t* row, int width) {
  // to the right block: the left block's (lanes 0-14), reversed
  const __m128i to_right = _mm_setr_epi8(12, 13, 14, 9, 10, 11, 6, 7, 8, 3, 4, 5, 0, 1, 2, -1);
  int a = 0, b = width;
  for (; b - a >= 10; a += 5, b -= 5) {
    uint8_t* l = row + 3 * a;
    uint8_t* r = row + 3 * b - 15;
    const __m128i lv = _mm_loadu_si128(reinterpret_cast<const __m128i*>(l));
    const __m128i rv = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r - 1));
    Store15(l, ReverseFiveRgb(rv));  // the right block's pixels, lanes 1-15 of its read
    Store15(r, _mm_shuffle_epi8(lv, to_right));
  }
  ReversePixels<3>(row, a, b);
}

// Mirrors an RGB row of `src` into `dst` (another buffer), five pixels at a time:
// 16 bytes read ending at the source block's end, 15 written.
__attribute__((target("ssse3"))) void FlipRgbRowCopySsse3(const uint8_t* src, uint8_t* dst,
                                                          int width) {
  int x = 0;
  for (; width - x >= 6; x += 5) {  // the read starts a byte before the block
    const uint8_t* end = src + 3 * (width - x);
    Store15(dst + 3 * x,
            ReverseFiveRgb(_mm_loadu_si128(reinterpret_cast<const __m128i*>(end - 16))));
  }
  for (; x < width; ++x) std::memcpy(dst + 3 * x, src + 3 * (width - 1 - x), 3);
}
#endif

}  // namespace

void FlipHorizontal(uint8_t* data, int width, int height, int pixel_bytes) {
  const size_t row_bytes = static_cast<size_t>(width) * pixel_bytes;
  for (int r = 0; r < height; ++r) {
    uint8_t* row = data + r * row_bytes;
    switch (pixel_bytes) {
      case 1:
        std::reverse(row, row + width);
        break;
      case 3:
#if defined(__x86_64__)
        if (__builtin_cpu_supports("ssse3")) {
          FlipRgbRowSsse3(row, width);
          break;
        }
#endif
        ReversePixels<3>(row, 0, width);
        break;
      case 4:
        ReversePixels<4>(row, 0, width);
        break;
      default:
        for (int a = 0, b = width - 1; a < b; ++a, --b) {
          std::swap_ranges(row + a * pixel_bytes, row + (a + 1) * pixel_bytes,
                           row + b * pixel_bytes);
        }
    }
  }
}

void FlipHorizontalCopy(const uint8_t* src, uint8_t* dst, int width, int height, int pixel_bytes) {
  const size_t row_bytes = static_cast<size_t>(width) * pixel_bytes;
#if defined(__x86_64__)
  const bool ssse3 = pixel_bytes == 3 && __builtin_cpu_supports("ssse3");
#endif
  for (int r = 0; r < height; ++r) {
    const uint8_t* in = src + r * row_bytes;
    uint8_t* out = dst + r * row_bytes;
#if defined(__x86_64__)
    if (ssse3) {
      FlipRgbRowCopySsse3(in, out, width);
      continue;
    }
#endif
    for (int x = 0; x < width; ++x) {
      std::memcpy(out + static_cast<size_t>(x) * pixel_bytes,
                  in + static_cast<size_t>(width - 1 - x) * pixel_bytes, pixel_bytes);
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
__attribute__((target("avx2"), always_inline)) inline __m256 Channel8(__m128i lo, __m128i hi,
                                                                      __m128i pick_lo,
                                                                      __m128i pick_hi, __m256 scale,
                                                                      __m256 offset, bool mirror,
                                                                      __m256i reverse) {
  const __m128i bytes = _mm_or_si128(_mm_shuffle_epi8(lo, pick_lo), _mm_shuffle_epi8(hi, pick_hi));
  const __m256 v =
      _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)), scale), offset);
  return mirror ? _mm256_permutevar8x32_ps(v, reverse) : v;
}

// `stream`: `at` is 32-byte aligned and not read again soon (a batch's slot): a
// store that bypasses the cache, no read of the line first.
template <bool stream>
__attribute__((target("avx2"), always_inline)) inline void Store8(float* at, __m256 v) {
  if constexpr (stream) {
    _mm256_stream_ps(at, v);
  } else {
    _mm256_storeu_ps(at, v);
  }
}

template <bool stream>
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
    Store8<stream>(r + x, Channel8(lo, hi, lo_r, hi_r, s0, o0, mirror, reverse));
    Store8<stream>(g + x, Channel8(lo, hi, lo_g, hi_g, s1, o1, mirror, reverse));
    Store8<stream>(b + x, Channel8(lo, hi, lo_b, hi_b, s2, o2, mirror, reverse));
  }
  return x;
}
#endif

}  // namespace

void NormalizeHwcToChw(const uint8_t* in, int h, int w, bool mirror, const float scale[3],
                       const float offset[3], float* out, bool streaming) {
  const size_t plane = static_cast<size_t>(h) * static_cast<size_t>(w);
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2");
  bool streamed = false;
#else
  (void)streaming;
#endif
  for (int y = 0; y < h; ++y) {
    const uint8_t* row = in + static_cast<size_t>(y) * static_cast<size_t>(w) * 3;
    float* r = out + static_cast<size_t>(y) * static_cast<size_t>(w);
    float* g = r + plane;
    float* b = g + plane;
    int x = 0;
#if defined(__x86_64__)
    const auto aligned = [](const float* p) { return reinterpret_cast<uintptr_t>(p) % 32 == 0; };
    if (avx2 && streaming && aligned(r) && aligned(g) && aligned(b)) {
      x = NormalizeRowAvx2<true>(row, w, mirror, scale, offset, r, g, b);
      streamed = true;
    } else if (avx2) {
      x = NormalizeRowAvx2<false>(row, w, mirror, scale, offset, r, g, b);
    }
#endif
    NormalizeRowScalar(row, w, x, mirror, scale, offset, r, g, b);
  }
#if defined(__x86_64__)
  if (streamed) _mm_sfence();  // the streaming stores are visible before the batch is handed on
#endif
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
