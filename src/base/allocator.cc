#include "base/allocator.h"

#include <cstdlib>
#include <initializer_list>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace reel {

bool RetainFreedHeapMemory() {
#if defined(__GLIBC__)
  for (const char* name : {"GLIBC_TUNABLES", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"}) {
    if (std::getenv(name) != nullptr) return true;  // the user's settings win
  }
  // 32 MiB is the largest mmap threshold glibc accepts (half its 64 MiB heap size).
  constexpr int kMmapThreshold = 32 << 20;
  constexpr int kTrimThreshold = 1 << 30;
  return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 &&
         mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
  return false;
#endif
}

}  // namespace reel
