#include "base/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
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

std::string ZeroedBuffer(size_t size) {
  constexpr size_t kHugePageWorthwhile = 4 << 20;
  std::string out;
  if (size >= kHugePageWorthwhile) {
    out.reserve(size);  // allocated, not yet touched
    const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    char* data = out.data();
    const size_t lead = (page - reinterpret_cast<uintptr_t>(data) % page) % page;  // to a page
    const size_t whole = (size - lead) / page * page;
    // Advice only: a kernel without transparent huge pages says no and the pages stay 4 KiB.
    if (whole > 0) ::madvise(data + lead, whole, MADV_HUGEPAGE);
  }
  out.resize(size);
  return out;
}

}  // namespace reel
