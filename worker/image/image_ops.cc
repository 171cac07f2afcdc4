#include "worker/image/image_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "worker/image/jpeg.h"
#include "worker/image/pixel_ops.h"
#include "worker/image/resize.h"

namespace gm {
namespace {

constexpr int64_t kMaxOutputSide = 1 << 15;
constexpr double kMaxJitter = 1e6;
constexpr char kJitterWant[] = "a number >= 0 (0 leaves it out)";

// ---- Parameter parsing -------------------------------------------------------

struct SizeParam {
  int h = 0, w = 0;
  bool short_side = false;  // an int: for resize, the short side
};

Result<SizeParam> ParseSize(const JsonNode& stage) {
  GM_ASSIGN_OR_RETURN(JsonNode node, stage.Get("size"));
  const auto& j = node.json();
  auto positive = [](const nlohmann::json& v) {
    return v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() <= kMaxOutputSide;
  };
  const char* kWant =
      "a positive integer or an array [height, width] of positive integers "
      "(at most 32768)";
  if (positive(j)) {
    int v = static_cast<int>(j.get<int64_t>());
    return SizeParam{v, v, true};
  }
  if (j.is_array() && j.size() == 2 && positive(j[0]) && positive(j[1])) {
    return SizeParam{static_cast<int>(j[0].get<int64_t>()), static_cast<int>(j[1].get<int64_t>()),
                     false};
  }
  return node.Expected(kWant);
}

// A [lo, hi] range with 0 < lo <= hi, or `fallback` when the key is absent.
Status ParseRange(const JsonNode& stage, std::string_view key, double fallback_lo,
                  double fallback_hi, double out[2]) {
  out[0] = fallback_lo;
  out[1] = fallback_hi;
  if (!stage.has(key)) return Status::Ok();
  GM_ASSIGN_OR_RETURN(JsonNode node, stage.Get(key));
  auto v = node.AsNumbers(2);
  if (!v.ok() || !((*v)[0] > 0 && (*v)[0] <= (*v)[1] && std::isfinite((*v)[1]))) {
    return node.Expected("an array [lo, hi] of numbers with 0 < lo <= hi");
  }
  out[0] = (*v)[0];
  out[1] = (*v)[1];
  return Status::Ok();
}

// A number in [lo, hi] (`want` says so in words), or `fallback` when the key is absent.
Result<double> ParseNumber(const JsonNode& stage, std::string_view key, double fallback, double lo,
                           double hi, std::string_view want) {
  GM_ASSIGN_OR_RETURN(double v, stage.NumberOr(key, fallback));
  if (!(v >= lo && v <= hi)) {
    GM_ASSIGN_OR_RETURN(JsonNode node, stage.Get(key));
    return node.Expected(want);
  }
  return v;
}

Status NeedRgb(const Sample& s, std::string_view op) {
  const Tensor& t = s.tensor;
  if (t.dtype == DType::kUInt8 && s.layout == Layout::kHWC && t.shape.size() == 3 &&
      t.shape[2] == 3 && t.shape[0] > 0 && t.shape[1] > 0) {
    return Status::Ok();
  }
  std::string layout = s.layout == Layout::kCHW ? "CHW" : s.layout == Layout::kHWC ? "HWC" : "none";
  return Status::InvalidArgument(std::string(op) +
                                 " needs a uint8 [H, W, 3] HWC image (place it "
                                 "after decode_jpeg and before to_tensor/normalize), got " +
                                 std::string(DTypeName(t.dtype)) + " " + ShapeString(t.shape) +
                                 " layout " + layout);
}

// ---- Geometric ops ------------------------------------------------------------

// Crops and resamples the plan's box of `t` (uint8 HWC RGB) into a new image.
void ApplyPlan(const CropPlan& p, Tensor& t) {
  RgbView src{t.data<uint8_t>(), static_cast<int>(t.shape[1]), static_cast<int>(t.shape[0]),
              static_cast<ptrdiff_t>(t.shape[1]) * 3};
  Tensor out;
  out.Reset(DType::kUInt8, {p.out_h, p.out_w, 3});
  SourceBox box{double(p.x), double(p.y), double(p.x + p.w), double(p.y + p.h)};
  ResizeBilinear(src, box, p.out_w, p.out_h, out.data<uint8_t>());
  t = std::move(out);
}

class GeometricOp : public RegionOp {
 public:
  Status Apply(Sample& s, const RunContext& run) const override {
    GM_RETURN_IF_ERROR(NeedRgb(s, name()));
    Rng rng = MakeRng(s, run);
    CropPlan p =
        Plan(static_cast<int>(s.tensor.shape[1]), static_cast<int>(s.tensor.shape[0]), rng);
    ApplyPlan(p, s.tensor);
    return Status::Ok();
  }
};

class ResizeOp : public GeometricOp {
 public:
  explicit ResizeOp(SizeParam size) : size_(size) {}
  std::string name() const override { return "resize"; }
  CropPlan Plan(int width, int height, Rng& /*rng*/) const override {
    CropPlan p{0, 0, width, height, size_.w, size_.h, false};
    if (size_.short_side) {
      // torchvision: new_long = int(size * long / short).
      const int s = size_.w;
      if (width <= height) {
        p.out_w = s;
        p.out_h = static_cast<int>(static_cast<double>(s) * height / width);
      } else {
        p.out_h = s;
        p.out_w = static_cast<int>(static_cast<double>(s) * width / height);
      }
      p.out_w = std::max(p.out_w, 1);
      p.out_h = std::max(p.out_h, 1);
    }
    return p;
  }

