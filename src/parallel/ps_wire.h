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

// A tensor on an accelerator (a worker's) goes through host memory.
inline void Append(std::string* out, const at::Tensor& t) {
  const at::Tensor host = t.device().is_cpu() ? t : t.to(at::kCPU);
  out->append(static_cast<const char*>(host.data_ptr()), host.nbytes());
}

// `like`'s size in zeros (a parameter that got no gradient).
inline void AppendZeros(std::string* out, const at::Tensor& like) { out->append(like.nbytes(), 0); }

// Copies the next t.nbytes() bytes of `in` into `t`; returns the position after them.
inline const char* CopyInto(const char* in, at::Tensor& t) {
  if (t.device().is_cpu()) {
    std::memcpy(t.data_ptr(), in, t.nbytes());
  } else {  // from_blob only reads here: the const_cast satisfies its signature
    t.copy_(at::from_blob(const_cast<char*>(in), t.sizes(), t.options().device(at::kCPU)));
  }
  return in + t.nbytes();
}

}  // namespace reel::parallel::ps_wire
