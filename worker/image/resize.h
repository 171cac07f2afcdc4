// Resampling of RGB images (8-bit HWC); the other pixel kernels are in
// worker/image/pixel_ops.h.
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

}  // namespace gm
