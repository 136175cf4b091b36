#include "models/cpu_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

#include "models/cpu_allocator_internal.h"

namespace reel::models {
namespace {

constexpr size_t kMaxCachedBytes = size_t{1} << 30;

// Before every block's data, 64 bytes (LibTorch's alignment) saying how to free it.
struct Header {
  const CachingCpuAllocator* owner;  // null: a small block from malloc
  size_t mapped;                     // a large block's mapped size
};
constexpr size_t kHeaderBytes = 64;
static_assert(sizeof(Header) <= kHeaderBytes);

// Large sizes rounded up to eight classes per power of two (at most 12.5% more), so that the
// same layer's activations at nearby batch sizes share blocks.
size_t SizeClass(size_t bytes) {
  size_t power = size_t{1} << (63 - __builtin_clzll(bytes));
  const size_t step = power / 8;
  return (bytes + step - 1) / step * step;
}

void* Data(void* base) { return static_cast<char*>(base) + kHeaderBytes; }
Header* HeaderOf(void* data) {
  return reinterpret_cast<Header*>(static_cast<char*>(data) - kHeaderBytes);
}

}  // namespace

c10::DataPtr CachingCpuAllocator::allocate(size_t n) const {
  const c10::Device cpu(c10::DeviceType::CPU);
  if (n == 0) return {nullptr, nullptr, &Free, cpu};
  void* base = nullptr;
  Header header{nullptr, 0};
  if (n + kHeaderBytes >= kLargeBlock) {
    header = Header{this, SizeClass(n + kHeaderBytes)};
    base = TakeLarge(header.mapped);
  } else if (posix_memalign(&base, kHeaderBytes, n + kHeaderBytes) != 0) {
    base = nullptr;
  }
  TORCH_CHECK(base != nullptr, "CachingCpuAllocator: out of memory allocating ", n, " bytes");
  *static_cast<Header*>(base) = header;
  return {Data(base), Data(base), &Free, cpu};
}

void CachingCpuAllocator::Free(void* data) {
  if (data == nullptr) return;
  Header* header = HeaderOf(data);
  if (header->owner == nullptr) {
    std::free(header);
  } else {
    header->owner->GiveBackLarge(header, header->mapped);
  }
}

void* CachingCpuAllocator::TakeLarge(size_t mapped) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(mapped);
    if (it != free_.end() && !it->second.empty()) {
      void* base = it->second.back();
      it->second.pop_back();
      cached_ -= mapped;
      return base;
    }
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base != MAP_FAILED) {
      std::lock_guard<std::mutex> lock(mutex_);
      mapped_ += mapped;
      return base;
    }
    ReleaseCached();  // the kept blocks may be what the kernel is short of
  }
  return nullptr;
}

void CachingCpuAllocator::GiveBackLarge(void* base, size_t mapped) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_ + mapped <= max_cached_) {
      free_[mapped].push_back(base);
      cached_ += mapped;
      return;
    }
    mapped_ -= mapped;
  }
  munmap(base, mapped);
}

void CachingCpuAllocator::ReleaseCached() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [mapped, blocks] : free_) {
    for (void* base : blocks) munmap(base, mapped);
    mapped_ -= mapped * blocks.size();
    blocks.clear();
  }
  cached_ = 0;
}

size_t CachingCpuAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_;
}

size_t CachingCpuAllocator::mapped_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mapped_;
}

void UseCachingCpuAllocator() {
  // Never destroyed: tensors may outlive every static.
  static auto* allocator = new CachingCpuAllocator(kMaxCachedBytes);
  c10::SetCPUAllocator(allocator, /*priority=*/1);  // above LibTorch's default (0)
}

}  // namespace reel::models
