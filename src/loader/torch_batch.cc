#include "loader/torch_batch.h"

#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace reel::loader {
namespace {

// A tensor over `data`'s buffer that keeps the vector alive until the tensor is freed.
template <typename Vector>
at::Tensor Adopt(Vector&& data, at::IntArrayRef shape, at::ScalarType type) {
  auto* owner = new std::decay_t<Vector>(std::forward<Vector>(data));
  return at::from_blob(
      owner->data(), shape, [owner](void*) { delete owner; }, at::TensorOptions().dtype(type));
}

template <typename Vector>
at::Tensor Pinned(const Vector& data, at::IntArrayRef shape, at::ScalarType type) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type).pinned_memory(true));
  std::memcpy(t.data_ptr(), data.data(), data.size() * sizeof(data[0]));
  return t;
}

}  // namespace

TensorBatch ToTensors(Batch&& batch) {
  const std::vector<int64_t> shape(batch.shape.begin(), batch.shape.end());
  std::vector<int64_t> labels(batch.labels.begin(), batch.labels.end());
  const int64_t n = static_cast<int64_t>(labels.size());
  const bool pin = at::hasCUDA();
  TensorBatch out;
  if (!batch.f32.empty()) {
    out.clips =
        pin ? Pinned(batch.f32, shape, at::kFloat) : Adopt(std::move(batch.f32), shape, at::kFloat);
  } else {
    out.clips =
        pin ? Pinned(batch.u8, shape, at::kByte) : Adopt(std::move(batch.u8), shape, at::kByte);
  }
  out.labels = pin ? Pinned(labels, {n}, at::kLong) : Adopt(std::move(labels), {n}, at::kLong);
  return out;
}

}  // namespace reel::loader
