#include "base/allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace reel {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kGlibcHeap = false;  // the sanitizers bring their own allocator
#elif defined(__GLIBC__)
constexpr bool kGlibcHeap = true;
#else
constexpr bool kGlibcHeap = false;
#endif

TEST(RetainFreedHeapMemoryTest, LargeBuffersComeFromTheHeapAndStayAfterFree) {
  if (!kGlibcHeap) GTEST_SKIP() << "not glibc's heap";
  if (std::getenv("GLIBC_TUNABLES") || std::getenv("MALLOC_TRIM_THRESHOLD_") ||
      std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_MMAP_MAX_")) {
    GTEST_SKIP() << "the environment sets glibc's heap itself";
  }
#if defined(__GLIBC__)
  ASSERT_TRUE(RetainFreedHeapMemory());
  // R(2+1)D-18's activations at batch 2 are 58 MB: above the 32 MiB that glibc's mmap threshold
  // goes up to, so only "never mmap" keeps them.
  constexpr size_t kSize = 80 << 20;
  const struct mallinfo2 before = mallinfo2();
  void* buffer = std::malloc(kSize);
  ASSERT_NE(buffer, nullptr);
  std::memset(buffer, 1, kSize);
  const struct mallinfo2 held = mallinfo2();
  EXPECT_EQ(held.hblkhd, before.hblkhd) << "an 80 MiB buffer was mmapped, not taken from the heap";
  std::free(buffer);
  const struct mallinfo2 after = mallinfo2();
  EXPECT_EQ(after.arena, held.arena) << "the heap was trimmed: the next step faults it in again";
  EXPECT_GE(after.fordblks, kSize) << "the freed buffer is kept for reuse";
#endif
}

TEST(AppendInPlaceTest, KeepsWhatWasThereAndAppendsWhatFillWrote) {
  for (size_t size :
       {size_t{0}, size_t{1}, size_t{4095}, size_t{(4 << 20) - 1}, size_t{(8 << 20) + 3}}) {
    std::string buffer = "head";
    AppendInPlace(&buffer, size, [](char* dest, size_t n) {
      for (size_t i = 0; i < n; ++i) dest[i] = static_cast<char>('a' + i % 26);
      return n;
    });
    ASSERT_EQ(buffer.size(), 4 + size);
    EXPECT_EQ(buffer.substr(0, 4), "head");
    for (size_t i = 0; i < size; i += 4093) {
      EXPECT_EQ(buffer[4 + i], static_cast<char>('a' + i % 26)) << size << " at " << i;
    }
    if (size > 0) {
      EXPECT_EQ(buffer.back(), static_cast<char>('a' + (size - 1) % 26));
    }
  }
}

TEST(AppendInPlaceTest, EndsWhereFillStopped) {
  std::string buffer = "ab";
  AppendInPlace(&buffer, 6 << 20, [](char* dest, size_t) {
    std::memcpy(dest, "xyz", 3);
    return size_t{3};  // a file that turned out shorter
  });
  EXPECT_EQ(buffer, "abxyz");
  AppendInPlace(&buffer, 10, [](char*, size_t) { return size_t{0}; });
  EXPECT_EQ(buffer, "abxyz");
}

TEST(ReserveBufferTest, GrowsCapacityAndKeepsTheBytes) {
  std::string buffer = "kept";
  ReserveBuffer(&buffer, 9 << 20);
  EXPECT_GE(buffer.capacity(), size_t{9} << 20);
  EXPECT_EQ(buffer, "kept");
  const char* data = buffer.data();
  ReserveBuffer(&buffer, 16);  // smaller than what it has: nothing moves
  EXPECT_EQ(buffer.data(), data);
}

TEST(UninitializedVectorTest, KeepsWhatItIsGivenAndResizesWithoutZeroing) {
  UninitializedVector<float> v = {1.f, 2.f};
  v.push_back(3.f);
  EXPECT_EQ(v, (UninitializedVector<float>{1.f, 2.f, 3.f}));
  v.resize(1000);  // new values unset: only the size and the kept ones are checked
  EXPECT_EQ(v.size(), 1000u);
  EXPECT_EQ(v[2], 3.f);
  v.resize(5, 7.f);  // an explicit value still fills
  v.resize(6, 7.f);
  EXPECT_EQ(v[5], 7.f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u);
  UninitializedVector<std::string> s(2);  // class types are still constructed
  EXPECT_TRUE(s[0].empty());
}

}  // namespace
}  // namespace reel
