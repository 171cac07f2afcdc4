#include "worker/image/image_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/unit/test_util.h"
#include "worker/image/jpeg.h"
#include "worker/image/pixel_ops.h"
#include "worker/image/resize.h"

namespace gm {
namespace {

constexpr char kOrigin[] = "pipeline.json";
constexpr char kStagePath[] = "$.stages[1]";

Result<std::unique_ptr<Op>> TryMakeOp(const std::string& json, uint64_t stage = 1) {
  GM_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(json, kOrigin));
  GM_ASSIGN_OR_RETURN(std::unique_ptr<Op> op,
                      OpRegistry::BuiltIn().Make(JsonNode(j, kOrigin, kStagePath), OpEnv{}));
  op->set_stage(stage);
  return op;
}

std::unique_ptr<Op> MakeOp(const std::string& json, uint64_t stage = 1) {
  auto op = TryMakeOp(json, stage);
  EXPECT_TRUE(op.ok()) << op.status().message();
  return op.ok() ? std::move(op).value() : nullptr;
}

Sample RgbSample(int h, int w, const std::vector<uint8_t>& pixels, uint64_t index = 0) {
  Sample s;
  s.index = index;
  s.tensor.Reset(DType::kUInt8, {h, w, 3});
  s.tensor.bytes.assign(pixels.begin(), pixels.end());
  s.layout = Layout::kHWC;
  return s;
}

std::string Photo() {
  return testing::ReadAll(testing::SourcePath("tests/data/images/photo_500x375.jpg"));
}

// ---- Resampling -------------------------------------------------------------------

TEST(ResizeTest, GivenRampWhenHalvedThenTriangleWeightsThreeThreeOneSevenths) {
  // Columns 0, 10, 20, 30. Downscale 2: support 2, weights 3/7, 3/7, 1/7 (and
  // mirrored), so out = (0*3 + 10*3 + 20) / 7 = 7.14 and (10 + 60 + 90) / 7 = 22.9.
  std::vector<uint8_t> px(4 * 4 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(10 * ((i / 3) % 4));
  std::vector<uint8_t> out(2 * 2 * 3);

  ResizeBilinear(RgbView{px.data(), 4, 4, 12}, SourceBox{0, 0, 4, 4}, 2, 2, out.data());

  EXPECT_EQ(out, (std::vector<uint8_t>{7, 7, 7, 23, 23, 23, 7, 7, 7, 23, 23, 23}));
}

std::vector<uint8_t> Pattern7x5() {
  std::vector<uint8_t> v(5 * 7 * 3);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  return v;
}

TEST(ResizeTest, GivenPatternWhenResizedThenEqualsPillowBilinear) {
  const std::vector<uint8_t> px = Pattern7x5();
  std::vector<uint8_t> out(3 * 2 * 3);

  ResizeBilinear(RgbView{px.data(), 7, 5, 21}, SourceBox{0, 0, 7, 5}, 3, 2, out.data());

  // Image.fromarray(a).resize((3, 2), Image.BILINEAR) with Pillow 9.4.
  EXPECT_EQ(out, (std::vector<uint8_t>{113, 97, 134, 154, 131, 111, 134, 169, 128, 93, 115, 152,
                                       131, 108, 129, 152, 149, 83}));
}

TEST(ResizeTest, GivenIntegerBoxWhenResizedThenEqualsPillowCropThenResize) {
  const std::vector<uint8_t> px = Pattern7x5();
  std::vector<uint8_t> out(4 * 3 * 3);

  ResizeBilinear(RgbView{px.data(), 7, 5, 21}, SourceBox{1, 1, 6, 5}, 4, 3, out.data());

  // Image.fromarray(a).crop((1, 1, 6, 5)).resize((4, 3), Image.BILINEAR).
  EXPECT_EQ(out, (std::vector<uint8_t>{162, 135, 172, 185, 72, 109, 165, 202, 89,  102, 139, 112,
                                       141, 146, 183, 121, 83, 120, 176, 138, 100, 113, 118, 123,
                                       119, 156, 193, 56,  93, 130, 186, 73,  110, 123, 96,  133}));
}

TEST(ResizeTest, GivenUpscaleWhenResizedThenEqualsPillow) {
  const std::vector<uint8_t> px = Pattern7x5();
  std::vector<uint8_t> out(11 * 8 * 3);

  ResizeBilinear(RgbView{px.data(), 7, 5, 21}, SourceBox{0, 0, 7, 5}, 11, 8, out.data());

  const std::vector<uint8_t> first = {11, 48, 85,  61, 98, 135, 132, 146, 183, 203,
                                      54, 91, 180, 54, 91, 88,  125, 162, 159, 196};
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 20), first);
  int64_t sum = 0;
  for (uint8_t v : out) sum += v;
  EXPECT_EQ(sum, 33457);  // numpy sum of Pillow's result
}

// ---- Geometric ops ----------------------------------------------------------------

