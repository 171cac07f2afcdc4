#include "dataplane/reorder.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace gm {
namespace {

// What a buffered batch holds: its data and its labels.
uint64_t BatchBytes(const Batch& batch) { return batch.data_size() + batch.labels.bytes.size(); }

// RankSequence::Create, except that a position inside a split of unknown count
// (a trainer resumed mid-split before the split's end was known) is reached by
// consuming the batches one by one: batch k of that split is then the next one.
Result<RankSequence> StartSequence(const EpochPlan& plan, int world_size, int rank,
                                   uint64_t position) {
  auto seq = RankSequence::Create(plan, world_size, rank, position);
  if (seq.ok() || position == 0) return seq;
  GM_ASSIGN_OR_RETURN(RankSequence walk, RankSequence::Create(plan, world_size, rank, 0));
  while (walk.position() < position && !walk.done()) walk.Advance();
  if (walk.position() < position) return seq.status();
  return walk;
}

}  // namespace

Status ReorderBuffer::StartEpoch(const EpochPlan& plan, int world_size, int rank, uint64_t position,
                                 std::optional<SequenceKey> at) {
  GM_ASSIGN_OR_RETURN(RankSequence seq,
                      at ? RankSequence::CreateAt(plan, world_size, rank, position, *at)
                         : StartSequence(plan, world_size, rank, position));
  for (auto it = learned_.begin(); it != learned_.end();) {
    if (it->first.first == plan.epoch) {
      // A count the plan already had, or one learned before the epoch started.
      (void)seq.SetBatchCount(it->first.second, it->second);
    }
    it = it->first.first <= plan.epoch ? learned_.erase(it) : std::next(it);
  }
  for (auto it = told_by_.begin(); it != told_by_.end();)
    it = it->first.first < plan.epoch ? told_by_.erase(it) : std::next(it);
  seq_ = std::move(seq);
  epoch_ = plan.epoch;
  // Re-classify what arrived before the sequence existed. What arrived of this
  // epoch before it started (made ahead) counts as arrived now: no view of its
  // holders was asked for since (AwaitsView), and the next one decides.
  for (auto it = buffer_.begin(); it != buffer_.end();) {
    if (std::get<0>(it->first) == epoch_) it->second.view = views_asked_;
    std::string why;
    const bool keep =
        std::get<0>(it->first) > epoch_ ||
        (std::get<0>(it->first) == epoch_ && Classify(it->first, &why) == Outcome::kBuffered);
    if (keep) {
      ++it;
    } else {
      ++dropped_;
      Forget(it++);
    }
  }
  for (auto it = seen_.begin(); it != seen_.end();) {
    it = it->first.first < epoch_ ? seen_.erase(it) : std::next(it);
  }
  for (auto it = next_from_.begin(); it != next_from_.end();) {
    it = std::get<0>(it->first) < epoch_ ? next_from_.erase(it) : std::next(it);
  }
  return Status::Ok();
}

ReorderBuffer::Outcome ReorderBuffer::Classify(const Key& key, std::string* why) {
  auto arrival = seq_->Classify(std::get<1>(key), std::get<2>(key));
  if (!arrival.ok()) {
    *why = arrival.status().message();
    return Outcome::kRejected;
  }
  if (*arrival == Arrival::kDuplicate || *arrival == Arrival::kBeyondShare)
    return Outcome::kDropped;
  return Outcome::kBuffered;
}

