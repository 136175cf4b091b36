#include "train/optimizer.h"

#include <map>
#include <set>
#include <sstream>
#include <type_traits>
#include <unordered_map>

#include "models/state_dict.h"

namespace reel::train {
namespace {

// LibTorch keys optimiser state by the parameter's TensorImpl: as its address printed in 1.x,
// as the pointer itself in later releases.
using StateMap = std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>;
using StateKeyType = typename StateMap::key_type;

template <typename Key>
Key StateKeyOf(const torch::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream address;
    address << p.unsafeGetTensorImpl();
    return address.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

StateKeyType StateKey(const torch::Tensor& p) { return StateKeyOf<StateKeyType>(p); }

std::unordered_map<const void*, std::string> ParameterNames(const torch::nn::Module& model) {
  std::unordered_map<const void*, std::string> names;
  for (const auto& p : model.named_parameters(true))
    names[p.value().unsafeGetTensorImpl()] = p.key();
  return names;
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(torch::nn::Module& model,
                                                       const OptimizerConfig& c) {
  return MakeOptimizer(model.parameters(true), c);
}

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const std::vector<torch::Tensor>& parameters,
                                                       const OptimizerConfig& c) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& p : parameters) {
    if (!p.requires_grad()) continue;
    (c.decay_norm_and_bias || p.dim() > 1 ? decay : no_decay).push_back(p);
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (c.kind == OptimizerKind::kSgd) {
    auto options = [&](double wd) {
      return std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(c.lr)
                                                            .momentum(c.momentum)
                                                            .nesterov(c.nesterov)
                                                            .weight_decay(wd));
    };
    groups.emplace_back(decay, options(c.weight_decay));
    if (!no_decay.empty()) groups.emplace_back(no_decay, options(0));
    return std::make_unique<torch::optim::SGD>(std::move(groups), torch::optim::SGDOptions(c.lr));
  }
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(c.lr).betas({c.beta1, c.beta2}).eps(c.eps).weight_decay(wd));
  };
  groups.emplace_back(decay, options(c.weight_decay));
  if (!no_decay.empty()) groups.emplace_back(no_decay, options(0));
  return std::make_unique<torch::optim::AdamW>(std::move(groups), torch::optim::AdamWOptions(c.lr));
}

void SetLearningRate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

void SaveOptimizerState(const torch::optim::Optimizer& optimizer, const torch::nn::Module& model,
                        const std::string& prefix, models::SafetensorsFile* out) {
  auto names = ParameterNames(model);
  const auto& state = optimizer.state();
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      auto it = state.find(StateKey(p));
      if (it == state.end()) continue;  // no step taken for this parameter yet
      const std::string base = prefix + names.at(p.unsafeGetTensorImpl()) + ".";
      if (auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(it->second.get())) {
        if (sgd->momentum_buffer().defined()) {
          out->tensors[base + "momentum_buffer"] = models::ToTensorBytes(sgd->momentum_buffer());
        }
      } else if (auto* adam =
                     dynamic_cast<const torch::optim::AdamWParamState*>(it->second.get())) {
        out->tensors[base + "step"] =
            models::ToTensorBytes(torch::tensor(adam->step(), torch::kLong));
        out->tensors[base + "exp_avg"] = models::ToTensorBytes(adam->exp_avg());
        out->tensors[base + "exp_avg_sq"] = models::ToTensorBytes(adam->exp_avg_sq());
      }
    }
  }
}

Status LoadOptimizerState(torch::optim::Optimizer& optimizer, const torch::nn::Module& model,
                          const std::string& prefix, const models::SafetensorsFile& file) {
  auto names = ParameterNames(model);
  bool sgd = dynamic_cast<torch::optim::SGD*>(&optimizer) != nullptr;
  std::set<std::string> used;
  auto tensor_for = [&](const std::string& key,
                        const torch::Tensor& like) -> Result<torch::Tensor> {
    auto it = file.tensors.find(key);
    if (it == file.tensors.end())
      return InvalidArgumentError("optimizer state: missing tensor '" + key + "'");
    REEL_ASSIGN_OR_RETURN(torch::Tensor t,
                          models::FromTensorBytes(it->second, "optimizer state '" + key + "'"));
    if (like.defined() && (t.sizes() != like.sizes() || t.scalar_type() != like.scalar_type())) {
      return InvalidArgumentError("optimizer state: tensor '" + key +
                                  "' does not match its parameter");
    }
    used.insert(key);
    return like.defined() ? t.to(like.device()) : t;
  };
  // Build the whole new state first so that a bad file leaves the optimiser untouched.
  std::vector<std::pair<StateKeyType, std::unique_ptr<torch::optim::OptimizerParamState>>> fresh;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      const std::string base = prefix + names.at(p.unsafeGetTensorImpl()) + ".";
      if (sgd) {
        if (!file.tensors.count(base + "momentum_buffer")) continue;
        REEL_ASSIGN_OR_RETURN(torch::Tensor buffer, tensor_for(base + "momentum_buffer", p));
        auto s = std::make_unique<torch::optim::SGDParamState>();
        s->momentum_buffer(buffer);
        fresh.emplace_back(StateKey(p), std::move(s));
      } else {
        if (!file.tensors.count(base + "step")) continue;
        REEL_ASSIGN_OR_RETURN(torch::Tensor step, tensor_for(base + "step", torch::Tensor()));
        if (step.numel() != 1 || step.scalar_type() != torch::kLong) {
          return InvalidArgumentError("optimizer state: tensor '" + base + "step' must be one I64");
        }
        REEL_ASSIGN_OR_RETURN(torch::Tensor exp_avg, tensor_for(base + "exp_avg", p));
        REEL_ASSIGN_OR_RETURN(torch::Tensor exp_avg_sq, tensor_for(base + "exp_avg_sq", p));
        auto s = std::make_unique<torch::optim::AdamWParamState>();
        s->step(step.item<int64_t>());
        s->exp_avg(exp_avg);
        s->exp_avg_sq(exp_avg_sq);
        fresh.emplace_back(StateKey(p), std::move(s));
      }
    }
  }
  std::set<std::string> all_names;
  for (const auto& [impl, name] : names) all_names.insert(prefix + name);
  auto of_the_model = [&](const std::string& key) {  // "<prefix><param>.<field>"
    const size_t dot = key.rfind('.');
    return dot != std::string::npos && all_names.count(key.substr(0, dot)) > 0;
  };
  for (const auto& [name, t] : file.tensors) {
    if (name.compare(0, prefix.size(), prefix) == 0 && !used.count(name) && !of_the_model(name)) {
      return InvalidArgumentError("optimizer state: tensor '" + name + "' belongs to no parameter");
    }
  }
  auto& state = optimizer.state();
  state.clear();
  for (auto& [key, s] : fresh) state[key] = std::move(s);
  return Status::Ok();
}

}  // namespace reel::train