TEST(ImageOpsTest, GivenShortSideSizeWhenResizedThenAspectKeptLikeTorchvision) {
  auto op = MakeOp(R"({"op": "resize", "size": 256})");
  Rng rng(1);

  CropPlan p = dynamic_cast<const RegionOp&>(*op).Plan(500, 375, rng);

  EXPECT_EQ(p.out_h, 256);
  EXPECT_EQ(p.out_w, 341);  // int(256 * 500 / 375)
  EXPECT_EQ(p.w, 500);
  EXPECT_EQ(p.h, 375);
}

TEST(ImageOpsTest, GivenExactSizeWhenAppliedThenOutputHasThatShape) {
  auto op = MakeOp(R"({"op": "resize", "size": [3, 2]})");
  Sample s = RgbSample(5, 7, Pattern7x5());

  ASSERT_TRUE(op->Apply(s, RunContext{}).ok());

  EXPECT_EQ(s.tensor.shape, (std::vector<int64_t>{3, 2, 3}));
  EXPECT_EQ(s.layout, Layout::kHWC);
}

TEST(ImageOpsTest, GivenCenterCropWhenAppliedThenCopiesTheRoundedCentreBox) {
  auto op = MakeOp(R"({"op": "center_crop", "size": [2, 3]})");
  Sample s = RgbSample(5, 7, Pattern7x5());

  ASSERT_TRUE(op->Apply(s, RunContext{}).ok());

  // top = round((5 - 2) / 2) = round(1.5) = 2, left = round((7 - 3) / 2) = 2.
  ASSERT_EQ(s.tensor.shape, (std::vector<int64_t>{2, 3, 3}));
  const std::vector<uint8_t> src = Pattern7x5();
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 9; ++x) {
      EXPECT_EQ(s.tensor.bytes[y * 9 + x], src[(y + 2) * 21 + 6 + x]);
    }
  }
}

TEST(ImageOpsTest, GivenRandomResizedCropWhenPlannedThenBoxInBoundsAndDeterministic) {
  auto op = MakeOp(R"({"op": "random_resized_crop", "size": 224})");
  const auto& region = dynamic_cast<const RegionOp&>(*op);
  Sample a, b;
  a.index = 7;
  b.index = 8;
  RunContext run{42, 3};
  int differing = 0;
  for (int i = 0; i < 50; ++i) {
    a.index = b.index + 1 + i;
    Rng r1 = op->MakeRng(a, run), r2 = op->MakeRng(a, run), r3 = op->MakeRng(b, run);
    CropPlan p = region.Plan(500, 375, r1), q = region.Plan(500, 375, r2),
             o = region.Plan(500, 375, r3);
    EXPECT_TRUE(p.x >= 0 && p.y >= 0 && p.w > 0 && p.h > 0);
    EXPECT_LE(p.x + p.w, 500);
    EXPECT_LE(p.y + p.h, 375);
    const double area = double(p.w) * p.h / (500.0 * 375.0), ratio = double(p.w) / p.h;
    EXPECT_TRUE(area >= 0.075 && area <= 1.0) << area;
    EXPECT_TRUE(ratio >= 0.74 && ratio <= 1.34) << ratio;
    EXPECT_EQ(p.out_w, 224);
    EXPECT_EQ(p.out_h, 224);
    EXPECT_TRUE(p.x == q.x && p.y == q.y && p.w == q.w && p.h == q.h);
    differing += (p.x != o.x || p.y != o.y || p.w != o.w || p.h != o.h);
  }
  EXPECT_GE(differing, 45);
}

TEST(ImageOpsTest, GivenImpossibleRatioWhenPlannedThenCentralFallback) {
  const double scale[2] = {0.99, 1.0}, ratio[2] = {3.0, 4.0};
  Rng rng(5);

  // A 100x100 image cannot hold a 3:1 box of 99% of its area: fall back.
  CropPlan p = RandomResizedCropPlan(100, 100, scale, ratio, 32, 32, rng);

  EXPECT_EQ(p.w, 100);
  EXPECT_EQ(p.h, 33);  // round(100 / 3)
  EXPECT_EQ(p.x, 0);
  EXPECT_EQ(p.y, 33);  // (100 - 33) // 2
}

TEST(ImageOpsTest, GivenBoxAndOutputWhenChoosingDctScaleThenSmallestThatStillCovers) {
  EXPECT_EQ(ChooseDctScale(500, 375, 224, 224), 8);  // 4/8 gives 187 rows; 5/8 is slow
  EXPECT_EQ(ChooseDctScale(1000, 460, 224, 224), 4);
  EXPECT_EQ(ChooseDctScale(1000, 440, 224, 224), 8);
  EXPECT_EQ(ChooseDctScale(2000, 2000, 224, 224), 1);
  EXPECT_EQ(ChooseDctScale(448, 448, 224, 224), 4);
  EXPECT_EQ(ChooseDctScale(100, 100, 224, 224), 8);
}

// ---- Pixel ops --------------------------------------------------------------------

