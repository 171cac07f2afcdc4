// Logging to stderr: one line per message, prefixed with the program name and level.
// Thread-safe (lines from several threads never interleave). The level is process-wide
// configuration set once by main() before threads start.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "core/thread_annotations.h"

namespace gm {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kQuiet = 4 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Writes one line. Control characters other than tab and newline (terminal
// escapes, carriage returns, bells) are written as \xNN, whoever made the text.
void Log(LogLevel level, std::string_view message);

// Text a peer sent (an ERROR message, a role, a name), made fit to quote in a
// message: every byte outside printable ASCII, newlines included, becomes \xNN,
// and the result is cut to `max_bytes` (then "...").
std::string PeerText(std::string_view text, size_t max_bytes = 200);

// Seconds between two warnings of a kind that a peer can trigger at will.
inline constexpr double kPeerWarningIntervalS = 10;

// Lets a warning that peers can trigger again and again (a failed handshake, a
// dropped connection) through at most once per interval. Thread-safe.
class RateLimit {
 public:
  explicit RateLimit(double interval_s) : interval_s_(interval_s) {}
  double interval_s() const { return interval_s_; }
  // True when the warning may be logged now; then `*held_back` (when given) is
  // how many were not logged since the last one.
  bool Allow(uint64_t* held_back = nullptr);

 private:
  const double interval_s_;
  Mutex mu_;
  double next_s_ GUARDED_BY(mu_) = 0;
  uint64_t held_back_ GUARDED_BY(mu_) = 0;
};

// A status line (a run's rates, a worker's progress) on a terminal.
// ShowStatusLine rewrites it in place on stderr (its first line, escaped like a
// log line) when stderr is a terminal and the level lets info through; else it
// does nothing (the caller logs a line now and then instead: StderrIsTerminal).
// The next Log line ends it first, so the last status stays above that line;
// EndStatusLine ends it the same way, ClearStatusLine erases it.
bool StderrIsTerminal();
void ShowStatusLine(std::string_view text);
void EndStatusLine();
void ClearStatusLine();

inline void LogDebug(std::string_view m) { Log(LogLevel::kDebug, m); }
inline void LogInfo(std::string_view m) { Log(LogLevel::kInfo, m); }
inline void LogWarning(std::string_view m) { Log(LogLevel::kWarning, m); }
inline void LogError(std::string_view m) { Log(LogLevel::kError, m); }

}  // namespace gm
