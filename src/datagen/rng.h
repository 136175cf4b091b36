// Internal to datagen: a small, portable random number generator. The distributions are written
// out here (not <random>'s, whose algorithms differ between standard libraries) so that a seed
// gives the same dataset everywhere.
#pragma once

#include <cstdint>

namespace reel::datagen::internal {

// SplitMix64's finaliser: a bijective 64-bit mix with full avalanche.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// SplitMix64 (Steele, Lea, Flood 2014): 2^64 period, passes BigCrush, trivially seedable.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ull;
    return Mix64(state_);
  }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform in [0, n), n >= 1 (multiply-shift; the bias is below 2^-32 for n < 2^32).
  int UniformInt(int n) {
    return static_cast<int>(((Next() >> 32) * static_cast<uint64_t>(n)) >> 32);
  }

 private:
  uint64_t state_;
};

}  // namespace reel::datagen::internal
