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
#include <set>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/sample.h"
#include "core/status.h"
#include "dataplane/batch_order.h"

namespace gm {

class ReorderBuffer {
 public:
  // kAside: a copy of a buffered batch that is not verified yet, kept until
  // SetHolders says which is real (its credit comes back at once, like kDropped).
  enum class Outcome { kBuffered, kDropped, kRejected, kAside };
  // Epochs past the current one whose batches are kept (others are rejected);
  // one more once the current one is read (the coordinator may be at the next).
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
  // for a batch that no honest worker sends: not this rank's, contradicting a
  // count, of an epoch past the next one (the coordinator hands out the next
  // epoch's splits ahead, never a later one's), or with repeated sample keys or
  // indices within its split. kDropped for a copy or a batch past the share;
  // kBuffered otherwise (the next epoch's included, kept unverified until it
  // starts: a view of its holders decides then). A worker sends
  // each split's batches in order from where the rank stands in it, so from one
  // `source` a split's first batch must not lie past the rank's position in the
  // split, and no later one past the one after the latest it sent (else
  // kRejected); copies and duplicates count as sent.
  Outcome Offer(Batch batch, uint64_t source, std::optional<uint64_t> split_batches,
                std::string* why);

  // The run's batch size (SUBSCRIBED's): a batch holds 1 to that many samples,
  // and only a split's last batch holds fewer (else kRejected). 0: not checked.
  void set_batch_size(uint64_t batch_size) { batch_size_ = batch_size; }

  // Records a split's batch count learned from the coordinator. Counts for a later
  // epoch are kept until it starts.
  Status SetBatchCount(uint64_t epoch, uint64_t split, uint64_t batch_count);

  // `source` was found to lie or to stall (the client reported it to the
  // coordinator, which drops it and gives its splits to others): the batch
  // counts it told (split_batches) of splits not passed yet are forgotten, so
  // that the worker that makes the split next says the count, and its buffered
  // batches are no longer verified: its word is not taken again, so a view of the
  // holders (SetHolders) or the next holder's copy decides each of them, and a
  // split's next holder's count drops those past it. (A stalled worker can have
  // sent a split's batches without end; kept verified, they would be read.)
  // What it sends later is dropped.
  void Disown(uint64_t source);

  // The next batch of the sequence and the connection it came from, when buffered
  // and verified (its source held its split by a view of the holders: SetHolders,
  // or one known when it arrived); advances the sequence. nullopt when it has not
  // arrived, is not verified yet (see AwaitsView), or done().
  std::optional<std::pair<Batch, uint64_t>> TakeNext();
  // The awaited batch is buffered but not verified, and no view of the holders
  // was asked for since it arrived: the caller should ask now.
  bool AwaitsView() const;

  bool started() const { return seq_.has_value(); }
  // The current epoch's share has been consumed (false before StartEpoch).
  bool done() const { return seq_ && seq_->done(); }
  // True when the epoch's plan left a count of this rank's splits unknown.
  bool WaitingForCount() const;
  uint64_t epoch() const { return epoch_; }
  uint64_t position() const { return seq_ ? seq_->position() : 0; }
  uint64_t dropped() const { return dropped_; }
  size_t buffered() const { return buffer_.size(); }
  // Checks what is buffered against the coordinator's view of who holds which
  // split of `epoch` (split -> source), asked for after AskView() returned
  // `view`. A batch from its split's holder is verified (kept as is). A batch
  // from another source that arrived before the view was asked for cannot be
  // honest unless its source lost the split meanwhile: it is dropped (a copy
  // from the holder, kept aside, takes its place) and, when its source is in
  // `listed` (the coordinator's live workers), that source is returned: it sent
  // batches of a split it never held.
  // A (split, source) pair in `revoked` (the coordinator took the split back from
  // that source when this rank's trainer restarted) is dropped as another
  // holder's would be, but the source is not returned: its batches were on their
  // way when it lost the split.
  std::set<uint64_t> SetHolders(uint64_t epoch, const std::map<uint64_t, uint64_t>& holders,
                                const std::set<uint64_t>& listed, uint64_t view,
                                const std::set<std::pair<uint64_t, uint64_t>>& revoked = {});
  // Numbers the next view of the holders: call before asking the coordinator.
  uint64_t AskView() { return ++views_asked_; }

