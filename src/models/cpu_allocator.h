// LibTorch's CPU memory for serving processes: large blocks kept for reuse by any thread.
//
// Why: `RetainFreedHeapMemory` (base/allocator.h) keeps large blocks in the main thread's heap,
// but glibc gives every other thread an arena of 64 MiB heaps that it returns to the kernel as
// soon as they are free. A served batch's activations live on the batcher's thread, so they were
// faulted in again on every batch (dynamic batching ran at a quarter to two thirds of a raw
// batch-8 forward). One arena for the whole process fixes that but makes FFmpeg's decoding
// threads share one lock (2-4x slower), so only LibTorch's large blocks are cached instead.
#pragma once

namespace reel::models {

// Makes LibTorch allocate CPU tensors through a process-wide cache of large blocks (1 MiB and
// up, mapped once, reused at their size class by any thread, at most 1 GiB of them kept free);
// smaller tensors come from malloc as before. Idempotent; call it before the first tensor that
// should use it (tensors made before are freed by their own allocator).
void UseCachingCpuAllocator();

}  // namespace reel::models
