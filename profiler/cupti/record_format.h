// One CUPTI activity record -> one line of the GPU activity log (profiler/gpu_log.h).
//
// The formatter reads the record structs that the CUPTI of this build writes: the
// newest CUpti_ActivityKernelN, CUpti_ActivityMemcpyN and CUpti_ActivityMemsetN that
// its cupti_activity.h defines (CUPTI always fills the newest version). CMake
// (profiler/cupti/CMakeLists.txt) finds them and defines GM_CUPTI_KERNEL_RECORD,
// GM_CUPTI_MEMCPY_RECORD and GM_CUPTI_MEMSET_RECORD; a build without CMake passes
// them with -D. The library is run against the libcupti it was built with (RPATH),
// so structs and records agree.
//
// Uses only CUPTI's headers, never libcupti: the unit test feeds it records it
// builds itself. Pure functions, safe from any thread.
#pragma once

#include <cupti_activity.h>

#include <cstdint>
#include <string>
#include <string_view>

#if !defined(GM_CUPTI_KERNEL_RECORD) || !defined(GM_CUPTI_MEMCPY_RECORD) || \
    !defined(GM_CUPTI_MEMSET_RECORD)
#error \
    "define GM_CUPTI_{KERNEL,MEMCPY,MEMSET}_RECORD to the newest CUpti_Activity structs \
of cupti_activity.h (profiler/cupti/CMakeLists.txt does it)"
#endif

namespace gm {

using CuptiKernelRecord = GM_CUPTI_KERNEL_RECORD;
using CuptiMemcpyRecord = GM_CUPTI_MEMCPY_RECORD;
using CuptiMemsetRecord = GM_CUPTI_MEMSET_RECORD;

enum class RecordLine {
  kWritten,    // one line appended
  kUntimed,    // a kernel/memcpy/memset without timestamps (start == end == 0): skipped
  kOtherKind,  // not a kind the log holds: skipped
};

// Appends the log line of `record` (with its '\n') to `out`:
//   kernel (KERNEL or CONCURRENT_KERNEL): "K start end device stream correlation name"
//   memcpy: "M start end device stream bytes copy_kind"
//   memset: "S start end device stream bytes"
// A kernel without a name is named "?"; control characters in a name become '?'
// so that the line stays one line. `record` must be a whole record of its kind (as
// cuptiActivityGetNextRecord returns it).
RecordLine AppendRecordLine(const CUpti_Activity& record, std::string& out);

// "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP",
// else "unknown" (CUpti_ActivityMemcpyKind, stored as a byte in memcpy records).
std::string_view MemcpyKindName(uint8_t copy_kind);

}  // namespace gm
