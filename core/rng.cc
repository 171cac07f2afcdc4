#include "core/rng.h"

namespace gm {
namespace {
constexpr uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (auto& s : s_) {
    x += 0x9E3779B97F4A7C15ULL;
    s = Mix64(x);
  }
}

Rng Rng::ForSample(uint64_t seed, uint64_t epoch, uint64_t index, uint64_t stream) {
  uint64_t k = Mix64(seed);
  k = Mix64(k ^ (epoch * 0xD6E8FEB86659FD93ULL));
  k = Mix64(k ^ index);
  k = Mix64(k ^ (stream * 0xA0761D6478BD642FULL));
  return Rng(k);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

uint64_t Rng::Below(uint64_t n) {
  __uint128_t m = static_cast<__uint128_t>(Next()) * n;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < n) {
    const uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = static_cast<__uint128_t>(Next()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

}  // namespace gm
