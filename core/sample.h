// Sample, Tensor and Batch: the values that flow through a pipeline.
//
// A Sample is owned by exactly one thread at a time (the engine hands it from the
// source to a stage thread to the batcher); nothing here is synchronised.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_annotations.h"

namespace gm {

// An allocator whose value-less construct() default-initialises, so a buffer
// that is about to be overwritten (a decoded image, a batch) is not zeroed first.
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}  // NOLINT
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// Tensor storage: resize() leaves new bytes uninitialised.
using Bytes = std::vector<uint8_t, DefaultInitAllocator<uint8_t>>;

// Compares contents with a plain byte vector (found by ADL; either order in C++20).
inline bool operator==(const Bytes& a, const std::vector<uint8_t>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

enum class DType : uint8_t { kUInt8, kInt32, kInt64, kFloat32 };

size_t DTypeSize(DType d);
std::string_view DTypeName(DType d);   // "uint8", "int32", "int64", "float32"
std::string_view NumpyDescr(DType d);  // "|u1", "<i4", "<i8", "<f4"

enum class Layout : uint8_t { kNone, kHWC, kCHW };

// A dense, row-major, contiguous n-d array. `bytes` holds num_elements()*DTypeSize;
// Reset() leaves the contents unspecified (callers overwrite them).
struct Tensor {
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape;
  Bytes bytes;

  size_t num_elements() const;
  bool empty() const { return shape.empty(); }
  void Reset(DType d, std::vector<int64_t> s);  // resizes bytes for the new shape
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(bytes.data());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
};

std::string ShapeString(const std::vector<int64_t>& shape);  // "[224, 224, 3]"

class BatchArena;

struct Sample {
  // Stable position of the sample in its source (files: index in the sorted list;
  // tar: shard << 32 | position in shard; jsonl: line number; range: the index).
  // Per-sample randomness is drawn from (seed, epoch, index) only.
  uint64_t index = 0;
  // Stable, unique key: "<path>" for files, "<shard>#<basename>" for tar,
  // "<path>:<line>" for jsonl, "range:<i>" for range. Used to prove exactly-once.
  std::string key;
  int64_t label = -1;  // -1: no label
  // Bytes from the source (an encoded JPEG, a line of text, ...).
  std::string data;
  // Extension of `data` (tar member suffix or file extension), e.g. "jpg".
  std::string ext;
  // Other members of a tar sample by extension (e.g. "cls", "json").
  std::map<std::string, std::string> fields;
  // The decoded value once a stage has made one. Images are [H, W, C] (kHWC).
  Tensor tensor;
  Layout layout = Layout::kNone;
  // When `tensor` is float32 and was produced by to_tensor or normalize: values are
  // already scaled to [0, 1] (to_tensor) or normalized; see worker/image/image_ops.h.
  bool normalized = false;
  // CPU seconds spent on this sample outside the calling thread (exec stages'
  // child processes). The engine adds it to the stage's CPU time and resets it.
  double extra_cpu_s = 0;

  // Lent by the engine to the last stage: the sample's slot in the buffer of the
  // batch it is expected to join. NewTensor() puts a new tensor there when it
  // fits; the tensor then has its dtype and shape but no bytes of its own, and
  // `in_arena` points at them.
  std::shared_ptr<BatchArena> arena;
  size_t arena_slot = 0;
  uint8_t* in_arena = nullptr;

  // Replaces `tensor` with an uninitialised one of `dtype` and `shape`, in the
  // arena slot when one is lent, fits and does not hold the tensor being
  // replaced, and returns its bytes to write. To keep reading the old tensor,
  // take tensor_data() and move `tensor` out first.
  uint8_t* NewTensor(DType dtype, std::vector<int64_t> shape);
  // The tensor's bytes, wherever they are.
  const uint8_t* tensor_data() const { return in_arena ? in_arena : tensor.bytes.data(); }
  size_t tensor_size() const;

  // Bytes the sample carries now: the tensor if there is one, else `data`.
  size_t payload_bytes() const { return tensor.empty() ? data.size() : tensor_size(); }
};

// A batch in delivery order. data: [B, ...sample shape], labels: int64 [B].
struct Batch {
  uint64_t epoch = 0;
  uint64_t index = 0;        // batch number within the epoch (delivery order)
  size_t split = 0;          // the split its samples came from (a batch never spans two)
  uint64_t split_batch = 0;  // batch number within that split
  // True for the split's last batch (so split_batch + 1 batches make the split).
  // False for every other batch, and when drop_last dropped the split's tail.
  bool last_of_split = false;
  Tensor data;
  Layout layout = Layout::kNone;  // of each sample
  Tensor labels;
  std::vector<std::string> keys;
  std::vector<uint64_t> sample_indices;
  // Set when the data tensor's bytes live in memory the batch does not own (a
  // shared-memory segment the client mapped: dataplane/shm.h): data.bytes is then
  // empty while data.dtype and data.shape describe `external`. Dropping the last
  // copy of `owner` gives the memory back to the sender.
  struct External {
    uint8_t* data = nullptr;
    size_t size = 0;
    std::shared_ptr<void> owner;
  };
  std::optional<External> external;
  size_t size() const { return keys.size(); }
  // The data tensor's bytes, wherever they live.
  uint8_t* data_ptr() { return external ? external->data : data.bytes.data(); }
  const uint8_t* data_ptr() const { return external ? external->data : data.bytes.data(); }
  size_t data_size() const { return external ? external->size : data.bytes.size(); }
};

// `bytes` of uninitialised heap memory as a batch's data (Batch::External): what a
// sink that takes batches in memory of its own lends when it has nothing better.
// The memory is recycled: up to 4 buffers come back for later batches.
Batch::External HeapMemory(size_t bytes);

// The data buffer of a batch still being made (worker/engine.cc): each of its
// samples' last stage writes its tensor straight into the sample's slot
// (Sample::NewTensor), so collating the batch copies nothing. Thread-safe: the
// stage threads of one batch share it.
class BatchArena {
 public:
  // Memory for the buffer: `slots` x the first tensor's size (BatchSink::Reserve).
  using Allocate = std::function<std::optional<Batch::External>(size_t bytes)>;
  BatchArena(size_t slots, Allocate allocate) : slots_(slots), allocate_(std::move(allocate)) {}

  // Slot `slot`'s memory for a tensor of `bytes`. The buffer is made on the first
  // call, for tensors of that size; nullptr when it could not be made, for another
  // size, or for a slot past the end.
  uint8_t* Slot(size_t slot, size_t bytes);
  // The buffer's first `slots` slots as a batch's data; nullopt if none was made.
  std::optional<Batch::External> Take(size_t slots);

 private:
  const size_t slots_;
  const Allocate allocate_;
  Mutex mu_;
  bool made_ GUARDED_BY(mu_) = false;  // allocation tried
  size_t stride_ GUARDED_BY(mu_) = 0;
  std::optional<Batch::External> memory_ GUARDED_BY(mu_);
};

}  // namespace gm
