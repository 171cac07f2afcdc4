#include "core/os/memory.h"

#include <malloc.h>
#include <sys/resource.h>

namespace gm {

void TuneAllocatorForTensors() {
  // A fixed mmap threshold also turns off glibc's dynamic threshold, whose
  // adjustments would otherwise send some large blocks back to mmap.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

uint64_t RaiseDescriptorLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return static_cast<uint64_t>(limit.rlim_cur);
}

}  // namespace gm