TEST(ImageOpsTest, GivenFlipWithPOneWhenAppliedThenRowsMirrored) {
  auto op = MakeOp(R"({"op": "flip", "p": 1.0})");
  Sample s = RgbSample(2, 3, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18});

  ASSERT_TRUE(op->Apply(s, RunContext{}).ok());

  EXPECT_EQ(s.tensor.bytes,
            (std::vector<uint8_t>{7, 8, 9, 4, 5, 6, 1, 2, 3, 16, 17, 18, 13, 14, 15, 10, 11, 12}));
}

// The row kernels (16-byte shuffles of RGB rows, fixed-size swaps for other
// pixel sizes), in place and into another buffer, against a plain mirror, for
// every width around their block boundaries, on the last rows of a buffer with
// nothing after it.
TEST(ImageOpsTest, GivenAnyWidthAndPixelSizeWhenFlippedInPlaceOrIntoACopyThenEachRowIsMirrored) {
  uint32_t seed = 7;
  for (int pixel_bytes : {1, 2, 3, 4, 5}) {
    for (int width = 0; width <= 70; ++width) {
      for (int height : {1, 3}) {
        const size_t n = static_cast<size_t>(width) * height * pixel_bytes;
        std::vector<uint8_t> in(n);
        for (uint8_t& v : in) v = static_cast<uint8_t>((seed = seed * 1103515245u + 12345u) >> 24);
        std::vector<uint8_t> want(n);
        for (int r = 0; r < height; ++r) {
          for (int x = 0; x < width; ++x) {
            for (int c = 0; c < pixel_bytes; ++c) {
              want[(static_cast<size_t>(r) * width + x) * pixel_bytes + c] =
                  in[(static_cast<size_t>(r) * width + (width - 1 - x)) * pixel_bytes + c];
            }
          }
        }
        // Exactly n bytes on the heap: under AddressSanitizer, a read or write
        // past the image fails the test.
        std::unique_ptr<uint8_t[]> got(new uint8_t[std::max<size_t>(n, 1)]);
        std::copy(in.begin(), in.end(), got.get());
        FlipHorizontal(got.get(), width, height, pixel_bytes);
        ASSERT_TRUE(std::equal(want.begin(), want.end(), got.get()))
            << "width " << width << ", height " << height << ", " << pixel_bytes
            << " bytes per pixel";
        // Into another buffer, from one of exactly n bytes.
        std::unique_ptr<uint8_t[]> from(new uint8_t[std::max<size_t>(n, 1)]);
        std::copy(in.begin(), in.end(), from.get());
        std::vector<uint8_t> copy(n, 0xEE);
        FlipHorizontalCopy(from.get(), copy.data(), width, height, pixel_bytes);
        ASSERT_EQ(copy, want) << "copy: width " << width << ", height " << height << ", "
                              << pixel_bytes << " bytes per pixel";
      }
    }
  }
}

TEST(ImageOpsTest, GivenFlipNormalizeToTensorWhenFusedThenBitIdenticalToTheThreeOps) {
  // Widths around the 8-pixel SIMD blocks, both flip outcomes (p 0.5 over many
  // sample indices), one fused op against flip, normalize and to_tensor in turn.
  const char* kNormalize = R"({"op": "normalize", "mean": [0.485, 0.456, 0.406],
                               "std": [0.229, 0.224, 0.225]})";
  const char* kToTensor = R"({"op": "to_tensor", "layout": "CHW", "dtype": "float32"})";
  std::unique_ptr<Op> flip = MakeOp(R"({"op": "flip", "p": 0.5})", 2);
  std::unique_ptr<Op> normalize = MakeOp(kNormalize, 3), to_tensor = MakeOp(kToTensor, 4);
  std::unique_ptr<Op> fused = FuseNormalize(normalize, to_tensor);
  ASSERT_NE(fused, nullptr);
  std::unique_ptr<Op> flip_part = MakeOp(R"({"op": "flip", "p": 0.5})", 2);
  fused = FuseFlip(flip_part, fused);
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->name(), "flip+normalize+to_tensor");
  EXPECT_EQ(fused->stage(), 2u);
  auto n_op = MakeOp(kNormalize, 3), t_op = MakeOp(kToTensor, 4);
  int mirrored = 0;
  for (int w : {1, 7, 8, 9, 16, 23, 224}) {
    for (uint64_t index = 0; index < 6; ++index) {
      std::vector<uint8_t> px(static_cast<size_t>(3 * 5 * w));
      for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 37 + index * 11 + w);
      Sample a = RgbSample(5, w, px, index), b = RgbSample(5, w, px, index);
      const RunContext run{7, 1};
      ASSERT_TRUE(flip->Apply(a, run).ok());
      ASSERT_TRUE(n_op->Apply(a, run).ok());
      ASSERT_TRUE(t_op->Apply(a, run).ok());
      ASSERT_TRUE(fused->Apply(b, run).ok());
      EXPECT_EQ(a.tensor.shape, b.tensor.shape);
      EXPECT_EQ(a.layout, b.layout);
      EXPECT_TRUE(b.normalized);
      EXPECT_EQ(a.tensor.bytes, std::vector<uint8_t>(b.tensor.bytes.begin(), b.tensor.bytes.end()))
          << "width " << w << ", sample " << index;
      Sample c = RgbSample(5, w, px, index);  // was this one flipped?
      ASSERT_TRUE(flip->Apply(c, run).ok());
      mirrored += w > 1 && !(c.tensor.bytes == px) ? 1 : 0;
    }
  }
  EXPECT_GT(mirrored, 0);  // both outcomes were exercised
  EXPECT_LT(mirrored, 36);
}

