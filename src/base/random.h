// The one seeded random source of Reel: SplitMix64 (Steele, Lea, Flood 2014) with its
// distributions written out here, not <random>'s, whose algorithms differ between standard
// libraries, so that a seed gives the same datasets, shuffles and crops on every machine.
//
// Streams split a seed by purpose: Rng::Stream(seed, kPurpose, epoch, index) gives a generator
// unrelated to every other (purpose, epoch, index), so a choice is repeatable whatever the
// thread count or timing, and adding draws for one purpose leaves the others unchanged.
//
// Thread-safety: an Rng is a value; use one per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace reel {

// SplitMix64's finaliser: a bijective 64-bit mix with full avalanche.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  using result_type = uint64_t;  // a UniformRandomBitGenerator, for code that wants one

  explicit Rng(uint64_t seed) : state_(seed) {}

  // The generator for one purpose of `seed`, further keyed by up to two indices (an epoch, a
  // sample). Every key bit is mixed in, so nearby seeds and indices give unrelated sequences.
  static Rng Stream(uint64_t seed, uint64_t purpose, uint64_t a = 0, uint64_t b = 0) {
    uint64_t key = Mix64(seed + kGolden);
    key = Mix64((key ^ purpose) + kGolden);
    key = Mix64((key ^ a) + kGolden);
    return Rng(Mix64((key ^ b) + kGolden));
  }

  uint64_t Next() {
    state_ += kGolden;
    return Mix64(state_);
  }
  result_type operator()() { return Next(); }
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return UINT64_MAX; }

  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }

  // Uniform in [0, n), n >= 1, by multiply-shift: one draw, bias below 2^-32 for n < 2^32.
  int UniformInt(int n) {
    return static_cast<int>(((Next() >> 32) * static_cast<uint64_t>(n)) >> 32);
  }

  // Uniform in [0, n), n >= 1, without bias (rejection).
  uint64_t Below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = Next();
    while (x >= limit);
    return x % n;
  }

  // Fisher-Yates with Below.
  template <typename T>
  void Shuffle(std::vector<T>* items) {
    for (size_t i = items->size(); i > 1; --i) std::swap((*items)[i - 1], (*items)[Below(i)]);
  }

 private:
  static constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;
  uint64_t state_;
};

}  // namespace reel
