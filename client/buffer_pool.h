// BufferPool: recycles large byte buffers (received batches), so a client does not
// pay a page fault per 4 KiB of every new 40 MB batch in a process whose allocator
// returns big blocks to the kernel (a Python trainer's). Thread-safe.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "core/sample.h"
#include "core/thread_annotations.h"

namespace gm {

class BufferPool {
 public:
  // Keeps at most `max_buffers` buffers; more are freed on Give.
  explicit BufferPool(size_t max_buffers) : max_buffers_(max_buffers) {}

  // A buffer with capacity if one is pooled, else an empty one. Contents unspecified.
  Bytes Take() {
    MutexLock lock(mu_);
    if (free_.empty()) return Bytes();
    Bytes b = std::move(free_.back());
    free_.pop_back();
    return b;
  }

  // Returns a buffer for reuse (dropped when the pool is full or it has no capacity).
  void Give(Bytes&& buffer) {
    if (buffer.capacity() == 0) return;
    MutexLock lock(mu_);
    if (free_.size() < max_buffers_) free_.push_back(std::move(buffer));
  }

 private:
  const size_t max_buffers_;
  Mutex mu_;
  std::vector<Bytes> free_ GUARDED_BY(mu_);
};

}  // namespace gm
