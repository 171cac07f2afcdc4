#include "core/permutation.h"

#include <bit>

#include "core/rng.h"

namespace gm {

IndexPermutation::IndexPermutation(uint64_t n, uint64_t key) : n_(n) {
  // Domain 2^(2h) >= n, with h >= 1 so that the halves are never empty.
  const int bits = n > 1 ? std::bit_width(n - 1) : 1;
  half_bits_ = (bits + 1) / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
  Rng rng(key);
  for (uint64_t& k : keys_) k = rng.Next();
}

uint64_t IndexPermutation::Encrypt(uint64_t x) const {
  uint64_t left = x >> half_bits_;
  uint64_t right = x & half_mask_;
  for (uint64_t k : keys_) {
    const uint64_t next = left ^ (Mix64(right ^ k) & half_mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t IndexPermutation::operator()(uint64_t position) const {
  // Cycle walking: the network permutes 0..2^(2h)-1; following the cycle from a
  // position below n until it returns below n permutes 0..n-1.
  uint64_t x = position;
  do {
    x = Encrypt(x);
  } while (x >= n_);
  return x;
}

}  // namespace gm