 private:
  SizeParam size_;
};

class CenterCropOp : public GeometricOp {
 public:
  explicit CenterCropOp(SizeParam size) : size_(size) {}
  std::string name() const override { return "center_crop"; }
  CropPlan Plan(int width, int height, Rng& /*rng*/) const override {
    CropPlan p;
    p.out_w = size_.w;
    p.out_h = size_.h;
    p.w = std::min(size_.w, width);
    p.h = std::min(size_.h, height);
    // Python's round() rounds half to even, as nearbyint does by default.
    p.x = static_cast<int>(std::nearbyint((width - p.w) / 2.0));
    p.y = static_cast<int>(std::nearbyint((height - p.h) / 2.0));
    return p;
  }

 private:
  SizeParam size_;
};

class RandomResizedCropOp : public GeometricOp {
 public:
  RandomResizedCropOp(SizeParam size, const double scale[2], const double ratio[2])
      : size_(size), scale_{scale[0], scale[1]}, ratio_{ratio[0], ratio[1]} {}
  std::string name() const override { return "random_resized_crop"; }
  CropPlan Plan(int width, int height, Rng& rng) const override {
    return RandomResizedCropPlan(width, height, scale_, ratio_, size_.w, size_.h, rng);
  }

 private:
  SizeParam size_;
  double scale_[2];
  double ratio_[2];
};

// ---- Decode and fusion --------------------------------------------------------

class DecodeJpegOp : public Op {
 public:
  explicit DecodeJpegOp(bool fast) : fast_(fast) {}
  std::string name() const override { return "decode_jpeg"; }
  bool fast() const { return fast_; }
  Status Apply(Sample& s, const RunContext& /*run*/) const override {
    GM_RETURN_IF_ERROR(DecodeJpeg(s.data, s.tensor));
    s.layout = Layout::kHWC;
    s.normalized = false;
    return Status::Ok();
  }

 private:
  bool fast_;
};

// decode_jpeg followed by a RegionOp: decodes only the planned box, at the
// smallest DCT scale that keeps it at least as large as the output, then
// resamples it. Draws the same random numbers as the unfused pair.
class FusedDecodeOp : public Op {
 public:
  FusedDecodeOp(std::unique_ptr<Op> decode, std::unique_ptr<Op> region)
      : decode_(std::move(decode)),
        region_op_(std::move(region)),
        region_(static_cast<const RegionOp*>(region_op_.get())) {
    set_stage(region_->stage());
  }
  std::string name() const override { return decode_->name() + "+" + region_->name(); }
  Status Apply(Sample& s, const RunContext& run) const override;

