// The step log: how a trainer process tells `goldminer profile` when it waited for
// data. Written by the goldminer client (each Next()) and by the PyTorch import hook
// (each DataLoader __next__); read by the profiler.
//
// When $GOLDMINER_PROFILE_DIR is set, each trainer process appends to
// $GOLDMINER_PROFILE_DIR/steps.<pid>.log, a text file:
//   # goldminer step log 1 pid=<pid> source=<goldminer|torch>
//   S <wait_begin_ns> <wait_end_ns> <samples> [<previous_cost_ns>]
//   S ...
//   D <workers> <cpu_ns> <bytes>
// one "S" line per batch request (the optional last field: nanoseconds the writer
// spent writing its previous "S" line, so a killed process still leaves its cost), written with one
// write(2) on an O_APPEND file as soon as the batch is handed over (so a crash loses nothing
// already stepped). Times are CLOCK_MONOTONIC nanoseconds, the clock the CUPTI injection library
// also reports in (see profiler/gpu_log.h). A last line without '\n' (killed mid-write) is ignored;
// any other malformed line is an error naming the file and line. Lines starting with '#' are
// comments; "E <text>" records an error the writer met; "O <seconds_spent> <records>", written when
// a writer closes, is the log's own cost: seconds spent writing its `records` "S" lines (reported
// as instrumentation overhead; a process that opened several writers has one "O" line per writer,
// and its header once per writer, with the same pid). A "D" line, written by the PyTorch hook with
// the "S" line of a batch made by stock DataLoader worker processes, belongs to that step: the
// iterator's worker count (>= 1), the CPU nanoseconds its process's DataLoader workers used so
// far (cumulative over the process's life) and the batch's bytes; a "D" line with no "S" line
// before it, or a second one for a step, is an error. An "N" line, written by the PyTorch hook
// under `goldminer profile --offload native` at a DataLoader's first iterator, prices that
// DataLoader on goldminer's native engine: "N <samples> <cpu_ns> <bytes> <cut_cpu_ns>
// <cut_bytes>", the CPU nanoseconds and bytes of `samples` (>= 1) samples made to the
// transform's end, then to its uint8 cut; an "X <text>" line says why a DataLoader was not
// recognised for the native engine.
//
// Threads: a StepLogWriter may be used from one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/os/unique_fd.h"
#include "core/status.h"

namespace gm {

inline constexpr std::string_view kProfileDirEnv = "GOLDMINER_PROFILE_DIR";

// A "D" line: the DataLoader worker processes behind a step's batch.
struct LoaderRecord {
  uint64_t workers = 0;  // the iterator's worker processes, >= 1
  uint64_t cpu_ns = 0;   // their process's DataLoader workers' CPU so far (cumulative)
  uint64_t bytes = 0;    // the batch's bytes
  bool operator==(const LoaderRecord&) const = default;
};

// An "N" line: a DataLoader's samples made by the native engine (totals).
struct NativeRecord {
  uint64_t samples = 0;     // >= 1
  uint64_t cpu_ns = 0;      // to the transform's end
  uint64_t bytes = 0;       // of those samples, as made
  uint64_t cut_cpu_ns = 0;  // to the uint8 cut
  uint64_t cut_bytes = 0;
  bool operator==(const NativeRecord&) const = default;
};

struct StepRecord {
  uint64_t wait_begin_ns = 0;
  uint64_t wait_end_ns = 0;
  uint64_t samples = 0;
  std::optional<LoaderRecord> loader = std::nullopt;  // its "D" line, when it had one
  bool operator==(const StepRecord&) const = default;
};

struct StepLog {
  int pid = 0;
  std::string source;                   // "goldminer" or "torch"
  std::vector<StepRecord> steps;        // in file order
  std::vector<std::string> errors;      // "E" lines
  std::vector<NativeRecord> native;     // "N" lines
  std::vector<std::string> not_native;  // "X" lines
  double overhead_s = 0;                // sum of the "O" lines' seconds
  uint64_t overhead_records = 0;        // sum of the "O" lines' records
  // The "S" lines' PREVIOUS_COST_NS fields: their sum and how many lines had one.
  // When no "O" line was written (the process was killed), overhead_s and
  // overhead_records come from these: the cost of every record but the last.
  uint64_t inline_overhead_ns = 0;
  uint64_t inline_overhead_lines = 0;
};

// CLOCK_MONOTONIC now, in nanoseconds.
uint64_t MonotonicNanos();

class StepLogWriter {
 public:
  // Opens <dir>/steps.<pid>.log for appending and writes the header. IoError names
  // the path; InvalidArgument when `source` is empty or holds whitespace.
  static Result<std::unique_ptr<StepLogWriter>> Open(const std::string& dir,
                                                     std::string_view source);
  // A writer when $GOLDMINER_PROFILE_DIR is set, else nullptr (also nullptr, with a
  // warning on stderr, when the file cannot be opened: profiling never breaks training).
  static std::unique_ptr<StepLogWriter> FromEnvironment(std::string_view source);

  // Writes the "O" line (and an "E" line when records were lost), closes the file.
  ~StepLogWriter();
  StepLogWriter(const StepLogWriter&) = delete;
  StepLogWriter& operator=(const StepLogWriter&) = delete;

  // Appends one step. Failures are counted, not returned (training goes on).
  void Record(const StepRecord& step);
  uint64_t failures() const { return failures_; }
  // Seconds spent inside Record() so far (the log's own overhead).
  double seconds_spent() const { return seconds_spent_; }

 private:
  explicit StepLogWriter(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
  uint64_t records_ = 0;       // Record() calls
  uint64_t last_cost_ns_ = 0;  // the previous Record()'s own time
  uint64_t failures_ = 0;
  double seconds_spent_ = 0;
};

// Parses one step log's text; `origin` names it in errors ("ORIGIN:LINE: ...").
// Corrupt when the first line is not a version-1 header or a line is malformed.
Result<StepLog> ParseStepLog(std::string_view text, const std::string& origin);
// Reads every steps.*.log in `dir`, sorted by pid (none: an empty vector). NotFound
// names `dir` when it does not exist. A file without one complete line (its process
// was killed before the header was written) is skipped.
Result<std::vector<StepLog>> ReadStepLogs(const std::string& dir);

// Counts the "S" lines of every steps.*.log in a directory while trainers append
// to them, reading only the bytes added since the previous call, so polling stays
// cheap however long the run. A line counts once complete ('\n'-terminated). Does
// not validate lines (ReadStepLogs does, at the end). Thread-compatible.
class StepCounter {
 public:
  // What the complete "S" lines of every log add up to so far.
  struct Totals {
    uint64_t steps = 0;
    uint64_t samples = 0;
    uint64_t wait_ns = 0;  // sum of wait_end - wait_begin
  };

  explicit StepCounter(std::string dir) : dir_(std::move(dir)) {}
  // The step count of each log seen so far, in file-name order. A file that cannot
  // be read now is counted again at the next call.
  std::vector<uint64_t> Update();
  // Totals over every log, as of the last Update(). A malformed "S" line counts as
  // a step with no samples and no wait.
  Totals totals() const;

 private:
  struct File {
    uint64_t offset = 0;  // bytes consumed: always just after a '\n'
    uint64_t steps = 0;
    uint64_t samples = 0;
    uint64_t wait_ns = 0;
  };
  std::string dir_;
  std::map<std::string, File> files_;  // by file name
};

}  // namespace gm
