// The GPU activity log: what libgoldminer_cupti.so (profiler/cupti/) records in a
// trainer process and `goldminer profile` reads back.
//
// The library is loaded into an unmodified CUDA program through
// CUDA_INJECTION64_PATH. When $GOLDMINER_PROFILE_DIR is set it writes
// $GOLDMINER_PROFILE_DIR/gpu.<pid>.log, a text file:
//   # goldminer gpu log 1 pid=<pid>                  header (first line; later key=value
//                                                    fields are allowed and ignored)
//   # clock=monotonic | # clock=cupti               which clock K/M/S times are on
//   C <cupti_timestamp_ns> <monotonic_ns>          clock pair (at start and at exit)
//   K <start_ns> <end_ns> <device> <stream> <correlation> <name>   kernel
//   M <start_ns> <end_ns> <device> <stream> <bytes> <copy kind>     memcpy
//   S <start_ns> <end_ns> <device> <stream> <bytes>                 memset
//   D <dropped_records>                           CUPTI's count of dropped records
//                                                 (one line per delivered buffer)
//   E <message>                                   an error the library met: a CUPTI call
//                                                 that failed ("E <call> failed: <CUPTI
//                                                 result name> (<code>)"), and "E no GPU
//                                                 activity will be recorded: <why>"
//   # <anything else>                             a comment: "# cupti_api_version=V",
//                                                 "# signal=N" (flushed on a stop signal),
//                                                 "# untimed=N" (records CUPTI delivered
//                                                 without timestamps, not in the log)
// <name> (mangled kernel name) and <copy kind> ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP",
// ...) are the rest of the line. The library reads the newest kernel, memcpy and
// memset record structs of the CUPTI it was built against (CUpti_ActivityKernel10,
// CUpti_ActivityMemcpy6, CUpti_ActivityMemset4 for CUDA 13.0), chosen at build time.
//
// Times: the library registers a CUPTI timestamp callback returning CLOCK_MONOTONIC
// nanoseconds and then writes "# clock=monotonic". Were that callback refused (or
// absent from the CUPTI it was built with), it writes "# clock=cupti": times are
// CUPTI's own (CLOCK_REALTIME on Linux), and ParseGpuLog puts them on CLOCK_MONOTONIC
// with the least-squares line through the "C" pairs (one pair: an offset). Without a
// "# clock=" line the times are taken as monotonic. So GpuLog always holds monotonic
// nanoseconds, on the clock of core/step_log.h.
//
// A last line without '\n' (the process died mid-write) is ignored, as is a file
// with no complete line; another malformed line (bad header, unknown tag, missing or
// non-numeric field, end before start) is a Corrupt error "FILE:LINE: what was
// expected, got '...'". "# clock=cupti" with activities but no "C" pair is Corrupt.
//
// Thread-compatible plain functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gm {

enum class GpuActivityKind { kKernel, kMemcpy, kMemset };

struct GpuActivity {
  GpuActivityKind kind = GpuActivityKind::kKernel;
  uint64_t start_ns = 0;  // CLOCK_MONOTONIC
  uint64_t end_ns = 0;
  uint32_t device = 0;
  uint32_t stream = 0;
  uint64_t bytes = 0;  // memcpy/memset
  std::string name;    // kernel name (mangled) or copy kind ("HtoD", ...)
};

struct GpuLog {
  int pid = 0;
  std::vector<GpuActivity> activities;  // in file order (not sorted)
  uint64_t dropped_records = 0;         // sum of "D" lines
  std::vector<std::string> errors;      // "E" lines
};

// Parses one GPU log's text; `origin` names it in errors. A text without a complete
// line gives an empty GpuLog (pid 0).
Result<GpuLog> ParseGpuLog(std::string_view text, const std::string& origin);
// Reads every gpu.<pid>.log in `dir`, sorted by pid (none: an empty vector); a log
// with no complete line takes its pid from its name. NotFound when `dir` does not
// exist; the first unreadable or malformed log is the error.
Result<std::vector<GpuLog>> ReadGpuLogs(const std::string& dir);

}  // namespace gm
