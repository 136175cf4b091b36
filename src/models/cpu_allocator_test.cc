#include "models/cpu_allocator.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "models/cpu_allocator_internal.h"

namespace reel::models {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(CachingCpuAllocatorTest, SmallAndLargeBlocksAreAlignedAndWritable) {
  CachingCpuAllocator allocator(64 * kMiB);
  for (size_t n : {size_t{1}, size_t{100}, kMiB - 64, kMiB, 5 * kMiB + 3}) {
    c10::DataPtr block = allocator.allocate(n);
    ASSERT_NE(block.get(), nullptr) << n;
    EXPECT_TRUE(Aligned(block.get())) << n;
    std::memset(block.get(), 0x5a, n);
    EXPECT_EQ(static_cast<unsigned char*>(block.get())[n - 1], 0x5a);
  }
  EXPECT_EQ(allocator.allocate(0).get(), nullptr);
}

TEST(CachingCpuAllocatorTest, AnotherThreadReusesAFreedLargeBlock) {
  CachingCpuAllocator allocator(64 * kMiB);
  void* first = nullptr;
  {
    c10::DataPtr block = allocator.allocate(10 * kMiB);
    first = block.get();
  }
  const size_t mapped = allocator.mapped_bytes();
  EXPECT_EQ(allocator.cached_bytes(), mapped);
  // The batcher's thread, and a slightly larger batch: the same size class, the same block.
  void* second = nullptr;
  std::thread batcher([&] {
    c10::DataPtr block = allocator.allocate(10 * kMiB + kMiB / 2);
    second = block.get();
  });
  batcher.join();
  EXPECT_EQ(second, first);
  EXPECT_EQ(allocator.mapped_bytes(), mapped) << "a block was mapped again";
}

TEST(CachingCpuAllocatorTest, KeepsNoMoreThanItsBoundFree) {
  CachingCpuAllocator allocator(4 * kMiB);
  {
    c10::DataPtr a = allocator.allocate(2 * kMiB);
    c10::DataPtr b = allocator.allocate(2 * kMiB);
    c10::DataPtr c = allocator.allocate(2 * kMiB);
    EXPECT_GE(allocator.mapped_bytes(), 6 * kMiB);
  }
  // Each block is 2 MiB and a bit (its class, 2.25 MiB): one fits under 4 MiB, two do not.
  EXPECT_GT(allocator.cached_bytes(), 2 * kMiB);
  EXPECT_LE(allocator.cached_bytes(), 4 * kMiB);
  EXPECT_EQ(allocator.mapped_bytes(), allocator.cached_bytes()) << "the rest is unmapped";
}

TEST(CachingCpuAllocatorTest, RawAllocateAndDeallocateRoundTrip) {
  CachingCpuAllocator allocator(64 * kMiB);
  for (size_t n : {size_t{48}, 3 * kMiB}) {
    void* p = allocator.raw_allocate(n);
    ASSERT_NE(p, nullptr);
    std::memset(p, 1, n);
    allocator.raw_deallocate(p);
  }
  EXPECT_GT(allocator.cached_bytes(), 0u);
}

// Installed, LibTorch's tensors use it: in a fresh process, since it stays for the process.
TEST(CachingCpuAllocatorDeathTest, InstalledItServesLibTorchTensors) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        UseCachingCpuAllocator();
        UseCachingCpuAllocator();  // idempotent
        torch::Tensor x = torch::randn({4, 1 << 18});
        void* first = x.data_ptr();
        const float sum = (x * 2).sum().item<float>();
        x = torch::Tensor();
        void* second = nullptr;
        std::thread other([&] {
          torch::Tensor y = torch::empty({4, 1 << 18});
          second = y.data_ptr();
        });
        other.join();
        std::exit(second == first && std::isfinite(sum) ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace reel::models