 private:
  std::unique_ptr<Op> decode_;
  std::unique_ptr<Op> region_op_;
  const RegionOp* region_;
};

Status FusedDecodeOp::Apply(Sample& s, const RunContext& run) const {
  JpegDecoder decoder(s.data);
  GM_RETURN_IF_ERROR(decoder.ReadHeader());
  Rng rng = MakeRng(s, run);
  const CropPlan p = region_->Plan(decoder.width(), decoder.height(), rng);
  const int scale = ChooseDctScale(p.w, p.h, p.out_w, p.out_h);
  const double f = scale / 8.0;
  const int sw = JpegDecoder::ScaledSize(decoder.width(), scale);
  const int sh = JpegDecoder::ScaledSize(decoder.height(), scale);
  // The box in scaled pixels, and the whole pixels that cover it.
  const double bx0 = p.x * f, by0 = p.y * f;
  const double bx1 = std::min<double>((p.x + p.w) * f, sw),
               by1 = std::min<double>((p.y + p.h) * f, sh);
  const int ix0 = static_cast<int>(std::floor(bx0)), iy0 = static_cast<int>(std::floor(by0));
  const int ix1 = static_cast<int>(std::ceil(bx1)), iy1 = static_cast<int>(std::ceil(by1));
  DecodedRegion r;
  GM_RETURN_IF_ERROR(decoder.DecodeRegion(scale, ix0, iy0, ix1 - ix0, iy1 - iy0, r));

  RgbView view{r.pixels.data(), r.width, r.height, static_cast<ptrdiff_t>(r.width) * 3};
  SourceBox box{bx0 - r.x, by0 - r.y, std::min(bx1 - r.x, double(r.width)),
                std::min(by1 - r.y, double(r.height))};
  // Straight into the batch's buffer when this is the last stage (Sample::arena).
  ResizeBilinear(view, box, p.out_w, p.out_h, s.NewTensor(DType::kUInt8, {p.out_h, p.out_w, 3}));
  s.layout = Layout::kHWC;
  s.normalized = false;
  return Status::Ok();
}

// ---- Pixel ops ----------------------------------------------------------------

class FlipOp : public Op {
 public:
  explicit FlipOp(double p) : p_(p) {}
  std::string name() const override { return "flip"; }
  // Whether `s` is flipped: the draw Apply makes.
  bool Draw(const Sample& s, const RunContext& run) const {
    Rng rng = MakeRng(s, run);
    return rng.Uniform() < p_;
  }
  Status Apply(Sample& s, const RunContext& run) const override {
    Tensor& t = s.tensor;
    if (s.layout != Layout::kHWC || t.shape.size() != 3) {
      return Status::InvalidArgument("flip needs an HWC image, got " + ShapeString(t.shape));
    }
    const bool flip = Draw(s, run);
    const int w = static_cast<int>(t.shape[1]), h = static_cast<int>(t.shape[0]);
    const int pixel_bytes = static_cast<int>(t.shape[2] * static_cast<int64_t>(DTypeSize(t.dtype)));
    if (s.arena != nullptr && s.in_arena == nullptr) {
      // The last stage, lent the sample's slot of its batch (Sample::arena): the
      // rows go there, mirrored or not, instead of being collated later.
      const Tensor in = std::move(s.tensor);
      uint8_t* dst = s.NewTensor(in.dtype, in.shape);
      if (flip) {
        FlipHorizontalCopy(in.bytes.data(), dst, w, h, pixel_bytes);
      } else {
        std::memcpy(dst, in.bytes.data(), in.bytes.size());
      }
      return Status::Ok();
    }
    if (!flip) return Status::Ok();
    FlipHorizontal(s.in_arena != nullptr ? s.in_arena : t.bytes.data(), w, h, pixel_bytes);
    return Status::Ok();
  }

 private:
  double p_;
};

class ColorJitterOp : public Op {
 public:
  ColorJitterOp(double b, double c, double sat) : amount_{b, c, sat} {}
  std::string name() const override { return "color_jitter"; }
  Status Apply(Sample& s, const RunContext& run) const override {
    GM_RETURN_IF_ERROR(NeedRgb(s, name()));
    Rng rng = MakeRng(s, run);
    float factor[3] = {1, 1, 1};
    for (int i = 0; i < 3; ++i) {
      if (amount_[i] <= 0) continue;
      factor[i] = static_cast<float>(rng.Uniform(std::max(0.0, 1 - amount_[i]), 1 + amount_[i]));
    }
    JitterColor(s.tensor.data<uint8_t>(), s.tensor.num_elements() / 3, factor[0], factor[1],
                factor[2]);
    return Status::Ok();
  }

