// IndexPermutation: a seeded pseudo-random permutation of 0..n-1 with random access.
//
// Position p of the permutation is computed alone, in O(1) time and memory, so any
// data worker can find the sample indices of any run of positions of an epoch
// without building (or agreeing on) an n-element array. It is an 8-round Feistel
// network over the smallest even-width power of two >= n, keyed from the seed, with
// cycle walking back into 0..n-1 (fewer than 4 steps expected per position). Each
// round mixes with SplitMix64, so the permutations are statistically like uniform
// ones for shuffling data (tests check label mixing against the uniform expectation).
// Immutable after construction; safe to share between threads.
#pragma once

#include <array>
#include <cstdint>

namespace gm {

class IndexPermutation {
 public:
  // A permutation of 0..n-1 chosen by `key`; n == 0 is an empty permutation.
  IndexPermutation(uint64_t n, uint64_t key);

  uint64_t size() const { return n_; }
  // The index at position `position` (< size()); a bijection of 0..size()-1.
  uint64_t operator()(uint64_t position) const;

 private:
  uint64_t Encrypt(uint64_t x) const;  // one pass of the Feistel network

  static constexpr int kRounds = 8;
  uint64_t n_ = 0;
  int half_bits_ = 0;  // width of each Feistel half
  uint64_t half_mask_ = 0;
  std::array<uint64_t, kRounds> keys_{};
};

}  // namespace gm
