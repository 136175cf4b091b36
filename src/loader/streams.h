// Internal to loader: the purposes its random streams are split by (base/random.h). Every random
// choice of an epoch (shard order, shuffle buffer, each sample's crop) has its own stream keyed
// by the epoch, so it is repeatable and independent of thread counts and timing.
#pragma once

#include <cstdint>

namespace reel::loader {

inline constexpr uint64_t kShardOrderStream = 1;    // keyed by epoch
inline constexpr uint64_t kBalancedDrawStream = 2;  // keyed by epoch
inline constexpr uint64_t kBufferStream = 3;        // keyed by epoch and rank
inline constexpr uint64_t kSampleStream = 4;        // keyed by epoch and (rank << 40) + position

}  // namespace reel::loader
