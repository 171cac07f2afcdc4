// Op: one pipeline stage, and the registry that builds stages from pipeline.json.
//
// Ops are immutable after construction and Apply() is called concurrently from
// many threads on different samples: an op keeps no per-sample state. Randomness
// comes only from the Rng made for (seed, epoch, sample.index, stage number).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/rng.h"
#include "core/sample.h"
#include "core/status.h"

namespace gm {

// Per-run values every stage sees.
struct RunContext {
  uint64_t seed = 0;
  uint64_t epoch = 0;
};

class Op {
 public:
  virtual ~Op() = default;
  // Short name for tables, e.g. "random_resized_crop".
  virtual std::string name() const = 0;
  // Transforms `sample` in place. Errors name the reason; the engine adds the key.
  virtual Status Apply(Sample& sample, const RunContext& run) const = 0;
  // False for stages that keep state across samples (none of the built-in ones).
  virtual bool stateless() const { return true; }

  // The stage number (0-based position in pipeline.json) keys this op's randomness.
  void set_stage(uint64_t stage) { stage_ = stage; }
  uint64_t stage() const { return stage_; }
  Rng MakeRng(const Sample& s, const RunContext& run) const {
    return Rng::ForSample(run.seed, run.epoch, s.index, stage_);
  }

 private:
  uint64_t stage_ = 0;
};

// What a geometric op needs from its input, decided before decoding.
struct CropPlan {
  // Box in source pixels.
  int x = 0, y = 0, w = 0, h = 0;
  // Output size after resampling the box (== box size when no resize).
  int out_w = 0, out_h = 0;
  bool flip = false;  // reserved: mirror horizontally after the resize
};

// A geometric op (resize, center_crop, random_resized_crop) that can say which
// region of its input it needs given only the input size. decode_jpeg uses this
// to decode just that region at a reduced DCT scale (fused decode).
class RegionOp : public Op {
 public:
  // Draws from `rng` exactly as Apply() would for the same sample.
  virtual CropPlan Plan(int width, int height, Rng& rng) const = 0;
};

// Environment for building ops.
struct OpEnv {
  std::string base_dir;  // directory of pipeline.json; relative paths resolve here
  int threads = 1;       // engine threads (exec stages size their process pools by it)
};

using OpFactory =
    std::function<Result<std::unique_ptr<Op>>(const JsonNode& stage, const OpEnv& env)>;

// Maps "op" names to factories. Built once, then read-only.
class OpRegistry {
 public:
  void Add(std::string name, OpFactory factory);
  // Builds the op named by stage["op"]; an unknown name lists the known ones.
  Result<std::unique_ptr<Op>> Make(const JsonNode& stage, const OpEnv& env) const;
  std::vector<std::string> names() const;

  // The registry with every built-in op.
  static const OpRegistry& BuiltIn();

 private:
  std::map<std::string, OpFactory> factories_;
};

// Registration hooks, one per op family (each defined in its own file).
void RegisterImageOps(OpRegistry& registry);  // worker/image/image_ops.cc
void RegisterTextOps(OpRegistry& registry);   // worker/text_ops.cc
void RegisterExecOps(OpRegistry& registry);   // worker/exec_op.cc

// Fusion hook (worker/image/image_ops.cc): when `decode` is a decode_jpeg op that allows
// fused decoding and `next` is a RegionOp, returns one op doing both; else nullptr.
std::unique_ptr<Op> FuseDecode(std::unique_ptr<Op>& decode, std::unique_ptr<Op>& next);
// Same for normalize followed by to_tensor to CHW float32 (one pass, same values).
std::unique_ptr<Op> FuseNormalize(std::unique_ptr<Op>& normalize, std::unique_ptr<Op>& next);
// A flip followed by a fused normalize+to_tensor: the flip folded into it (rows
// read mirrored); `next` itself, moved out, or nullptr when they do not fuse.
std::unique_ptr<Op> FuseFlip(std::unique_ptr<Op>& flip, std::unique_ptr<Op>& next);

}  // namespace gm
