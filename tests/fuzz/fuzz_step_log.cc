// libFuzzer target: parses arbitrary bytes as a step log (core/step_log.h). Any
// input must yield a StepLog or a Corrupt status naming the origin and a line:
// never a crash or a hang. A parsed log must keep its invariants: a positive pid,
// a one-word source, every wait ending no earlier than it begins.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/step_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto log = gm::ParseStepLog(text, "fuzz.log");
  if (!log.ok()) {
    if (log.status().code() != gm::Code::kCorrupt ||
        !log.status().message().starts_with("fuzz.log:"))
      __builtin_trap();
    return 0;
  }
  if (log->pid <= 0 || log->source.empty() ||
      log->source.find_first_of(" \n") != std::string::npos || !(log->overhead_s >= 0))
    __builtin_trap();
  for (const gm::StepRecord& step : log->steps) {
    if (step.wait_end_ns < step.wait_begin_ns) __builtin_trap();
  }
  return 0;
}
