#include "train/amp.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace reel::train {

// LibTorch 2.4 replaced the CUDA-only autocast switches with per-device ones.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define REEL_AUTOCAST_PER_DEVICE 1
#endif

AutocastGuard::AutocastGuard(bool enabled, torch::ScalarType dtype) : enabled_(enabled) {
  if (!enabled_) return;
#ifdef REEL_AUTOCAST_PER_DEVICE
  previous_ = at::autocast::is_autocast_enabled(at::kCUDA);
  previous_dtype_ = at::autocast::get_autocast_dtype(at::kCUDA);
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, dtype);
#else
  previous_ = at::autocast::is_enabled();
  previous_dtype_ = at::autocast::get_autocast_gpu_dtype();
  at::autocast::set_enabled(true);
  at::autocast::set_autocast_gpu_dtype(dtype);
#endif
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!enabled_) return;
  // The weight casts are cached for one forward; drop them when the outermost scope ends.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#ifdef REEL_AUTOCAST_PER_DEVICE
  at::autocast::set_autocast_enabled(at::kCUDA, previous_);
  at::autocast::set_autocast_dtype(at::kCUDA, previous_dtype_);
#else
  at::autocast::set_enabled(previous_);
  at::autocast::set_autocast_gpu_dtype(previous_dtype_);
#endif
}

GradScaler::GradScaler(bool enabled, double growth, double backoff, int64_t growth_interval)
    : enabled_(enabled), growth_(growth), backoff_(backoff), growth_interval_(growth_interval) {}

torch::Tensor GradScaler::ScaleLoss(const torch::Tensor& loss) const {
  return enabled_ ? loss * state_.scale : loss;
}

bool GradScaler::Unscale(const std::vector<torch::Tensor>& parameters) {
  if (!enabled_) return true;
  torch::NoGradGuard no_grad;
  const double inverse = 1.0 / state_.scale;
  torch::Tensor bad;  // one device-side flag, read once: no host sync per gradient
  for (const auto& p : parameters) {
    const torch::Tensor& g = p.grad();  // a handle: mul_ below still scales the gradient
    if (!g.defined()) continue;
    torch::Tensor flag = g.isfinite().logical_not().any();
    bad = bad.defined() ? bad.logical_or(flag) : flag;
    g.mul_(inverse);
  }
  return !bad.defined() || !bad.item<bool>();
}

void GradScaler::Update(bool finite) {
  if (!enabled_) return;
  if (!finite) {
    state_.scale *= backoff_;
    state_.good_steps = 0;
  } else if (++state_.good_steps >= growth_interval_) {
    state_.scale *= growth_;
    state_.good_steps = 0;
  }
}

}  // namespace reel::train
