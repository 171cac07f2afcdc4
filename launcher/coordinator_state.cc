#include "launcher/coordinator_state.h"

#include <algorithm>
#include <string>
#include <utility>

namespace gm {
namespace {

std::string WorkerName(WorkerId worker) { return "worker " + std::to_string(worker); }

}  // namespace

Result<CoordinatorState> CoordinatorState::Create(const CoordinatorOptions& options) {
  if (options.world_size < 1) {
    return Status::InvalidArgument("coordinator: world size must be at least 1, got " +
                                   std::to_string(options.world_size));
  }
  if (options.max_inflight_per_worker < 1) {
    return Status::InvalidArgument(
        "coordinator: max in-flight splits per worker must be at "
        "least 1, got " +
        std::to_string(options.max_inflight_per_worker));
  }
  if (!(options.liveness_timeout_s > 0)) {
    return Status::InvalidArgument("coordinator: liveness timeout must be positive seconds, got " +
                                   std::to_string(options.liveness_timeout_s));
  }
  return CoordinatorState(options);
}

Status CoordinatorState::StartEpoch(const EpochPlan& plan) {
  if (cur_.layout && cur_.incomplete > 0) {
    return Status::InvalidArgument("cannot start epoch " + std::to_string(plan.epoch) + ": epoch " +
                                   std::to_string(cur_.epoch) + " still has " +
                                   std::to_string(cur_.incomplete) +
                                   " splits not fully acknowledged");
  }
  if (cur_.layout && plan.epoch <= cur_.epoch) {
    return Status::InvalidArgument("cannot start epoch " + std::to_string(plan.epoch) +
                                   ": it must come after epoch " + std::to_string(cur_.epoch));
  }
  if (ahead_ && ahead_->epoch == plan.epoch) {  // its splits were handed out ahead
    LeaveEpoch();
    cur_ = std::move(*ahead_);
    ahead_.reset();
    return Status::Ok();
  }
  DropAhead();
  return LayOut(plan);
}

bool CoordinatorState::WantsAhead() const {
  return cur_.layout && cur_.pending.empty() && cur_.incomplete > 0 && !ahead_;
}

Status CoordinatorState::PlanAhead(const EpochPlan& plan) {
  if (!WantsAhead() || plan.epoch != cur_.epoch + 1) {
    return Status::InvalidArgument("cannot lay out epoch " + std::to_string(plan.epoch) +
                                   " ahead of epoch " + std::to_string(cur_.epoch));
  }
  GM_ASSIGN_OR_RETURN(PlanLayout layout, LayOutPlan(plan, options_.world_size));
  Book book;
  book.epoch = plan.epoch;
  Fill(book, std::move(layout));
  ahead_ = std::move(book);
  return Status::Ok();
}

void CoordinatorState::DropAhead() {
  if (!ahead_) return;
  for (size_t p = 0; p < ahead_->splits.size(); ++p) {
    if (ahead_->splits[p].phase == Phase::kAssigned) Release(*ahead_, p);
  }
  ahead_.reset();
}

CoordinatorState::Book* CoordinatorState::BookOf(uint64_t epoch) {
  if (cur_.layout && epoch == cur_.epoch) return &cur_;
  if (ahead_ && epoch == ahead_->epoch) return &*ahead_;
  return nullptr;
}

void CoordinatorState::TakeBackAhead(int rank) {
  if (!ahead_) return;
  for (size_t p : ahead_->layout->rank_slots[static_cast<size_t>(rank)]) {
    if (ahead_->splits[p].phase == Phase::kAssigned) TakeBack(*ahead_, p);
  }
}

Status CoordinatorState::SkipToEpoch(const EpochPlan& plan) {
  if (!cur_.layout || plan.epoch <= cur_.epoch || touched_) {
    return Status::InvalidArgument("cannot move to epoch " + std::to_string(plan.epoch) +
                                   ": the run is at epoch " + std::to_string(cur_.epoch) +
                                   (touched_ ? " and has delivered batches of it" : ""));
  }
  for (size_t p = 0; p < cur_.splits.size(); ++p) {
    if (cur_.splits[p].phase == Phase::kAssigned) Release(cur_, p);
  }
  DropAhead();
  return LayOut(plan);
}

void CoordinatorState::LeaveEpoch() {
  for (const SplitProgress& split : cur_.splits) skipped_before_ += split.samples_skipped;
  touched_ = false;
  skipped_base_.assign(static_cast<size_t>(options_.world_size), 0);
}

Status CoordinatorState::LayOut(const EpochPlan& plan) {
  GM_ASSIGN_OR_RETURN(PlanLayout layout, LayOutPlan(plan, options_.world_size));
  LeaveEpoch();
  cur_.epoch = plan.epoch;
  Fill(cur_, std::move(layout));
  return Status::Ok();
}

void CoordinatorState::Fill(Book& book, PlanLayout layout) {
  book.splits.assign(layout.slots.size(), SplitProgress{});
  book.pending.clear();
  book.incomplete = 0;
  for (size_t p = 0; p < layout.slots.size(); ++p) {
    book.splits[p].deliver = layout.slots[p].deliver;
    if (book.splits[p].deliver == 0) {
      book.splits[p].phase = Phase::kComplete;
    } else {
      book.pending.insert(p);
      ++book.incomplete;
    }
  }
  book.layout = std::move(layout);
}

CoordinatorState::WorkerRecord* CoordinatorState::FindWorker(WorkerId worker) {
  auto it = workers_.find(worker);
  return it == workers_.end() ? nullptr : &it->second;
}

WorkerId CoordinatorState::RegisterWorker(double now_s) {
  const WorkerId id = next_worker_++;
  WorkerRecord& record = workers_[id];
  record.last_heard_s = now_s;
  record.stats.id = id;
  return id;
}

Status CoordinatorState::Heartbeat(WorkerId worker, double now_s) {
  WorkerRecord* record = FindWorker(worker);
  if (record == nullptr) return Status::InvalidArgument(WorkerName(worker) + " is not registered");
  if (record->stats.status == WorkerStatus::kGone) {
    return Status::Unavailable(WorkerName(worker) +
                               " was declared lost or exited; it must exit and register again");
  }
  record->last_heard_s = std::max(record->last_heard_s, now_s);
  return Status::Ok();
}

std::vector<WorkerId> CoordinatorState::Tick(double now_s) {
  std::vector<WorkerId> lost;
  for (auto& [id, record] : workers_) {
    if (record.stats.status == WorkerStatus::kGone) continue;
    if (now_s - record.last_heard_s > options_.liveness_timeout_s) {
      LoseWorker(record);
      lost.push_back(id);
    }
  }
  return lost;
}

Status CoordinatorState::Drain(WorkerId worker) {
  WorkerRecord* record = FindWorker(worker);
  if (record == nullptr) return Status::InvalidArgument(WorkerName(worker) + " is not registered");
  if (record->stats.status != WorkerStatus::kActive) return Status::Ok();
  record->stats.status = WorkerStatus::kDraining;
  // What it holds of the epoch ahead would keep it until the trainers reach that
  // epoch: it goes back to the queue now, and the batches it sent of it are no
  // fault of the worker's (Revoked).
  const auto held = record->held;
  for (const auto& [epoch, position] : held) {
    if (ahead_ && epoch == ahead_->epoch) Revoke(*ahead_, position);
  }
  return Status::Ok();
}

void CoordinatorState::EndRun() { ended_ = true; }

Status CoordinatorState::WorkerExited(WorkerId worker) {
  WorkerRecord* record = FindWorker(worker);
  if (record == nullptr) return Status::InvalidArgument(WorkerName(worker) + " is not registered");
  if (record->stats.status != WorkerStatus::kGone) LoseWorker(*record);
  return Status::Ok();
}

bool CoordinatorState::ShouldExit(WorkerId worker) const {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return true;
  const WorkerStats& stats = it->second.stats;
  return stats.status == WorkerStatus::kGone ||
         (stats.status == WorkerStatus::kDraining && it->second.held.empty());
}

bool CoordinatorState::Draining(WorkerId worker) const {
  auto it = workers_.find(worker);
  return it != workers_.end() && it->second.stats.status == WorkerStatus::kDraining;
}

void CoordinatorState::LoseWorker(WorkerRecord& worker) {
  worker.stats.status = WorkerStatus::kGone;
  const auto held = worker.held;  // TakeBack edits worker.held
  for (const auto& [epoch, position] : held) {
    // (Every split held is of the current epoch or the one ahead: a book that
    // ends releases its holders first.)
    if (Book* book = BookOf(epoch)) TakeBack(*book, position);
  }
}

void CoordinatorState::Release(Book& book, size_t position) {
  SplitProgress& split = book.splits[position];
  WorkerRecord* holder = FindWorker(split.holder);
  if (holder != nullptr) {
    holder->held.erase({book.epoch, position});
    if (!split.produced) --holder->producing;
  }
  if (split.holder != 0) split.last_holder = split.holder;
  split.holder = 0;
  split.produced = false;
}

void CoordinatorState::TakeBack(Book& book, size_t position) {
  SplitProgress& split = book.splits[position];
  if (!ended_) {  // after the run's end, nothing given back is made again
    if (WorkerRecord* holder = FindWorker(split.holder)) ++holder->stats.reassigned;
    ++reassignments_;
  }
  // The count the holder said where the plan left it open was its word only: a
  // holder dropped as a liar may have said more batches than it sent. It stays
  // (acknowledgements still on their way complete the split by it, as for an
  // honest holder that died), but the next holder makes the split to its real
  // end and its count replaces it (LearnCount).
  if (split.produced && book.layout->slots[position].batch_count == kUnknownCount)
    split.count_from_lost = true;
  Release(book, position);
  split.phase = Phase::kPending;
  book.pending.insert(position);
}

void CoordinatorState::Revoke(Book& book, size_t position) {
  SplitProgress& split = book.splits[position];
  if (split.revoked_from.size() < kMaxRevokedPerSplit) split.revoked_from.push_back(split.holder);
  TakeBack(book, position);
}

void CoordinatorState::CompleteIfDone(Book& book, size_t position) {
  SplitProgress& split = book.splits[position];
  if (split.phase == Phase::kComplete || split.deliver == kUnknownCount ||
      split.acked_count < split.deliver) {
    return;
  }
  if (split.phase == Phase::kAssigned) {
    if (WorkerRecord* holder = FindWorker(split.holder)) ++holder->stats.splits_completed;
    Release(book, position);
  } else {
    book.pending.erase(position);
  }
  split.phase = Phase::kComplete;
  --book.incomplete;
}

Result<Assignment> CoordinatorState::RequestSplit(WorkerId worker) {
  WorkerRecord* record = FindWorker(worker);
  if (record == nullptr) return Status::InvalidArgument(WorkerName(worker) + " is not registered");
  Assignment answer;
  if (record->stats.status == WorkerStatus::kGone) {
    answer.kind = Assignment::Kind::kExit;
  } else if (record->stats.status == WorkerStatus::kDraining) {
    answer.kind = record->held.empty() ? Assignment::Kind::kExit : Assignment::Kind::kDrain;
  } else if (cur_.layout && cur_.incomplete == 0) {
    answer.kind = Assignment::Kind::kEpochDone;
  } else if (cur_.layout && record->producing < options_.max_inflight_per_worker) {
    if (!cur_.pending.empty()) {
      answer = AssignNext(cur_, *record);
    } else if (ahead_ && !ahead_->pending.empty()) {
      answer = AssignNext(*ahead_, *record);
    }
  }
  return answer;
}

Assignment CoordinatorState::AssignNext(Book& book, WorkerRecord& worker) {
  const size_t position = *book.pending.begin();
  book.pending.erase(book.pending.begin());
  SplitProgress& split = book.splits[position];
  split.phase = Phase::kAssigned;
  split.holder = worker.stats.id;
  split.produced = false;
  split.assigned_start = split.contiguous;
  worker.held.insert({book.epoch, position});
  ++worker.producing;
  ++worker.stats.splits_assigned;
  const SplitSlot& slot = book.layout->slots[position];
  Assignment answer;
  answer.kind = Assignment::Kind::kAssign;
  answer.epoch = book.epoch;
  answer.split = slot.split;
  answer.plan_position = position;
  answer.rank = slot.rank;
  answer.start_batch = split.contiguous;
  answer.end_batch = split.count_from_lost ? kUnknownCount : split.deliver;
  answer.batch_count = slot.batch_count;
  return answer;
}

Status CoordinatorState::CheckEpoch(uint64_t epoch, std::string_view what) const {
  if (!cur_.layout) return Status::InvalidArgument(std::string(what) + " before any epoch started");
  if (epoch > cur_.epoch) {
    return Status::InvalidArgument(std::string(what) + " for epoch " + std::to_string(epoch) +
                                   ", but the current epoch is " + std::to_string(cur_.epoch));
  }
  return Status::Ok();
}

Status CoordinatorState::LearnCount(Book& book, size_t position, WorkerId worker,
                                    uint64_t batch_count) {
  const SplitSlot& slot = book.layout->slots[position];
  SplitProgress& split = book.splits[position];
  const uint64_t known = slot.batch_count != kUnknownCount ? slot.batch_count
                         : split.count_from_lost           ? kUnknownCount
                                                           : split.deliver;
  const std::string who = WorkerName(worker) + ": " + SplitName(book.epoch, slot.split);
  if (known != kUnknownCount && known != batch_count) {
    return Status::InvalidArgument(who + " has " + std::to_string(batch_count) +
                                   " batches, but it is known to have " + std::to_string(known));
  }
  if (batch_count > kMaxSplitBatches || split.acked.size() > batch_count) {
    return Status::InvalidArgument(who + ": batch count " + std::to_string(batch_count) +
                                   " is impossible (too large, or below an acknowledged batch)");
  }
  if (split.deliver == kUnknownCount || split.count_from_lost) split.deliver = batch_count;
  split.count_from_lost = false;
  return Status::Ok();
}

Status CoordinatorState::SplitDone(WorkerId worker, uint64_t epoch, uint64_t split_id,
                                   uint64_t batch_count, uint64_t skipped) {
  WorkerRecord* record = FindWorker(worker);
  if (record == nullptr) return Status::InvalidArgument(WorkerName(worker) + " is not registered");
  Book* book = BookOf(epoch);
  if (book == nullptr) GM_RETURN_IF_ERROR(CheckEpoch(epoch, WorkerName(worker) + ": split done"));
  if (book == nullptr) {  // an earlier epoch's
    ++stale_split_done_;
    return Status::Ok();
  }
  GM_ASSIGN_OR_RETURN(size_t position, book->layout->Find(split_id));
  SplitProgress& split = book->splits[position];
  // Only the split's current holder may tell its count: a worker that never held
  // it (or lost it) would otherwise end the split, or the epoch, with batches
  // that nobody sent.
  if (split.phase == Phase::kAssigned && split.holder == worker && !split.produced) {
    GM_RETURN_IF_ERROR(LearnCount(*book, position, worker, batch_count));
    split.produced = true;
    split.samples_skipped = skipped;
    split.skip_told = true;
    --record->producing;
    ++record->stats.splits_done;
    if (split.deliver > split.assigned_start) {
      record->stats.batches += split.deliver - split.assigned_start;
    }
  } else if (split.phase == Phase::kComplete && !split.skipped && !split.skip_told &&
             split.last_holder == worker) {
    // Its maker's word on what it skipped, after the trainer acknowledged the
    // whole split (the count was planned).
    split.samples_skipped = skipped;
    split.skip_told = true;
    ++record->stats.splits_done;  // (Release counted it as no longer producing)
  } else {
    ++stale_split_done_;
  }
  CompleteIfDone(*book, position);
  return Status::Ok();
}

std::optional<CoordinatorState::Delivery> CoordinatorState::Delivered(uint64_t split_id) const {
  const std::optional<size_t> p = PositionOf(split_id);
  if (!p) return std::nullopt;
  const SplitProgress& split = cur_.splits[*p];
  if (split.phase != Phase::kComplete || split.skipped || split.uncounted) return std::nullopt;
  return Delivery{split.acked_samples, split.samples_skipped, split.skip_told, split.deliver,
                  split.holder != 0 ? split.holder : split.last_holder};
}

Result<AckOutcome> CoordinatorState::Ack(int rank, uint64_t epoch, uint64_t split_id,
                                         uint64_t split_batch, std::optional<uint64_t> samples) {
  GM_RETURN_IF_ERROR(CheckEpoch(epoch, "ack from rank " + std::to_string(rank)));
  if (epoch < cur_.epoch) {  // an earlier epoch finished, so all of it was acknowledged
    ++duplicate_acks_;
    return AckOutcome::kDuplicate;
  }
  if (rank < 0 || rank >= options_.world_size) {
    return Status::InvalidArgument("ack from rank " + std::to_string(rank) +
                                   ", outside world size " + std::to_string(options_.world_size));
  }
  GM_ASSIGN_OR_RETURN(size_t position, cur_.layout->Find(split_id));
  const SplitSlot& slot = cur_.layout->slots[position];
  const std::string what = "ack from rank " + std::to_string(rank) + " for " +
                           SplitName(epoch, split_id) + " batch " + std::to_string(split_batch);
  if (slot.rank != rank) {
    return Status::InvalidArgument(what + ": the split belongs to rank " +
                                   std::to_string(slot.rank));
  }
  SplitProgress& split = cur_.splits[position];
  if (split.skipped) {  // delivered by an earlier run
    ++duplicate_acks_;
    return AckOutcome::kDuplicate;
  }
  const uint64_t bound = split.deliver != kUnknownCount ? split.deliver : kMaxSplitBatches;
  if (split_batch >= bound) {
    return Status::InvalidArgument(what + ": the split delivers only batches 0.." +
                                   std::to_string(bound) + " (exclusive)");
  }
  if (split_batch < split.acked.size() && split.acked[split_batch]) {
    ++duplicate_acks_;
    return AckOutcome::kDuplicate;
  }
  if (split.acked.size() <= split_batch) split.acked.resize(split_batch + 1, false);
  split.acked[split_batch] = true;
  ++split.acked_count;
  if (samples) {
    split.acked_samples += *samples;
  } else {
    split.uncounted = true;
  }
  ++acks_;
  touched_ = true;
  while (split.contiguous < split.acked.size() && split.acked[split.contiguous]) {
    ++split.contiguous;
  }
  CompleteIfDone(cur_, position);
  return AckOutcome::kAcked;
}

void CoordinatorState::SetAckedPrefix(size_t position, uint64_t count) {
  SplitProgress& split = cur_.splits[position];
  if (split.skipped) {  // resumed again, to an earlier point: the split is due again
    split.skipped = false;
    split.deliver = cur_.layout->slots[position].deliver;
    split.acked.clear();
    split.acked_count = split.contiguous = 0;
    split.phase = Phase::kPending;
    cur_.pending.insert(position);
    ++cur_.incomplete;
  }
  split.acked.assign(count, true);
  split.acked_count = count;
  split.acked_samples = 0;
  split.uncounted = count > 0;  // acknowledged by a resume: not counted in samples
  split.contiguous = count;
  if (split.phase == Phase::kComplete) {
    if (count == split.deliver) return;
    split.phase = Phase::kPending;
    cur_.pending.insert(position);
    ++cur_.incomplete;
  } else if (split.phase == Phase::kAssigned && count != split.deliver) {
    Revoke(cur_, position);
  }
  CompleteIfDone(cur_, position);
}

Status CoordinatorState::CheckResume(int rank, uint64_t epoch, const std::string& what) const {
  if (!cur_.layout || epoch != cur_.epoch) {
    return Status::InvalidArgument(
        what + ": the current epoch is " +
        (cur_.layout ? std::to_string(cur_.epoch) : std::string("none")));
  }
  if (rank < 0 || rank >= options_.world_size) {
    return Status::InvalidArgument(what + ": rank outside world size " +
                                   std::to_string(options_.world_size));
  }
  return Status::Ok();
}

Status CoordinatorState::Resume(int rank, uint64_t epoch, uint64_t position) {
  const std::string what = "resume of rank " + std::to_string(rank) + " at batch " +
                           std::to_string(position) + " of epoch " + std::to_string(epoch);
  GM_RETURN_IF_ERROR(CheckResume(rank, epoch, what));
  const std::vector<size_t>& slots = cur_.layout->rank_slots[static_cast<size_t>(rank)];
  uint64_t remaining = position;
  for (size_t p : slots) {
    if (remaining == 0) break;
    if (cur_.splits[p].deliver == kUnknownCount) {
      return Status::InvalidArgument(what + ": the batch count of " +
                                     SplitName(epoch, cur_.layout->slots[p].split) +
                                     " is not known");
    }
    remaining -= std::min(remaining, cur_.splits[p].deliver);
  }
  if (remaining > 0) return Status::InvalidArgument(what + ": the rank's share is smaller");
  remaining = position;
  for (size_t p : slots) {
    const uint64_t take = std::min(remaining, cur_.splits[p].deliver);
    remaining -= take;
    SetAckedPrefix(p, take);
  }
  TakeBackAhead(rank);
  skipped_base_[static_cast<size_t>(rank)] = 0;
  touched_ = true;
  return Status::Ok();
}

void CoordinatorState::Skip(size_t position) {
  SplitProgress& split = cur_.splits[position];
  if (split.skipped) return;
  if (split.phase == Phase::kAssigned) Release(cur_, position);
  if (split.phase != Phase::kComplete) {
    cur_.pending.erase(position);
    --cur_.incomplete;
  }
  split.phase = Phase::kComplete;
  split.skipped = true;
  split.acked.clear();
  split.acked_count = split.contiguous = 0;
}

Status CoordinatorState::ResumeAt(int rank, uint64_t epoch, uint64_t position, SequenceKey at) {
  const std::string what = "resume of rank " + std::to_string(rank) + " at batch " +
                           std::to_string(position) + " of epoch " + std::to_string(epoch);
  GM_RETURN_IF_ERROR(CheckResume(rank, epoch, what));
  const std::vector<size_t>& slots = cur_.layout->rank_slots[static_cast<size_t>(rank)];
  if (at.index > slots.size() || (at.index == slots.size() && at.batch > 0)) {
    return Status::InvalidArgument(what + ": the state names split " + std::to_string(at.index) +
                                   " of the rank's sequence, which has " +
                                   std::to_string(slots.size()) + " splits in this run");
  }
  if (at.batch > position) {
    return Status::InvalidArgument(what + ": the state is inconsistent (batch " +
                                   std::to_string(at.batch) +
                                   " of its split, beyond the position)");
  }
  if (at.index < slots.size()) {
    const uint64_t deliver = cur_.splits[slots[at.index]].deliver;
    if (deliver != kUnknownCount && at.batch > deliver) {
      return Status::InvalidArgument(
          what + ": the state is at batch " + std::to_string(at.batch) + " of " +
          SplitName(epoch, cur_.layout->slots[slots[at.index]].split) + ", which has " +
          std::to_string(deliver) + " batches in this run");
    }
  }
  // With every earlier count known, the position must add up.
  uint64_t before = 0;
  bool known = true;
  for (size_t i = 0; i < at.index && known; ++i) {
    const SplitProgress& split = cur_.splits[slots[i]];
    known = !split.skipped && split.deliver != kUnknownCount;
    if (known) before += split.deliver;
  }
  if (known && before + at.batch != position) {
    return Status::InvalidArgument(
        what + ": in this run, batch " + std::to_string(at.batch) + " of the rank's split " +
        std::to_string(at.index) + " is batch " + std::to_string(before + at.batch) +
        " of the epoch (the state belongs to another pipeline or source)");
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    if (i < at.index) {
      Skip(slots[i]);
    } else {
      SetAckedPrefix(slots[i], i == at.index ? at.batch : 0);
    }
  }
  TakeBackAhead(rank);
  skipped_base_[static_cast<size_t>(rank)] = position - at.batch;
  touched_ = true;
  return Status::Ok();
}

std::pair<uint64_t, SequenceKey> CoordinatorState::RankCursor(int rank) const {
  if (!cur_.layout || rank < 0 || rank >= options_.world_size) return {0, SequenceKey{}};
  uint64_t position = skipped_base_[static_cast<size_t>(rank)];
  const std::vector<size_t>& slots = cur_.layout->rank_slots[static_cast<size_t>(rank)];
  for (size_t i = 0; i < slots.size(); ++i) {
    const SplitProgress& split = cur_.splits[slots[i]];
    if (split.skipped) continue;
    if (split.phase != Phase::kComplete) {
      return {position + split.contiguous, SequenceKey{i, split.contiguous}};
    }
    position += split.deliver;
  }
  return {position, SequenceKey{slots.size(), 0}};
}

uint64_t CoordinatorState::RankPosition(int rank) const { return RankCursor(rank).first; }

std::vector<std::pair<uint64_t, WorkerId>> CoordinatorState::Holders(int rank) const {
  std::vector<std::pair<uint64_t, WorkerId>> out;
  if (!cur_.layout) return out;
  for (size_t p = 0; p < cur_.splits.size(); ++p) {
    if (cur_.splits[p].phase != Phase::kAssigned || cur_.layout->slots[p].rank != rank) continue;
    out.emplace_back(cur_.layout->slots[p].split, cur_.splits[p].holder);
  }
  return out;
}

std::vector<std::pair<uint64_t, WorkerId>> CoordinatorState::Revoked(int rank) const {
  std::vector<std::pair<uint64_t, WorkerId>> out;
  if (!cur_.layout) return out;
  for (size_t p = 0; p < cur_.splits.size(); ++p) {
    if (cur_.layout->slots[p].rank != rank) continue;
    for (WorkerId w : cur_.splits[p].revoked_from) out.emplace_back(cur_.layout->slots[p].split, w);
  }
  return out;
}

std::optional<size_t> CoordinatorState::PositionOf(uint64_t split_id) const {
  if (!cur_.layout) return std::nullopt;
  auto it = cur_.layout->position_of.find(split_id);
  if (it == cur_.layout->position_of.end()) return std::nullopt;
  return it->second;
}

uint64_t CoordinatorState::BatchCount(uint64_t split_id) const {
  const std::optional<size_t> p = PositionOf(split_id);
  if (!p) return kUnknownCount;
  const uint64_t planned = cur_.layout->slots[*p].batch_count;
  if (planned != kUnknownCount) return planned;
  return cur_.splits[*p].phase == Phase::kComplete ? cur_.splits[*p].deliver : kUnknownCount;
}

bool CoordinatorState::MakesSplit(WorkerId worker, uint64_t split_id) const {
  const std::optional<size_t> p = PositionOf(split_id);
  if (!p) return false;
  const SplitProgress& split = cur_.splits[*p];
  return split.phase == Phase::kAssigned && split.holder == worker && !split.produced;
}

std::vector<std::pair<uint64_t, uint64_t>> CoordinatorState::Making(WorkerId worker) const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  auto it = workers_.find(worker);
  if (it == workers_.end()) return out;
  for (const auto& [epoch, position] : it->second.held) {
    const Book& book = epoch == cur_.epoch || !ahead_ ? cur_ : *ahead_;
    if (book.epoch != epoch || !book.layout || position >= book.splits.size()) continue;
    const SplitProgress& split = book.splits[position];
    if (split.phase == Phase::kAssigned && split.holder == worker && !split.produced)
      out.emplace_back(epoch, book.layout->slots[position].split);
  }
  return out;
}

uint64_t CoordinatorState::PlannedCount(uint64_t split_id) const {
  const std::optional<size_t> p = PositionOf(split_id);
  return p ? cur_.layout->slots[*p].batch_count : kUnknownCount;
}

CoordinatorStats CoordinatorState::Stats() const {
  CoordinatorStats stats;
  stats.epoch = cur_.epoch;
  stats.epoch_done = EpochDone();
  stats.pending_splits = cur_.pending.size();
  stats.incomplete_splits = cur_.incomplete;
  stats.acks = acks_;
  stats.duplicate_acks = duplicate_acks_;
  stats.reassignments = reassignments_;
  stats.stale_split_done = stale_split_done_;
  stats.samples_skipped = skipped_before_;
  for (const SplitProgress& split : cur_.splits) stats.samples_skipped += split.samples_skipped;
  for (int r = 0; r < options_.world_size; ++r) stats.rank_positions.push_back(RankPosition(r));
  for (const auto& [id, record] : workers_) stats.workers.push_back(record.stats);
  return stats;
}

}  // namespace gm
