// Loader batches as LibTorch tensors, for the trainer. Kept apart from loader.h so that only the
// parts that use LibTorch include its headers.
//
// clips:  B x C x T x H x W, float32 (normalised batches) or uint8
// labels: B, int64
// Without CUDA the tensors adopt the batch's buffers (no copy). With CUDA they are copied once
// into pinned host memory, so that .to(device, non_blocking=true) overlaps with compute.
// Thread-safety: a pure function of its argument.
#pragma once

#include <ATen/ATen.h>

#include "loader/loader.h"

namespace reel::loader {

struct TensorBatch {
  at::Tensor clips;
  at::Tensor labels;
};

TensorBatch ToTensors(Batch&& batch);

}  // namespace reel::loader