  // What is buffered (not taken yet), copies kept aside included: in all
  // (kept()), what came from `source` (kept_from), and of that what is not
  // verified yet (held_from: SetHolders). Bytes are data and labels.
  struct Held {
    uint64_t batches = 0;
    uint64_t bytes = 0;
  };
  uint64_t buffered_bytes() const { return kept_.bytes; }
  Held kept() const { return kept_; }
  Held kept_from(uint64_t source) const;
  Held held_from(uint64_t source) const;
  // "epoch E split S batch B" of the batch awaited, for messages.
  std::string Awaited() const;
  // The source that holds the awaited batch's split by the latest SetHolders,
  // when that view is of the current epoch and names a holder.
  std::optional<uint64_t> AwaitedHolder() const;
  // The latest view of the current epoch names no holder of the awaited split
  // (the coordinator has it queued, its holder gone) and its batch is not here:
  // it waits for a worker to ask for work.
  bool AwaitedOrphaned() const;

 private:
  using Key = std::tuple<uint64_t, uint64_t, uint64_t>;  // epoch, split, split_batch
  struct Copy {
    Batch batch;
    uint64_t source = 0;
  };
  struct Entry {
    Batch batch;
    uint64_t source = 0;
    uint64_t bytes = 0;        // data and labels, counted in kept_
    bool verified = false;     // its source held its split (SetHolders)
    uint64_t view = 0;         // views_asked_ when it arrived
    std::vector<Copy> copies;  // from other sources, while not verified
  };
  static constexpr size_t kMaxCopies = 4;
  Outcome Classify(const Key& key, std::string* why);
  // Rejects (with `*why`) a batch whose keys or sample indices repeat, within the
  // batch or against earlier batches of its split; else records them. (Which
  // indices a split holds is the layout's: a permuted split is a random subset
  // of the dataset, so no range is checked here. A split that holds too few
  // samples is the coordinator's count check: CoordinatorServer::CheckDelivered.)
  bool CheckSamples(const Batch& batch, std::string* why);
  bool InOrder(const Batch& batch, uint64_t source, std::string* why) const;
  // Records (`seen`) or forgets the hashes of `batch`'s sample keys and its
  // sample indices in seen_: a batch dropped as another source's word must not
  // make the real one a repeat.
  void See(const Batch& batch, bool seen);
  // The key of the batch the sequence awaits (nullopt before an epoch or when done).
  std::optional<Key> AwaitedKey() const;
  // Rejects (with `*why`) a batch of no samples, of more than the batch size, or
  // of fewer when it is not its split's last.
  bool CheckSize(const Batch& batch, std::optional<uint64_t> split_batches, std::string* why) const;
  // A copy of a buffered batch: kept aside while the buffered one is not verified.
  Outcome OfferCopy(Entry& entry, Batch batch, uint64_t source);
  void Verify(Entry& entry);
  // The latest view of the holders names `source` as the holder of `split` of
  // `epoch`, and `source` is not disowned.
  bool HeldBy(uint64_t epoch, uint64_t split, uint64_t source) const;
  // Counts `bytes` of a batch from `source` in or out of kept_ and kept_from_
  // (Count), or of its unverified part held_ (Hold, Unhold).
  void Count(uint64_t source, uint64_t bytes, bool in);
  void Hold(uint64_t source, uint64_t bytes);
  void Unhold(uint64_t source, uint64_t bytes);
  void ReleaseCopies(Entry& entry);
  void Keep(const Key& key, Batch batch, uint64_t source);
  void Forget(std::map<Key, Entry>::iterator it);

  std::optional<RankSequence> seq_;
  uint64_t epoch_ = 0;
  std::map<Key, Entry> buffer_;
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> learned_;  // (epoch, split) -> count
  // (epoch, split) -> the source whose split_batches told the count.
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> told_by_;
  uint64_t dropped_ = 0;
  Held kept_;                           // everything buffered
  std::map<uint64_t, Held> kept_from_;  // by source
  std::map<uint64_t, Held> held_;       // by source, not verified yet
  // Hashes of the sample keys, and the sample indices, of each (epoch, split)
  // accepted so far, until the sequence moves past the split (later copies are
  // dropped before the check).
  struct Seen {
    std::unordered_set<uint64_t> keys;
    std::unordered_set<uint64_t> indices;
  };
  std::map<std::pair<uint64_t, uint64_t>, Seen> seen_;
  // The next split_batch expected from (epoch, source, split).
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, uint64_t> next_from_;
  std::map<uint64_t, uint64_t> holders_;  // split -> source, for holders_epoch_
  uint64_t holders_epoch_ = UINT64_MAX;
  std::set<uint64_t> disowned_;  // Disown: never verified again
  uint64_t views_asked_ = 0;
  uint64_t batch_size_ = 0;
};

}  // namespace gm
