#include "worker/pipeline.h"

#include <algorithm>
#include <filesystem>

#include "core/json.h"

namespace gm {

Result<Pipeline> Pipeline::Load(const std::string& path, const PipelineOptions& options) {
  GM_ASSIGN_OR_RETURN(nlohmann::json doc, LoadJsonFile(path));
  std::string base = std::filesystem::path(path).parent_path().string();
  if (base.empty()) base = ".";
  return FromJson(doc, path, base, options);
}

Result<Pipeline> Pipeline::FromJson(const nlohmann::json& doc, const std::string& origin,
                                    const std::string& base_dir, const PipelineOptions& options) {
  JsonNode root(doc, origin);
  if (!root.is_object()) return root.Expected("a pipeline object ({\"version\": 1, ...})");
  GM_RETURN_IF_ERROR(root.CheckKeys(
      {"version", "name", "source", "stages", "batch", "shuffle", "seed", "on_error"}));
  GM_ASSIGN_OR_RETURN(int64_t version, root.Int("version"));
  if (version != kPipelineSchemaVersion) {
    GM_ASSIGN_OR_RETURN(JsonNode v, root.Get("version"));
    return v.Error("unsupported schema version " + std::to_string(version) +
                   " (this goldminer reads version " + std::to_string(kPipelineSchemaVersion) +
                   ")");
  }
  Pipeline p;
  p.origin_ = origin;
  GM_ASSIGN_OR_RETURN(p.name_, root.StringOr("name", ""));
  GM_ASSIGN_OR_RETURN(p.seed_, root.IntOr("seed", 0));

  GM_ASSIGN_OR_RETURN(std::string on_error, root.StringOr("on_error", "skip"));
  if (on_error == "skip") {
    p.on_error_ = OnError::kSkip;
  } else if (on_error == "fail") {
    p.on_error_ = OnError::kFail;
  } else {
    return (*root.Get("on_error")).Expected("\"skip\" or \"fail\"");
  }

  if (root.has("batch")) {
    GM_ASSIGN_OR_RETURN(JsonNode batch, root.Get("batch"));
    GM_RETURN_IF_ERROR(batch.CheckKeys({"size", "drop_last"}));
    GM_ASSIGN_OR_RETURN(p.batch_size_, batch.IntOr("size", 64));
    if (p.batch_size_ < 1) return (*batch.Get("size")).Expected("a batch size >= 1");
    GM_ASSIGN_OR_RETURN(p.drop_last_, batch.BoolOr("drop_last", false));
  }
  if (root.has("shuffle")) {
    GM_ASSIGN_OR_RETURN(JsonNode shuffle, root.Get("shuffle"));
    GM_RETURN_IF_ERROR(p.ParseShuffle(shuffle));
  }

  if (options.http == nullptr) p.own_http_ = MakeCurlHttpClient();
  // A batch never spans two splits: make splits whole numbers of batches.
  const size_t batch = static_cast<size_t>(p.batch_size_);
  const size_t per_split =
      (std::max<size_t>(1, options.samples_per_split) + batch - 1) / batch * batch;
  SourceEnv source_env{base_dir, options.http ? options.http : p.own_http_.get(), per_split};
  GM_ASSIGN_OR_RETURN(JsonNode source, root.Get("source"));
  GM_ASSIGN_OR_RETURN(p.source_, MakeSource(source, source_env));
  p.layout_ = SplitLayout::Make(*p.source_, p.shuffle_, p.shuffle_shards_);

  GM_ASSIGN_OR_RETURN(JsonNode stages, root.Get("stages"));
  GM_RETURN_IF_ERROR(p.ParseStages(stages, OpEnv{base_dir, options.threads}, options));
  return p;
}

// "shuffle": true | false | {"buffer": N, "shards": G}. The object form shuffles
// unless its buffer is 0, which kept samples in source order before the
// permutation existed and still does.
Status Pipeline::ParseShuffle(const JsonNode& shuffle) {
  if (!shuffle.is_object()) {
    Result<bool> on = shuffle.AsBool();
    if (!on.ok())
      return shuffle.Expected("true, false or an object {\"buffer\": N, \"shards\": G}");
    shuffle_ = *on;
    shuffle_buffer_ = shuffle_ ? kDefaultShuffleBuffer : 0;
    return Status::Ok();
  }
  GM_RETURN_IF_ERROR(shuffle.CheckKeys({"buffer", "shards"}));
  GM_ASSIGN_OR_RETURN(int64_t buffer,
                      shuffle.IntOr("buffer", static_cast<int64_t>(kDefaultShuffleBuffer)));
  if (buffer < 0 || buffer > (int64_t{1} << 24)) {
    return (*shuffle.Get("buffer")).Expected("a buffer size from 0 to 16777216 samples");
  }
  GM_ASSIGN_OR_RETURN(int64_t shards,
                      shuffle.IntOr("shards", static_cast<int64_t>(kDefaultShuffleShards)));
  if (shards < 1 || shards > 4096) {
    return (*shuffle.Get("shards")).Expected("a number of shards from 1 to 4096");
  }
  shuffle_ = buffer > 0;
  shuffle_buffer_ = static_cast<size_t>(buffer);
  shuffle_shards_ = static_cast<size_t>(shards);
  return Status::Ok();
}

std::string Pipeline::OrderNotice() const {
  switch (layout_.mode()) {
    case SplitMode::kInOrder:
      return origin_ +
             ": no \"shuffle\": samples are read in source order (batches follow the "
             "order of the files or shards); add \"shuffle\": true to train on random batches";
    case SplitMode::kPermuted:
      return "";
    case SplitMode::kInterleaved: {
      const size_t open = layout_.shards_per_split(), total = source_->splits().size();
      if (open >= total || open >= 16) return "";
      return origin_ + ": the shuffle mixes " + std::to_string(open) + " of " +
             std::to_string(total) + " shards at a time through a " +
             std::to_string(shuffle_buffer_) + "-sample buffer, so a batch draws from at most " +
             std::to_string(open) +
             " shards; if a shard holds few classes, raise "
             "\"shuffle\": {\"shards\": N} (each worker holds that many shards in memory)";
    }
  }
  return "";
}

// "on": "worker" (the default) or "device". Device stages must be a tail of the
// list, of ops in kDeviceOps, and leave at least one stage to the workers (they
// decode); the ops are built either way, so their fields are checked here.
Status Pipeline::ParseStages(const JsonNode& stages, const OpEnv& env,
                             const PipelineOptions& options) {
  const bool fuse = options.fuse;
  const bool with_device = options.with_device_stages;
  GM_ASSIGN_OR_RETURN(std::vector<JsonNode> elements, stages.Elements());
  std::vector<std::unique_ptr<Op>> built;
  // Whether every stage from index i on could run "on": "device".
  std::vector<bool> device_capable_from(elements.size() + 1, true);
  for (size_t i = 0; i < elements.size(); ++i) {
    nlohmann::json stage = elements[i].json();
    bool on_device = false;
    if (elements[i].has("on")) {
      GM_ASSIGN_OR_RETURN(JsonNode on_node, elements[i].Get("on"));
      Result<std::string> on = on_node.AsString();
      if (!on.ok() || (*on != "worker" && *on != "device")) {
        return on_node.Expected("\"worker\" or \"device\"");
      }
      on_device = *on == "device";
      stage.erase("on");
    }
    const JsonNode node(stage, elements[i].origin(), elements[i].path());
    GM_ASSIGN_OR_RETURN(std::unique_ptr<Op> op, OpRegistry::BuiltIn().Make(node, env));
    op->set_stage(i);
    const bool device_op =
        std::find(std::begin(kDeviceOps), std::end(kDeviceOps), op->name()) != std::end(kDeviceOps);
    device_capable_from[i] = device_op;
    if (on_device) {
      const std::string name = op->name();
      if (!device_op) {
        return elements[i].Error("op \"" + name + "\" cannot run \"on\": \"device\" (only " +
                                 "to_tensor and normalize can; run it on the workers)");
      }
      if (i == 0) {
        return elements[i].Error(
            "the first stage cannot run \"on\": \"device\": the workers "
            "must make a tensor first (e.g. decode_jpeg)");
      }
      if (device_from_ < 0) device_from_ = static_cast<int>(i);
      device_stages_.push_back(stage);
    } else if (device_from_ >= 0) {
      return elements[i].Error(
          "a stage on the workers cannot follow a stage \"on\": \"device\" "
          "(stage " +
          std::to_string(device_from_) + "): the device stages must be the last ones");
    }
    if (!on_device || with_device) built.push_back(std::move(op));
  }
  for (size_t i = elements.size(); i-- > 0;) {
    device_capable_from[i] = device_capable_from[i] && device_capable_from[i + 1];
  }
  // Fuse decode with the crop/resize that follows it, so only the needed pixels
  // are decoded (the fused op keeps the crop's stage number for its randomness),
  // and normalize with the to_tensor after it (one pass instead of two).
  for (size_t i = 0; i < built.size(); ++i) {
    // Never across the device cut: the profiler measures each side on its own.
    if (fuse && i + 1 < built.size() && static_cast<int>(built[i + 1]->stage()) != device_from_) {
      std::unique_ptr<Op> fused = FuseDecode(built[i], built[i + 1]);
      if (!fused) fused = FuseNormalize(built[i], built[i + 1]);
      if (fused) {
        stages_.push_back(std::move(fused));
        ++i;
        continue;
      }
    }
    stages_.push_back(std::move(built[i]));
  }
  // Then a flip into the normalize+to_tensor after it (rows read mirrored).
  for (size_t i = 0; fuse && i + 1 < stages_.size(); ++i) {
    if (static_cast<int>(stages_[i + 1]->stage()) == device_from_) continue;
    if (options.keep_device_cut && device_capable_from[stages_[i + 1]->stage()]) continue;
    if (std::unique_ptr<Op> fused = FuseFlip(stages_[i], stages_[i + 1])) {
      stages_[i] = std::move(fused);
      stages_.erase(stages_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    }
  }
  return Status::Ok();
}

}  // namespace gm
