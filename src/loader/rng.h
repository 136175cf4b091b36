// Internal to loader: random generators keyed by (seed, epoch, stream), so that every random
// choice of an epoch (shard order, shuffle buffer, each sample's crop) is repeatable and
// independent of thread counts and timing.
#pragma once

#include <cstdint>
#include <random>

namespace reel::loader {

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// SplitMix64 over the key mixes every bit, so nearby seeds and epochs give unrelated sequences.
inline std::mt19937_64 KeyedRng(uint64_t seed, int64_t epoch, uint64_t stream) {
  uint64_t key = SplitMix64(SplitMix64(SplitMix64(seed) ^ static_cast<uint64_t>(epoch)) ^ stream);
  std::seed_seq seq{static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)};
  return std::mt19937_64(seq);
}

// Streams: fixed ones below kSampleStreamBase; sample i of rank r uses
// kSampleStreamBase + (r << 40) + i.
inline constexpr uint64_t kShardOrderStream = 1;
inline constexpr uint64_t kBalancedDrawStream = 2;
inline constexpr uint64_t kBufferStreamBase = 1000;
inline constexpr uint64_t kSampleStreamBase = 1ull << 20;

}  // namespace reel::loader