ReorderBuffer::Outcome ReorderBuffer::Offer(Batch batch, uint64_t source,
                                            std::optional<uint64_t> split_batches,
                                            std::string* why) {
  Key key{batch.epoch, batch.split, batch.split_batch};
  // Nothing is kept for epochs past the look-ahead: a worker never makes them
  // (the coordinator hands out the next epoch's splits once the current one's
  // are all out, never the one after), and a peer sending them would otherwise
  // make the buffer grow without bound. The next epoch's batches wait, unverified,
  // in their senders' part of the look-ahead bound until this rank reaches it.
  // Once this rank read its epoch, the coordinator may have moved to the next
  // (every rank acknowledged this one) and hand out the one after ahead.
  const uint64_t ahead = kLookAheadEpochs + (seq_ && seq_->done() ? 1 : 0);
  if (batch.epoch > epoch_ + ahead) {
    *why = "batch of epoch " + std::to_string(batch.epoch) + " while epoch " +
           std::to_string(epoch_) + " is read: beyond the look-ahead of " + std::to_string(ahead) +
           " epoch(s)";
    return Outcome::kRejected;
  }
  // A split the rank has read (a copy from a worker that made it again, perhaps
  // after one that cut it short was dropped): nothing to learn from it. Nor
  // from a source disowned (a batch that was on its way when it was).
  if ((seq_ && batch.epoch == epoch_ && seq_->Passed(batch.split)) || disowned_.contains(source)) {
    ++dropped_;
    return Outcome::kDropped;
  }
  if (!CheckSize(batch, split_batches, why)) return Outcome::kRejected;
  if (split_batches) {
    Status counted = SetBatchCount(batch.epoch, batch.split, *split_batches);
    if (!counted.ok()) {
      *why = counted.message();
      return Outcome::kRejected;
    }
    told_by_.emplace(std::pair{batch.epoch, batch.split}, source);  // the first teller
  }
  Outcome outcome = Outcome::kBuffered;
  if (seq_ && batch.epoch < epoch_) {
    outcome = Outcome::kDropped;
  } else if (seq_ && batch.epoch == epoch_) {
    outcome = Classify(key, why);
  }
  if (outcome == Outcome::kRejected) return outcome;
  const auto copy = outcome == Outcome::kBuffered ? buffer_.find(key) : buffer_.end();
  if (outcome == Outcome::kBuffered && !InOrder(batch, source, why)) return Outcome::kRejected;
  if (outcome == Outcome::kBuffered && copy == buffer_.end() && !CheckSamples(batch, why))
    return Outcome::kRejected;
  // Where this source stands in the split, also after a copy (a worker that took
  // the split over sends what others sent before it, then goes on).
  if (batch.epoch >= epoch_) {
    uint64_t& next = next_from_[{batch.epoch, source, batch.split}];
    next = std::max(next, batch.split_batch + 1);
  }
  if (outcome == Outcome::kDropped) {
    ++dropped_;
    return outcome;
  }
  if (copy != buffer_.end()) return OfferCopy(copy->second, std::move(batch), source);
  Keep(key, std::move(batch), source);
  return outcome;
}

bool ReorderBuffer::CheckSamples(const Batch& batch, std::string* why) {
  Seen& seen = seen_[{batch.epoch, batch.split}];
  std::unordered_set<uint64_t> keys, indices;  // this batch's
  const auto repeats = [&](const std::string& what, bool earlier) {
    *why = "batch " + std::to_string(batch.split_batch) + " of epoch " +
           std::to_string(batch.epoch) + " split " + std::to_string(batch.split) + " repeats " +
           what + (earlier ? " of an earlier batch of the split" : "");
    return false;
  };
  for (size_t i = 0; i < batch.keys.size(); ++i) {
    const uint64_t h = std::hash<std::string>{}(batch.keys[i]);
    if (seen.keys.contains(h) || !keys.insert(h).second)
      return repeats("sample \"" + batch.keys[i].substr(0, 200) + "\"", seen.keys.contains(h));
  }
  // A key names one sample and so does its index: a batch can repeat a sample
  // under another name, but not under another index.
  for (uint64_t index : batch.sample_indices) {
    if (seen.indices.contains(index) || !indices.insert(index).second)
      return repeats("sample index " + std::to_string(index), seen.indices.contains(index));
  }
  seen.keys.insert(keys.begin(), keys.end());
  seen.indices.insert(indices.begin(), indices.end());
  return true;
}

bool ReorderBuffer::InOrder(const Batch& batch, uint64_t source, std::string* why) const {
  auto it = next_from_.find({batch.epoch, source, batch.split});
  const bool first = it == next_from_.end();
  uint64_t allowed = first ? 0 : it->second;
  if (first && seq_ && !seq_->done() && batch.epoch == epoch_ && batch.split == seq_->next_split())
    allowed = seq_->next_key().batch;  // a worker that took the split over starts where we are
  // A batch again (a copy) is fine; one past the next is a gap.
  if (batch.split_batch <= allowed) return true;
  *why = "sent batch " + std::to_string(batch.split_batch) + " of epoch " +
         std::to_string(batch.epoch) + " split " + std::to_string(batch.split) +
         (first ? " first, where the rank stands at batch " + std::to_string(allowed)
                : " after batch " + std::to_string(allowed - 1)) +
         ": a worker sends a split's batches in order";
  return false;
}

