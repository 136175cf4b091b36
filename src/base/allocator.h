// Heap settings for processes that allocate and free the same large buffers again and again: a
// training step's activations and gradients, a served batch's tensors.
//
// With glibc's defaults each such buffer is handed back to the kernel when it is freed (above
// the mmap threshold, or by trimming the top of the heap) and faulted in page by page when the
// next step allocates it again. On the main job that cost 23% of the training time (29.8 ->
// 38.9 clips/s with the settings below, 2 processes on 2 cores).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace reel {

// Keeps freed heap memory in the process for reuse: every buffer comes from the heap, not
// mmap (M_MMAP_MAX 0), and freed memory at the top of the heap is kept up to 1 GiB. The process's
// resident size stays at its high-water mark, as under jemalloc or tcmalloc. Leaves the settings
// alone when the user set glibc's own (GLIBC_TUNABLES, MALLOC_TRIM_THRESHOLD_,
// MALLOC_MMAP_THRESHOLD_, MALLOC_MMAP_MAX_). False where the C library is not glibc or refused a
// setting.
bool RetainFreedHeapMemory();

// Gives `out` room for `capacity` bytes without touching the memory. Above 4 MiB the memory is
// asked for in transparent huge pages (MADV_HUGEPAGE, where the kernel offers them on request)
// before it is first touched, so filling it faults 2 MiB at a time rather than 4 KiB: on a VM
// each fault is costly, and reading a 256 MiB file into a new string went from 0.24 to
// 0.55-3.1 GB/s (the spread: how many huge pages the kernel had free). Keeps what `out` holds.
void ReserveBuffer(std::string* out, size_t capacity);

// Appends up to `n` bytes to `out` that `fill(dest, n)` writes in place and counts (it returns
// how many it wrote, at most n): a whole object read into memory. The new bytes are not zeroed
// first where the standard library allows it (C++23's resize_and_overwrite; zeroing 256 MiB
// cost a third of reading a cached file), and a large buffer is reserved as ReserveBuffer does.
void AppendInPlace(std::string* out, size_t n, const std::function<size_t(char*, size_t)>& fill);

// An allocator whose resize() leaves new values of trivial types unset, for buffers that are
// overwritten whole right away (a batch of clips), where zeroing first costs a pass over memory;
// and whose buffers start on a cache line.
template <typename T>
class DefaultInitAllocator : public std::allocator<T> {
 public:
  static constexpr size_t kAlignment = 64;
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() noexcept = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}  // NOLINT: as std::allocator

  // On a cache line, as LibTorch's own buffers: vector code over it never splits a line.
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kAlignment)));
  }
  void deallocate(T* p, size_t /*n*/) noexcept {
    ::operator delete(p, std::align_val_t(kAlignment));
  }

  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;  // default-, not value-initialised
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <typename T>
using UninitializedVector = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace reel
