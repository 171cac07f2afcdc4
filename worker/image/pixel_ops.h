// Pixel kernels for images (8-bit HWC unless stated): flips, torchvision's color
// jitter, per-channel scaling, the normalize-to-CHW of a batch, and a streaming
// copy. Pure and thread-safe; SIMD where the CPU has it, with the same bytes as
// the scalar code (the tests compare them).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gm {

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
