#include "base/random.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

namespace reel {
namespace {

// SplitMix64's published reference outputs for seed 1234567 (Vigna's splitmix64.c): the same
// numbers on every machine and standard library.
TEST(RngTest, MatchesTheReferenceSplitMix64) {
  Rng rng(1234567);
  EXPECT_EQ(rng.Next(), 6457827717110365317ull);
  EXPECT_EQ(rng.Next(), 3203168211198807973ull);
  EXPECT_EQ(rng.Next(), 9817491932198370423ull);
  EXPECT_EQ(rng.Next(), 4593380528125082431ull);
  EXPECT_EQ(rng.Next(), 16408922859458223821ull);
}

TEST(RngTest, StreamsAreRepeatableAndIndependent) {
  EXPECT_EQ(Rng::Stream(7, 1, 2, 3).Next(), Rng::Stream(7, 1, 2, 3).Next());
  std::set<uint64_t> firsts;
  for (uint64_t seed : {0ull, 1ull}) {
    for (uint64_t purpose : {0ull, 1ull, 2ull}) {
      for (uint64_t a : {0ull, 1ull}) {
        for (uint64_t b : {0ull, 1ull}) firsts.insert(Rng::Stream(seed, purpose, a, b).Next());
      }
    }
  }
  EXPECT_EQ(firsts.size(), 24u) << "two keys gave the same stream";
}

TEST(RngTest, DrawsStayInRangeAndCoverIt) {
  Rng rng(42);
  std::vector<int> counts(10, 0);
  for (int i = 0; i < 10000; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    const uint64_t below = rng.Below(10);
    ASSERT_LT(below, 10u);
    ++counts[below];
    const int small = rng.UniformInt(3);
    ASSERT_GE(small, 0);
    ASSERT_LT(small, 3);
  }
  for (int c : counts) EXPECT_NEAR(c, 1000, 150);
  const double x = rng.Uniform(-2.0, 3.0);
  EXPECT_GE(x, -2.0);
  EXPECT_LT(x, 3.0);
}

TEST(RngTest, ShuffleIsAPermutationFixedByTheSeed) {
  std::vector<int> a(50), b;
  std::iota(a.begin(), a.end(), 0);
  b = a;
  Rng(9).Shuffle(&a);
  Rng(9).Shuffle(&b);
  EXPECT_EQ(a, b);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> expected(50);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(sorted, expected);
  EXPECT_NE(a, expected);
}

}  // namespace
}  // namespace reel
