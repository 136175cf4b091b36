// Test support for the registry's tests: small networks with deterministic weights, training-like
// moves of them, and a store that dies after a number of puts. Tests only.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "base/random.h"
#include "models/safetensors.h"
#include "registry/registry.h"
#include "storage/memory_store.h"
#include "testing/status_matchers.h"

namespace reel::registry {

using models::SafetensorsFile;
using models::TensorBytes;

// The tests' users: a writer and an admin.
inline const Actor kAda{"ada", false};
inline const Actor kRoot{"root", true};

inline TensorBytes Floats(std::vector<int64_t> shape, uint64_t seed) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  Rng rng(seed);
  std::vector<float> w(n);
  for (float& x : w) x = static_cast<float>(0.05 * (rng.Uniform() + rng.Uniform() - 1.0));
  TensorBytes t{"F32", std::move(shape), std::string(n * 4, '\0')};
  std::memcpy(t.data.data(), w.data(), t.data.size());
  return t;
}

// Every weight of `t` moved by up to a relative `step`, as one step of training does.
inline TensorBytes Moved(TensorBytes t, double step, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> w(t.data.size() / 4);
  std::memcpy(w.data(), t.data.data(), t.data.size());
  for (float& x : w) x = static_cast<float>(x * (1.0 + step * (2 * rng.Uniform() - 1)));
  std::memcpy(t.data.data(), w.data(), t.data.size());
  return t;
}

// A small network: a conv weight over several chunks (with a remainder), a bias, a head, an
// int64 counter, an empty tensor, and metadata.
inline SafetensorsFile Model(uint64_t seed) {
  SafetensorsFile f;
  f.tensors["conv.weight"] = Floats({16, 3, 3, 7, 7}, seed);  // 28224 bytes
  f.tensors["conv.bias"] = Floats({16}, seed + 1);
  f.tensors["fc.weight"] = Floats({8, 16}, seed + 2);
  TensorBytes steps{"I64", {}, std::string(8, '\0')};
  steps.data[0] = 42;
  f.tensors["bn.num_batches_tracked"] = steps;
  f.tensors["empty"] = TensorBytes{"F16", {0, 4}, ""};
  f.metadata["arch"] = "test";
  return f;
}

inline void ExpectSameFile(const SafetensorsFile& a, const SafetensorsFile& b) {
  ASSERT_OK_AND_ASSIGN(std::string x, models::WriteSafetensors(a));
  ASSERT_OK_AND_ASSIGN(std::string y, models::WriteSafetensors(b));
  EXPECT_TRUE(x == y) << "the pulled file differs";
}

// Fails every Put after the first `allowed`, as a push killed halfway would stop.
class StopsAfterPuts : public storage::MemoryStore {
 public:
  explicit StopsAfterPuts(int allowed) : allowed_(allowed) {}
  Status Put(std::string_view key, std::string_view data) override {
    if (allowed_.fetch_sub(1) <= 0) return UnavailableError("the pushing process died");
    return MemoryStore::Put(key, data);
  }
  std::atomic<int> allowed_;  // pushes put on several threads
};

}  // namespace reel::registry
