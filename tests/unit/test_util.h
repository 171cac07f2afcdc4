// Helpers shared by unit tests: a per-test temporary directory and file writing.
#pragma once

#include <string>
#include <string_view>

namespace gm::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it when
// the object goes out of scope.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // Writes `content` to path()/name (creating parent directories); returns the full path.
  std::string Write(const std::string& name, std::string_view content) const;

 private:
  std::string path_;
};

// Absolute path of a file in the source tree, e.g. SourcePath("tests/data/x.jpg").
std::string SourcePath(const std::string& relative);

// Reads a whole file; fails the calling test (ADD_FAILURE) and returns "" on error.
std::string ReadAll(const std::string& path);

}  // namespace gm::testing
