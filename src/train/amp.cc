#include "train/amp.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace reel::train {

// LibTorch 2.4 replaced the CUDA-only autocast switches with per-device ones.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define REEL_AUTOCAST_PER_DEVICE 1
#endif

namespace {

// The autocast switches of one device type; LibTorch before 2.4 had a pair for CPU and one for
// CUDA ("gpu").
bool AutocastEnabled(torch::DeviceType device) {
#ifdef REEL_AUTOCAST_PER_DEVICE
  return at::autocast::is_autocast_enabled(device);
#else
  return device == torch::kCPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

torch::ScalarType AutocastDtype(torch::DeviceType device) {
#ifdef REEL_AUTOCAST_PER_DEVICE
  return at::autocast::get_autocast_dtype(device);
#else
  return device == torch::kCPU ? at::autocast::get_autocast_cpu_dtype()
                               : at::autocast::get_autocast_gpu_dtype();
#endif
}

void SetAutocast(torch::DeviceType device, bool enabled, torch::ScalarType dtype) {
#ifdef REEL_AUTOCAST_PER_DEVICE
  at::autocast::set_autocast_enabled(device, enabled);
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == torch::kCPU) {
    at::autocast::set_cpu_enabled(enabled);
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_enabled(enabled);
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
#endif
}

}  // namespace

AutocastGuard::AutocastGuard(bool enabled, torch::ScalarType dtype, torch::DeviceType device)
    : enabled_(enabled), device_(device) {
  if (!enabled_) return;
  previous_ = AutocastEnabled(device_);
  previous_dtype_ = AutocastDtype(device_);
  SetAutocast(device_, true, dtype);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!enabled_) return;
  // The weight casts are cached for one forward; drop them when the outermost scope ends.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  SetAutocast(device_, previous_, previous_dtype_);
}

bool CpuHasNativeBf16() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool amx_bf16 = (edx >> 22) & 1;
  const unsigned max_subleaf = eax;
  bool avx512_bf16 = false;
  if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) {
    avx512_bf16 = (eax >> 5) & 1;
  }
  // The OS must save the registers too (XCR0): opmask and ZMM state for AVX-512, tile state
  // for AMX.
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !((ecx >> 27) & 1)) return false;  // OSXSAVE
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool zmm_state = (xcr0_lo & 0xE6) == 0xE6;
  const bool tile_state = (xcr0_lo & 0x60000) == 0x60000;
  return (avx512_bf16 && zmm_state) || (amx_bf16 && tile_state);
#else
  return false;  // other architectures' bf16 units are not probed: fp32
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
