// The client's re-order buffer: batches arrive from many workers in any order, and
// leave in the rank's sequence order (RankSequence, dataplane/batch_order.h), each
// (epoch, split, split_batch) exactly once. Copies of consumed batches, copies of
// buffered ones and batches past the rank's share are dropped and counted.
//
// A plain value with no I/O, clock or threads; thread-compatible (the client guards
// it with its mutex).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "core/sample.h"
#include "core/status.h"
#include "dataplane/batch_order.h"

namespace gm {

class ReorderBuffer {
 public:
  enum class Outcome { kBuffered, kDropped, kRejected };
  // Epochs past the current one whose batches are kept (others are rejected).
  static constexpr uint64_t kLookAheadEpochs = 1;

  // Makes `plan` the current epoch, with this rank's first `position` batches
  // consumed. Buffered batches of later epochs stay, earlier ones are dropped,
  // counts learned earlier for the epoch are applied. A position inside the first
  // split of unknown count is allowed (the sequence walks to it); errors from
  // RankSequence::Create otherwise (a position past an unknown count or the share).
  // With `at`, the position's place in the sequence is given (RankSequence::CreateAt).
  Status StartEpoch(const EpochPlan& plan, int world_size, int rank, uint64_t position,
                    std::optional<SequenceKey> at = std::nullopt);
  // Where the position lies: the current split's index and its batches consumed.
  SequenceKey key() const { return seq_ ? seq_->next_key() : SequenceKey{}; }

  // Takes a batch that arrived on connection `source`. `split_batches`, when given,
  // is the split's batch count (sent with its last batch). kRejected (with `*why`)
  // for a batch that is not this rank's or contradicts a count; kDropped for a copy
  // or a batch past the share; kBuffered otherwise (including later epochs).
  Outcome Offer(Batch batch, uint64_t source, std::optional<uint64_t> split_batches,
                std::string* why);

  // Records a split's batch count learned from the coordinator. Counts for a later
  // epoch are kept until it starts.
  Status SetBatchCount(uint64_t epoch, uint64_t split, uint64_t batch_count);

  // The next batch of the sequence and the connection it came from, when buffered;
  // advances the sequence. nullopt when it has not arrived (or done()).
  std::optional<std::pair<Batch, uint64_t>> TakeNext();

  bool started() const { return seq_.has_value(); }
  // The current epoch's share has been consumed (false before StartEpoch).
  bool done() const { return seq_ && seq_->done(); }
  // True when the epoch's plan left a count of this rank's splits unknown.
  bool WaitingForCount() const;
  uint64_t epoch() const { return epoch_; }
  uint64_t position() const { return seq_ ? seq_->position() : 0; }
  uint64_t dropped() const { return dropped_; }
  size_t buffered() const { return buffer_.size(); }
  // "epoch E split S batch B" of the batch awaited, for messages.
  std::string Awaited() const;

 private:
  using Key = std::tuple<uint64_t, uint64_t, uint64_t>;  // epoch, split, split_batch
  struct Entry {
    Batch batch;
    uint64_t source = 0;
  };
  Outcome Classify(const Key& key, std::string* why);

  std::optional<RankSequence> seq_;
  uint64_t epoch_ = 0;
  std::map<Key, Entry> buffer_;
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> learned_;  // (epoch, split) -> count
  uint64_t dropped_ = 0;
};

}  // namespace gm
