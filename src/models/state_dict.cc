#include "models/state_dict.h"

#include <cstring>
#include <set>
#include <vector>

namespace reel::models {

std::string DtypeName(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat:
      return "F32";
    case torch::kDouble:
      return "F64";
    case torch::kHalf:
      return "F16";
    case torch::kBFloat16:
      return "BF16";
    case torch::kLong:
      return "I64";
    case torch::kInt:
      return "I32";
    case torch::kShort:
      return "I16";
    case torch::kChar:
      return "I8";
    case torch::kByte:
      return "U8";
    case torch::kBool:
      return "BOOL";
    default:
      return "";
  }
}

namespace {

bool ScalarTypeOf(const std::string& dtype, torch::ScalarType* type) {
  static const std::pair<const char*, torch::ScalarType> kTypes[] = {
      {"F32", torch::kFloat},     {"F64", torch::kDouble}, {"F16", torch::kHalf},
      {"BF16", torch::kBFloat16}, {"I64", torch::kLong},   {"I32", torch::kInt},
      {"I16", torch::kShort},     {"I8", torch::kChar},    {"U8", torch::kByte},
      {"BOOL", torch::kBool}};
  for (const auto& [name, t] : kTypes) {
    if (dtype == name) {
      *type = t;
      return true;
    }
  }
  return false;
}

}  // namespace

TensorBytes ToTensorBytes(const torch::Tensor& tensor) {
  torch::Tensor dense = tensor.detach().to(torch::kCPU).contiguous();
  TensorBytes t;
  t.dtype = DtypeName(dense.scalar_type());
  t.shape.assign(dense.sizes().begin(), dense.sizes().end());
  t.data.assign(static_cast<const char*>(dense.data_ptr()), dense.numel() * dense.element_size());
  return t;
}

Result<torch::Tensor> FromTensorBytes(const TensorBytes& bytes, const std::string& what) {
  torch::ScalarType type;
  if (!ScalarTypeOf(bytes.dtype, &type)) {
    return InvalidArgumentError(what + ": unsupported dtype '" + bytes.dtype + "'");
  }
  torch::Tensor t = torch::empty(bytes.shape, torch::TensorOptions().dtype(type));
  if (static_cast<size_t>(t.numel() * t.element_size()) != bytes.data.size()) {
    return InvalidArgumentError(what + ": " + std::to_string(bytes.data.size()) +
                                " bytes do not fit its shape and dtype");
  }
  if (!bytes.data.empty()) std::memcpy(t.data_ptr(), bytes.data.data(), bytes.data.size());
  return t;
}

Status LoadStateDict(torch::nn::Module& module, const SafetensorsFile& file) {
  torch::NoGradGuard no_grad;
  std::vector<std::pair<torch::Tensor, torch::Tensor>>
      copies;  // target, source: applied once all check out
  std::set<std::string> used;
  auto check = [&](const std::string& name, const torch::Tensor& target) -> Status {
    auto it = file.tensors.find(name);
    if (it == file.tensors.end())
      return InvalidArgumentError("weights: missing tensor '" + name + "'");
    const TensorBytes& t = it->second;
    if (t.dtype != DtypeName(target.scalar_type())) {
      return InvalidArgumentError("weights: tensor '" + name + "' is " + t.dtype +
                                  ", the model wants " + DtypeName(target.scalar_type()));
    }
    if (std::vector<int64_t>(target.sizes().begin(), target.sizes().end()) != t.shape) {
      return InvalidArgumentError("weights: tensor '" + name +
                                  "' has another shape than the model's");
    }
    REEL_ASSIGN_OR_RETURN(torch::Tensor source,
                          FromTensorBytes(t, "weights: tensor '" + name + "'"));
    copies.emplace_back(target, std::move(source));
    used.insert(name);
    return Status::Ok();
  };
  for (const auto& p : module.named_parameters(/*recurse=*/true))
    REEL_RETURN_IF_ERROR(check(p.key(), p.value()));
  for (const auto& b : module.named_buffers(/*recurse=*/true))
    REEL_RETURN_IF_ERROR(check(b.key(), b.value()));
  for (const auto& [name, t] : file.tensors) {
    if (!used.count(name)) return InvalidArgumentError("weights: unexpected tensor '" + name + "'");
  }
  for (auto& [target, source] : copies) target.copy_(source);
  return Status::Ok();
}

SafetensorsFile SaveStateDict(const torch::nn::Module& module) {
  SafetensorsFile file;
  for (const auto& p : module.named_parameters(true))
    file.tensors[p.key()] = ToTensorBytes(p.value());
  for (const auto& b : module.named_buffers(true)) file.tensors[b.key()] = ToTensorBytes(b.value());
  return file;
}

}  // namespace reel::models
