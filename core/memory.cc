#include "core/memory.h"

#include <malloc.h>

namespace gm {

void TuneAllocatorForTensors() {
  // A fixed mmap threshold also turns off glibc's dynamic threshold, whose
  // adjustments would otherwise send some large blocks back to mmap.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

}  // namespace gm
