#include "core/run_spec.h"

namespace gm {
namespace {

Status Range(const char* field, long long value, long long lo, long long hi) {
  if (value >= lo && value <= hi) return Status::Ok();
  return Status::InvalidArgument(std::string(field) + " is " + std::to_string(value) +
                                 "; it must be from " + std::to_string(lo) + " to " +
                                 std::to_string(hi));
}

}  // namespace

int RunSpec::ThreadsOf(int slot) const {
  const size_t i = static_cast<size_t>(slot);
  return slot >= 0 && i < slots.size() ? slots[i].threads : threads_per_worker;
}

bool RunSpec::RemoteOf(int slot) const {
  const size_t i = static_cast<size_t>(slot);
  return slot >= 0 && i < slots.size() ? slots[i].remote : true;
}

uint64_t RunSpec::MemoryOf(int slot) const {
  const size_t i = static_cast<size_t>(slot);
  const uint64_t planned = slot >= 0 && i < slots.size() ? slots[i].memory_bytes : 0;
  return planned > 0 ? planned : worker_memory_bytes;
}

Status RunSpec::Validate() const {
  GM_RETURN_IF_ERROR(Range("workers", workers, 1, kMaxRunWorkers));
  GM_RETURN_IF_ERROR(Range("threads per worker", threads_per_worker, 1, kMaxWorkerThreads));
  for (const WorkerSlot& s : slots)
    GM_RETURN_IF_ERROR(Range("a worker's threads", s.threads, 1, kMaxWorkerThreads));
  GM_RETURN_IF_ERROR(Range("epochs", epochs, 0, kMaxRunEpochs));
  GM_RETURN_IF_ERROR(Range("world size", world_size, 1, kMaxWorldSize));
  GM_RETURN_IF_ERROR(Range("samples per split", static_cast<long long>(samples_per_split), 1,
                           static_cast<long long>(kMaxSamplesPerSplit)));
  return Status::Ok();
}

}  // namespace gm
