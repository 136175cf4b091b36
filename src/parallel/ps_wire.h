// Internal to the parameter server and its client: a shard's tensors as one binary body, each
// tensor's bytes in order (shapes and dtypes are known to both sides from the model).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace reel::parallel::ps_wire {

inline uint64_t Bytes(const std::vector<at::Tensor>& tensors) {
  uint64_t n = 0;
  for (const auto& t : tensors) n += t.nbytes();
  return n;
}

inline void Append(std::string* out, const at::Tensor& t) {
  out->append(static_cast<const char*>(t.data_ptr()), t.nbytes());
}

// `like`'s size in zeros (a parameter that got no gradient).
inline void AppendZeros(std::string* out, const at::Tensor& like) { out->append(like.nbytes(), 0); }

// Copies the next t.nbytes() bytes of `in` into `t`; returns the position after them.
inline const char* CopyInto(const char* in, at::Tensor& t) {
  std::memcpy(t.data_ptr(), in, t.nbytes());
  return in + t.nbytes();
}

}  // namespace reel::parallel::ps_wire
