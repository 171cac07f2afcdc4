#include "worker/engine.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>

#include "core/clock.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/thread_annotations.h"
#include "worker/http.h"
#include "worker/image/pixel_ops.h"

namespace gm {
namespace {

// Rng stream numbers for engine-level draws (stage numbers are small, these are not).
constexpr uint64_t kSplitOrderStream = 0xFFFF0001;
constexpr uint64_t kShuffleBufferStream = 0xFFFF0002;

struct Item {
  uint64_t seq = 0;
  Sample sample;
  Status status;
  size_t split = 0;        // id of the split the sample came from
  bool split_end = false;  // a marker after a split's last sample, not a sample
};

// Shared state of one epoch: the reader, the stage threads and the batcher meet here.
class EpochState {
 public:
  explicit EpochState(size_t inflight) : inflight_(inflight) {}

  // Reader side: numbers `item` and queues it (straight to `done_` when it failed
  // at the source). Blocks while `inflight_` items are unconsumed. False: stopping.
  bool Push(Item item) {
    MutexLock lock(mu_);
    lock.Wait(space_cv_,
              [&]() REQUIRES(mu_) { return stop_ || next_seq_ - consumed_ < inflight_; });
    if (stop_) return false;
    item.seq = next_seq_++;
    if (item.status.ok() && !item.split_end) {
      work_.push_back(std::move(item));
      work_cv_.notify_one();
    } else {
      done_.emplace(item.seq, std::move(item));
      done_cv_.notify_all();
    }
    return true;
  }

  void ReaderDone() {
    MutexLock lock(mu_);
    reader_done_ = true;
    work_cv_.notify_all();
    done_cv_.notify_all();
  }

  // Stage thread side: the next item to process, or false when there is no more.
  bool TakeWork(Item& out) {
    MutexLock lock(mu_);
    lock.Wait(work_cv_, [&]() REQUIRES(mu_) { return stop_ || !work_.empty() || reader_done_; });
    if (stop_ || work_.empty()) return false;
    out = std::move(work_.front());
    work_.pop_front();
    return true;
  }

  void Finish(Item item) {
    MutexLock lock(mu_);
    uint64_t seq = item.seq;
    done_.emplace(seq, std::move(item));
    if (seq == consumed_) done_cv_.notify_all();
  }

  // Batcher side: the next item in sequence order, or false at the end of the epoch.
  bool TakeNext(Item& out) {
    MutexLock lock(mu_);
    lock.Wait(done_cv_, [&]() REQUIRES(mu_) {
      return stop_ || done_.count(consumed_) || (reader_done_ && consumed_ == next_seq_);
    });
    auto it = done_.find(consumed_);
    if (stop_ || it == done_.end()) return false;
    out = std::move(it->second);
    done_.erase(it);
    ++consumed_;
    space_cv_.notify_one();
    return true;
  }

  void Stop() {
    MutexLock lock(mu_);
    stop_ = true;
    work_cv_.notify_all();
    done_cv_.notify_all();
    space_cv_.notify_all();
  }

  bool stopped() {
    MutexLock lock(mu_);
    return stop_;
  }

