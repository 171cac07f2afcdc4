// The pipeline engine: runs a Pipeline's samples through its stages on a pool of
// threads and hands batches, in the epoch's deterministic order, to a BatchSink.
//
// Threads: one reader (reads splits in epoch order, each as its SplitLayout says,
// shuffles each split's samples through its own buffer, numbers samples), `threads` stage threads,
// and the calling thread, which re-orders finished samples by number, forms batches and calls the
// sink. At most `inflight` samples exist at once, so memory stays bounded whatever the dataset
// size. Order and content of batches depend only on the pipeline file, its seed
// and the epoch, never on the number of threads or their timing. A batch never
// spans two splits, so the batches of a split are a function of (seed, epoch,
// split) alone and any worker can re-make them bit-identically.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/engine_stats.h"
#include "core/sample.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "worker/pipeline.h"

namespace gm {

// Receives batches in delivery order on the engine's calling thread.
class BatchSink {
 public:
  virtual ~BatchSink() = default;
  // A non-OK status stops the run and is returned by RunPipeline.
  virtual Status Consume(const Batch& batch) = 0;
  // Memory for the data of a batch, `bytes` long, into which the samples' last
  // stage writes their tensors (BatchArena) or the batcher collates them, instead
  // of a buffer of the batch's own; Batch::external then points at it. A worker's
  // data port lends a shared-memory segment of the client's, so the batch is
  // written once, in place. nullopt (the default): the batch gets its own buffer
  // and Consume sees data.bytes. Called from any of the engine's threads.
  virtual std::optional<Batch::External> Reserve(size_t bytes) {
    (void)bytes;
    return std::nullopt;
  }
};

// One stage applied to one sample, for traces (EngineOptions::spans).
struct StageSpan {
  int stage = 0;        // index into Pipeline::stages()
  int thread = 0;       // stage thread number, 0..threads-1
  uint64_t sample = 0;  // sample index
  double begin_s = 0;   // MonotonicSeconds()
  double end_s = 0;
};

// Collects stage spans from the stage threads, at most `max_per_thread` per thread
// and run (the first ones). Thread-safe.
class SpanRecorder {
 public:
  explicit SpanRecorder(size_t max_per_thread) : max_per_thread_(max_per_thread) {}
  size_t max_per_thread() const { return max_per_thread_; }
  void Append(std::vector<StageSpan> spans);
  std::vector<StageSpan> Take();

 private:
  const size_t max_per_thread_;
  Mutex mu_;
  std::vector<StageSpan> spans_ GUARDED_BY(mu_);
};

struct EngineOptions {
  int threads = 1;
  int epochs = 1;
  int64_t limit = -1;        // at most this many samples read per epoch (-1: all)
  size_t inflight = 0;       // max samples in flight; 0: 4 * threads + 2 * batch size
  size_t max_warnings = 20;  // skipped samples named one by one, then only counted
  // Per-stage timing (StageStats cpu_s/wall_s). Off: those stay 0 and the engine
  // reads no clock per stage (the profiler measures the timing's own overhead so).
  bool time_stages = true;
  SpanRecorder* spans = nullptr;  // not owned; null: no spans kept
};

// Live counters, written by the engine and readable from any thread (progress).
struct EngineProgress {
  std::atomic<uint64_t> samples{0};
  std::atomic<uint64_t> skipped{0};
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> epoch{0};
};

// Runs `pipeline` for options.epochs epochs. Returns the stats, or the first error
// when on_error is "fail" (naming the sample key, the stage and the reason), or an
// error from the sink. `progress` may be null.
Result<RunStats> RunPipeline(const Pipeline& pipeline, const EngineOptions& options,
                             BatchSink& sink, EngineProgress* progress = nullptr);

// Adds `from` to `into` stage by stage (same pipeline); an empty `into` becomes a
// copy of `from`.
void MergeStageStats(std::vector<StageStats>& into, const std::vector<StageStats>& from);

// The epoch's split order: the splits' ids in order, or shuffled by (seed, epoch)
// when the pipeline shuffles. RunPipeline reads the splits in this order.
std::vector<size_t> EpochSplitOrder(const Pipeline& pipeline, uint64_t epoch);

// One split's share of an epoch, as a data worker is asked to make it.
struct SplitTask {
  uint64_t epoch = 0;
  size_t split = 0;                 // id in pipeline.splits()
  uint64_t start_batch = 0;         // first batch of the split to deliver
  uint64_t end_batch = UINT64_MAX;  // one past the last (UINT64_MAX: to the split's end)
};

// Makes batches start_batch..end_batch-1 of one split of one epoch. They are
// bit-identical to the batches RunPipeline delivers for that split (same keys,
// bytes, labels, split_batch numbers); Batch::index counts from 0 within this call.
// Earlier batches are still formed (a skipped sample moves later boundaries) but
// not delivered. options.limit is ignored.
Result<RunStats> RunSplit(const Pipeline& pipeline, const EngineOptions& options,
                          const SplitTask& task, BatchSink& sink,
                          EngineProgress* progress = nullptr);

// Stacks samples into a batch: every sample must have the dtype, shape and layout of
// the first (a sample without a tensor contributes its raw bytes as uint8 [n]).
// Returns InvalidArgument naming the offending sample's key otherwise.
Status CheckCollatable(const Sample& first, const Sample& next);
// Collate writes the data into `into` when it is given and exactly the batch's
// size (BatchSink::Reserve), else into the batch's own buffer.
Batch Collate(std::vector<Sample>& samples, uint64_t epoch, uint64_t index,
              std::optional<Batch::External> into = std::nullopt);

}  // namespace gm
