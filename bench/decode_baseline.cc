// Decode alone: libjpeg-turbo (TurboJPEG tjDecompress2, full size, RGB) on one
// core over the same files, the ceiling a per-core pipeline is compared with.
// Files are read into memory first; prints one JSON object.
// Usage: decode_baseline FILE_LIST_OR_DIR [--rounds N]
#include <turbojpeg.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/jpeg_corpus.h"

int main(int argc, char** argv) {
  JpegCorpus corpus;
  if (int status = LoadJpegCorpus(argc, argv, "decode_baseline", 3, &corpus); status >= 0) {
    return status;
  }
  const std::vector<std::string>& files = corpus.files;
  const int rounds = corpus.rounds;
  tjhandle tj = tjInitDecompress();
  std::vector<unsigned char> out;
  std::vector<double> rates;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (const auto& f : files) TurboDecodeRgb(tj, f, out);
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(files.size() / dt);
  }
  tjDestroy(tj);
  std::sort(rates.begin(), rates.end());
  std::printf("{\"images\": %zu, \"rounds\": %d, \"median_images_per_s\": %.1f}\n", files.size(),
              rounds, rates[rates.size() / 2]);
  return 0;
}