 private:
  double amount_[3];
};

class NormalizeOp : public Op {
 public:
  NormalizeOp(std::vector<double> mean, std::vector<double> std_dev)
      : mean_(std::move(mean)), std_(std::move(std_dev)) {}
  std::string name() const override { return "normalize"; }
  Status Apply(Sample& s, const RunContext& run) const override;
  // out = in * scale[c] + offset[c] turns `from_u8` (else [0, 1] float) input into
  // the normalized value.
  void Coefficients(bool from_u8, float scale[3], float offset[3]) const {
    for (int c = 0; c < 3; ++c) {
      scale[c] = static_cast<float>(1.0 / ((from_u8 ? 255.0 : 1.0) * std_[c]));
      offset[c] = static_cast<float>(-mean_[c] / std_[c]);
    }
  }

 private:
  std::vector<double> mean_, std_;
};

Status NormalizeOp::Apply(Sample& s, const RunContext& /*run*/) const {
  Tensor& t = s.tensor;
  const bool hwc = s.layout == Layout::kHWC;
  const bool ok_shape = t.shape.size() == 3 &&
                        (s.layout == Layout::kHWC || s.layout == Layout::kCHW) &&
                        t.shape[hwc ? 2 : 0] == 3;
  if (!ok_shape || s.normalized || (t.dtype != DType::kUInt8 && t.dtype != DType::kFloat32)) {
    return Status::InvalidArgument(
        "normalize needs a 3-channel uint8 or float32 (from to_tensor) "
        "image that is not normalized yet, got " +
        std::string(DTypeName(t.dtype)) + " " + ShapeString(t.shape) +
        (s.normalized ? " (already normalized)" : ""));
  }
  const size_t pixels = t.num_elements() / 3;
  const bool from_u8 = t.dtype == DType::kUInt8;
  float scale[3], offset[3];  // out = in * scale + offset
  Coefficients(from_u8, scale, offset);
  Tensor out;
  out.Reset(DType::kFloat32, t.shape);
  if (from_u8) {
    ScaleChannels(t.data<uint8_t>(), pixels, hwc, scale, offset, out.data<float>());
  } else {
    ScaleChannels(t.data<float>(), pixels, hwc, scale, offset, out.data<float>());
  }
  t = std::move(out);
  s.normalized = true;
  return Status::Ok();
}

class ToTensorOp : public Op {
 public:
  ToTensorOp(Layout layout, DType dtype) : layout_(layout), dtype_(dtype) {}
  std::string name() const override { return "to_tensor"; }
  Status Apply(Sample& s, const RunContext& run) const override;
  Layout layout() const { return layout_; }
  DType dtype() const { return dtype_; }

