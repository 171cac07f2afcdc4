#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

namespace gm {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_mu;
}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }

void Log(LogLevel level, std::string_view message) {
  if (static_cast<int>(level) < g_level.load()) return;
  const char* tag = "";
  switch (level) {
    case LogLevel::kDebug: tag = "debug: "; break;
    case LogLevel::kInfo: tag = ""; break;
    case LogLevel::kWarning: tag = "warning: "; break;
    case LogLevel::kError: tag = "error: "; break;
    case LogLevel::kQuiet: return;
  }
  std::string line = "goldminer: ";
  line += tag;
  line += message;
  line += '\n';
  std::lock_guard<std::mutex> lock(g_mu);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace gm
