#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "core/clock.h"
#include "core/thread_annotations.h"

namespace gm {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
Mutex g_mu;
bool g_status_shown GUARDED_BY(g_mu) = false;  // a status line is on stderr, without '\n'
}  // namespace

namespace {

void AppendEscaped(std::string& out, unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 15];
}

// Appends `text` with control characters other than tab and newline as \xNN.
void AppendLogText(std::string& out, std::string_view text) {
  for (unsigned char c : text) {
    if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) {
      AppendEscaped(out, c);
    } else {
      out += static_cast<char>(c);
    }
  }
}

}  // namespace

std::string PeerText(std::string_view text, size_t max_bytes) {
  std::string out;
  for (unsigned char c : text) {
    if (out.size() >= max_bytes) {
      out += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      AppendEscaped(out, c);
    }
  }
  return out;
}

bool RateLimit::Allow(uint64_t* held_back) {
  MutexLock lock(mu_);
  const double now = MonotonicSeconds();
  if (now < next_s_) {
    ++held_back_;
    return false;
  }
  next_s_ = now + interval_s_;
  if (held_back != nullptr) *held_back = held_back_;
  held_back_ = 0;
  return true;
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }

void Log(LogLevel level, std::string_view message) {
  if (static_cast<int>(level) < g_level.load()) return;
  const char* tag = "";
  switch (level) {
    case LogLevel::kDebug:
      tag = "debug: ";
      break;
    case LogLevel::kInfo:
      tag = "";
      break;
    case LogLevel::kWarning:
      tag = "warning: ";
      break;
    case LogLevel::kError:
      tag = "error: ";
      break;
    case LogLevel::kQuiet:
      return;
  }
  std::string line = "goldminer: ";
  line += tag;
  AppendLogText(line, message);
  line += '\n';
  MutexLock lock(g_mu);
  if (g_status_shown) std::fputc('\n', stderr);
  g_status_shown = false;
  std::fwrite(line.data(), 1, line.size(), stderr);
}

bool StderrIsTerminal() { return ::isatty(2) == 1; }

void ShowStatusLine(std::string_view text) {
  if (static_cast<int>(LogLevel::kInfo) < g_level.load() || !StderrIsTerminal()) return;
  std::string line = "\r\033[K";
  AppendLogText(line, text.substr(0, text.find('\n')));
  MutexLock lock(g_mu);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  g_status_shown = true;
}

void EndStatusLine() {
  MutexLock lock(g_mu);
  if (g_status_shown) std::fputc('\n', stderr);
  g_status_shown = false;
}

void ClearStatusLine() {
  MutexLock lock(g_mu);
  if (g_status_shown) std::fputs("\r\033[K", stderr);
  g_status_shown = false;
}

}  // namespace gm