 private:
  const size_t inflight_;
  Mutex mu_;
  std::condition_variable work_cv_, done_cv_, space_cv_;
  std::deque<Item> work_ GUARDED_BY(mu_);
  std::map<uint64_t, Item> done_ GUARDED_BY(mu_);  // finished, keyed by seq
  uint64_t next_seq_ GUARDED_BY(mu_) = 0;
  uint64_t consumed_ GUARDED_BY(mu_) = 0;
  bool reader_done_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
};

// Where the samples' last stage writes: slots in the buffer of the batch each
// sample is expected to join (BatchArena). A split's k-th good sample goes to
// slot k % B of its batch k / B; a sample the batcher skips (a failed stage, an
// odd shape) shifts the later ones, whose batches are then copied as before.
struct ArenaPlan {
  BatchArena::Allocate allocate;  // empty: no arenas
  uint64_t window_start = 0;      // batches of a split that are delivered
  uint64_t window_end = UINT64_MAX;
};

// Reads the splits in `order` into `state`. Each split is read in its epoch's
// order (SplitLayout) and its samples pass through their own shuffle buffer, so a
// split's batches depend only on (seed, epoch, split): any worker can make them.
void ReadSplits(const Pipeline& p, uint64_t epoch, const std::vector<size_t>& order, int64_t limit,
                const ArenaPlan& arenas, EpochState& state) {
  const uint64_t batch = static_cast<uint64_t>(p.batch_size());
  // A permuted split is already a random subset in random order: no buffer.
  const size_t buffer_size = p.layout().mode() == SplitMode::kPermuted ? 0 : p.shuffle_buffer();
  int64_t read = 0;
  bool running = true;
  auto full = [&] { return limit >= 0 && read >= limit; };
  for (size_t id : order) {
    if (!running || full()) break;
    Rng buffer_rng = Rng::ForSample(p.seed(), epoch, id, kShuffleBufferStream);
    std::vector<Item> buffer;
    uint64_t good = 0;  // samples of this split pushed for the stages
    std::shared_ptr<BatchArena> arena;
    auto pop_random = [&] {
      size_t j = buffer_rng.Below(buffer.size());
      std::swap(buffer[j], buffer.back());
      Item& item = buffer.back();
      if (arenas.allocate && item.status.ok()) {
        const uint64_t k = good / batch;
        if (good % batch == 0) {
          arena = k >= arenas.window_start && k < arenas.window_end
                      ? std::make_shared<BatchArena>(batch, arenas.allocate)
                      : nullptr;
        }
        item.sample.arena = arena;
        item.sample.arena_slot = good % batch;
        ++good;
      }
      running = state.Push(std::move(item)) && running;
      buffer.pop_back();
    };
    auto emit = [&](Sample&& sample, const Status& status) -> bool {
      if (!running || full()) return false;
      ++read;
      buffer.push_back(Item{0, std::move(sample), status, id});
      if (buffer.size() > buffer_size) pop_random();
      return running;
    };
    Status st = p.layout().Read(p.source(), p.seed(), epoch, id, emit);
    if (!st.ok() && st.code() != Code::kCancelled && running) {
      // The split failed as a whole (404, broken tar): it is one skipped entry.
      Sample marker;
      marker.key = RedactUrl(p.splits()[id].name);
      buffer.push_back(Item{0, std::move(marker), st, id});
    }
    while (running && !buffer.empty()) pop_random();
    if (running) running = state.Push(Item{0, Sample{}, Status::Ok(), id, true});
  }
  state.ReaderDone();
}

// What one stage thread accounts into: per-stage stats and, when asked, spans.
struct StageThreadStats {
  std::vector<StageStats> stages;
  std::vector<StageSpan> spans;
  int thread = 0;
};

// Runs one sample through every stage, accounting into `acc`.
Status ProcessSample(const Pipeline& p, const RunContext& run, const EngineOptions& o, Sample& s,
                     StageThreadStats& acc) {
  const auto& stages = p.stages();
  const bool keep_span = o.spans != nullptr && acc.spans.size() < o.spans->max_per_thread();
  // Only the last stage's tensor goes into the batch: only it sees the arena.
  std::shared_ptr<BatchArena> arena = std::move(s.arena);
  for (size_t i = 0; i < stages.size(); ++i) {
    StageStats& st = acc.stages[i];
    if (i + 1 == stages.size()) s.arena = std::move(arena);
    const uint64_t in = s.payload_bytes();
    double w0 = 0, c0 = 0;
    if (o.time_stages) w0 = MonotonicSeconds(), c0 = ThreadCpuSeconds();
    Status r = stages[i]->Apply(s, run);
    if (o.time_stages) {
      const double w1 = MonotonicSeconds();
      st.cpu_s += ThreadCpuSeconds() - c0 + s.extra_cpu_s;
      st.extra_cpu_s += s.extra_cpu_s;
      st.wall_s += w1 - w0;
      if (keep_span) {
        acc.spans.push_back(StageSpan{static_cast<int>(i), acc.thread, s.index, w0, w1});
      }
    }
    s.extra_cpu_s = 0;
    ++st.count;
    st.bytes_in += in;
    const uint64_t out = s.payload_bytes();
    st.bytes_out += out;
    st.peak_bytes_out = std::max(st.peak_bytes_out, out);
    if (!r.ok()) {
      return r.WithContext("stage " + std::to_string(stages[i]->stage()) + " (" +
                           stages[i]->name() + ")");
    }
  }
  if (s.tensor.empty()) {  // no decoding stage: the raw bytes are the value
    s.tensor.Reset(DType::kUInt8, {static_cast<int64_t>(s.data.size())});
    std::memcpy(s.tensor.bytes.data(), s.data.data(), s.data.size());
  }
  s.data = std::string();  // the encoded bytes are no longer needed
  s.fields.clear();
  return Status::Ok();
}

std::vector<StageStats> EmptyStats(const Pipeline& p) {
  std::vector<StageStats> stats;
  for (const auto& op : p.stages()) stats.push_back(StageStats{op->name()});
  return stats;
}

// Forms batches from finished samples in sequence order and feeds the sink.
class Batcher {
 public:
  Batcher(const Pipeline& p, const EngineOptions& o, BatchSink& sink, RunStats& stats,
          EngineProgress* progress)
      : p_(p), options_(o), sink_(sink), stats_(stats), progress_(progress) {}