 private:
  Layout layout_;
  DType dtype_;
};

// Copies `in` (HWC or CHW, element type In) to `out` in the `to` layout and
// type Out: `pixels` pixels of `c` channels.
template <typename In, typename Out, typename Convert>
void Relayout(const In* in, size_t pixels, size_t c, bool from_hwc, bool to_hwc, Out* out,
              Convert convert) {
  if (from_hwc == to_hwc) {
    for (size_t i = 0; i < pixels * c; ++i) out[i] = convert(in[i]);
  } else if (from_hwc) {
    for (size_t k = 0; k < c; ++k) {
      for (size_t i = 0; i < pixels; ++i) out[k * pixels + i] = convert(in[i * c + k]);
    }
  } else {
    for (size_t k = 0; k < c; ++k) {
      for (size_t i = 0; i < pixels; ++i) out[i * c + k] = convert(in[k * pixels + i]);
    }
  }
}

Status ToTensorOp::Apply(Sample& s, const RunContext& /*run*/) const {
  Tensor& t = s.tensor;
  const bool from_hwc = s.layout == Layout::kHWC;
  if (t.shape.size() != 3 || s.layout == Layout::kNone ||
      (t.dtype != DType::kUInt8 && t.dtype != DType::kFloat32) ||
      (t.dtype == DType::kFloat32 && dtype_ == DType::kUInt8 && s.normalized)) {
    return Status::InvalidArgument(
        "to_tensor needs a uint8 image or a float32 image in [0, 1] "
        "(uint8 output only before normalize), got " +
        std::string(DTypeName(t.dtype)) + " " + ShapeString(t.shape));
  }
  const bool to_hwc = layout_ == Layout::kHWC;
  const int64_t h = t.shape[from_hwc ? 0 : 1], w = t.shape[from_hwc ? 1 : 2],
                c = t.shape[from_hwc ? 2 : 0];
  const size_t px = static_cast<size_t>(h * w), ch = static_cast<size_t>(c);
  const DType from = t.dtype;
  const uint8_t* src = s.tensor_data();
  const Tensor in = std::move(s.tensor);  // keeps `src` alive
  // Straight into the batch's buffer when this is the last stage (Sample::arena).
  uint8_t* dst =
      s.NewTensor(dtype_, to_hwc ? std::vector<int64_t>{h, w, c} : std::vector<int64_t>{c, h, w});
  const auto* src_f = reinterpret_cast<const float*>(src);
  auto* dst_f = reinterpret_cast<float*>(dst);
  if (from == DType::kUInt8 && dtype_ == DType::kFloat32) {
    Relayout(src, px, ch, from_hwc, to_hwc, dst_f,
             [](uint8_t v) { return static_cast<float>(v) / 255.0f; });
  } else if (from == DType::kFloat32 && dtype_ == DType::kUInt8) {
    Relayout(src_f, px, ch, from_hwc, to_hwc, dst, [](float v) {
      return static_cast<uint8_t>(std::nearbyint(std::clamp(v * 255.0f, 0.0f, 255.0f)));
    });
  } else if (from == DType::kUInt8) {
    Relayout(src, px, ch, from_hwc, to_hwc, dst, [](uint8_t v) { return v; });
  } else {
    Relayout(src_f, px, ch, from_hwc, to_hwc, dst_f, [](float v) { return v; });
  }
  s.layout = layout_;
  return Status::Ok();
}

// normalize followed by to_tensor (CHW, float32): one pass from uint8 HWC to
// normalized float32 CHW instead of two passes and an intermediate image. Same
// arithmetic as the two ops in turn, so the result is bit-identical; inputs the
// fast path does not cover go through the two ops.
//
// A flip right before it is folded in too ("flip+normalize+to_tensor"): the flip's
// draw (its own stage's randomness) decides whether each row is read mirrored, so
// the image is not flipped in place first. Same values as the three ops in turn.
class NormalizeToTensorOp : public Op {
 public:
  NormalizeToTensorOp(std::unique_ptr<Op> normalize, std::unique_ptr<Op> to_tensor)
      : normalize_(std::move(normalize)), to_tensor_(std::move(to_tensor)) {
    set_stage(normalize_->stage());
  }
  std::string name() const override {
    return (flip_ ? flip_->name() + "+" : "") + normalize_->name() + "+" + to_tensor_->name();
  }
  // Folds `flip` (a FlipOp) in before the normalize; the op then numbers as the flip.
  void FoldFlip(std::unique_ptr<Op> flip) {
    flip_ = std::move(flip);
    set_stage(flip_->stage());
  }

  Status Apply(Sample& s, const RunContext& run) const override {
    const Tensor& t = s.tensor;
    if (s.layout != Layout::kHWC || t.dtype != DType::kUInt8 || t.shape.size() != 3 ||
        t.shape[2] != 3 || s.normalized) {
      if (flip_) GM_RETURN_IF_ERROR(flip_->Apply(s, run));
      GM_RETURN_IF_ERROR(normalize_->Apply(s, run));
      return to_tensor_->Apply(s, run);
    }
    const bool mirror = flip_ && static_cast<const FlipOp&>(*flip_).Draw(s, run);
    float scale[3], offset[3];
    static_cast<const NormalizeOp&>(*normalize_).Coefficients(true, scale, offset);
    const int64_t h = t.shape[0], w = t.shape[1];
    const uint8_t* src = s.tensor_data();
    const Tensor in = std::move(s.tensor);  // keeps `src` alive
    // Straight into the batch's buffer when this is the last stage (Sample::arena).
    float* out = reinterpret_cast<float*>(s.NewTensor(DType::kFloat32, {3, h, w}));
    NormalizeHwcToChw(src, static_cast<int>(h), static_cast<int>(w), mirror, scale, offset, out,
                      /*streaming=*/s.in_arena != nullptr);
    s.layout = Layout::kCHW;
    s.normalized = true;
    return Status::Ok();
  }

