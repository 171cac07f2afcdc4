// Source: where samples come from (files, tar shards, jsonl, range).
//
// A source is cut into splits (a run of files, one tar shard, one jsonl file, a
// range of indices). Splits are the unit of work hand-out: the engine (and later
// the coordinator) reads whole splits. ReadSplit() may be called concurrently for
// different splits; a Source is immutable after Open.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/sample.h"
#include "core/status.h"
#include "worker/http.h"

namespace gm {

struct Split {
  size_t id = 0;       // position in splits()
  std::string name;    // shown in messages: a path, a URL, "files[0..255]"
  uint64_t count = 0;  // samples in the split when known before reading, else 0
};

// Called once per sample in split order. `status` is OK for a readable sample; a
// sample that could not be read (missing file, ...) is passed with a non-OK status
// and at least `key` set, so the engine can skip or fail by on_error. Return false
// to stop reading early (the engine is shutting down).
using EmitFn = std::function<bool(Sample&& sample, const Status& status)>;

class Source {
 public:
  virtual ~Source() = default;
  virtual const std::vector<Split>& splits() const = 0;
  // Total samples when known without reading the data (files, jsonl, range), else 0.
  virtual uint64_t size_hint() const = 0;
  // Reads split `split_id` in order. Returns non-OK when the split as a whole
  // failed (404, unreadable shard, broken tar header) after emitting the samples it
  // could read; the message names the split and the reason.
  virtual Status ReadSplit(size_t split_id, const EmitFn& emit) const = 0;

  // Indexable sources (files, range) read any one sample by its index, 0 ..
  // size_hint()-1, and split s holds the indices that follow those of splits
  // 0..s-1, in order. Sequential sources (tar shards, jsonl files) read only
  // whole splits. A shuffle permutes all the indices of an indexable source
  // (worker/split_layout.h).
  virtual bool indexable() const { return false; }
  // Reads sample `index` and emits it once, with a non-OK status when it could
  // not be read (as ReadSplit does). Returns Cancelled when emit returned false,
  // InvalidArgument for an index out of range or a source that is not indexable.
  virtual Status ReadSample(uint64_t index, const EmitFn& emit) const;
};

struct SourceEnv {
  std::string base_dir;        // relative paths resolve here (pipeline.json's dir)
  HttpClient* http = nullptr;  // for http(s):// URLs; not owned, outlives the source
  // Samples per split of the files and range sources (the pipeline rounds it up to
  // a multiple of the batch size, so that only an epoch's last batch is partial).
  size_t samples_per_split = 256;
};

// Builds the source described by the "source" object of pipeline.json.
Result<std::unique_ptr<Source>> MakeSource(const JsonNode& source, const SourceEnv& env);

}  // namespace gm