  // Only batches start..end-1 of each split go to the sink; the others are formed
  // (their boundaries depend on which samples were skipped) and dropped.
  void SetWindow(uint64_t start, uint64_t end) {
    window_start_ = start;
    window_end_ = end;
  }

  // Arenas for the batches this batcher delivers, in memory the sink lends
  // (BatchSink::Reserve, called from the stage threads).
  ArenaPlan Arenas() {
    return ArenaPlan{[this](size_t bytes) { return sink_.Reserve(bytes); }, window_start_,
                     window_end_};
  }

  Status Add(Item item, uint64_t epoch) {
    if (item.split_end) return EndSplit(epoch);
    split_ = item.split;
    if (item.status.ok() && !pending_.empty()) {
      item.status = CheckCollatable(pending_.front(), item.sample);
    }
    if (!item.status.ok()) return Skip(item);
    // A full batch waits for the next sample or the split's end, so that the
    // split's last batch goes out marked as such (Batch::last_of_split).
    if (static_cast<int64_t>(pending_.size()) == p_.batch_size()) {
      GM_RETURN_IF_ERROR(Flush(epoch, /*last=*/false));
    }
    pending_.push_back(std::move(item.sample));
    return Status::Ok();
  }

  // A batch never spans two splits: the split's last, partial batch goes out here
  // (or is dropped with drop_last).
  Status EndSplit(uint64_t epoch) {
    Status st = Status::Ok();
    const bool full = static_cast<int64_t>(pending_.size()) == p_.batch_size();
    if (full || (!pending_.empty() && !p_.drop_last())) st = Flush(epoch, /*last=*/true);
    pending_.clear();
    stats_.split_batches += split_batch_;
    split_batch_ = 0;
    return st;
  }

  void EndEpoch() { batch_index_ = 0; }

 private:
  Status Skip(const Item& item) {
    std::string what = item.sample.key + ": " + item.status.message();
    if (item.status.code() == Code::kResourceExhausted) {  // not the sample's fault
      return Status(item.status.code(), what +
                                            " (the worker is short of a resource: the "
                                            "sample is not skipped, the split is made again)");
    }
    if (p_.on_error() == OnError::kFail) {
      return Status(item.status.code(), what + " (on_error is \"fail\")");
    }
    ++stats_.skipped;
    if (progress_) progress_->skipped.fetch_add(1, std::memory_order_relaxed);
    if (stats_.skipped <= options_.max_warnings) {
      LogWarning("skipped " + what);
    } else if (stats_.skipped == options_.max_warnings + 1) {
      LogWarning("further skipped samples are counted but not named");
    }
    return Status::Ok();
  }

  Status Flush(uint64_t epoch, bool last) {
    const uint64_t split_batch = split_batch_++;
    if (split_batch < window_start_ || split_batch >= window_end_) {
      pending_.clear();
      return Status::Ok();
    }
    const size_t bytes = pending_.size() * pending_.front().tensor_size();
    // The samples' last stage wrote them into their slots of one arena, in
    // order: that buffer is the batch's, nothing to copy. Else a buffer from the
    // sink, or the batch's own.
    BatchArena* arena = pending_.front().arena.get();
    for (size_t i = 0; i < pending_.size() && arena != nullptr; ++i) {
      const Sample& s = pending_[i];
      if (s.arena.get() != arena || s.arena_slot != i || s.in_arena == nullptr) arena = nullptr;
    }
    std::optional<Batch::External> into;
    if (arena != nullptr) into = arena->Take(pending_.size());
    if (into) ++stats_.batches_in_place;
    if (!into && bytes > 0) into = sink_.Reserve(bytes);
    Batch batch = Collate(pending_, epoch, batch_index_++, std::move(into));
    batch.split = split_;
    batch.split_batch = split_batch;
    batch.last_of_split = last;
    pending_.clear();
    stats_.samples += batch.size();
    ++stats_.batches;
    if (progress_) {
      progress_->samples.fetch_add(batch.size(), std::memory_order_relaxed);
      progress_->batches.fetch_add(1, std::memory_order_relaxed);
    }
    return sink_.Consume(batch);
  }