// Accounting of what is buffered, in all and by source (the look-ahead bound).
void ReorderBuffer::Count(uint64_t source, uint64_t bytes, bool in) {
  Held& from = kept_from_[source];
  for (Held* held : {&kept_, &from}) {
    held->batches = in ? held->batches + 1 : held->batches - 1;
    held->bytes = in ? held->bytes + bytes : held->bytes - bytes;
  }
  if (from.batches == 0) kept_from_.erase(source);
}

// What a source's unverified batches hold.
void ReorderBuffer::Hold(uint64_t source, uint64_t bytes) {
  Held& held = held_[source];
  ++held.batches;
  held.bytes += bytes;
}

void ReorderBuffer::Unhold(uint64_t source, uint64_t bytes) {
  auto held = held_.find(source);
  if (held == held_.end()) return;
  --held->second.batches;
  held->second.bytes -= bytes;
  if (held->second.batches == 0) held_.erase(held);
}

void ReorderBuffer::ReleaseCopies(Entry& entry) {
  for (const Copy& c : entry.copies) {
    const uint64_t bytes = BatchBytes(c.batch);
    Count(c.source, bytes, false);
    Unhold(c.source, bytes);
  }
  entry.copies.clear();
}

ReorderBuffer::Outcome ReorderBuffer::OfferCopy(Entry& entry, Batch batch, uint64_t source) {
  if (entry.verified || entry.source == source || entry.copies.size() >= kMaxCopies ||
      std::any_of(entry.copies.begin(), entry.copies.end(),
                  [&](const Copy& c) { return c.source == source; })) {
    ++dropped_;
    return Outcome::kDropped;
  }
  const uint64_t bytes = BatchBytes(batch);
  if (HeldBy(batch.epoch, batch.split, source)) {
    // The holder's copy replaces a batch from a source that does not hold the split.
    ReleaseCopies(entry);
    Unhold(entry.source, entry.bytes);
    Count(entry.source, entry.bytes, false);
    Count(source, bytes, true);
    See(entry.batch, false);  // its keys were another source's word
    See(batch, true);
    entry.batch = std::move(batch);
    entry.source = source;
    entry.bytes = bytes;
    entry.verified = true;
    ++dropped_;  // the batch it replaced
    return Outcome::kDropped;
  }
  // Kept aside until SetHolders says whose is real; counted as its source's.
  Count(source, bytes, true);
  Hold(source, bytes);
  entry.copies.push_back(Copy{std::move(batch), source});
  return Outcome::kAside;
}

void ReorderBuffer::See(const Batch& batch, bool seen) {
  const std::pair<uint64_t, uint64_t> split{batch.epoch, batch.split};
  if (seen) {
    Seen& s = seen_[split];
    for (const std::string& key : batch.keys) s.keys.insert(std::hash<std::string>{}(key));
    s.indices.insert(batch.sample_indices.begin(), batch.sample_indices.end());
    return;
  }
  auto it = seen_.find(split);
  if (it == seen_.end()) return;
  for (const std::string& key : batch.keys) it->second.keys.erase(std::hash<std::string>{}(key));
  for (uint64_t index : batch.sample_indices) it->second.indices.erase(index);
}

void ReorderBuffer::Verify(Entry& entry) {
  if (entry.verified) return;
  entry.verified = true;
  ReleaseCopies(entry);
  Unhold(entry.source, entry.bytes);
}

