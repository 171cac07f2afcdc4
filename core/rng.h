// Deterministic per-sample randomness.
//
// Every random draw of a stage is made from a stream keyed by (run seed, epoch,
// sample index, stage number) and nothing else: never by thread, worker or time.
// So a sample re-made on another worker, or with another --threads, is
// bit-identical. Not thread-safe; make one Rng per (sample, stage).
#pragma once

#include <cstdint>

namespace gm {

// SplitMix64 finaliser: a good 64-bit mix, used to derive stream keys.
constexpr uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// xoshiro256** seeded through SplitMix64.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  static Rng ForSample(uint64_t seed, uint64_t epoch, uint64_t index, uint64_t stream);

  uint64_t Next();
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [0, n); n > 0. Unbiased (Lemire's method with rejection).
  uint64_t Below(uint64_t n);

 private:
  uint64_t s_[4];
};

}  // namespace gm
