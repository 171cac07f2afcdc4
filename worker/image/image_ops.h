// Image ops of the pipeline engine, as pipeline.json stage objects:
//
//   {"op": "decode_jpeg", "fast": true}
//       Sample::data (a JPEG) -> uint8 [H, W, 3] RGB, Layout::kHWC. Grayscale and
//       CMYK are converted to RGB. Bad data -> Status::Corrupt ("truncated JPEG
//       ...", "not a JPEG (PNG signature)", ...). "fast": false forbids fusion.
//   {"op": "resize", "size": 256 | [h, w]}
//       An int sets the short side (the long side is int(size * long / short), as
//       torchvision); [h, w] is exact. Pillow's antialiased BILINEAR.
//   {"op": "center_crop", "size": 224 | [h, w]}
//       torchvision's CenterCrop; an image smaller than the crop is resized up to
//       cover it (torchvision pads with zeros instead).
//   {"op": "random_resized_crop", "size": 224 | [h, w], "scale": [0.08, 1.0],
//    "ratio": [0.75, 1.3333]}
//       torchvision's RandomResizedCrop.get_params (10 tries, log-uniform ratio,
//       then the central fallback), then the box resized to size.
//   {"op": "flip", "p": 0.5}
//       Horizontal flip with probability p (any HWC tensor).
//   {"op": "color_jitter", "brightness": 0.4, "contrast": 0.4, "saturation": 0.4}
//       Factors uniform in [max(0, 1 - x), 1 + x] drawn in that order (only for
//       x > 0), applied in that order on uint8 HWC with torchvision's tensor
//       formulas: blend(img, other, f) = clamp(f * img + (1 - f) * other, 0, 255)
//       truncated to uint8; brightness blends with black, contrast with the mean
//       of the uint8 grayscale image, saturation with the grayscale image, where
//       gray = uint8(0.299 R + 0.587 G + 0.114 B).
//   {"op": "normalize", "mean": [m0, m1, m2], "std": [s0, s1, s2]}
//       uint8 -> float32 (x / 255 - mean) / std; float32 from to_tensor (values in
//       [0, 1]) -> (x - mean) / std. Keeps the layout; sets Sample::normalized.
//   {"op": "to_tensor", "layout": "CHW" | "HWC", "dtype": "float32" | "uint8"}
//       Defaults CHW, float32. uint8 -> float32 divides by 255 (torchvision
//       ToTensor); float32 stays as is; float32 -> uint8 (only before normalize)
//       rounds x * 255. Shape becomes [C, H, W] for CHW.
//
// All randomness comes from Op::MakeRng(sample, run). Geometric ops are RegionOps:
// Apply() == Plan() on the image size, then crop and resize. Ops are immutable and
// thread-safe (see worker/op.h).
#pragma once

#include "core/rng.h"
#include "worker/op.h"

namespace gm {

// Smallest libjpeg scale_num among 1, 2, 4 and 8 (over 8; the scales libjpeg-turbo
// decodes fastest) at which a w x h box is still at least out_w x out_h pixels.
int ChooseDctScale(int w, int h, int out_w, int out_h);

// torchvision's RandomResizedCrop.get_params for a width x height image: the box
// (x, y, w, h) and out_w/out_h = out size. scale and ratio are [lo, hi] ranges.
CropPlan RandomResizedCropPlan(int width, int height, const double scale[2], const double ratio[2],
                               int out_w, int out_h, Rng& rng);

}  // namespace gm
