// Mixed precision: an autocast scope for CUDA forwards (fp16 or bf16) and CPU forwards (bf16),
// and a dynamic loss scaler for fp16.
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

// Turns autocast on for `device`'s forwards (CUDA or CPU) for its lifetime (no effect when
// `enabled` is false).
class AutocastGuard {
 public:
  AutocastGuard(bool enabled, torch::ScalarType dtype,
                torch::DeviceType device = torch::DeviceType::CUDA);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool enabled_;
  torch::DeviceType device_;
  bool previous_ = false;
  torch::ScalarType previous_dtype_ = torch::kHalf;
};

// Whether this CPU computes bf16 dot products in hardware (AVX512-BF16 or AMX-BF16), where
// oneDNN's bf16 convolutions run about 2.6x faster than fp32 (measured on the main job's model,
// AMD EPYC Zen 4). Without them bf16 is emulated and slower than fp32.
bool CpuHasNativeBf16();

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
