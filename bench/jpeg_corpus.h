// The command line and the files of the JPEG decode benchmarks
// (decode_baseline, entropy_bench): PROGRAM DIR [--rounds N], every .jpg under
// DIR read into memory.
#pragma once

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
