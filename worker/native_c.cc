// The C ABI of include/goldminer/native.h: a Pipeline built from the stages alone
// (a one-sample range source stands in for the source, which the caller's files
// replace), its ops applied to each file as the engine's stage threads apply them.
#include <cstring>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/os/file_util.h"
#include "core/sample.h"
#include "core/status.h"
#include "goldminer/native.h"
#include "worker/pipeline.h"

struct gm_native {
  gm::Pipeline pipeline;
};

namespace {

thread_local std::string g_error;

int Fail(const std::string& why) {
  g_error = why;
  return -1;
}

std::string LowerExtension(const std::string& path) {
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string ext = path.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

// One sample of `path` through every stage, into slot `slot` of `arena` (the
// caller's buffer, sample_bytes a slot, lent to the last stage as the engine
// lends a batch's: it writes there), or copied there when it could not.
gm::Status MakeSample(const gm::Pipeline& pipeline, const std::string& path, uint64_t index,
                      const gm::RunContext& run, const std::shared_ptr<gm::BatchArena>& arena,
                      size_t slot, uint8_t* out, size_t sample_bytes, int64_t* shape) {
  gm::Sample s;
  s.index = index;
  s.key = path;
  s.ext = LowerExtension(path);
  GM_ASSIGN_OR_RETURN(s.data, gm::ReadFile(path));
  const auto& stages = pipeline.stages();
  for (size_t i = 0; i < stages.size(); ++i) {
    if (i + 1 == stages.size()) {
      s.arena = arena;
      s.arena_slot = slot;
    }
    gm::Status st = stages[i]->Apply(s, run);
    if (!st.ok()) {
      return gm::Status::InvalidArgument(path + ": " + stages[i]->name() + ": " + st.message());
    }
  }
  if (s.tensor.shape.size() != 3) {
    return gm::Status::InvalidArgument(path + ": the stages made a tensor of shape " +
                                       gm::ShapeString(s.tensor.shape) + ", not an image");
  }
  if (s.tensor_size() != sample_bytes) {
    return gm::Status::InvalidArgument(
        path + ": the stages made " + std::to_string(s.tensor_size()) + " bytes (shape " +
        gm::ShapeString(s.tensor.shape) + " " + std::string(gm::DTypeName(s.tensor.dtype)) +
        "), the batch's samples are " + std::to_string(sample_bytes));
  }
  if (s.in_arena != out) std::memcpy(out, s.tensor_data(), sample_bytes);
  for (int d = 0; d < 3; ++d) shape[d] = s.tensor.shape[d];
  return gm::Status::Ok();
}

}  // namespace

#define GM_API extern "C" __attribute__((visibility("default")))

GM_API int gm_native_abi_version(void) { return GM_NATIVE_ABI_VERSION; }

GM_API const char* gm_native_last_error(void) { return g_error.c_str(); }

GM_API int gm_native_open(const char* stages_json, gm_native** out) {
  if (stages_json == nullptr || out == nullptr) return Fail("gm_native_open: a null argument");
  nlohmann::json stages = nlohmann::json::parse(stages_json, nullptr, /*allow_exceptions=*/false);
  if (!stages.is_array() || stages.empty()) {
    return Fail("gm_native_open: the stages are not a non-empty JSON array");
  }
  const nlohmann::json doc = {{"version", gm::kPipelineSchemaVersion},
                              {"name", "offload-native"},
                              {"source", {{"type", "range"}, {"count", 1}}},
                              {"stages", std::move(stages)},
                              {"batch", {{"size", 1}}}};
  gm::Result<gm::Pipeline> pipeline =
      gm::Pipeline::FromJson(doc, "the DataLoader's native stages", "/", gm::PipelineOptions{});
  if (!pipeline.ok()) return Fail(pipeline.status().message());
  *out = new (std::nothrow) gm_native{std::move(*pipeline)};
  return *out == nullptr ? Fail("gm_native_open: out of memory") : 0;
}

GM_API int gm_native_batch(const gm_native* native, const char* const* paths,
                           const uint64_t* indices, size_t count, uint64_t seed, uint64_t epoch,
                           void* out, size_t sample_bytes, int64_t* shape) {
  if (native == nullptr || (count > 0 && (paths == nullptr || indices == nullptr ||
                                          out == nullptr || shape == nullptr))) {
    return Fail("gm_native_batch: a null argument");
  }
  const gm::RunContext run{seed, epoch};
  auto* dst = static_cast<uint8_t*>(out);
  const size_t total = count * sample_bytes;
  auto arena = std::make_shared<gm::BatchArena>(
      count, [dst, total](size_t bytes) -> std::optional<gm::Batch::External> {
        if (bytes > total) return std::nullopt;
        return gm::Batch::External{dst, total, nullptr};
      });
  for (size_t i = 0; i < count; ++i) {
    if (paths[i] == nullptr) return Fail("gm_native_batch: path " + std::to_string(i) + " is null");
    gm::Status st = MakeSample(native->pipeline, paths[i], indices[i], run, arena, i,
                               dst + i * sample_bytes, sample_bytes, shape);
    if (!st.ok()) return Fail(st.message());
  }
  return 0;
}

GM_API void gm_native_close(gm_native* native) { delete native; }
