#include "core/sample.h"

#include "core/thread_annotations.h"

namespace gm {

size_t DTypeSize(DType d) {
  switch (d) {
    case DType::kUInt8:
      return 1;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kFloat32:
      return 4;
  }
  return 1;
}

std::string_view DTypeName(DType d) {
  switch (d) {
    case DType::kUInt8:
      return "uint8";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat32:
      return "float32";
  }
  return "?";
}

std::string_view NumpyDescr(DType d) {
  switch (d) {
    case DType::kUInt8:
      return "|u1";
    case DType::kInt32:
      return "<i4";
    case DType::kInt64:
      return "<i8";
    case DType::kFloat32:
      return "<f4";
  }
  return "?";
}

size_t Tensor::num_elements() const {
  if (shape.empty()) return 0;
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  return n;
}

void Tensor::Reset(DType d, std::vector<int64_t> s) {
  dtype = d;
  shape = std::move(s);
  bytes.resize(num_elements() * DTypeSize(d));
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

uint8_t* Sample::NewTensor(DType dtype, std::vector<int64_t> shape) {
  // The slot is not lent twice: the tensor being replaced may live there (the
  // caller still reads it).
  const bool slot_taken = in_arena != nullptr;
  in_arena = nullptr;
  if (arena && !slot_taken) {
    size_t bytes = DTypeSize(dtype);
    for (int64_t d : shape) bytes *= static_cast<size_t>(d);
    if (uint8_t* slot = arena->Slot(arena_slot, bytes); slot != nullptr && bytes > 0) {
      tensor.dtype = dtype;
      tensor.shape = std::move(shape);
      tensor.bytes = Bytes();
      in_arena = slot;
      return slot;
    }
  }
  tensor.Reset(dtype, std::move(shape));
  return tensor.bytes.data();
}

size_t Sample::tensor_size() const {
  return in_arena ? tensor.num_elements() * DTypeSize(tensor.dtype) : tensor.bytes.size();
}

namespace {

// Buffers HeapMemory lent and got back, kept for the next batches: a batch is
// tens of MB, which malloc maps fresh each time (past its mmap threshold), so
// every page would fault again. Bounded: the batches in flight are a few.
class BufferCache {
 public:
  static constexpr size_t kKeep = 4;

  std::shared_ptr<Bytes> Take(size_t bytes) {
    std::unique_ptr<Bytes> buffer;
    {
      MutexLock lock(mu_);
      // The smallest kept buffer that fits, not more than twice the size.
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        const size_t have = (*it)->size();
        if (have >= bytes && have <= 2 * bytes && (best == free_.end() || have < (*best)->size())) {
          best = it;
        }
      }
      if (best != free_.end()) {
        buffer = std::move(*best);
        free_.erase(best);
      }
    }
    if (!buffer) buffer = std::make_unique<Bytes>(bytes);
    return std::shared_ptr<Bytes>(buffer.release(), [this](Bytes* b) { Give(b); });
  }

 private:
  void Give(Bytes* b) {
    std::unique_ptr<Bytes> buffer(b);
    MutexLock lock(mu_);
    if (free_.size() < kKeep) free_.push_back(std::move(buffer));
  }

  Mutex mu_;
  std::vector<std::unique_ptr<Bytes>> free_ GUARDED_BY(mu_);
};

// Never destroyed: batches may be dropped during static destruction.
BufferCache& Cache() {
  static BufferCache* cache = new BufferCache;
  return *cache;
}

}  // namespace

Batch::External HeapMemory(size_t bytes) {
  // 64 bytes more, to start on a cache line (SIMD stores into slots align too).
  std::shared_ptr<Bytes> buffer = Cache().Take(bytes + 64);
  uint8_t* data = buffer->data();
  data += (64 - reinterpret_cast<uintptr_t>(data) % 64) % 64;
  return Batch::External{data, bytes, buffer};
}

uint8_t* BatchArena::Slot(size_t slot, size_t bytes) {
  MutexLock lock(mu_);
  if (!made_) {
    made_ = true;
    stride_ = bytes;
    if (bytes > 0 && allocate_) memory_ = allocate_(bytes * slots_);
    if (memory_ && memory_->size < bytes * slots_) memory_.reset();
  }
  if (!memory_ || bytes != stride_ || slot >= slots_) return nullptr;
  return memory_->data + slot * stride_;
}

std::optional<Batch::External> BatchArena::Take(size_t slots) {
  MutexLock lock(mu_);
  if (!memory_ || slots > slots_) return std::nullopt;
  Batch::External out = *memory_;
  out.size = slots * stride_;
  return out;
}

}  // namespace gm