TEST(ResizeTest, GivenAnyBoxAndScaleWhenResizedWithEachSimdLevelThenBytesEqualScalarKernels) {
  // Random images, fractional boxes (as after a DCT scale), down- and upscales,
  // odd and even output widths: the SIMD kernels must give the scalar bytes.
  uint64_t state = 12345;
  const auto next = [&](uint64_t bound) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % bound;
  };
  int compared = 0;
  for (int round = 0; round < 300; ++round) {
    const int w = 1 + static_cast<int>(next(round < 100 ? 40 : 700));
    const int h = 1 + static_cast<int>(next(round < 100 ? 40 : 120));
    const ptrdiff_t stride = static_cast<ptrdiff_t>(w) * 3 + static_cast<ptrdiff_t>(next(9));
    std::vector<uint8_t> px(static_cast<size_t>(stride) * h);
    // Extremes (0 and 255) are common so that rounding and saturation are reached.
    for (auto& b : px)
      b = next(4) == 0 ? static_cast<uint8_t>(255 * next(2)) : static_cast<uint8_t>(next(256));
    const double x0 = static_cast<double>(next(static_cast<uint64_t>(w) * 8)) / 16.0;
    const double y0 = static_cast<double>(next(static_cast<uint64_t>(h) * 8)) / 16.0;
    const double x1 = std::min<double>(
        w, x0 + 0.5 + static_cast<double>(next(static_cast<uint64_t>(w) * 16)) / 16.0);
    const double y1 = std::min<double>(
        h, y0 + 0.5 + static_cast<double>(next(static_cast<uint64_t>(h) * 16)) / 16.0);
    const int out_w = 1 + static_cast<int>(next(round % 3 == 0 ? 500 : 230));
    const int out_h = 1 + static_cast<int>(next(60));
    const RgbView view{px.data(), w, h, stride};
    const SourceBox box{x0, y0, x1, y1};
    std::vector<uint8_t> scalar(static_cast<size_t>(out_w) * out_h * 3);
    ResizeBilinear(view, box, out_w, out_h, scalar.data(), ResizeIsa::kScalar);
    for (ResizeIsa isa : {ResizeIsa::kBest, ResizeIsa::kAvx512, ResizeIsa::kAvx2}) {
      std::vector<uint8_t> simd(scalar.size());
      ResizeBilinear(view, box, out_w, out_h, simd.data(), isa);
      ASSERT_EQ(simd, scalar) << "isa " << static_cast<int>(isa) << ": " << w << "x" << h << " box "
                              << x0 << "," << y0 << "," << x1 << "," << y1 << " to " << out_w << "x"
                              << out_h;
    }
    ++compared;
  }
  EXPECT_EQ(compared, 300);
}

TEST(ResizeTest, GivenAnySizeAndAlignmentWhenCopiedStreamingThenBytesEqualMemcpy) {
  std::vector<uint8_t> src(300000), dst(300000 + 64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{31}, size_t{4095}, size_t{4096}, size_t{4097},
                       size_t{150528}, size_t{150528 + 77}}) {
    for (size_t misalign : {size_t{0}, size_t{1}, size_t{17}, size_t{31}}) {
      std::fill(dst.begin(), dst.end(), uint8_t{0xAB});
      CopyStreaming(dst.data() + misalign, src.data() + 3, bytes);
      ASSERT_TRUE(std::equal(src.begin() + 3, src.begin() + 3 + static_cast<ptrdiff_t>(bytes),
                             dst.begin() + static_cast<ptrdiff_t>(misalign)))
          << bytes << " bytes at +" << misalign;
      // Nothing written around the range.
      for (size_t i = 0; i < misalign; ++i) ASSERT_EQ(dst[i], 0xAB);
      ASSERT_EQ(dst[misalign + bytes], 0xAB) << bytes << " bytes at +" << misalign;
    }
  }
}

