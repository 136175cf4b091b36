// The allocator behind UseCachingCpuAllocator, for its test.
#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace reel::models {

class CachingCpuAllocator final : public c10::Allocator {
 public:
  static constexpr size_t kLargeBlock = size_t{1} << 20;  // from here blocks are mapped and kept

  explicit CachingCpuAllocator(size_t max_cached_bytes) : max_cached_(max_cached_bytes) {}

  c10::DataPtr allocate(size_t n) const override;
  // Every block, small or large, is freed by this one function (as raw_allocate requires).
  c10::DeleterFnPtr raw_deleter() const override { return &Free; }

  size_t cached_bytes() const;  // free large blocks kept for reuse
  size_t mapped_bytes() const;  // large blocks mapped, in use or kept

 private:
  static void Free(void* data);
  void* TakeLarge(size_t mapped) const;
  void GiveBackLarge(void* base, size_t mapped) const;
  void ReleaseCached() const;

  const size_t max_cached_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<size_t, std::vector<void*>> free_;  // by mapped size (a class)
  mutable size_t cached_ = 0;
  mutable size_t mapped_ = 0;
};

}  // namespace reel::models
