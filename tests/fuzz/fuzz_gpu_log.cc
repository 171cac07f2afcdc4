// libFuzzer target: parses arbitrary bytes as a GPU activity log (profiler/gpu_log.h).
// Any input must yield a GpuLog or a Corrupt status: never a crash or a hang. A
// parsed log must hold only activities that end after they start, and writing it
// out again on the monotonic clock must parse to the same activities.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "profiler/gpu_log.h"

namespace {

std::string ActivityLine(const gm::GpuActivity& a) {
  std::string times = std::to_string(a.start_ns) + " " + std::to_string(a.end_ns) + " " +
                      std::to_string(a.device) + " " + std::to_string(a.stream) + " ";
  switch (a.kind) {
    case gm::GpuActivityKind::kKernel:
      return "K " + times + "0 " + a.name + "\n";
    case gm::GpuActivityKind::kMemcpy:
      return "M " + times + std::to_string(a.bytes) + " " + a.name + "\n";
    case gm::GpuActivityKind::kMemset:
      return "S " + times + std::to_string(a.bytes) + "\n";
  }
  return "";
}

bool Same(const gm::GpuActivity& a, const gm::GpuActivity& b) {
  return a.kind == b.kind && a.start_ns == b.start_ns && a.end_ns == b.end_ns &&
         a.device == b.device && a.stream == b.stream && a.bytes == b.bytes && a.name == b.name;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto log = gm::ParseGpuLog(text, "fuzz");
  if (!log.ok()) {
    if (log.status().code() != gm::Code::kCorrupt) __builtin_trap();
    return 0;
  }
  std::string again = "# goldminer gpu log 1 pid=" + std::to_string(log->pid) + "\n";
  again += "# clock=monotonic\n";
  for (const gm::GpuActivity& a : log->activities) {
    if (a.end_ns < a.start_ns) __builtin_trap();
    again += ActivityLine(a);
  }
  auto twice = gm::ParseGpuLog(again, "again");
  if (!twice.ok() || twice->activities.size() != log->activities.size()) __builtin_trap();
  for (size_t i = 0; i < log->activities.size(); ++i) {
    if (!Same(log->activities[i], twice->activities[i])) __builtin_trap();
  }
  return 0;
}
