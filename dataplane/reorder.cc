#include "dataplane/reorder.h"

#include <utility>

namespace gm {
namespace {

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
  seq_ = std::move(seq);
  epoch_ = plan.epoch;
  // Re-classify what arrived before the sequence existed.
  for (auto it = buffer_.begin(); it != buffer_.end();) {
    std::string why;
    const bool keep =
        std::get<0>(it->first) > epoch_ ||
        (std::get<0>(it->first) == epoch_ && Classify(it->first, &why) == Outcome::kBuffered);
    if (keep) {
      ++it;
    } else {
      ++dropped_;
      it = buffer_.erase(it);
    }
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
  // (the coordinator plans one epoch at a time), and a peer sending them would
  // otherwise make the buffer grow without bound.
  if (batch.epoch > epoch_ + kLookAheadEpochs) {
    *why = "batch of epoch " + std::to_string(batch.epoch) + " while epoch " +
           std::to_string(epoch_) + " is read: beyond the look-ahead of " +
           std::to_string(kLookAheadEpochs) + " epoch";
    return Outcome::kRejected;
  }
  if (split_batches) {
    Status counted = SetBatchCount(batch.epoch, batch.split, *split_batches);
    if (!counted.ok()) {
      *why = counted.message();
      return Outcome::kRejected;
    }
  }
  Outcome outcome = Outcome::kBuffered;
  if (seq_ && batch.epoch < epoch_) {
    outcome = Outcome::kDropped;
  } else if (seq_ && batch.epoch == epoch_) {
    outcome = Classify(key, why);
  }
  if (outcome == Outcome::kBuffered && buffer_.contains(key)) outcome = Outcome::kDropped;
  if (outcome == Outcome::kDropped) ++dropped_;
  if (outcome == Outcome::kBuffered) buffer_.emplace(key, Entry{std::move(batch), source});
  return outcome;
}

Status ReorderBuffer::SetBatchCount(uint64_t epoch, uint64_t split, uint64_t batch_count) {
  if (seq_ && epoch == epoch_) return seq_->SetBatchCount(split, batch_count);
  if (!seq_ || epoch > epoch_) learned_[{epoch, split}] = batch_count;
  return Status::Ok();
}

std::optional<std::pair<Batch, uint64_t>> ReorderBuffer::TakeNext() {
  if (!seq_ || seq_->done()) return std::nullopt;
  auto it = buffer_.find(Key{epoch_, seq_->next_split(), seq_->next_key().batch});
  if (it == buffer_.end()) return std::nullopt;
  std::pair<Batch, uint64_t> out{std::move(it->second.batch), it->second.source};
  buffer_.erase(it);
  seq_->Advance();
  return out;
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

}  // namespace gm
