// A module's parameters and buffers as safetensors, by their torchvision-style dotted names, and
// single tensors to and from safetensors' bytes. Tensors on any device: bytes are always little-
// endian host memory, and loading copies into the module's own tensors wherever they live.
// Errors: InvalidArgument naming the tensor (missing, unexpected, other shape or dtype).
// Thread-safety: pure functions; the module must not be in use by another thread.
#pragma once

#include <torch/torch.h>

#include <string>

#include "base/status.h"
#include "models/safetensors.h"

namespace reel::models {

// "F32", "I64", ... for a LibTorch dtype; "" for one safetensors cannot hold here.
std::string DtypeName(torch::ScalarType type);

TensorBytes ToTensorBytes(const torch::Tensor& tensor);
// A new CPU tensor holding a copy of `bytes`. `what` names it in errors.
Result<torch::Tensor> FromTensorBytes(const TensorBytes& bytes, const std::string& what);

// Copies every parameter and buffer of `module` from `file`, by name (strict: a missing,
// unexpected or mis-shaped tensor is InvalidArgument naming it; an unsupported dtype too).
// Nothing is changed unless every tensor checks out.
Status LoadStateDict(torch::nn::Module& module, const SafetensorsFile& file);
// Every parameter and buffer of `module` as tensors of a safetensors file.
SafetensorsFile SaveStateDict(const torch::nn::Module& module);

}  // namespace reel::models