  const Pipeline& p_;
  const EngineOptions& options_;
  BatchSink& sink_;
  RunStats& stats_;
  EngineProgress* progress_;
  std::vector<Sample> pending_;
  uint64_t batch_index_ = 0;
  size_t split_ = 0;
  uint64_t split_batch_ = 0;
  uint64_t window_start_ = 0;
  uint64_t window_end_ = UINT64_MAX;
};

// The epoch's split order: source order, or shuffled by (seed, epoch).
std::vector<size_t> SplitOrder(const Pipeline& p, uint64_t epoch) {
  std::vector<size_t> order(p.splits().size());
  std::iota(order.begin(), order.end(), 0);
  if (p.shuffle()) {
    Rng rng = Rng::ForSample(p.seed(), epoch, 0, kSplitOrderStream);
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  }
  return order;
}

// Runs the splits in `order` of `epoch` through the stages into `batcher`,
// adding stage costs and thread CPU to `stats`.
Status RunSplits(const Pipeline& p, const EngineOptions& o, uint64_t epoch,
                 const std::vector<size_t>& order, Batcher& batcher, RunStats& stats) {
  const ArenaPlan arenas = batcher.Arenas();
  const size_t inflight =
      o.inflight ? o.inflight : static_cast<size_t>(4 * o.threads + 2 * p.batch_size());
  EpochState state(inflight);
  const RunContext run{p.seed(), epoch};
  std::vector<StageThreadStats> per_thread(static_cast<size_t>(o.threads));
  std::vector<double> thread_cpu(per_thread.size(), 0.0);
  double reader_cpu = 0;
  std::vector<std::thread> threads;
  std::thread reader([&] {
    ReadSplits(p, epoch, order, o.limit, arenas, state);
    reader_cpu = ThreadCpuSeconds();
  });
  for (size_t t = 0; t < per_thread.size(); ++t) {
    per_thread[t].stages = EmptyStats(p);
    per_thread[t].thread = static_cast<int>(t);
    threads.emplace_back([&, t] {
      Item item;
      while (state.TakeWork(item)) {
        item.status = ProcessSample(p, run, o, item.sample, per_thread[t]);
        state.Finish(std::move(item));
      }
      thread_cpu[t] = ThreadCpuSeconds();
    });
  }
  const double batcher_c0 = ThreadCpuSeconds();
  Status status = Status::Ok();
  Item item;
  while (status.ok() && state.TakeNext(item)) status = batcher.Add(std::move(item), epoch);
  batcher.EndEpoch();
  stats.batcher_cpu_s += ThreadCpuSeconds() - batcher_c0;
  state.Stop();
  reader.join();
  for (auto& t : threads) t.join();
  stats.reader_cpu_s += reader_cpu;
  for (size_t t = 0; t < per_thread.size(); ++t) {
    MergeStageStats(stats.stages, per_thread[t].stages);
    stats.stage_threads_cpu_s += thread_cpu[t];
    if (o.spans != nullptr) o.spans->Append(std::move(per_thread[t].spans));
  }
  return status;
}

}  // namespace

Status CheckCollatable(const Sample& first, const Sample& next) {
  if (first.tensor.dtype == next.tensor.dtype && first.tensor.shape == next.tensor.shape &&
      first.layout == next.layout) {
    return Status::Ok();
  }
  return Status::InvalidArgument(
      "cannot batch: its value is " + std::string(DTypeName(next.tensor.dtype)) + " " +
      ShapeString(next.tensor.shape) + " but the batch holds " +
      std::string(DTypeName(first.tensor.dtype)) + " " + ShapeString(first.tensor.shape) +
      " (add a resize/crop or pad stage so every sample has one shape)");
}

Batch Collate(std::vector<Sample>& samples, uint64_t epoch, uint64_t index,
              std::optional<Batch::External> into) {
  Batch b;
  b.epoch = epoch;
  b.index = index;
  if (samples.empty()) return b;
  const Tensor& first = samples.front().tensor;
  std::vector<int64_t> shape = first.shape;
  shape.insert(shape.begin(), static_cast<int64_t>(samples.size()));
  const size_t stride = samples.front().tensor_size();
  if (into && into->data != nullptr && into->size == stride * samples.size()) {
    b.data.dtype = first.dtype;  // the bytes live in `into`
    b.data.shape = std::move(shape);
    b.external = std::move(into);
  } else {
    b.data.Reset(first.dtype, std::move(shape));
  }
  b.layout = samples.front().layout;
  b.labels.Reset(DType::kInt64, {static_cast<int64_t>(samples.size())});
  uint8_t* data = b.data_ptr();
  for (size_t i = 0; i < samples.size(); ++i) {
    // A sample already in its slot (Sample::in_arena) stays where it is.
    const uint8_t* from = samples[i].tensor_data();
    if (stride && from != data + i * stride) CopyStreaming(data + i * stride, from, stride);
    b.labels.data<int64_t>()[i] = samples[i].label;
    b.keys.push_back(std::move(samples[i].key));
    b.sample_indices.push_back(samples[i].index);
  }
  return b;
}

Result<RunStats> RunPipeline(const Pipeline& pipeline, const EngineOptions& options,
                             BatchSink& sink, EngineProgress* progress) {
  if (options.threads < 1) return Status::InvalidArgument("--threads must be at least 1");
  if (options.epochs < 1) return Status::InvalidArgument("--epochs must be at least 1");
  RunStats stats;
  stats.threads = options.threads;
  stats.epochs = options.epochs;
  stats.stages = EmptyStats(pipeline);
  const double t0 = MonotonicSeconds(), c0 = ProcessCpuSeconds();
  Batcher batcher(pipeline, options, sink, stats, progress);
  for (int e = 0; e < options.epochs; ++e) {
    if (progress) progress->epoch.store(static_cast<uint64_t>(e));
    const uint64_t epoch = static_cast<uint64_t>(e);
    GM_RETURN_IF_ERROR(
        RunSplits(pipeline, options, epoch, SplitOrder(pipeline, epoch), batcher, stats));
  }
  stats.seconds = MonotonicSeconds() - t0;
  stats.cpu_s = ProcessCpuSeconds() - c0;
  return stats;
}

std::vector<size_t> EpochSplitOrder(const Pipeline& pipeline, uint64_t epoch) {
  return SplitOrder(pipeline, epoch);
}

Result<RunStats> RunSplit(const Pipeline& pipeline, const EngineOptions& options,
                          const SplitTask& task, BatchSink& sink, EngineProgress* progress) {
  if (options.threads < 1) return Status::InvalidArgument("--threads must be at least 1");
  if (task.split >= pipeline.splits().size()) {
    return Status::InvalidArgument("no split " + std::to_string(task.split) + " (the source has " +
                                   std::to_string(pipeline.splits().size()) + ")");
  }
  RunStats stats;
  stats.threads = options.threads;
  stats.epochs = 1;
  stats.stages = EmptyStats(pipeline);
  const double t0 = MonotonicSeconds(), c0 = ProcessCpuSeconds();
  EngineOptions split_options = options;
  split_options.limit = -1;
  Batcher batcher(pipeline, split_options, sink, stats, progress);
  batcher.SetWindow(task.start_batch, task.end_batch);
  GM_RETURN_IF_ERROR(RunSplits(pipeline, split_options, task.epoch, {task.split}, batcher, stats));
  stats.seconds = MonotonicSeconds() - t0;
  stats.cpu_s = ProcessCpuSeconds() - c0;
  return stats;
}

void MergeStageStats(std::vector<StageStats>& into, const std::vector<StageStats>& from) {
  if (into.empty()) {
    into = from;
    return;
  }
  for (size_t i = 0; i < into.size() && i < from.size(); ++i) {
    into[i].count += from[i].count;
    into[i].cpu_s += from[i].cpu_s;
    into[i].extra_cpu_s += from[i].extra_cpu_s;
    into[i].wall_s += from[i].wall_s;
    into[i].bytes_in += from[i].bytes_in;
    into[i].bytes_out += from[i].bytes_out;
    into[i].peak_bytes_out = std::max(into[i].peak_bytes_out, from[i].peak_bytes_out);
  }
}

void SpanRecorder::Append(std::vector<StageSpan> spans) {
  MutexLock lock(mu_);
  spans_.insert(spans_.end(), spans.begin(), spans.end());
}

std::vector<StageSpan> SpanRecorder::Take() {
  MutexLock lock(mu_);
  return std::exchange(spans_, {});
}

}  // namespace gm
