// Mixed precision: an autocast scope for CUDA forwards and a dynamic loss scaler for fp16.
//
// GradScaler follows torch.cuda.amp.GradScaler's rules: the loss is multiplied by `scale`
// before backward; before the optimiser step the gradients are divided by it and checked; a
// step whose gradients hold inf or NaN is skipped and the scale multiplied by `backoff`; after
// `growth_interval` good steps in a row the scale is multiplied by `growth`. The check is
// written with plain tensor ops, so it runs (and is tested) on the CPU as well.
// Thread-safety: both belong to the training thread.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace reel::train {

// Turns CUDA autocast on for its lifetime (no effect when `enabled` is false).
class AutocastGuard {
 public:
  AutocastGuard(bool enabled, torch::ScalarType dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool enabled_;
  bool previous_ = false;
  torch::ScalarType previous_dtype_ = torch::kHalf;
};

struct GradScalerState {
  double scale = 65536.0;
  int64_t good_steps = 0;  // steps without inf/NaN since the last change of scale
};

class GradScaler {
 public:
  explicit GradScaler(bool enabled, double growth = 2.0, double backoff = 0.5,
                      int64_t growth_interval = 2000);

  bool enabled() const { return enabled_; }
  torch::Tensor ScaleLoss(const torch::Tensor& loss) const;
  // Divides the gradients by the scale; false when any of them holds inf or NaN (skip the step).
  bool Unscale(const std::vector<torch::Tensor>& parameters);
  // Adjusts the scale after a step, given what Unscale found.
  void Update(bool finite);

  GradScalerState state() const { return state_; }
  void set_state(const GradScalerState& state) { state_ = state; }

 private:
  bool enabled_;
  double growth_, backoff_;
  int64_t growth_interval_;
  GradScalerState state_;
};

}  // namespace reel::train
