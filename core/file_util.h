// Small file-system helpers that return Status instead of throwing.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace gm {

// Reads a whole file. NotFound names the path when it does not exist.
Result<std::string> ReadFile(const std::string& path);

// Writes `data` to `path` atomically (temporary file + rename), so a reader never
// sees half a file and a failure leaves any old file intact.
Status WriteFileAtomic(const std::string& path, std::string_view data);

// Creates `dir` and its parents; OK when it already exists.
Status MakeDirs(const std::string& dir);

}  // namespace gm
