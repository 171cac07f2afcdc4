// The coordinator's journal: every call that changed its CoordinatorState, in
// order, one line each, so that a coordinator started again replays it into the
// same state (a coordinator that dies costs the run no progress). Pure but for
// JournalFile: the lines go to a sink the caller gives.
//
// A line is a JSON object, a tab, and the FNV-1a 64 hash of the JSON in 16 hex
// digits, then a newline:
//
//   {"seq":7,"op":"ack","rank":0,"epoch":1,"split":3,"batch":0,"samples":64}\t<hash>\n
//
// seq counts from 1 without a gap. What is journaled, and how it replays:
//   - every mutator that succeeded, with its arguments (start_epoch, plan_ahead,
//     skip_to: the plan; register, drain, exited, end_run, split_done, ack,
//     resume, resume_at); a call that failed changed nothing and is not written;
//   - request: a RequestSplit answered with an assignment (the other answers
//     change nothing), with its answer, which the replay must give again (the
//     state machine is deterministic: a different answer means the journal is
//     not this coordinator's, and the replay fails saying so);
//   - exited: for a worker not gone already;
//   - ack: a first acknowledgement only (a repeat changes nothing but a counter);
//   - note: the caller's own bookkeeping that a restarted coordinator needs (the
//     server's sessions and channels), an object handed back to it on replay;
//   - Tick's outcome, not its input: a worker it declared lost is an "exited"
//     line (both give the worker's splits back the same way). Heartbeats are not
//     written: after a replay every live worker was last heard at the replay's
//     time, and one that does not come back is declared lost a liveness timeout
//     later, as any silent worker.
// A journal cut short (its last line without a newline: the process died while
// writing it) or corrupted (a hash that does not match, a gap in seq, a line that
// is not an op) is an error naming the file and line, never a state replayed
// wrong. Thread-compatible, as CoordinatorState.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "launcher/coordinator_state.h"

namespace gm {

// Where journal lines go (a file, or memory in tests); an empty one: nowhere,
// and no line is even built (a coordinator without a journal pays nothing). An
// error stops the call that wrote it: its change is then in the state but not in
// the journal, so the caller must not answer the peer (and should stop: the
// journal is behind).
using JournalSink = std::function<Status(std::string_view line)>;
// Takes a replayed note (JournaledCoordinator::Note); an error fails the replay.
using NoteHandler = std::function<Status(const nlohmann::json& note)>;

class JournaledCoordinator {
 public:
  // A new run's coordinator: an empty state, its calls written to `sink`.
  static Result<JournaledCoordinator> Create(const CoordinatorOptions& options, JournalSink sink);
  // A coordinator started again: the state `journal` (the text of the file
  // `origin`) replays into, every live worker last heard at `now_s`; later calls
  // go to `sink`, numbered on from the journal's last line. Each note goes to
  // `on_note` (none: skipped) in its place. InvalidArgument naming origin:line
  // when the journal is cut short, corrupted, or does not replay as it ran.
  static Result<JournaledCoordinator> Replay(const CoordinatorOptions& options,
                                             std::string_view journal, const std::string& origin,
                                             double now_s, JournalSink sink,
                                             NoteHandler on_note = nullptr);

  const CoordinatorState& state() const { return state_; }
  uint64_t lines() const { return seq_; }  // written and replayed

  // CoordinatorState's mutators, journaled (coordinator_state.h says what each does).
  Status StartEpoch(const EpochPlan& plan);
  Status PlanAhead(const EpochPlan& plan);
  Status SkipToEpoch(const EpochPlan& plan);
  Result<WorkerId> RegisterWorker(double now_s);
  Status Heartbeat(WorkerId worker, double now_s);  // not journaled
  Result<std::vector<WorkerId>> Tick(double now_s);
  Status Drain(WorkerId worker);
  Status WorkerExited(WorkerId worker);
  Status EndRun();
  Result<Assignment> RequestSplit(WorkerId worker);
  Status SplitDone(WorkerId worker, uint64_t epoch, uint64_t split, uint64_t batch_count,
                   uint64_t skipped = 0);
  Result<AckOutcome> Ack(int rank, uint64_t epoch, uint64_t split, uint64_t split_batch,
                         std::optional<uint64_t> samples = std::nullopt);
  Status Resume(int rank, uint64_t epoch, uint64_t position);
  Status ResumeAt(int rank, uint64_t epoch, uint64_t position, SequenceKey at);
  // Writes the caller's `note` (an object) as a line of its own; the state is
  // untouched.
  Status Note(nlohmann::json note);
  // Nothing more is written (the calls still change the state): a coordinator
  // that stops leaves the journal as a crash would, so that one started again
  // from it waits for the workers that were live to come back.
  void Detach() { sink_ = nullptr; }

 private:
  JournaledCoordinator(CoordinatorState state, JournalSink sink)
      : state_(std::move(state)), sink_(std::move(sink)) {}
  // Writes one op (its fields in `entry`, seq and op added) to the sink.
  Status Write(std::string_view op, nlohmann::json entry);
  // Applies one replayed entry to the state.
  Status Apply(const nlohmann::json& entry);

  CoordinatorState state_;
  JournalSink sink_;
  NoteHandler on_note_;  // during Replay only
  uint64_t seq_ = 0;
};

// The line's hash: FNV-1a 64 of `json`, 16 lowercase hex digits.
std::string JournalHash(std::string_view json);

// An append-only journal file: each Append is one write(2) of a whole line (a
// crash leaves at most the last line torn); Sync makes the lines so far durable
// (fdatasync). Move-only; closes the file.
class JournalFile {
 public:
  // Opens `path` for appending, creating it (mode 0600) when missing.
  static Result<JournalFile> Open(const std::string& path);
  JournalFile(JournalFile&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
    other.fd_ = -1;
  }
  JournalFile& operator=(JournalFile&&) = delete;
  JournalFile(const JournalFile&) = delete;
  ~JournalFile();
  Status Append(std::string_view line);
  Status Sync();

 private:
  JournalFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

}  // namespace gm
