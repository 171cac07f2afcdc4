// The coordinator's bookkeeping: which data worker makes which split of the
// epoch, which batches each trainer rank has acknowledged, and when the epoch ends.
//
// A pure state machine: no sockets, threads or clock reads. Time is a number of
// seconds the caller passes in (any monotonic origin). The wiring layer turns each
// message it receives into one call here and each answer into a message:
//
//   worker starts          -> RegisterWorker(now)             -> its WorkerId
//   any worker message     -> Heartbeat(id, now)
//   periodically           -> Tick(now)                        -> workers declared lost
//   worker asks for work   -> RequestSplit(id)                 -> Assign|Wait|Drain|Exit|EpochDone
//   worker made a split    -> SplitDone(id, epoch, split, count)
//   trainer rank used batch-> Ack(rank, epoch, split, split_batch)
//   trainer rank restarted -> Resume(rank, epoch, position)
//   scale down             -> Drain(id); worker process ended -> WorkerExited(id)
//   all splits handed out  -> WantsAhead() -> PlanAhead(plan of the next epoch)
//   EpochDone()            -> StartEpoch(plan of the next epoch)
//
// Epochs in flight: once every split of the current epoch is handed out, the
// next epoch's splits are handed out to workers that would otherwise idle
// through the current epoch's tail (a split of the current epoch given back
// still goes first). The trainers keep those batches until they reach that
// epoch, so nothing of it is acknowledged before StartEpoch adopts it; a worker
// lost meanwhile gives its splits of either epoch back, and a rank that resumes
// gives back its splits made ahead (their batches went to its old trainer).
//
// Guarantee: every batch of every rank's share (see dataplane/batch_order.h) is
// made by some worker as long as workers keep coming, whatever workers are lost,
// drained or added; a batch may be sent twice after a reassignment, and the client
// drops the copy with RankSequence, so each rank consumes it exactly once.
//
// Splits are handed out in plan order (lowest pending plan position first), so the
// split each rank needs next is always assigned or being made, never queued behind
// later splits. A client with a bounded re-order buffer must still keep accepting
// the stream of the split it needs next while it holds back the others.
//
// A split assigned to a worker stays the worker's until every batch it delivers has
// been acknowledged, even after SplitDone: if the worker is lost or exits first, the
// split goes back to the pending queue (ordered by plan position, so it is handed
// out before every later split) and the next worker starts it at the number of its
// batches acknowledged contiguously from batch 0.
//
// Thread-compatible: one thread at a time (the coordinator's event loop).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "dataplane/batch_order.h"

namespace gm {

using WorkerId = uint64_t;  // 1, 2, 3, ... in registration order; never reused

struct CoordinatorOptions {
  int world_size = 1;               // trainer ranks (>= 1)
  int max_inflight_per_worker = 2;  // splits a worker makes at once (>= 1)
  double liveness_timeout_s = 10;   // silence after which Tick declares a worker lost (> 0)
};

// The answer to RequestSplit.
struct Assignment {
  enum class Kind {
    kAssign,     // make the split below
    kWait,       // nothing to hand out now (or the in-flight limit is reached): ask later
    kDrain,      // draining: finish what you hold, take nothing new
    kExit,       // draining and nothing held, or declared lost: exit now
    kEpochDone,  // every rank acknowledged its share; wait for the next epoch
  };
  Kind kind = Kind::kWait;
  // The split, for kAssign only. The worker makes batches start_batch..end_batch-1
  // in order (end_batch kUnknownCount: to the split's end) for trainer `rank`, then
  // calls SplitDone with the split's batch count.
  uint64_t epoch = 0;
  uint64_t split = 0;
  size_t plan_position = 0;
  int rank = 0;
  uint64_t start_batch = 0;
  uint64_t end_batch = kUnknownCount;
  uint64_t batch_count = kUnknownCount;  // as planned
};

enum class AckOutcome { kAcked, kDuplicate };
enum class WorkerStatus { kActive, kDraining, kGone };

struct WorkerStats {
  WorkerId id = 0;
  WorkerStatus status = WorkerStatus::kActive;
  uint64_t splits_assigned = 0;
  uint64_t splits_done = 0;       // SplitDone calls for splits it held
  uint64_t splits_completed = 0;  // splits fully acknowledged while it held them
  uint64_t batches = 0;           // batches it made (per SplitDone: end - start)
  uint64_t reassigned = 0;        // splits taken from it unfinished (lost, exited, resume)
};

struct CoordinatorStats {
  uint64_t epoch = 0;
  bool epoch_done = false;
  uint64_t pending_splits = 0;           // waiting for a worker
  uint64_t incomplete_splits = 0;        // not yet fully acknowledged
  uint64_t acks = 0;                     // first acknowledgements, all epochs
  uint64_t duplicate_acks = 0;           // acknowledgements of batches already acknowledged
  uint64_t reassignments = 0;            // splits taken back from a worker unfinished
  uint64_t stale_split_done = 0;         // SplitDone for a split the worker no longer held
  uint64_t samples_skipped = 0;          // all epochs, by the holders' SplitDone
  std::vector<uint64_t> rank_positions;  // RankPosition per rank
  std::vector<WorkerStats> workers;      // in id order, lost and exited ones included
};

class CoordinatorState {
 public:
  // InvalidArgument when an option is out of range.
  static Result<CoordinatorState> Create(const CoordinatorOptions& options);