TEST(ImageOpsTest, GivenFlipWithPZeroWhenAppliedThenUnchanged) {
  auto op = MakeOp(R"({"op": "flip", "p": 0})");
  Sample s = RgbSample(1, 2, {1, 2, 3, 4, 5, 6});

  ASSERT_TRUE(op->Apply(s, RunContext{}).ok());

  EXPECT_EQ(s.tensor.bytes, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
}

TEST(ImageOpsTest, GivenUint8PixelsWhenNormalizedThenFloatFormula) {
  auto op = MakeOp(R"({"op": "normalize", "mean": [0.5, 0.25, 0], "std": [0.5, 0.25, 2]})");
  Sample s = RgbSample(1, 2, {0, 255, 51, 255, 0, 102});

  ASSERT_TRUE(op->Apply(s, RunContext{}).ok());

  ASSERT_EQ(s.tensor.dtype, DType::kFloat32);
  EXPECT_TRUE(s.normalized);
  const float* f = s.tensor.data<float>();
  const float expected[6] = {-1.0f, 3.0f, 0.1f, 1.0f, -1.0f, 0.2f};  // (x/255 - m) / s
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(f[i], expected[i], 1e-6) << i;
}

TEST(ImageOpsTest, GivenToTensorThenNormalizeWhenChwThenPerPlaneFormula) {
  auto to_tensor = MakeOp(R"({"op": "to_tensor", "layout": "CHW", "dtype": "float32"})");
  auto normalize =
      MakeOp(R"({"op": "normalize", "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]})");
  // 1 row, 2 pixels: (0, 51, 102), (153, 204, 255).
  Sample s = RgbSample(1, 2, {0, 51, 102, 153, 204, 255});

  ASSERT_TRUE(to_tensor->Apply(s, RunContext{}).ok());
  ASSERT_EQ(s.tensor.shape, (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(s.layout, Layout::kCHW);
  EXPECT_FALSE(s.normalized);
  // CHW: [c][y][x] = pixel x's channel c, divided by 255.
  const float chw[6] = {0.0f, 0.6f, 0.2f, 0.8f, 0.4f, 1.0f};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(s.tensor.data<float>()[i], chw[i], 1e-6) << i;

  ASSERT_TRUE(normalize->Apply(s, RunContext{}).ok());
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(s.tensor.data<float>()[i], chw[i] * 2 - 1, 1e-6) << i;
  EXPECT_TRUE(s.normalized);
}

TEST(ImageOpsTest, GivenNormalizedHwcWhenToTensorChwThenLayoutOnlyNoRescale) {
  auto normalize = MakeOp(R"({"op": "normalize", "mean": [0, 0, 0], "std": [1, 1, 1]})");
  auto to_tensor = MakeOp(R"({"op": "to_tensor"})");
  Sample s = RgbSample(1, 1, {255, 0, 51});

  ASSERT_TRUE(normalize->Apply(s, RunContext{}).ok());
  ASSERT_TRUE(to_tensor->Apply(s, RunContext{}).ok());

  EXPECT_NEAR(s.tensor.data<float>()[0], 1.0f, 1e-6);
  EXPECT_NEAR(s.tensor.data<float>()[2], 0.2f, 1e-6);
}

TEST(ImageOpsTest, GivenUint8ChwRequestWhenToTensorThenTransposedBytes) {
  auto op = MakeOp(R"({"op": "to_tensor", "layout": "CHW", "dtype": "uint8"})");
  Sample s = RgbSample(2, 1, {1, 2, 3, 4, 5, 6});

  ASSERT_TRUE(op->Apply(s, RunContext{}).ok());

  EXPECT_EQ(s.tensor.shape, (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(s.tensor.bytes, (std::vector<uint8_t>{1, 4, 2, 5, 3, 6}));
}

TEST(ImageOpsTest, GivenColorJitterWhenAppliedThenTorchvisionFormulasWithDrawnFactors) {
  auto op =
      MakeOp(R"({"op": "color_jitter", "brightness": 0.4, "contrast": 0.4, "saturation": 0.4})", 3);
  const std::vector<uint8_t> px = {200, 100, 50, 10, 20, 30};
  Sample s = RgbSample(1, 2, px, 11);
  RunContext run{9, 2};

  ASSERT_TRUE(op->Apply(s, run).ok());

  Rng rng = Rng::ForSample(9, 2, 11, 3);
  float fb = float(rng.Uniform(0.6, 1.4)), fc = float(rng.Uniform(0.6, 1.4)),
        fs = float(rng.Uniform(0.6, 1.4));
  auto blend = [](float f, float x, float o) {
    return float(uint8_t(std::clamp(f * x + (1 - f) * o, 0.0f, 255.0f)));
  };
  auto gray = [](const float* p) {
    return std::floor(0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2]);
  };
  float v[6];
  for (int i = 0; i < 6; ++i) v[i] = blend(fb, px[i], 0);
  const float mean = (gray(v) + gray(v + 3)) / 2;
  for (float& x : v) x = blend(fc, x, mean);
  const float g[2] = {gray(v), gray(v + 3)};
  for (int i = 0; i < 6; ++i) v[i] = blend(fs, v[i], g[i / 3]);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(s.tensor.bytes[i], v[i]) << i;
  EXPECT_NE(s.tensor.bytes, px);
}

TEST(ImageOpsTest, GivenFloatTensorWhenCropThenInvalidArgumentNamesOp) {
  auto op = MakeOp(R"({"op": "center_crop", "size": 2})");
  Sample s = RgbSample(2, 2, std::vector<uint8_t>(12, 0));
  s.tensor.dtype = DType::kFloat32;

  Status st = op->Apply(s, RunContext{});

  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("center_crop needs a uint8"), std::string::npos) << st.message();
}

// ---- Decode and fusion --------------------------------------------------------------

TEST(ImageOpsTest, GivenBadFilesWhenDecodeOpAndFusedOpThenCorruptNeverCrash) {
  for (const char* file : {"truncated.jpg", "empty.jpg", "png_named.jpg", "random_bytes.jpg"}) {
    std::unique_ptr<Op> decode = MakeOp(R"({"op": "decode_jpeg"})", 0);
    std::unique_ptr<Op> crop = MakeOp(R"({"op": "center_crop", "size": 400})", 1);
    Sample s;
    s.data = testing::ReadAll(testing::SourcePath(std::string("tests/data/images/") + file));
    EXPECT_EQ(decode->Apply(s, RunContext{}).code(), Code::kCorrupt) << file;
    std::unique_ptr<Op> fused = FuseDecode(decode, crop);
    ASSERT_NE(fused, nullptr);
    EXPECT_EQ(fused->Apply(s, RunContext{}).code(), Code::kCorrupt) << file;
  }
}

TEST(ImageOpsTest, GivenDecodeAndRegionOpWhenFusedThenNameAndStageOfNext) {
  std::unique_ptr<Op> decode = MakeOp(R"({"op": "decode_jpeg"})", 0);
  std::unique_ptr<Op> rrc = MakeOp(R"({"op": "random_resized_crop", "size": 224})", 1);

  std::unique_ptr<Op> fused = FuseDecode(decode, rrc);

  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->name(), "decode_jpeg+random_resized_crop");
  EXPECT_EQ(fused->stage(), 1u);
}

