#include "core/os/file_util.h"
#include "worker/http.h"
#include "worker/source.h"
#include "worker/sources_internal.h"

namespace gm {

bool IsHttpUrl(std::string_view location) {
  return location.starts_with("http://") || location.starts_with("https://");
}

std::string ResolvePath(const std::string& base_dir, const std::string& path) {
  if (base_dir.empty() || path.starts_with("/")) return path;
  return base_dir.ends_with("/") ? base_dir + path : base_dir + "/" + path;
}

Result<std::string> FetchWhole(const std::string& location, const SourceEnv& env) {
  if (!IsHttpUrl(location)) return ReadFile(ResolvePath(env.base_dir, location));
  if (env.http == nullptr) {
    return Status::Unavailable(location + ": no HTTP client is configured for this source");
  }
  return env.http->Get(location);
}

Status ReadIndexedSplit(const Source& source, std::string_view kind, size_t split_id,
                        uint64_t per_split, const EmitFn& emit) {
  const std::vector<Split>& splits = source.splits();
  if (split_id >= splits.size()) {
    return Status::InvalidArgument(std::string(kind) + " source: no split " +
                                   std::to_string(split_id));
  }
  const uint64_t begin = split_id * per_split;
  for (uint64_t i = begin; i < begin + splits[split_id].count; ++i) {
    Status st = source.ReadSample(i, emit);
    if (!st.ok()) return st.WithContext(RedactUrl(splits[split_id].name));
  }
  return Status::Ok();
}

Status Source::ReadSample(uint64_t index, const EmitFn& /*emit*/) const {
  return Status::InvalidArgument("sample " + std::to_string(index) +
                                 ": this source reads whole splits only (not indexable)");
}

Result<std::unique_ptr<Source>> MakeSource(const JsonNode& source, const SourceEnv& env) {
  if (!source.is_object()) return source.Expected("a source object");
  GM_ASSIGN_OR_RETURN(std::string type, source.String("type"));
  if (type == "files") return MakeFilesSource(source, env);
  if (type == "tar") return MakeTarSource(source, env);
  if (type == "jsonl") return MakeJsonlSource(source, env);
  if (type == "range") return MakeRangeSource(source, env);
  GM_ASSIGN_OR_RETURN(JsonNode type_node, source.Get("type"));
  return type_node.Error("unknown source type \"" + type +
                         "\"; expected one of \"files\", \"tar\", \"jsonl\", \"range\"");
}

}  // namespace gm