std::set<uint64_t> ReorderBuffer::SetHolders(
    uint64_t epoch, const std::map<uint64_t, uint64_t>& holders, const std::set<uint64_t>& listed,
    uint64_t view, const std::set<std::pair<uint64_t, uint64_t>>& revoked) {
  holders_ = holders;
  holders_epoch_ = epoch;
  std::set<uint64_t> liars;
  for (auto it = buffer_.lower_bound(Key{epoch, 0, 0});
       it != buffer_.end() && std::get<0>(it->first) == epoch;) {
    Entry& entry = it->second;
    auto holder = holders.find(std::get<1>(it->first));
    if (entry.verified || holder == holders.end() || holder->second == entry.source ||
        entry.view >= view) {
      // Verified; not held by anyone now (its holder was lost and the split went
      // back to the queue: the next holder's copy is checked then); the holder's
      // (unless disowned: a view asked before the coordinator dropped it); or
      // arrived after the view was asked for.
      if (HeldBy(epoch, std::get<1>(it->first), entry.source)) Verify(entry);
      ++it;
      continue;
    }
    if (listed.contains(entry.source) && !disowned_.contains(entry.source) &&
        !revoked.contains({std::get<1>(it->first), entry.source}))
      liars.insert(entry.source);
    auto copy = std::find_if(entry.copies.begin(), entry.copies.end(),
                             [&](const Copy& c) { return c.source == holder->second; });
    std::optional<Copy> real;
    if (copy != entry.copies.end()) {  // taken out of the copies, and out of their count
      real = std::move(*copy);
      entry.copies.erase(copy);
      Unhold(real->source, BatchBytes(real->batch));
      Count(real->source, BatchBytes(real->batch), false);
    }
    const Key key = it->first;
    ++dropped_;
    // Its sample keys were its source's word only: the real batch may hold them.
    See(entry.batch, false);
    Forget(it++);
    if (real) {  // the holder's copy takes its place
      See(real->batch, true);
      Keep(key, std::move(real->batch), real->source);
      --dropped_;
    }
  }
  return liars;
}

void ReorderBuffer::Keep(const Key& key, Batch batch, uint64_t source) {
  const uint64_t bytes = BatchBytes(batch);
  Count(source, bytes, true);
  Hold(source, bytes);
  Entry entry{std::move(batch), source, bytes, false, views_asked_, {}};
  auto [it, fresh] = buffer_.emplace(key, std::move(entry));
  if (HeldBy(std::get<0>(key), std::get<1>(key), source)) Verify(it->second);
}

bool ReorderBuffer::HeldBy(uint64_t epoch, uint64_t split, uint64_t source) const {
  if (holders_epoch_ != epoch || disowned_.contains(source)) return false;
  auto holder = holders_.find(split);
  return holder != holders_.end() && holder->second == source;
}

void ReorderBuffer::Forget(std::map<Key, Entry>::iterator it) {
  Count(it->second.source, it->second.bytes, false);
  ReleaseCopies(it->second);
  if (!it->second.verified) Unhold(it->second.source, it->second.bytes);
  buffer_.erase(it);
}

ReorderBuffer::Held ReorderBuffer::held_from(uint64_t source) const {
  auto it = held_.find(source);
  return it == held_.end() ? Held{} : it->second;
}

ReorderBuffer::Held ReorderBuffer::kept_from(uint64_t source) const {
  auto it = kept_from_.find(source);
  return it == kept_from_.end() ? Held{} : it->second;
}

Status ReorderBuffer::SetBatchCount(uint64_t epoch, uint64_t split, uint64_t batch_count) {
  if (seq_ && epoch == epoch_) {
    GM_RETURN_IF_ERROR(seq_->SetBatchCount(split, batch_count));
    // What was buffered past the count (only a forged batch can be) goes now.
    for (auto it = buffer_.lower_bound(Key{epoch, split, 0}); it != buffer_.end() &&
                                                              std::get<0>(it->first) == epoch &&
                                                              std::get<1>(it->first) == split;) {
      std::string why;
      if (Classify(it->first, &why) == Outcome::kBuffered) {
        ++it;
      } else {
        ++dropped_;
        See(it->second.batch, false);
        Forget(it++);
      }
    }
    return Status::Ok();
  }
  if (!seq_ || epoch > epoch_) learned_[{epoch, split}] = batch_count;
  return Status::Ok();
}

