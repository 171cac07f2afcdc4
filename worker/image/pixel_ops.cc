#include "worker/image/pixel_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace gm {

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
