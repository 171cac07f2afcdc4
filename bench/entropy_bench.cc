// The JPEG Huffman decoder: goldminer's (worker/image/jpeg_entropy.h) against
// libjpeg-turbo's own, on the same files, one core, in one run.
//
// Each round decodes every file whole to RGB three ways, alternating: with
// TurboJPEG (tjDecompress2, the peer), with goldminer's decoder and libjpeg's
// Huffman decoding, and with goldminer's decoder and its own. The pixels of the
// last two are compared for every file (they must be equal). Files are read
// into memory first. Prints one JSON object with the medians over the rounds.
// Usage: entropy_bench DIR [--rounds N]
#include <turbojpeg.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/jpeg_corpus.h"
#include "worker/image/jpeg.h"
#include "worker/image/jpeg_entropy.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double ImagesPerSecond(const std::vector<std::string>& files, F decode) {
  auto t0 = std::chrono::steady_clock::now();
  for (const auto& f : files) decode(f);
  double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(files.size()) / dt;
}

}  // namespace

int main(int argc, char** argv) {
  JpegCorpus corpus;
  if (int status = LoadJpegCorpus(argc, argv, "entropy_bench", 5, &corpus); status >= 0) {
    return status;
  }
  const std::vector<std::string>& files = corpus.files;
  const int rounds = corpus.rounds;

  // The two Huffman decoders must give the same pixels.
  size_t mismatches = 0, failures = 0;
  for (const auto& f : files) {
    gm::Tensor a, b;
    gm::SetJpegEntropy(gm::JpegEntropy::kLibjpeg);
    bool ok_a = gm::DecodeJpeg(f, a).ok();
    gm::SetJpegEntropy(gm::JpegEntropy::kFast);
    bool ok_b = gm::DecodeJpeg(f, b).ok();
    if (!ok_a || !ok_b) ++failures;
    if (ok_a != ok_b || a.bytes != b.bytes) ++mismatches;
  }

  tjhandle tj = tjInitDecompress();
  std::vector<unsigned char> out;
  std::vector<double> turbo, libjpeg, fast;
  for (int r = 0; r < rounds; ++r) {
    turbo.push_back(
        ImagesPerSecond(files, [&](const std::string& f) { TurboDecodeRgb(tj, f, out); }));
    for (auto [which, rates] : {std::pair{gm::JpegEntropy::kLibjpeg, &libjpeg},
                                std::pair{gm::JpegEntropy::kFast, &fast}}) {
      gm::SetJpegEntropy(which);
      rates->push_back(ImagesPerSecond(files, [](const std::string& f) {
        gm::Tensor t;
        (void)gm::DecodeJpeg(f, t);
      }));
    }
  }
  tjDestroy(tj);
  std::printf(
      "{\"images\": %zu, \"rounds\": %d, \"turbojpeg_images_per_s\": %.1f, "
      "\"libjpeg_huffman_images_per_s\": %.1f, \"goldminer_huffman_images_per_s\": %.1f, "
      "\"speedup_vs_libjpeg_huffman\": %.3f, \"speedup_vs_turbojpeg\": %.3f, "
      "\"pixel_mismatches\": %zu, \"failed_decodes\": %zu}\n",
      files.size(), rounds, Median(turbo), Median(libjpeg), Median(fast),
      Median(fast) / Median(libjpeg), Median(fast) / Median(turbo), mismatches, failures);
  return mismatches == 0 ? 0 : 1;
}
