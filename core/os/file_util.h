// Small file-system helpers that return Status instead of throwing.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "core/status.h"

namespace gm {

// Reads a whole file. NotFound names the path when it does not exist.
Result<std::string> ReadFile(const std::string& path);

// Writes `data` to `path` atomically (temporary file + rename), so a reader never
// sees half a file and a failure leaves any old file intact. The file and its
// folder are fsync'ed before it returns. Nothing is followed: InvalidArgument
// when `path` is a symbolic link, and the temporary file is created exclusively.
Status WriteFileAtomic(const std::string& path, std::string_view data);

// Creates `dir` and its parents; OK when it already exists.
Status MakeDirs(const std::string& dir);

// A new private (0700) directory $TMPDIR/<prefix>XXXXXX (or under /tmp), removed
// with everything in it when the owner is destroyed. Move-only.
class TempDir {
 public:
  // IoError names the path when it cannot be created.
  static Result<TempDir> Make(std::string_view prefix);
  TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  TempDir& operator=(TempDir&&) = delete;
  TempDir(const TempDir&) = delete;
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace gm
