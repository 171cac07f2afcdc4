// Subprocess: a move-only owner of one child process whose stdin and stdout are
// both connected to one Unix stream socket held by the parent; the child's
// stderr is ours. Destroying (or Kill()ing) the owner sends SIGKILL to a child
// that is still running and reaps it, so no child outlives its owner unnoticed.
//
// Writes use MSG_NOSIGNAL (a dead child never raises SIGPIPE in the parent) and
// every read and write waits with poll() against a deadline, so a stuck child
// costs at most the caller's timeout. The socket is close-on-exec in the parent,
// so children started concurrently from other threads do not inherit it.
//
// Thread-compatible: one thread at a time uses a Subprocess.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/os/unique_fd.h"
#include "core/status.h"

namespace gm {

class Subprocess {
 public:
  // Starts argv[0] (searched in PATH when it has no '/') with `argv` and the
  // environment `env` ("NAME=value" strings). NotFound / IoError name the
  // program and the reason when it cannot be started.
  static Result<Subprocess> Start(const std::vector<std::string>& argv,
                                  const std::vector<std::string>& env);

  Subprocess() = default;
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  // Writes all of `data` to the child's stdin before `deadline_s` (seconds on
  // MonotonicSeconds()). IoError on a closed pipe, Unavailable on timeout.
  Status WriteAll(std::string_view data, double deadline_s);

  // Reads exactly `n` bytes of the child's stdout into `out` (replacing it)
  // before `deadline_s`. IoError on end of file (the message says how many bytes
  // came), Unavailable on timeout.
  Status ReadExact(size_t n, std::string& out, double deadline_s);

  // CPU seconds (user + system, including reaped grandchildren) the child has
  // used so far, from /proc/<pid>/stat; IoError when it cannot be read.
  Result<double> CpuSeconds() const;

  // Ends the child: waits up to `grace_s` seconds for it to exit by itself
  // (e.g. after closing its stdout), then sends SIGKILL, reaps it, and returns how it
  // ended: "exited with status 3" or "was killed by signal 9 (Killed)". With
  // `ended`, also kKilledByOthers when the child had ended by SIGKILL before
  // Kill sent one (else 0).
  static constexpr int kKilledByOthers = 1;
  std::string Kill(double grace_s = 0, int* ended = nullptr);

 private:
  Subprocess(pid_t pid, UniqueFd fd) : pid_(pid), fd_(std::move(fd)) {}
  Status Poll(short events, double deadline_s, std::string_view what);
  pid_t pid_ = -1;
  UniqueFd fd_;
};

}  // namespace gm
