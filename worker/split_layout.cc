#include "worker/split_layout.h"

#include <algorithm>
#include <utility>

#include "core/permutation.h"
#include "core/rng.h"

namespace gm {
namespace {

// Rng streams of the layout's draws (stage numbers are small; engine streams are
// 0xFFFF0001 and 0xFFFF0002).
constexpr uint64_t kPermutationStream = 0xFFFF0003;
constexpr uint64_t kInterleaveStream = 0xFFFF0004;

struct ReadSampleResult {
  Sample sample;
  Status status;
};

}  // namespace

std::string_view SplitModeName(SplitMode mode) {
  switch (mode) {
    case SplitMode::kInOrder:
      return "in order";
    case SplitMode::kPermuted:
      return "permuted";
    case SplitMode::kInterleaved:
      return "interleaved";
  }
  return "?";
}

SplitLayout SplitLayout::Make(const Source& source, bool shuffle, size_t shards_per_split) {
  SplitLayout l;
  const std::vector<Split>& from = source.splits();
  if (!shuffle) {
    l.splits_ = from;
    return l;
  }
  if (source.indexable()) {
    l.mode_ = SplitMode::kPermuted;
    for (const Split& s : from) {
      l.first_position_.push_back(l.total_);
      l.splits_.push_back({s.id,
                           "positions [" + std::to_string(l.total_) + ".." +
                               std::to_string(l.total_ + s.count - 1) +
                               "] of the epoch's permutation",
                           s.count});
      l.total_ += s.count;
    }
    return l;
  }
  l.mode_ = SplitMode::kInterleaved;
  l.shards_per_split_ = std::clamp<size_t>(shards_per_split, 1, std::max<size_t>(1, from.size()));
  const size_t groups = (from.size() + l.shards_per_split_ - 1) / l.shards_per_split_;
  l.members_.resize(groups);
  for (size_t i = 0; i < from.size(); ++i) l.members_[i % groups].push_back(i);
  for (size_t g = 0; g < groups; ++g) {
    const std::vector<size_t>& m = l.members_[g];
    uint64_t count = 0;
    bool known = true;
    for (size_t i : m) {
      known = known && from[i].count > 0;
      count += from[i].count;
    }
    std::string name = from[m.front()].name;
    if (m.size() > 1) name += " and " + std::to_string(m.size() - 1) + " more, interleaved";
    l.splits_.push_back({g, std::move(name), known ? count : 0});
  }
  return l;
}

Status SplitLayout::Read(const Source& source, uint64_t seed, uint64_t epoch, size_t id,
                         const EmitFn& emit) const {
  if (id >= splits_.size()) {
    return Status::InvalidArgument("no split " + std::to_string(id) + " (the source has " +
                                   std::to_string(splits_.size()) + ")");
  }
  switch (mode_) {
    case SplitMode::kInOrder:
      return source.ReadSplit(id, emit);
    case SplitMode::kPermuted:
      return ReadPermuted(source, seed, epoch, id, emit);
    case SplitMode::kInterleaved:
      return ReadInterleaved(source, seed, epoch, id, emit);
  }
  return Status::Internal("unknown split layout");
}

Status SplitLayout::ReadPermuted(const Source& source, uint64_t seed, uint64_t epoch, size_t id,
                                 const EmitFn& emit) const {
  const IndexPermutation permutation(total_,
                                     Rng::ForSample(seed, epoch, 0, kPermutationStream).Next());
  const uint64_t begin = first_position_[id];
  for (uint64_t position = begin; position < begin + splits_[id].count; ++position) {
    GM_RETURN_IF_ERROR(source.ReadSample(permutation(position), emit));
  }
  return Status::Ok();
}

// Each member is read whole (a worker holds the split's shards in memory at once),
// then merged: each next sample comes from a member chosen with probability
// proportional to what it has left, so every member spreads evenly over the split.
Status SplitLayout::ReadInterleaved(const Source& source, uint64_t seed, uint64_t epoch, size_t id,
                                    const EmitFn& emit) const {
  const std::vector<size_t>& members = members_[id];
  std::vector<std::vector<ReadSampleResult>> reads(members.size());
  Status failed = Status::Ok();
  for (size_t m = 0; m < members.size(); ++m) {
    Status st = source.ReadSplit(members[m], [&](Sample&& sample, const Status& status) {
      reads[m].push_back({std::move(sample), status});
      return true;
    });
    if (!st.ok() && failed.ok()) failed = st;
  }
  std::vector<size_t> next(members.size(), 0);
  uint64_t left = 0;
  for (const auto& r : reads) left += r.size();
  Rng rng = Rng::ForSample(seed, epoch, id, kInterleaveStream);
  for (; left > 0; --left) {
    uint64_t pick = rng.Below(left);
    size_t m = 0;
    for (; pick >= reads[m].size() - next[m]; ++m) pick -= reads[m].size() - next[m];
    ReadSampleResult& r = reads[m][next[m]++];
    if (!emit(std::move(r.sample), r.status)) {
      return Status::Cancelled(splits_[id].name + ": reading stopped");
    }
  }
  return failed;
}

}  // namespace gm
