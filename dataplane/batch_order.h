// Epoch plans and the order in which each trainer rank receives its batches.
//
// An epoch plan is the ordered list of the epoch's splits (computed elsewhere from
// the run seed and the epoch). With world size W, the split at plan position p
// belongs to rank p % W. A rank's batch sequence for the epoch is its splits in
// plan order, each split's batches 0..n-1 in order. A batch never spans two
// splits, so (split, split_batch) names one batch of an epoch everywhere.
//
// Equal shares: when every split's batch count is known, every rank is delivered
// exactly `share` batches, the smallest batch total of any rank. Batches past the
// share at the END of a longer rank's sequence are not delivered (like PyTorch's
// DistributedSampler with drop_last), so every rank runs the same number of steps
// and DDP's collective operations never wait for a rank that has run out. When some
// count is unknown, W must be 1 and the rank gets every batch of every split.
//
// Everything here is a plain value with no I/O, clock or threads; thread-compatible.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace gm {

// A batch count (or position) that is not known.
inline constexpr uint64_t kUnknownCount = std::numeric_limits<uint64_t>::max();
// Largest batch count of one split accepted anywhere (a guard against bogus input).
inline constexpr uint64_t kMaxSplitBatches = uint64_t{1} << 24;

struct PlanSplit {
  uint64_t split = 0;                    // the split id (Batch::split)
  uint64_t batch_count = kUnknownCount;  // batches the split makes, or unknown
};

struct EpochPlan {
  uint64_t epoch = 0;
  std::vector<PlanSplit> splits;  // in plan order; each split id at most once
};

// Where the split at one plan position lands.
struct SplitSlot {
  uint64_t split = 0;
  int rank = 0;                          // plan position % world size
  uint64_t batch_count = kUnknownCount;  // as planned
  // Position of the split's batch 0 in its rank's sequence (unknown once an
  // earlier split of the same rank has an unknown count).
  uint64_t offset = kUnknownCount;
  // Batches of the split that are delivered: 0..deliver-1. Equals batch_count
  // except where the equal-share cut falls inside or before the split.
  uint64_t deliver = kUnknownCount;
};

// A plan laid out over the ranks.
struct PlanLayout {
  uint64_t epoch = 0;
  int world_size = 1;
  uint64_t share = kUnknownCount;  // batches each rank receives (unknown if any count is)
  std::vector<SplitSlot> slots;    // by plan position
  std::vector<std::vector<size_t>> rank_slots;       // per rank: its plan positions, in order
  std::unordered_map<uint64_t, size_t> position_of;  // split id -> plan position

  // The plan position of `split`; InvalidArgument naming the split and epoch if absent.
  Result<size_t> Find(uint64_t split) const;
};

// "epoch E split S", for messages.
std::string SplitName(uint64_t epoch, uint64_t split);

// Lays `plan` out over `world_size` ranks. Fails (InvalidArgument, naming the epoch
// and split) on world_size < 1, a split id listed twice, a count above
// kMaxSplitBatches, or an unknown count with world_size > 1.
Result<PlanLayout> LayOutPlan(const EpochPlan& plan, int world_size);

// Where a delivered batch falls in the receiving rank's sequence.
enum class Arrival {
  kNext,         // the batch the rank needs now: hand it to the trainer, then Advance()
  kFuture,       // a later batch of the rank: keep it in the re-order buffer
  kDuplicate,    // already consumed (a copy re-sent after a reassignment): drop it
  kBeyondShare,  // past the rank's equal share: drop it
};
std::string_view ArrivalName(Arrival arrival);  // "next", "future", ...

// Orders a rank's batches: compare keys to sort a re-order buffer.
struct SequenceKey {
  size_t index = 0;    // the split's index among the rank's splits
  uint64_t batch = 0;  // split_batch
  auto operator<=>(const SequenceKey&) const = default;
};

// The client side of one rank's sequence: which batch is next, and what to do with
// a batch that arrives. A cursor moves over the sequence as batches are consumed.
class RankSequence {
 public:
  // The sequence of `rank` (0 <= rank < world_size) with the first `start_position`
  // batches already consumed (a trainer resumed from a checkpoint). start_position
  // > 0 needs the counts of the splits it covers; it must not exceed the share.
  static Result<RankSequence> Create(const EpochPlan& plan, int world_size, int rank,
                                     uint64_t start_position = 0);
  // The same, for a start that also says where start_position lies: `at` (the
  // split's index among the rank's splits, and its batches consumed). The counts of
  // the splits before it are not needed: a trainer continuing, in a new run, a
  // checkpoint of an earlier one. InvalidArgument when `at` lies beyond the share or
  // a known count, or contradicts start_position where the earlier counts are known.
  static Result<RankSequence> CreateAt(const EpochPlan& plan, int world_size, int rank,
                                       uint64_t start_position, SequenceKey at);

  // Classifies a batch that arrived. InvalidArgument when the split is not in the
  // plan, belongs to another rank, or split_batch is not below the split's count.
  Result<Arrival> Classify(uint64_t split, uint64_t split_batch) const;
  // Consumes the next batch; call once after each batch classified kNext is used.
  void Advance();
  // Records a split's batch count learned at run time (unknown-count plans: from
  // the worker's end of split or from the coordinator). InvalidArgument when it
  // contradicts the plan, an earlier count, or batches already consumed.
  Status SetBatchCount(uint64_t split, uint64_t batch_count);
  // Forgets a count learned at run time for a split the sequence has not passed
  // (its teller was found to lie): the split's count is unknown again. False when
  // the count was planned, or the split is passed.
  bool ForgetBatchCount(uint64_t split);

  // Position of the batch in the rank's sequence (0-based). Needs the counts of the
  // rank's earlier splits; InvalidArgument when unknown, not ours or beyond the share.
  Result<uint64_t> Position(uint64_t split, uint64_t split_batch) const;
  // Key of a batch (same errors as Classify) and of the next batch.
  Result<SequenceKey> Key(uint64_t split, uint64_t split_batch) const;
  SequenceKey next_key() const { return {cursor_, batch_}; }
  // (split id, split_batch) of the next batch; only meaningful when !done().
  uint64_t next_split() const { return layout_.slots[positions_[cursor_]].split; }

  // True for a split of the rank that the cursor has moved past (consumed).
  bool Passed(uint64_t split) const;
  // The split's planned or learned batch count (kUnknownCount when unknown or
  // not the rank's).
  uint64_t CountOf(uint64_t split) const;

  uint64_t position() const { return consumed_before_ + batch_; }  // batches consumed
  bool done() const { return cursor_ == positions_.size(); }       // whole share consumed
  uint64_t share() const { return layout_.share; }
  int rank() const { return rank_; }
  const PlanLayout& layout() const { return layout_; }

 private:
  RankSequence(PlanLayout layout, int rank);
  Result<size_t> IndexOf(uint64_t split) const;  // index among the rank's splits
  void Normalize();                              // moves the cursor past finished splits

  PlanLayout layout_;
  int rank_ = 0;
  std::vector<size_t> positions_;  // the rank's plan positions
  std::vector<uint64_t> count_;    // per rank index: planned or learned count
  std::vector<uint64_t> deliver_;  // per rank index: batches delivered
  size_t cursor_ = 0;              // rank index of the next batch's split
  uint64_t batch_ = 0;             // split_batch of the next batch
  uint64_t consumed_before_ = 0;   // batches of the splits before the cursor
};

}  // namespace gm
