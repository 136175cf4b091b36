// Tensor values as doubles, for what the registry computes on weights: diffs (relative L2
// distance) and merges (averages, task arithmetic, TIES). Every safetensors dtype converts;
// converting back rounds to nearest (F16 and BF16 round half to even, integers round and clamp).
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "models/safetensors.h"

namespace reel::registry {

// Errors: InvalidArgument for an unknown dtype or a size that does not match it.
Result<std::vector<double>> ToDoubles(const models::TensorBytes& t);
Result<models::TensorBytes> FromDoubles(const std::vector<double>& values, const std::string& dtype,
                                        const std::vector<int64_t>& shape);

// ||b - a|| / ||a||; ||b|| when a is all zeros (0 when both are).
double RelativeL2(const std::vector<double>& a, const std::vector<double>& b);

bool IsFloatDtype(const std::string& dtype);

}  // namespace reel::registry
