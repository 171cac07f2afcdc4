// Resampling and pixel kernels for RGB images (8-bit HWC unless stated).
//
// ResizeBilinear reproduces Pillow's antialiased BILINEAR resampling (the one
// torchvision applies to PIL images): a triangle filter whose support grows with
// the downscale factor, coefficients in 22-bit fixed point, a horizontal pass into
// an 8-bit intermediate image, then a vertical pass. For an integer box the result
// is bit-identical to Pillow's `img.crop(box).resize(size, BILINEAR)`.
//
// All functions are pure and thread-safe; they allocate only their own scratch
// buffers (once per call, never per pixel).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gm {

// A read-only view of an RGB image: `height` rows of `width` pixels, 3 bytes each,
// rows `stride` bytes apart.
struct RgbView {
  const uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  ptrdiff_t stride = 0;
};

// A source box in pixel coordinates of a view; may be fractional (a box mapped
// through a DCT scale). Filter taps are limited to the pixels
// [floor(x0), ceil(x1)) x [floor(y0), ceil(y1)), so an integer box behaves exactly
// like cropping it first.
struct SourceBox {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

// Resamples `box` of `src` to out_w x out_h pixels into `dst` (out_h rows of
// out_w * 3 bytes, tightly packed). Requires out_w, out_h > 0 and a non-empty box
// inside the view. `isa` caps the instruction set of the kernels (AVX-512 VBMI,
// AVX-512BW, AVX2, SSE4.1 or none, whichever the CPU has); every level gives
// the same bytes, and the tests compare them.
enum class ResizeIsa { kBest, kAvx512, kAvx2, kScalar };
void ResizeBilinear(const RgbView& src, const SourceBox& box, int out_w, int out_h, uint8_t* dst,
                    ResizeIsa isa = ResizeIsa::kBest);

// Copies the integer box (x, y, w, h) of `src` into `dst` (h rows of w * 3 bytes).
void CropRgb(const RgbView& src, int x, int y, int w, int h, uint8_t* dst);

// Mirrors each row of a packed HWC image in place (pixel_bytes per pixel).
void FlipHorizontal(uint8_t* data, int width, int height, int pixel_bytes);
// The same from `src` into `dst` (another buffer of the same size).
void FlipHorizontalCopy(const uint8_t* src, uint8_t* dst, int width, int height, int pixel_bytes);

// torchvision's brightness, contrast and saturation adjustments, in that order,
// on `pixels` packed RGB pixels in place; a factor of 1 is the identity. Each is
// blend(img, other, f) = uint8(clamp(f * img + (1 - f) * other, 0, 255)) with other
// = 0, the mean of the uint8 grayscale image, and the grayscale image, where
// gray = uint8(0.299 R + 0.587 G + 0.114 B).
void JitterColor(uint8_t* px, size_t pixels, float brightness, float contrast, float saturation);

// out = in * scale[c] + offset[c] for the 3 channels of `pixels` pixels, stored
// interleaved (HWC) or planar (CHW).
void ScaleChannels(const uint8_t* in, size_t pixels, bool interleaved, const float scale[3],
                   const float offset[3], float* out);
void ScaleChannels(const float* in, size_t pixels, bool interleaved, const float scale[3],
                   const float offset[3], float* out);

// uint8 HWC RGB (h rows of w pixels) to float32 CHW: out[c][y][x] =
// float(in[y][x'][c]) * scale[c] + offset[c], with x' = w - 1 - x when `mirror`
// (a horizontal flip folded in) else x. The same two float operations (no fused
// multiply-add) in the SIMD and scalar versions, so results are bit-identical to
// ScaleChannels on the (flipped) image followed by a move to CHW. `streaming`:
// `out` is not read again soon (a batch's slot): where its rows are 32-byte
// aligned, stores bypass the cache. Same values either way.
void NormalizeHwcToChw(const uint8_t* in, int h, int w, bool mirror, const float scale[3],
                       const float offset[3], float* out, bool streaming = false);

// memcpy for a destination that is not read again soon (a batch being
// collated): on x86-64 with AVX2, stores that bypass the cache (no read of the
// destination's lines first), then a fence; elsewhere plain memcpy.
void CopyStreaming(void* dst, const void* src, size_t bytes);

}  // namespace gm
