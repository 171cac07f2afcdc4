// SplitLayout: how an epoch's samples are cut into the splits that data workers
// make, and how one split of one epoch is read.
//
// A split is the unit the coordinator hands out and accounts for: its batches are
// a function of (seed, epoch, split) alone, so any worker can re-make them. Three
// layouts, fixed when the pipeline is loaded:
//   - in order (no shuffle): split s is the source's split s, read in source order;
//   - permuted (shuffle on, indexable source: files, range): each epoch's order is
//     a seeded permutation of ALL sample indices (like DataLoader(shuffle=True)),
//     and split s is the run of positions after those of splits 0..s-1, so a split
//     is a random subset of the dataset and so is every batch;
//   - interleaved (shuffle on, sequential source: tar shards, jsonl files): split g
//     is the source splits g, g+M, g+2M, ... (M = number of splits: each mixes
//     shards from all over the source), read whole and merged in a random order
//     drawn from (seed, epoch, g). The engine then passes the samples through the
//     pipeline's shuffle buffer and permutes the order of the splits per epoch.
//     Unlike the permuted layout, a batch draws only from the shards of its split.
// Immutable after Make; Read may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "worker/source.h"

namespace gm {

enum class SplitMode { kInOrder, kPermuted, kInterleaved };
std::string_view SplitModeName(SplitMode mode);  // "in order", "permuted", "interleaved"

class SplitLayout {
 public:
  // The layout for `source`: in order when !shuffle; permuted when the source is
  // indexable; else interleaved with `shards_per_split` (>= 1) source splits per
  // split (fewer when the source has fewer).
  static SplitLayout Make(const Source& source, bool shuffle, size_t shards_per_split);

  SplitMode mode() const { return mode_; }
  // The splits, by id. A count is 0 when not known before reading.
  const std::vector<Split>& splits() const { return splits_; }
  // Source splits merged into each split (1 unless interleaved).
  size_t shards_per_split() const { return shards_per_split_; }

  // Reads split `id` of `epoch` in that epoch's order, emitting each sample once.
  // Errors as Source::ReadSplit: non-OK when a source split failed as a whole
  // (after emitting every sample that could be read), Cancelled when emit
  // returned false, InvalidArgument for an unknown id.
  Status Read(const Source& source, uint64_t seed, uint64_t epoch, size_t id,
              const EmitFn& emit) const;

 private:
  Status ReadPermuted(const Source& source, uint64_t seed, uint64_t epoch, size_t id,
                      const EmitFn& emit) const;
  Status ReadInterleaved(const Source& source, uint64_t seed, uint64_t epoch, size_t id,
                         const EmitFn& emit) const;

  SplitMode mode_ = SplitMode::kInOrder;
  size_t shards_per_split_ = 1;
  std::vector<Split> splits_;
  std::vector<uint64_t> first_position_;      // permuted: position of each split's start
  uint64_t total_ = 0;                        // permuted: samples in the source
  std::vector<std::vector<size_t>> members_;  // interleaved: source splits of each split
};

}  // namespace gm