TEST(ImageOpsTest, GivenSlowDecodeOrNonRegionNextWhenFusingThenNothingFused) {
  std::unique_ptr<Op> slow = MakeOp(R"({"op": "decode_jpeg", "fast": false})", 0);
  std::unique_ptr<Op> fast = MakeOp(R"({"op": "decode_jpeg"})", 0);
  std::unique_ptr<Op> rrc = MakeOp(R"({"op": "random_resized_crop", "size": 224})", 1);
  std::unique_ptr<Op> flip = MakeOp(R"({"op": "flip"})", 1);

  EXPECT_EQ(FuseDecode(slow, rrc), nullptr);
  EXPECT_EQ(FuseDecode(fast, flip), nullptr);
  EXPECT_NE(slow, nullptr);
  EXPECT_NE(rrc, nullptr);
}

double MeanAbsDiff(const Tensor& a, const Tensor& b) {
  double total = 0;
  for (size_t i = 0; i < a.bytes.size(); ++i) total += std::abs(int(a.bytes[i]) - int(b.bytes[i]));
  return total / static_cast<double>(a.bytes.size());
}

// Runs decode + `region_json` fused and unfused on the photo; returns the mean
// absolute difference, and checks the shapes agree.
double FusedVersusUnfused(const std::string& region_json, uint64_t index,
                          const std::string& file = "photo_500x375.jpg") {
  RunContext run{1234, 5};
  Sample plain, fast;
  plain.index = fast.index = index;
  plain.data = fast.data = testing::ReadAll(testing::SourcePath("tests/data/images/" + file));
  auto decode = MakeOp(R"({"op": "decode_jpeg"})", 0);
  auto region = MakeOp(region_json, 1);
  EXPECT_TRUE(decode->Apply(plain, run).ok());
  EXPECT_TRUE(region->Apply(plain, run).ok());
  auto fused = FuseDecode(decode, region);
  EXPECT_NE(fused, nullptr);
  EXPECT_TRUE(fused->Apply(fast, run).ok());
  EXPECT_EQ(plain.tensor.shape, fast.tensor.shape);
  EXPECT_EQ(fast.layout, Layout::kHWC);
  if (plain.tensor.shape != fast.tensor.shape) return 255;
  return MeanAbsDiff(plain.tensor, fast.tensor);
}

TEST(ImageOpsTest, GivenRealPhotoWhenFusedRandomResizedCropThenCloseToUnfused) {
  for (uint64_t index = 0; index < 12; ++index) {
    EXPECT_LT(FusedVersusUnfused(R"({"op": "random_resized_crop", "size": 224})", index), 3.0)
        << "index " << index;
  }
}

TEST(ImageOpsTest, GivenRealPhotoWhenFusedResizeOrCenterCropThenCloseToUnfused) {
  EXPECT_LT(FusedVersusUnfused(R"({"op": "resize", "size": 128})", 0), 3.0);
  EXPECT_LT(FusedVersusUnfused(R"({"op": "center_crop", "size": [200, 300]})", 0), 0.5);
}

TEST(ImageOpsTest, GivenOtherKindsOfJpegWhenFusedThenCloseToUnfused) {
  for (const char* file :
       {"photo_333x251_444.jpg", "gray_160x120.jpg", "cmyk_64x48.jpg", "progressive_200x150.jpg"}) {
    for (uint64_t index = 0; index < 4; ++index) {
      EXPECT_LT(FusedVersusUnfused(R"({"op": "random_resized_crop", "size": 40})", index, file),
                3.0)
          << file << " index " << index;
    }
  }
}