  // Starts an epoch. Fails (InvalidArgument) while the current epoch is not done,
  // when plan.epoch is not above the current epoch, or when LayOutPlan rejects the
  // plan (e.g. an unknown batch count with world size > 1). Splits the equal-share
  // cut leaves with nothing to deliver are complete from the start.
  Status StartEpoch(const EpochPlan& plan);
  // Epochs in flight together: once every split of the current epoch is handed
  // out (WantsAhead), the next epoch's plan may be laid out beside it, and
  // RequestSplit hands its splits out when the current epoch has none pending
  // (a split of the current epoch given back always goes first). Their makers
  // send their batches at once; the trainers keep them until they reach the
  // epoch, and acknowledge them only then, so nothing of the next epoch is
  // acknowledged before StartEpoch adopts it (its plan must be the same epoch).
  // InvalidArgument when not WantsAhead() or plan.epoch is not the next one.
  Status PlanAhead(const EpochPlan& plan);
  // True when the current epoch has nothing left to hand out, is not done, and
  // no next epoch is laid out yet.
  bool WantsAhead() const;
  // The epoch laid out ahead (nullopt when none).
  std::optional<uint64_t> ahead_epoch() const {
    return ahead_ ? std::optional<uint64_t>(ahead_->epoch) : std::nullopt;
  }
  bool epoch_started() const { return cur_.layout.has_value(); }
  uint64_t epoch() const { return cur_.epoch; }
  // True when every rank has acknowledged its whole share of the current epoch.
  bool EpochDone() const { return cur_.layout.has_value() && cur_.incomplete == 0; }

  WorkerId RegisterWorker(double now_s);
  // Records that the worker was heard from. Unavailable when it was declared lost
  // or exited (it must exit and register again); InvalidArgument for an unknown id.
  Status Heartbeat(WorkerId worker, double now_s);
  // Declares lost every live worker not heard from for more than
  // liveness_timeout_s before now_s, gives its unfinished splits back, and returns
  // the lost workers' ids (ascending).
  std::vector<WorkerId> Tick(double now_s);
  // The worker takes no new splits; it is told to exit once it holds none. Its
  // splits of the epoch laid out ahead go back to the queue at once (listed in
  // Revoked once that epoch starts): it need not wait for the trainers to get there.
  Status Drain(WorkerId worker);
  // The worker's process ended: its unfinished splits go back to the queue.
  // Idempotent for a worker already gone.
  Status WorkerExited(WorkerId worker);
  // The run is over for its workers (they are being stopped): splits given back
  // from now on are not counted as reassignments, since none is made again.
  void EndRun();
  bool ended() const { return ended_; }  // EndRun() was called
  // True when the worker should exit now (draining and holding nothing, or gone).
  bool ShouldExit(WorkerId worker) const;
  // True when the worker was told to drain (and is not gone).
  bool Draining(WorkerId worker) const;

