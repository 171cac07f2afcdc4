// The command line and the files of the JPEG decode benchmarks
// (decode_baseline, entropy_bench): PROGRAM DIR [--rounds N], every .jpg under
// DIR read into memory; and their peer, TurboJPEG's whole decode to RGB.
#pragma once

#include <turbojpeg.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

struct JpegCorpus {
  std::vector<std::string> files;  // contents
  int rounds = 0;
};

// Returns the exit status to stop with (after saying why on stderr), or -1.
inline int LoadJpegCorpus(int argc, char** argv, const char* program, int default_rounds,
                          JpegCorpus* out) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [--rounds N]\n", program);
    return 2;
  }
  out->rounds = default_rounds;
  if (argc >= 4 && std::string(argv[2]) == "--rounds") {
    out->rounds = std::max(1, std::atoi(argv[3]));
  }
  for (const auto& e : std::filesystem::recursive_directory_iterator(argv[1])) {
    if (e.is_regular_file() && e.path().extension() == ".jpg") {
      std::ifstream in(e.path(), std::ios::binary);
      std::ostringstream ss;
      ss << in.rdbuf();
      out->files.push_back(ss.str());
    }
  }
  if (out->files.empty()) {
    std::fprintf(stderr, "%s: no .jpg files under %s\n", program, argv[1]);
    return 1;
  }
  return -1;
}

// Decodes one file whole to RGB with TurboJPEG (tjDecompress2, default flags)
// into `out`; a file whose header it cannot read is left out.
inline void TurboDecodeRgb(tjhandle tj, const std::string& file, std::vector<unsigned char>& out) {
  int w = 0, h = 0, sub = 0, cs = 0;
  auto* buf = reinterpret_cast<const unsigned char*>(file.data());
  if (tjDecompressHeader3(tj, buf, file.size(), &w, &h, &sub, &cs) != 0) return;
  out.resize(static_cast<size_t>(w) * h * 3);
  tjDecompress2(tj, buf, file.size(), out.data(), w, 0, h, TJPF_RGB, 0);
}