TEST(ImageOpsTest, GivenSameSampleTwiceWhenFusedThenBitIdentical) {
  auto decode = MakeOp(R"({"op": "decode_jpeg"})", 0);
  auto rrc = MakeOp(R"({"op": "random_resized_crop", "size": 96})", 1);
  auto fused = FuseDecode(decode, rrc);
  Sample a, b;
  a.index = b.index = 17;
  a.data = b.data = Photo();

  ASSERT_TRUE(fused->Apply(a, RunContext{3, 1}).ok());
  ASSERT_TRUE(fused->Apply(b, RunContext{3, 1}).ok());

  EXPECT_EQ(a.tensor.bytes, b.tensor.bytes);
}

// ---- Parameter errors ---------------------------------------------------------------

struct BadParams {
  const char* json;
  const char* message;
};

class BadOpParams : public ::testing::TestWithParam<BadParams> {};

TEST_P(BadOpParams, GivenBadParameterWhenMakingOpThenErrorNamesJsonPath) {
  auto op = TryMakeOp(GetParam().json);

  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().code(), Code::kInvalidArgument);
  EXPECT_NE(op.status().message().find(GetParam().message), std::string::npos)
      << op.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Stages, BadOpParams,
    ::testing::Values(
        BadParams{R"({"op": "resize", "size": "224"})",
                  "pipeline.json: $.stages[1].size: expected a positive integer"},
        BadParams{R"({"op": "center_crop", "size": [224, 0]})", "$.stages[1].size: expected"},
        BadParams{R"({"op": "resize"})", "$.stages[1]: missing required key \"size\""},
        BadParams{R"({"op": "flip", "p": -0.5})",
                  "$.stages[1].p: expected a probability in [0, 1], got -0.5"},
        BadParams{R"({"op": "flip", "prob": 0.5})", "unknown key \"prob\""},
        BadParams{R"({"op": "normalize", "mean": [0, 0, 0], "std": [1, 0, 1]})",
                  "$.stages[1].std: expected an array of 3 positive numbers"},
        BadParams{R"({"op": "normalize", "mean": [0, 0], "std": [1, 1, 1]})",
                  "$.stages[1].mean: expected an array of 3 numbers"},
        BadParams{R"({"op": "random_resized_crop", "size": 224, "scale": [1.0, 0.08]})",
                  "$.stages[1].scale: expected an array [lo, hi]"},
        BadParams{R"({"op": "color_jitter", "brightness": -1})",
                  "$.stages[1].brightness: expected a number >= 0"},
        BadParams{R"({"op": "color_jitter", "hue": 0.1})", "unknown key \"hue\""},
        BadParams{R"({"op": "to_tensor", "layout": "NHWC"})", "$.stages[1].layout: expected"},
        BadParams{R"({"op": "decode_jpeg", "fast": "yes"})", "$.stages[1].fast: expected true"}));

}  // namespace
}  // namespace gm

