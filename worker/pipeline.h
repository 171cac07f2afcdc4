// Pipeline: a loaded, validated pipeline.json (schema version 1): the source, the
// stages (built ops, with decode fused into the following crop where allowed), the
// batch, shuffle, seed and on_error settings. Immutable after Load; safe to share
// between threads. The schema is documented in man/goldminer-pipeline.5.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "worker/http.h"
#include "worker/op.h"
#include "worker/source.h"
#include "worker/split_layout.h"

namespace gm {

inline constexpr int kPipelineSchemaVersion = 1;
// "shuffle": true means these (see man/goldminer-pipeline.5).
inline constexpr size_t kDefaultShuffleBuffer = 1024;
inline constexpr size_t kDefaultShuffleShards = 4;

enum class OnError { kSkip, kFail };

struct PipelineOptions {
  int threads = 1;                 // engine threads (sizes exec process pools)
  bool fuse = true;                // allow fused decode (decode_jpeg "fast": true)
  HttpClient* http = nullptr;      // not owned; nullptr: the pipeline makes a libcurl client
  size_t samples_per_split = 256;  // rounded up to a multiple of the batch size
  // Build the stages marked "on": "device" too, as ordinary CPU stages (the
  // profiler measures every stage); by default a pipeline holds only the stages
  // its workers run and keeps the device tail as JSON (device_stages()).
  bool with_device_stages = false;
  // Keep a flip on its own when every stage after it could run "on": "device"
  // (instead of folding it into the normalize+to_tensor after it), so the cut
  // before those stages (uint8 on the wire) is a stage boundary: the profiler
  // measures the cuts a pipeline could have, not only the one its file makes.
  bool keep_device_cut = false;
};

// Ops a pipeline may leave to the trainer's device ("on": "device"): elementwise
// casts and affine maps of a whole batch, which the trainer's client applies
// (python/goldminer/_tail.py; on the GPU in goldminer.torch.DeviceLoader) to the
// uint8 batch it receives.
inline constexpr std::string_view kDeviceOps[] = {"to_tensor", "normalize"};

class Pipeline {
 public:
  // Reads and validates `path`. Relative paths inside resolve against its directory.
  static Result<Pipeline> Load(const std::string& path, const PipelineOptions& options = {});
  // Same from a parsed document; `origin` names it in errors.
  static Result<Pipeline> FromJson(const nlohmann::json& doc, const std::string& origin,
                                   const std::string& base_dir,
                                   const PipelineOptions& options = {});

  Pipeline(Pipeline&&) noexcept = default;
  Pipeline& operator=(Pipeline&&) noexcept = default;
  ~Pipeline() = default;

  const Source& source() const { return *source_; }
  const std::vector<std::unique_ptr<Op>>& stages() const { return stages_; }
  const std::string& origin() const { return origin_; }
  const std::string& name() const { return name_; }

  int64_t batch_size() const { return batch_size_; }
  bool drop_last() const { return drop_last_; }
  bool shuffle() const { return shuffle_; }
  // Samples of the per-split shuffle buffer (interleaved layout only; 0: none).
  size_t shuffle_buffer() const { return shuffle_buffer_; }
  // The splits workers make and how each is read (worker/split_layout.h). Use
  // splits() rather than source().splits(): under a shuffle they differ.
  const SplitLayout& layout() const { return layout_; }
  const std::vector<Split>& splits() const { return layout_.splits(); }
  // One line for the user about the order samples are read in ("" when there is
  // nothing to say): without a shuffle, that the order is the source's; with a
  // shuffle over few interleaved shards, that batches mix only those. Verbs that
  // run a pipeline print it once.
  std::string OrderNotice() const;
  uint64_t seed() const { return seed_; }
  OnError on_error() const { return on_error_; }
  // The stages marked "on": "device" (a tail of the list), as written minus the
  // "on" key: what the trainer's client applies after the workers' stages. An
  // empty array when every stage runs on the workers.
  const nlohmann::json& device_stages() const { return device_stages_; }
  // Index in pipeline.json of the first device stage; -1 when there is none.
  int device_from() const { return device_from_; }

 private:
  Pipeline() = default;
  Status ParseStages(const JsonNode& stages, const OpEnv& env, const PipelineOptions& options);
  Status ParseShuffle(const JsonNode& shuffle);

  std::string origin_;
  std::string name_;
  std::unique_ptr<HttpClient> own_http_;
  std::unique_ptr<Source> source_;
  std::vector<std::unique_ptr<Op>> stages_;
  int64_t batch_size_ = 64;
  bool drop_last_ = false;
  bool shuffle_ = false;
  size_t shuffle_buffer_ = 0;
  size_t shuffle_shards_ = kDefaultShuffleShards;
  SplitLayout layout_;
  uint64_t seed_ = 0;
  OnError on_error_ = OnError::kSkip;
  nlohmann::json device_stages_ = nlohmann::json::array();
  int device_from_ = -1;
};

}  // namespace gm
