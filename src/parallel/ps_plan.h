// Which parameter server holds which tensor: a model's state split across K servers by size, so
// each server stores, receives and updates about 1/K of the bytes (as ps-lite and TensorFlow's
// greedy load balancer split variables). Every process computes the same plan from the model.
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace reel::parallel {

enum class PsSync {
  kBsp,  // bulk synchronous: a step's update waits for every worker's gradient
  kSsp,  // stale synchronous: each gradient applies as it arrives; workers stay within s steps
};

// "bsp" or "ssp"; InvalidArgument otherwise.
Result<PsSync> ParsePsSync(const std::string& name);
const char* PsSyncName(PsSync sync);

// The server (0..servers-1) of each tensor, given each tensor's size in bytes: largest first, each
// to the server holding the fewest bytes so far (the lowest index on ties). InvalidArgument for
// servers < 1 or a negative size. A server may hold nothing when there are fewer tensors.
Result<std::vector<int>> AssignToServers(const std::vector<int64_t>& bytes, int servers);

}  // namespace reel::parallel