  // Hands the worker its next split, or says why not. InvalidArgument for an
  // unknown id. The in-flight limit counts splits assigned and not yet SplitDone.
  Result<Assignment> RequestSplit(WorkerId worker);
  // The worker finished making a split; batch_count is the split's full batch count.
  // With a known planned count it must match (InvalidArgument otherwise); an
  // unknown count is learned here. A SplitDone for an earlier epoch or for a split
  // the worker no longer holds is counted as stale and accepted.
  // `skipped`: samples of the split the worker skipped (on_error: skip), counted
  // in CoordinatorStats::samples_skipped from the holder's report (a split made
  // again replaces its count).
  Status SplitDone(WorkerId worker, uint64_t epoch, uint64_t split, uint64_t batch_count,
                   uint64_t skipped = 0);
  // Trainer `rank` consumed batch split_batch of `split`. Idempotent: a repeat, or
  // an ack for an earlier (finished) epoch, returns kDuplicate and is counted.
  // InvalidArgument when no epoch started, the epoch is in the future, the rank is
  // out of range, the split is not in the plan or belongs to another rank, or the
  // batch is not below the split's delivered count.
  // `samples`: the batch's sample count as the trainer got it (ACK's samples),
  // summed per split for Delivered; a split acknowledged without it is not counted.
  Result<AckOutcome> Ack(int rank, uint64_t epoch, uint64_t split, uint64_t split_batch,
                         std::optional<uint64_t> samples = std::nullopt);
  // What the trainer got of a complete split of the current epoch, for the
  // coordinator's count check: nullopt while the split is not complete, when a
  // batch of it was acknowledged without its sample count (or by a resume), or
  // when an earlier run delivered it. `skip_told`: its maker's SPLIT_DONE said
  // how many samples it skipped (`skipped`), also when it came after the last ack.
  struct Delivery {
    uint64_t samples = 0;
    uint64_t skipped = 0;
    bool skip_told = false;
    uint64_t batches = 0;  // delivered: fewer than the split makes where equal shares cut it
    WorkerId maker = 0;    // who made it (its last holder)
  };
  std::optional<Delivery> Delivered(uint64_t split) const;
  // Trainer `rank` restarted from a checkpoint at `position`: exactly the first
  // `position` batches of its sequence count as acknowledged (later acknowledgements
  // of the rank are forgotten), and every split of the rank held by a worker is
  // taken back (the old trainer's streams are gone) and handed out again from its
  // acknowledged prefix. InvalidArgument for another epoch, a position beyond the
  // share, or a position that needs a batch count not known yet. The caller must
  // drop acknowledgements still arriving from the rank's old process afterwards.
  // The rank's splits of an epoch laid out ahead are taken back too.
  Status Resume(int rank, uint64_t epoch, uint64_t position);
  // Like Resume, for a rank that says where its position lies in its sequence:
  // `at` is the split's index among the rank's splits and the batches of it
  // consumed. The splits before it count as delivered without their counts being
  // known (a new run continuing a checkpoint of an earlier one, whose workers
  // learned the counts). InvalidArgument for another epoch, an index beyond the
  // share, a batch beyond a known count, or a position that contradicts known counts
  // (the state belongs to another pipeline or source).
  Status ResumeAt(int rank, uint64_t epoch, uint64_t position, SequenceKey at);
  // Replaces the current epoch by a later one before anything of it was
  // acknowledged (a new run whose first trainer resumes a later epoch). Splits
  // held by workers are taken from them (their SPLIT_DONE is then stale), those
  // of an epoch laid out ahead too.
  // InvalidArgument once a batch of the current epoch was acknowledged or resumed,
  // or when plan.epoch is not later.
  Status SkipToEpoch(const EpochPlan& plan);
  // True once a batch of the current epoch was acknowledged or a rank resumed in it.
  bool EpochTouched() const { return touched_; }
  // Batches acknowledged contiguously from the start of the rank's sequence (0 for
  // an unknown rank or before the first epoch).
  uint64_t RankPosition(int rank) const;
  // RankPosition and where it lies in the rank's sequence (its first split not
  // fully acknowledged, and the batches of it acknowledged), for ResumeAt.
  std::pair<uint64_t, SequenceKey> RankCursor(int rank) const;
  // The splits of `rank`'s share of the current epoch that a worker holds (made
  // or being made and not fully acknowledged), with the holder, in plan order.
  std::vector<std::pair<uint64_t, WorkerId>> Holders(int rank) const;
  // The splits of `rank`'s current epoch taken back from a worker when the rank's
  // trainer restarted (ResumeAt), or from a worker drained while it held them
  // ahead of their epoch, with each such worker: its batches of the split that
  // were on their way when it lost the split are no fault (the client drops
  // them, WORKERS' revoked). At most kMaxRevokedPerSplit workers a split.
  std::vector<std::pair<uint64_t, WorkerId>> Revoked(int rank) const;
  static constexpr size_t kMaxRevokedPerSplit = 4;
  // The split's batch count if planned, or learned from its maker once the split
  // is complete (acknowledged to its end), else kUnknownCount: before that the
  // maker's word may yet be taken back (TakeBack, when it is dropped), and a
  // trainer told it would refuse the next maker's. What PLAN says.
  uint64_t BatchCount(uint64_t split) const;
  // True when `worker` holds `split` of the current epoch and has not said it is
  // done: its SplitDone would set the split's count.
  bool MakesSplit(WorkerId worker, uint64_t split) const;
  // Every (epoch, split) the worker holds and has not said it finished (SplitDone),
  // of the current epoch and the one laid out ahead, in that order: what a worker
  // registering again at a restarted coordinator must still be making.
  std::vector<std::pair<uint64_t, uint64_t>> Making(WorkerId worker) const;
  // The split's batch count as the current epoch's plan gave it (kUnknownCount
  // when it left it open, or for a split not in the plan).
  uint64_t PlannedCount(uint64_t split) const;

