// Internal to the source implementations (worker/source_*.cc): one factory per
// source type, and the helpers they share. Not for use outside worker/source*.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/json.h"
#include "core/status.h"
#include "worker/source.h"

namespace gm {

// Each factory validates the keys of its "source" object; errors name the path.
Result<std::unique_ptr<Source>> MakeFilesSource(const JsonNode& source, const SourceEnv& env);
Result<std::unique_ptr<Source>> MakeTarSource(const JsonNode& source, const SourceEnv& env);
Result<std::unique_ptr<Source>> MakeJsonlSource(const JsonNode& source, const SourceEnv& env);
Result<std::unique_ptr<Source>> MakeRangeSource(const JsonNode& source, const SourceEnv& env);

// ReadSplit of an indexable source whose splits are runs of `per_split` indices:
// reads split `split_id` sample by sample with ReadSample. `kind` ("files",
// "range") names the source in errors.
Status ReadIndexedSplit(const Source& source, std::string_view kind, size_t split_id,
                        uint64_t per_split, const EmitFn& emit);

// True for "http://..." and "https://..." locations.
bool IsHttpUrl(std::string_view location);

// `path` if absolute, else base_dir/path ("" base_dir: `path` unchanged).
std::string ResolvePath(const std::string& base_dir, const std::string& path);

// The whole content of a local path (relative to env.base_dir) or an http(s) URL
// (through env.http). Errors name `location`; Unavailable when a URL is given
// but env.http is null.
Result<std::string> FetchWhole(const std::string& location, const SourceEnv& env);

}  // namespace gm
