#include "base/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <initializer_list>

#include "base/check.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace reel {

bool RetainFreedHeapMemory() {
#if defined(__GLIBC__)
  for (const char* name :
       {"GLIBC_TUNABLES", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_MMAP_MAX_"}) {
    if (std::getenv(name) != nullptr) return true;  // the user's settings win
  }
  // No buffer is mmapped: 32 MiB is the largest mmap threshold mallopt accepts, and larger
  // activations (58 MB for R(2+1)D-18 at batch 2) were mapped and faulted in again each step,
  // 4 KiB at a time: 6000 faults, 60 ms, around a 4 ms batch norm.
  constexpr int kTrimThreshold = 1 << 30;
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
  return false;
#endif
}

void ReserveBuffer(std::string* out, size_t capacity) {
  if (capacity <= out->capacity()) return;
  constexpr size_t kHugePageWorthwhile = 4 << 20;
  out->reserve(capacity);  // allocated; beyond the old size, not yet touched
  if (capacity < kHugePageWorthwhile) return;
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  char* start = out->data() + out->size();
  const size_t lead = (page - reinterpret_cast<uintptr_t>(start) % page) % page;  // to a page
  const size_t untouched = capacity - out->size();
  if (untouched <= lead) return;
  const size_t whole = (untouched - lead) / page * page;
  // Advice only: a kernel without transparent huge pages says no and the pages stay 4 KiB.
  if (whole > 0) ::madvise(start + lead, whole, MADV_HUGEPAGE);
}

void AppendInPlace(std::string* out, size_t n, const std::function<size_t(char*, size_t)>& fill) {
  const size_t old_size = out->size();
  ReserveBuffer(out, old_size + n);
#if defined(__cpp_lib_string_resize_and_overwrite)
  out->resize_and_overwrite(old_size + n, [&](char* data, size_t) {
    const size_t written = fill(data + old_size, n);
    REEL_CHECK(written <= n);
    return old_size + written;
  });
#else
  out->resize(old_size + n);
  const size_t written = fill(out->data() + old_size, n);
  REEL_CHECK(written <= n);
  out->resize(old_size + written);
#endif
}

}  // namespace reel