namespace gm {
namespace {

// A file cut below the crop box must be bad input whatever the crop: the fused
// decode stops early, so the end-of-image check is what catches it.
TEST(FusedDecodeTest, GivenATruncatedJpegThenEveryCropReportsItCorrupt) {
  std::string truncated = testing::ReadAll(testing::SourcePath("tests/data/engine/truncated.jpg"));
  auto stages =
      nlohmann::json::parse(R"([{"op": "decode_jpeg"}, {"op": "center_crop", "size": [8, 8]}])");
  JsonNode root(stages, "test.json");
  std::unique_ptr<Op> decode = *OpRegistry::BuiltIn().Make(*root.At(0), OpEnv{});
  std::unique_ptr<Op> crop = *OpRegistry::BuiltIn().Make(*root.At(1), OpEnv{});
  crop->set_stage(1);
  std::unique_ptr<Op> fused = FuseDecode(decode, crop);
  ASSERT_NE(fused, nullptr);
  for (uint64_t index = 0; index < 20; ++index) {
    Sample s;
    s.index = index;
    s.data = truncated;
    Status st = fused->Apply(s, RunContext{1, 0});
    EXPECT_EQ(st.code(), Code::kCorrupt) << index;
    EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace gm

namespace gm {
namespace {

// normalize (ImageNet's mean and std) then to_tensor (CHW float32), as a pipeline
// file has them.
std::pair<std::unique_ptr<Op>, std::unique_ptr<Op>> NormalizeThenToTensor() {
  const auto stages = nlohmann::json::parse(R"([
      {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
      {"op": "to_tensor", "layout": "CHW", "dtype": "float32"}])");
  JsonNode root(stages, "test.json");
  auto make = [&](size_t i) { return *OpRegistry::BuiltIn().Make(*root.At(i), OpEnv{}); };
  return {make(0), make(1)};
}

TEST(FusedNormalizeTest, GivenUint8ImageThenOnePassEqualsNormalizeThenToTensorBitForBit) {
  auto [normalize, to_tensor] = NormalizeThenToTensor();
  Sample a;
  ASSERT_TRUE(
      DecodeJpeg(testing::ReadAll(testing::SourcePath("tests/data/engine/photo1.jpg")), a.tensor)
          .ok());
  a.layout = Layout::kHWC;
  Sample b = a;
  ASSERT_TRUE(normalize->Apply(a, RunContext{}).ok());
  ASSERT_TRUE(to_tensor->Apply(a, RunContext{}).ok());
  auto [n2, t2] = NormalizeThenToTensor();
  std::unique_ptr<Op> fused = FuseNormalize(n2, t2);
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->name(), "normalize+to_tensor");
  ASSERT_TRUE(fused->Apply(b, RunContext{}).ok());
  EXPECT_EQ(b.tensor.shape, a.tensor.shape);
  EXPECT_EQ(b.layout, Layout::kCHW);
  EXPECT_TRUE(b.normalized);
  EXPECT_EQ(b.tensor.bytes, a.tensor.bytes);
}

TEST(FusedNormalizeTest, GivenASlotInABatchBufferThenTheTensorIsWrittenThereWithTheSameBytes) {
  auto [normalize, to_tensor] = NormalizeThenToTensor();
  std::unique_ptr<Op> fused = FuseNormalize(normalize, to_tensor);
  ASSERT_NE(fused, nullptr);
  // Widths whose rows are 32-byte aligned in the slot (streaming stores) and not.
  for (int w : {224, 16, 13}) {
    Sample own = RgbSample(5, w, [&] {
      std::vector<uint8_t> px(static_cast<size_t>(5) * w * 3);
      for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 37 + 11);
      return px;
    }());
    own.layout = Layout::kHWC;
    Sample lent = own;
    lent.arena = std::make_shared<BatchArena>(3, [](size_t bytes) { return HeapMemory(bytes); });
    lent.arena_slot = 1;
    ASSERT_TRUE(fused->Apply(own, RunContext{}).ok());
    ASSERT_TRUE(fused->Apply(lent, RunContext{}).ok());
    ASSERT_NE(lent.in_arena, nullptr) << w;
    EXPECT_TRUE(lent.tensor.bytes.empty());
    EXPECT_EQ(lent.tensor.shape, own.tensor.shape);
    ASSERT_EQ(lent.tensor_size(), own.tensor.bytes.size());
    EXPECT_TRUE(std::equal(own.tensor.bytes.begin(), own.tensor.bytes.end(), lent.tensor_data()))
        << "width " << w;
    // Slot 1 of the arena's buffer.
    auto whole = lent.arena->Take(3);
    ASSERT_TRUE(whole);
    EXPECT_EQ(lent.in_arena, whole->data + own.tensor.bytes.size());
  }
}

TEST(ImageOpsTest, GivenASlotInABatchBufferThenToTensorWritesThereWithTheSameBytes) {
  std::unique_ptr<Op> to_tensor =
      MakeOp(R"({"op": "to_tensor", "layout": "CHW", "dtype": "uint8"})");
  ASSERT_NE(to_tensor, nullptr);
  Sample own = RgbSample(5, 7, Pattern7x5());
  Sample lent = own;
  lent.arena = std::make_shared<BatchArena>(2, [](size_t bytes) { return HeapMemory(bytes); });
  ASSERT_TRUE(to_tensor->Apply(own, RunContext{}).ok());
  ASSERT_TRUE(to_tensor->Apply(lent, RunContext{}).ok());
  ASSERT_NE(lent.in_arena, nullptr);
  EXPECT_EQ(lent.tensor.shape, (std::vector<int64_t>{3, 5, 7}));
  ASSERT_EQ(lent.tensor_size(), own.tensor.bytes.size());
  EXPECT_TRUE(std::equal(own.tensor.bytes.begin(), own.tensor.bytes.end(), lent.tensor_data()));
  // A second new tensor does not take the slot its input is in.
  const uint8_t* slot = lent.in_arena;
  uint8_t* next = lent.NewTensor(DType::kUInt8, {3, 5, 7});
  EXPECT_NE(next, slot);
  EXPECT_EQ(lent.in_arena, nullptr);
  EXPECT_EQ(lent.tensor.bytes.size(), 105u);
}

TEST(FusedNormalizeTest, GivenToTensorToHwcOrUint8ThenNoFusion) {
  auto stages = nlohmann::json::parse(R"([
      {"op": "normalize", "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]},
      {"op": "to_tensor", "layout": "HWC", "dtype": "float32"},
      {"op": "flip", "p": 0.5}])");
  JsonNode root(stages, "test.json");
  auto make = [&](size_t i) { return *OpRegistry::BuiltIn().Make(*root.At(i), OpEnv{}); };
  std::unique_ptr<Op> n = make(0), hwc = make(1), flip = make(2);
  EXPECT_EQ(FuseNormalize(n, hwc), nullptr);
  EXPECT_EQ(FuseNormalize(n, flip), nullptr);
  EXPECT_NE(n, nullptr);  // nothing was taken
}

}  // namespace
}  // namespace gm