 private:
  std::unique_ptr<Op> flip_;  // null unless folded in
  std::unique_ptr<Op> normalize_;
  std::unique_ptr<Op> to_tensor_;
};

// ---- Factories ------------------------------------------------------------------

using OpResult = Result<std::unique_ptr<Op>>;

OpResult MakeDecode(const JsonNode& stage, const OpEnv&) {
  GM_RETURN_IF_ERROR(stage.CheckKeys({"op", "fast"}));
  GM_ASSIGN_OR_RETURN(bool fast, stage.BoolOr("fast", true));
  return std::unique_ptr<Op>(std::make_unique<DecodeJpegOp>(fast));
}

OpResult MakeResize(const JsonNode& stage, const OpEnv&) {
  GM_RETURN_IF_ERROR(stage.CheckKeys({"op", "size"}));
  GM_ASSIGN_OR_RETURN(SizeParam size, ParseSize(stage));
  return std::unique_ptr<Op>(std::make_unique<ResizeOp>(size));
}

OpResult MakeCenterCrop(const JsonNode& stage, const OpEnv&) {
  GM_RETURN_IF_ERROR(stage.CheckKeys({"op", "size"}));
  GM_ASSIGN_OR_RETURN(SizeParam size, ParseSize(stage));
  return std::unique_ptr<Op>(std::make_unique<CenterCropOp>(size));
}

OpResult MakeRandomResizedCrop(const JsonNode& stage, const OpEnv&) {
  GM_RETURN_IF_ERROR(stage.CheckKeys({"op", "size", "scale", "ratio"}));
  GM_ASSIGN_OR_RETURN(SizeParam size, ParseSize(stage));
  double scale[2], ratio[2];
  GM_RETURN_IF_ERROR(ParseRange(stage, "scale", 0.08, 1.0, scale));
  GM_RETURN_IF_ERROR(ParseRange(stage, "ratio", 3.0 / 4.0, 4.0 / 3.0, ratio));
  return std::unique_ptr<Op>(std::make_unique<RandomResizedCropOp>(size, scale, ratio));
}

OpResult MakeFlip(const JsonNode& stage, const OpEnv&) {
  GM_RETURN_IF_ERROR(stage.CheckKeys({"op", "p"}));
  GM_ASSIGN_OR_RETURN(double p, ParseNumber(stage, "p", 0.5, 0.0, 1.0, "a probability in [0, 1]"));
  return std::unique_ptr<Op>(std::make_unique<FlipOp>(p));
}

OpResult MakeColorJitter(const JsonNode& stage, const OpEnv&) {
  GM_RETURN_IF_ERROR(stage.CheckKeys({"op", "brightness", "contrast", "saturation"}));
  GM_ASSIGN_OR_RETURN(double b,
                      ParseNumber(stage, "brightness", 0.0, 0.0, kMaxJitter, kJitterWant));
  GM_ASSIGN_OR_RETURN(double c, ParseNumber(stage, "contrast", 0.0, 0.0, kMaxJitter, kJitterWant));
  GM_ASSIGN_OR_RETURN(double s,
                      ParseNumber(stage, "saturation", 0.0, 0.0, kMaxJitter, kJitterWant));
  return std::unique_ptr<Op>(std::make_unique<ColorJitterOp>(b, c, s));
}

OpResult MakeNormalize(const JsonNode& stage, const OpEnv&) {
  GM_RETURN_IF_ERROR(stage.CheckKeys({"op", "mean", "std"}));
  GM_ASSIGN_OR_RETURN(JsonNode mean_node, stage.Get("mean"));
  GM_ASSIGN_OR_RETURN(JsonNode std_node, stage.Get("std"));
  GM_ASSIGN_OR_RETURN(std::vector<double> mean, mean_node.AsNumbers(3));
  GM_ASSIGN_OR_RETURN(std::vector<double> std_dev, std_node.AsNumbers(3));
  for (double v : std_dev) {
    if (!(v > 0) || !std::isfinite(v)) return std_node.Expected("an array of 3 positive numbers");
  }
  return std::unique_ptr<Op>(std::make_unique<NormalizeOp>(std::move(mean), std::move(std_dev)));
}

OpResult MakeToTensor(const JsonNode& stage, const OpEnv&) {
  GM_RETURN_IF_ERROR(stage.CheckKeys({"op", "layout", "dtype"}));
  GM_ASSIGN_OR_RETURN(std::string layout, stage.StringOr("layout", "CHW"));
  GM_ASSIGN_OR_RETURN(std::string dtype, stage.StringOr("dtype", "float32"));
  if (layout != "CHW" && layout != "HWC") {
    GM_ASSIGN_OR_RETURN(JsonNode node, stage.Get("layout"));
    return node.Expected("\"CHW\" or \"HWC\"");
  }
  if (dtype != "float32" && dtype != "uint8") {
    GM_ASSIGN_OR_RETURN(JsonNode node, stage.Get("dtype"));
    return node.Expected("\"float32\" or \"uint8\"");
  }
  return std::unique_ptr<Op>(
      std::make_unique<ToTensorOp>(layout == "CHW" ? Layout::kCHW : Layout::kHWC,
                                   dtype == "uint8" ? DType::kUInt8 : DType::kFloat32));
}

}  // namespace

int ChooseDctScale(int w, int h, int out_w, int out_h) {
  // Only 1/8, 1/4 and 1/2: libjpeg-turbo has SIMD IDCTs for those; 3/8, 5/8, 6/8
  // and 7/8 use plain C IDCTs and decode slower than the full 8/8 size.
  for (int s : {1, 2, 4}) {
    if (static_cast<int64_t>(w) * s >= int64_t{8} * out_w &&
        static_cast<int64_t>(h) * s >= int64_t{8} * out_h) {
      return s;
    }
  }
  return 8;
}

CropPlan RandomResizedCropPlan(int width, int height, const double scale[2], const double ratio[2],
                               int out_w, int out_h, Rng& rng) {
  CropPlan p;
  p.out_w = out_w;
  p.out_h = out_h;
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(ratio[0]), log_hi = std::log(ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.Uniform(scale[0], scale[1]);
    const double aspect = std::exp(rng.Uniform(log_lo, log_hi));
    const int w = static_cast<int>(std::nearbyint(std::sqrt(target_area * aspect)));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(target_area / aspect)));
    if (0 < w && w <= width && 0 < h && h <= height) {
      p.y = static_cast<int>(rng.Below(static_cast<uint64_t>(height - h + 1)));
      p.x = static_cast<int>(rng.Below(static_cast<uint64_t>(width - w + 1)));
      p.w = w;
      p.h = h;
      return p;
    }
  }
  // Fallback: the central crop with the ratio clamped into range.
  const double in_ratio = static_cast<double>(width) / height;
  p.w = width;
  p.h = height;
  if (in_ratio < ratio[0]) {
    p.h = std::clamp(static_cast<int>(std::nearbyint(width / ratio[0])), 1, height);
  } else if (in_ratio > ratio[1]) {
    p.w = std::clamp(static_cast<int>(std::nearbyint(height * ratio[1])), 1, width);
  }
  p.y = (height - p.h) / 2;
  p.x = (width - p.w) / 2;
  return p;
}