void ReorderBuffer::Disown(uint64_t source) {
  disowned_.insert(source);
  for (auto& [key, entry] : buffer_) {
    if (entry.source != source || !entry.verified) continue;
    entry.verified = false;
    Hold(source, entry.bytes);
  }
  for (auto it = told_by_.begin(); it != told_by_.end();) {
    const auto [epoch, split] = it->first;
    if (it->second != source) {
      ++it;
      continue;
    }
    if (seq_ && epoch == epoch_) {
      (void)seq_->ForgetBatchCount(split);  // false: passed already, nothing to undo
    } else {
      learned_.erase({epoch, split});
    }
    it = told_by_.erase(it);
  }
}

std::optional<ReorderBuffer::Key> ReorderBuffer::AwaitedKey() const {
  if (!seq_ || seq_->done()) return std::nullopt;
  return Key{epoch_, seq_->next_split(), seq_->next_key().batch};
}

std::optional<std::pair<Batch, uint64_t>> ReorderBuffer::TakeNext() {
  const std::optional<Key> awaited = AwaitedKey();
  if (!awaited) return std::nullopt;
  auto it = buffer_.find(*awaited);
  // Never a batch whose source is not known to hold its split: a worker could
  // otherwise slip in the batch awaited for a split another worker makes.
  if (it == buffer_.end() || !it->second.verified) return std::nullopt;
  const uint64_t split = seq_->next_split();
  Batch batch = std::move(it->second.batch);
  const uint64_t source = it->second.source;
  Forget(it);
  seq_->Advance();
  if (seq_->done() || seq_->next_split() != split) seen_.erase({epoch_, split});
  return std::pair<Batch, uint64_t>{std::move(batch), source};
}

bool ReorderBuffer::AwaitsView() const {
  const std::optional<Key> awaited = AwaitedKey();
  if (!awaited) return false;
  auto it = buffer_.find(*awaited);
  return it != buffer_.end() && !it->second.verified && it->second.view >= views_asked_;
}

bool ReorderBuffer::WaitingForCount() const {
  if (!seq_ || seq_->done()) return false;
  const PlanLayout& layout = seq_->layout();
  for (size_t position : layout.rank_slots[static_cast<size_t>(seq_->rank())]) {
    if (layout.slots[position].batch_count == kUnknownCount) return true;
  }
  return false;
}

std::string ReorderBuffer::Awaited() const {
  if (!seq_) return "the first plan";
  if (seq_->done()) return "nothing (epoch " + std::to_string(epoch_) + " done)";
  return "epoch " + std::to_string(epoch_) + " split " + std::to_string(seq_->next_split()) +
         " batch " + std::to_string(seq_->next_key().batch);
}

bool ReorderBuffer::CheckSize(const Batch& batch, std::optional<uint64_t> split_batches,
                              std::string* why) const {
  const uint64_t n = batch.size();
  std::string wrong;  // what is wrong with it; the message is made only then
  if (n == 0) {
    wrong = ": a worker sends no empty batch";
  } else if (batch_size_ == 0 || n == batch_size_) {
    return true;
  } else if (n > batch_size_) {
    wrong = ", more than the run's batch size " + std::to_string(batch_size_);
  } else {
    const uint64_t count = split_batches                   ? *split_batches
                           : seq_ && batch.epoch == epoch_ ? seq_->CountOf(batch.split)
                                                           : kUnknownCount;
    if (count == batch.split_batch + 1) return true;
    wrong = " of " + std::to_string(batch_size_) +
            ": only a split's last batch holds fewer, and this is not its last";
  }
  *why = SplitName(batch.epoch, batch.split) + " batch " + std::to_string(batch.split_batch) +
         " holds " + std::to_string(n) + " samples" + wrong;
  return false;
}

std::optional<uint64_t> ReorderBuffer::AwaitedHolder() const {
  if (!seq_ || seq_->done() || holders_epoch_ != epoch_) return std::nullopt;
  auto it = holders_.find(seq_->next_split());
  if (it == holders_.end()) return std::nullopt;
  return it->second;
}

bool ReorderBuffer::AwaitedOrphaned() const {
  return seq_ && !seq_->done() && holders_epoch_ == epoch_ &&
         !holders_.contains(seq_->next_split()) && !buffer_.contains(*AwaitedKey());
}

}  // namespace gm
