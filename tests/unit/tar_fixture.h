// Test helpers for tar archives: pack files with the real GNU tar, and build
// single headers by hand for shapes tar will not write (broken ones included).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace gm::testing {

// Packs dir/names, in this order and without recursing into directories, into
// `out` with /usr/bin/tar in `format` ("gnu", "pax" or "ustar").
inline void PackTar(const std::string& dir, const std::vector<std::string>& names,
                    const std::string& out, const std::string& format = "gnu") {
  std::string cmd =
      "/usr/bin/tar --no-recursion --format=" + format + " -cf '" + out + "' -C '" + dir + "'";
  for (const auto& n : names) cmd += " '" + n + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// One 512-byte header (old GNU magic) for `name` with `size` and `type`, and a
// correct checksum.
inline std::string TarHeader(const std::string& name, size_t size, char type = '0') {
  std::string h(512, '\0');
  h.replace(0, std::min<size_t>(name.size(), 100), name.substr(0, 100));
  std::snprintf(&h[100], 8, "%07o", 0644);
  std::snprintf(&h[124], 12, "%011zo", size);
  std::snprintf(&h[136], 12, "%011o", 0);
  h[156] = type;
  h.replace(257, 8, std::string("ustar  \0", 8));
  h.replace(148, 8, "        ");
  unsigned sum = 0;
  for (char c : h) sum += static_cast<unsigned char>(c);
  std::snprintf(&h[148], 8, "%06o", sum);
  h[155] = ' ';
  return h;
}

// `data` followed by NULs up to a multiple of 512 bytes.
inline std::string TarPadded(const std::string& data) {
  return data + std::string((512 - data.size() % 512) % 512, '\0');
}

}  // namespace gm::testing
