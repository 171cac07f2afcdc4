#include "dataplane/batch_order.h"

#include <algorithm>
#include <string>
#include <utility>

namespace gm {

std::string SplitName(uint64_t epoch, uint64_t split) {
  return "epoch " + std::to_string(epoch) + " split " + std::to_string(split);
}

namespace {

// First pass of LayOutPlan: slots with ranks, planned counts and offsets.
Result<bool> PlaceSplits(const EpochPlan& plan, PlanLayout& layout) {
  const auto w = static_cast<size_t>(layout.world_size);
  std::vector<uint64_t> totals(w, 0);  // kUnknownCount once a count is unknown
  bool all_known = true;
  for (size_t p = 0; p < plan.splits.size(); ++p) {
    const PlanSplit& s = plan.splits[p];
    auto [it, inserted] = layout.position_of.emplace(s.split, p);
    if (!inserted) {
      return Status::InvalidArgument(
          SplitName(plan.epoch, s.split) + " appears twice in the plan (positions " +
          std::to_string(it->second) + " and " + std::to_string(p) + ")");
    }
    if (s.batch_count != kUnknownCount && s.batch_count > kMaxSplitBatches) {
      return Status::InvalidArgument(SplitName(plan.epoch, s.split) + " has " +
                                     std::to_string(s.batch_count) + " batches; at most " +
                                     std::to_string(kMaxSplitBatches) + " are allowed");
    }
    const size_t rank = p % w;
    SplitSlot slot{s.split, static_cast<int>(rank), s.batch_count, totals[rank], s.batch_count};
    if (s.batch_count == kUnknownCount) {
      all_known = false;
      totals[rank] = kUnknownCount;
    } else if (totals[rank] != kUnknownCount) {
      totals[rank] += s.batch_count;
    }
    layout.slots.push_back(slot);
    layout.rank_slots[rank].push_back(p);
  }
  if (all_known) layout.share = *std::min_element(totals.begin(), totals.end());
  return all_known;
}

}  // namespace

Result<size_t> PlanLayout::Find(uint64_t split) const {
  auto it = position_of.find(split);
  if (it == position_of.end()) {
    return Status::InvalidArgument(SplitName(epoch, split) + " is not in the epoch's plan");
  }
  return it->second;
}

Result<PlanLayout> LayOutPlan(const EpochPlan& plan, int world_size) {
  if (world_size < 1) {
    return Status::InvalidArgument("world size must be at least 1, got " +
                                   std::to_string(world_size));
  }
  PlanLayout layout;
  layout.epoch = plan.epoch;
  layout.world_size = world_size;
  layout.rank_slots.resize(static_cast<size_t>(world_size));
  GM_ASSIGN_OR_RETURN(bool all_known, PlaceSplits(plan, layout));
  if (!all_known && world_size > 1) {
    for (const SplitSlot& slot : layout.slots) {
      if (slot.batch_count != kUnknownCount) continue;
      return Status::InvalidArgument(
          SplitName(plan.epoch, slot.split) + " has no batch count; with world size " +
          std::to_string(world_size) +
          " every split's count must be known so that each rank gets an equal share "
          "(count the splits first, or run with world size 1)");
    }
  }
  if (all_known) {
    for (SplitSlot& slot : layout.slots) {
      const uint64_t room = layout.share > slot.offset ? layout.share - slot.offset : 0;
      slot.deliver = std::min(slot.batch_count, room);
    }
  }
  return layout;
}

std::string_view ArrivalName(Arrival arrival) {
  switch (arrival) {
    case Arrival::kNext:
      return "next";
    case Arrival::kFuture:
      return "future";
    case Arrival::kDuplicate:
      return "duplicate";
    case Arrival::kBeyondShare:
      return "beyond share";
  }
  return "?";
}

RankSequence::RankSequence(PlanLayout layout, int rank) : layout_(std::move(layout)), rank_(rank) {
  positions_ = layout_.rank_slots[static_cast<size_t>(rank)];
  for (size_t p : positions_) {
    count_.push_back(layout_.slots[p].batch_count);
    deliver_.push_back(layout_.slots[p].deliver);
  }
}

Result<RankSequence> RankSequence::Create(const EpochPlan& plan, int world_size, int rank,
                                          uint64_t start_position) {
  GM_ASSIGN_OR_RETURN(PlanLayout layout, LayOutPlan(plan, world_size));
  if (rank < 0 || rank >= world_size) {
    return Status::InvalidArgument("rank " + std::to_string(rank) + " is outside world size " +
                                   std::to_string(world_size));
  }
  RankSequence seq(std::move(layout), rank);
  seq.Normalize();
  uint64_t remaining = start_position;
  while (remaining > 0) {
    if (seq.done() || seq.deliver_[seq.cursor_] == kUnknownCount) {
      return Status::InvalidArgument(
          "cannot start rank " + std::to_string(rank) + " of epoch " + std::to_string(plan.epoch) +
          " at batch " + std::to_string(start_position) +
          (seq.done() ? ": the rank's share is smaller" : ": a split's batch count is unknown"));
    }
    const uint64_t take = std::min(remaining, seq.deliver_[seq.cursor_]);
    seq.batch_ = take;
    remaining -= take;
    seq.Normalize();
  }
  return seq;
}

Result<RankSequence> RankSequence::CreateAt(const EpochPlan& plan, int world_size, int rank,
                                            uint64_t start_position, SequenceKey at) {
  GM_ASSIGN_OR_RETURN(RankSequence seq, Create(plan, world_size, rank, 0));
  const std::string what = "cannot start rank " + std::to_string(rank) + " of epoch " +
                           std::to_string(plan.epoch) + " at batch " +
                           std::to_string(start_position);
  const size_t splits = seq.positions_.size();
  if (at.index > splits || (at.index == splits && at.batch > 0) || at.batch > start_position) {
    return Status::InvalidArgument(what + " (batch " + std::to_string(at.batch) + " of its split " +
                                   std::to_string(at.index) + "): the rank has " +
                                   std::to_string(splits) + " splits in this epoch");
  }
  if (at.index < splits && seq.deliver_[at.index] != kUnknownCount &&
      at.batch > seq.deliver_[at.index]) {
    return Status::InvalidArgument(what + ": its split " + std::to_string(at.index) + " has " +
                                   std::to_string(seq.deliver_[at.index]) + " batches");
  }
  uint64_t before = 0;
  bool known = true;
  for (size_t i = 0; i < at.index && known; ++i) {
    known = seq.deliver_[i] != kUnknownCount;
    if (known) before += seq.deliver_[i];
  }
  if (known && before + at.batch != start_position) {
    return Status::InvalidArgument(what + ": batch " + std::to_string(at.batch) + " of split " +
                                   std::to_string(at.index) + " is batch " +
                                   std::to_string(before + at.batch) + " of the rank's share");
  }
  seq.cursor_ = at.index;
  seq.batch_ = at.batch;
  seq.consumed_before_ = start_position - at.batch;
  seq.Normalize();
  return seq;
}

void RankSequence::Normalize() {
  while (cursor_ < positions_.size() && deliver_[cursor_] != kUnknownCount &&
         batch_ >= deliver_[cursor_]) {
    consumed_before_ += deliver_[cursor_];
    ++cursor_;
    batch_ = 0;
  }
}

Result<size_t> RankSequence::IndexOf(uint64_t split) const {
  GM_ASSIGN_OR_RETURN(size_t pos, layout_.Find(split));
  const SplitSlot& slot = layout_.slots[pos];
  if (slot.rank != rank_) {
    return Status::InvalidArgument(SplitName(layout_.epoch, split) + " belongs to rank " +
                                   std::to_string(slot.rank) + ", not rank " +
                                   std::to_string(rank_));
  }
  return pos / static_cast<size_t>(layout_.world_size);
}

Result<SequenceKey> RankSequence::Key(uint64_t split, uint64_t split_batch) const {
  GM_ASSIGN_OR_RETURN(size_t index, IndexOf(split));
  if (count_[index] != kUnknownCount && split_batch >= count_[index]) {
    return Status::InvalidArgument(SplitName(layout_.epoch, split) + " has " +
                                   std::to_string(count_[index]) + " batches; batch " +
                                   std::to_string(split_batch) + " does not exist");
  }
  return SequenceKey{index, split_batch};
}

Result<Arrival> RankSequence::Classify(uint64_t split, uint64_t split_batch) const {
  GM_ASSIGN_OR_RETURN(SequenceKey key, Key(split, split_batch));
  const uint64_t deliver = deliver_[key.index];
  if (deliver != kUnknownCount && split_batch >= deliver) return Arrival::kBeyondShare;
  const SequenceKey next = next_key();
  if (key < next) return Arrival::kDuplicate;
  return key == next ? Arrival::kNext : Arrival::kFuture;
}

bool RankSequence::Passed(uint64_t split) const {
  Result<size_t> index = IndexOf(split);
  return index.ok() && *index < cursor_;
}

uint64_t RankSequence::CountOf(uint64_t split) const {
  Result<size_t> index = IndexOf(split);
  return index.ok() ? count_[*index] : kUnknownCount;
}

void RankSequence::Advance() {
  if (done()) return;
  ++batch_;
  Normalize();
}

Status RankSequence::SetBatchCount(uint64_t split, uint64_t batch_count) {
  GM_ASSIGN_OR_RETURN(size_t index, IndexOf(split));
  const uint64_t known = count_[index];
  if (known != kUnknownCount && known != batch_count) {
    return Status::InvalidArgument(SplitName(layout_.epoch, split) + " was known to have " +
                                   std::to_string(known) + " batches, now told " +
                                   std::to_string(batch_count));
  }
  if (batch_count > kMaxSplitBatches || (index == cursor_ && batch_count < batch_)) {
    return Status::InvalidArgument(SplitName(layout_.epoch, split) + ": batch count " +
                                   std::to_string(batch_count) + " is impossible here");
  }
  if (known == kUnknownCount) {
    count_[index] = batch_count;
    deliver_[index] = batch_count;  // unknown counts only occur with world size 1: no cut
  }
  Normalize();
  return Status::Ok();
}

bool RankSequence::ForgetBatchCount(uint64_t split) {
  Result<size_t> index = IndexOf(split);
  if (!index.ok() || *index < cursor_) return false;
  const size_t pos = positions_[*index];
  if (layout_.slots[pos].batch_count != kUnknownCount) return false;  // planned
  count_[*index] = kUnknownCount;
  deliver_[*index] = kUnknownCount;
  return true;
}

Result<uint64_t> RankSequence::Position(uint64_t split, uint64_t split_batch) const {
  GM_ASSIGN_OR_RETURN(SequenceKey key, Key(split, split_batch));
  if (deliver_[key.index] != kUnknownCount && split_batch >= deliver_[key.index]) {
    return Status::InvalidArgument(SplitName(layout_.epoch, split) + " batch " +
                                   std::to_string(split_batch) + " is beyond rank " +
                                   std::to_string(rank_) + "'s share");
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < key.index; ++i) {
    if (deliver_[i] == kUnknownCount) {
      return Status::InvalidArgument("position of " + SplitName(layout_.epoch, split) + " batch " +
                                     std::to_string(split_batch) +
                                     " needs the batch counts of the rank's earlier splits");
    }
    offset += deliver_[i];
  }
  return offset + split_batch;
}

}  // namespace gm