  CoordinatorStats Stats() const;
  const CoordinatorOptions& options() const { return options_; }
  // The current epoch's layout; only valid when epoch_started().
  const PlanLayout& layout() const { return *cur_.layout; }

 private:
  enum class Phase { kPending, kAssigned, kComplete };
  struct SplitProgress {
    Phase phase = Phase::kPending;
    uint64_t deliver = kUnknownCount;  // planned delivery, or the learned count
    std::vector<bool> acked;           // by split_batch
    uint64_t acked_count = 0;
    uint64_t contiguous = 0;  // acknowledged from batch 0 without a gap
    WorkerId holder = 0;      // when kAssigned
    bool produced = false;    // holder called SplitDone
    uint64_t assigned_start = 0;
    bool skipped = false;          // delivered by an earlier run (ResumeAt); count may be unknown
    uint64_t samples_skipped = 0;  // by the holder's SplitDone (on_error: skip)
    bool skip_told = false;        // samples_skipped came from a SplitDone
    uint64_t acked_samples = 0;    // sum of the acknowledged batches' samples
    bool uncounted = false;        // a batch acknowledged without its sample count
    WorkerId last_holder = 0;      // who held it last (kept after Release)
    bool count_from_lost = false;  // deliver was told by a holder since taken back
    // Holders it was taken back from when its rank's trainer restarted (ResumeAt):
    // honest workers whose batches of it may still reach the new session.
    std::vector<WorkerId> revoked_from;
  };
  // One epoch's splits.
  struct Book {
    std::optional<PlanLayout> layout;  // (cur_'s: none before the first epoch)
    uint64_t epoch = 0;
    std::vector<SplitProgress> splits;  // by plan position
    std::set<size_t> pending;           // plan positions waiting for a worker
    uint64_t incomplete = 0;            // splits not fully acknowledged
  };
  struct WorkerRecord {
    double last_heard_s = 0;
    std::set<std::pair<uint64_t, size_t>> held;  // (epoch, plan position) assigned, not complete
    int producing = 0;                           // held and not yet SplitDone
    WorkerStats stats;
  };

  explicit CoordinatorState(const CoordinatorOptions& options) : options_(options) {}
  WorkerRecord* FindWorker(WorkerId worker);
  // The current epoch's plan position of `split` (nullopt before an epoch, or
  // for a split not in the plan).
  std::optional<size_t> PositionOf(uint64_t split) const;
  Assignment AssignNext(Book& book, WorkerRecord& worker);
  void Release(Book& book, size_t position);   // detaches the split from its holder
  void TakeBack(Book& book, size_t position);  // holder loses it unfinished: back to pending
  // TakeBack, its holder listed in Revoked: the batches on their way are no fault.
  void Revoke(Book& book, size_t position);
  void CompleteIfDone(Book& book, size_t position);
  // The book of `epoch`: cur_'s, ahead_'s, or nullptr.
  Book* BookOf(uint64_t epoch);
  // The rank's splits made ahead go back to the queue (its trainer restarted:
  // their batches went to the old one).
  void TakeBackAhead(int rank);
  void LoseWorker(WorkerRecord& worker);
  void SetAckedPrefix(size_t position, uint64_t count);
  void Skip(size_t position);  // complete without its count: delivered by an earlier run
  Status LayOut(const EpochPlan& plan);
  // What the current epoch leaves behind as another becomes current: its
  // skipped samples counted, nothing of the next touched or skipped yet.
  void LeaveEpoch();
  void Fill(Book& book,
            PlanLayout layout);  // every split pending but those with nothing to deliver
  void DropAhead();              // the epoch laid out ahead is gone, its holders freed
  Status CheckEpoch(uint64_t epoch, std::string_view what) const;
  Status CheckResume(int rank, uint64_t epoch, const std::string& what) const;
  Status LearnCount(Book& book, size_t position, WorkerId worker, uint64_t batch_count);

  CoordinatorOptions options_;
  Book cur_;                            // the epoch the trainers read
  std::optional<Book> ahead_;           // the next one, while its splits are made ahead
  bool touched_ = false;                // a batch of the epoch was acknowledged or resumed
  std::vector<uint64_t> skipped_base_;  // per rank: batches of its skipped splits
  std::map<WorkerId, WorkerRecord> workers_;
  WorkerId next_worker_ = 1;
  uint64_t acks_ = 0;
  uint64_t duplicate_acks_ = 0;
  uint64_t reassignments_ = 0;
  bool ended_ = false;  // EndRun() was called
  uint64_t stale_split_done_ = 0;
  uint64_t skipped_before_ = 0;  // samples skipped in epochs before the current one
};

}  // namespace gm
