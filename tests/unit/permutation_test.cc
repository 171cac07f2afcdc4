// IndexPermutation: a bijection for every size, chosen by its key, and as well
// mixed as a uniform shuffle by the measures that matter for training data.
#include "core/permutation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace gm {
namespace {

std::vector<uint64_t> All(const IndexPermutation& p) {
  std::vector<uint64_t> out;
  for (uint64_t i = 0; i < p.size(); ++i) out.push_back(p(i));
  return out;
}

TEST(IndexPermutation, GivenAnySizeThenEveryIndexAppearsExactlyOnce) {
  for (uint64_t n : {1u, 2u, 3u, 4u, 5u, 7u, 8u, 9u, 100u, 255u, 256u, 257u, 1000u, 4097u}) {
    std::vector<uint64_t> v = All(IndexPermutation(n, 42));
    std::sort(v.begin(), v.end());
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], i) << "n " << n;
  }
}

TEST(IndexPermutation, GivenTheSameKeyThenTheSameOrderAndOtherKeysGiveOthers) {
  EXPECT_EQ(All(IndexPermutation(500, 7)), All(IndexPermutation(500, 7)));
  EXPECT_NE(All(IndexPermutation(500, 7)), All(IndexPermutation(500, 8)));
  std::vector<uint64_t> identity(500);
  for (uint64_t i = 0; i < 500; ++i) identity[i] = i;
  EXPECT_NE(All(IndexPermutation(500, 7)), identity);
}

TEST(IndexPermutation, GivenAHugeSizeThenPositionsStayInRange) {
  const uint64_t n = (uint64_t{1} << 40) + 3;
  IndexPermutation p(n, 1);
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_LT(p(i * 999983), n);
  EXPECT_NE(p(0), p(1));
}

// Contiguous runs of positions are random subsets: where the first quarter of the
// positions lands is spread evenly over the indices (chi-square over 16 bins, far
// below what a sorted or blocky order would give), for many keys.
TEST(IndexPermutation, GivenARunOfPositionsThenItsIndicesSpreadOverTheWholeRange) {
  const uint64_t n = 4096, run = n / 4, bins = 16;
  for (uint64_t key = 0; key < 20; ++key) {
    IndexPermutation p(n, key);
    std::vector<double> count(bins, 0);
    for (uint64_t i = 0; i < run; ++i) count[p(i) * bins / n] += 1;
    const double expected = static_cast<double>(run) / bins;
    double chi2 = 0;
    for (double c : count) chi2 += (c - expected) * (c - expected) / expected;
    // 15 degrees of freedom: P(chi2 > 45) < 1e-4 for a uniform permutation.
    EXPECT_LT(chi2, 45) << "key " << key;
  }
}

}  // namespace
}  // namespace gm