void RegisterImageOps(OpRegistry& registry) {
  registry.Add("decode_jpeg", MakeDecode);
  registry.Add("resize", MakeResize);
  registry.Add("center_crop", MakeCenterCrop);
  registry.Add("random_resized_crop", MakeRandomResizedCrop);
  registry.Add("flip", MakeFlip);
  registry.Add("color_jitter", MakeColorJitter);
  registry.Add("normalize", MakeNormalize);
  registry.Add("to_tensor", MakeToTensor);
}

std::unique_ptr<Op> FuseDecode(std::unique_ptr<Op>& decode, std::unique_ptr<Op>& next) {
  const auto* d = dynamic_cast<const DecodeJpegOp*>(decode.get());
  if (d == nullptr || !d->fast() || dynamic_cast<const RegionOp*>(next.get()) == nullptr) {
    return nullptr;
  }
  return std::make_unique<FusedDecodeOp>(std::move(decode), std::move(next));
}

std::unique_ptr<Op> FuseNormalize(std::unique_ptr<Op>& normalize, std::unique_ptr<Op>& next) {
  const auto* t = dynamic_cast<const ToTensorOp*>(next.get());
  if (dynamic_cast<const NormalizeOp*>(normalize.get()) == nullptr || t == nullptr ||
      t->layout() != Layout::kCHW || t->dtype() != DType::kFloat32) {
    return nullptr;
  }
  return std::make_unique<NormalizeToTensorOp>(std::move(normalize), std::move(next));
}

std::unique_ptr<Op> FuseFlip(std::unique_ptr<Op>& flip, std::unique_ptr<Op>& next) {
  auto* nt = dynamic_cast<NormalizeToTensorOp*>(next.get());
  if (dynamic_cast<const FlipOp*>(flip.get()) == nullptr || nt == nullptr) return nullptr;
  nt->FoldFlip(std::move(flip));
  return std::move(next);
}

}  // namespace gm
