#include "models/batch_norm.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>

namespace reel::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A [N, C, S] view of a contiguous batch: channel c of sample n is S floats at (n * C + c) * S.
struct Layout {
  int64_t n, c, s;
  const float* Row(const float* base, int64_t sample, int64_t channel) const {
    return base + (sample * c + channel) * s;
  }
  float* Row(float* base, int64_t sample, int64_t channel) const {
    return base + (sample * c + channel) * s;
  }
  double count() const { return static_cast<double>(n * s); }
};

// Per-channel affine map y = x * scale + shift (then max(y, 0) with a ReLU).
struct Affine {
  float scale, shift;
};

bool HasAvx2Fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

// Lane sums are moved into doubles every kFlush vectors, so a long channel loses no precision.
constexpr int64_t kFlush = 512;

__attribute__((target("avx2,fma"))) double HorizontalSum(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  double total = 0;
  for (float lane : lanes) total += lane;
  return total;
}

// Mean and biased variance of channel c: sums of (x - k) and (x - k)^2, k its first value.
__attribute__((target("avx2,fma"))) void ChannelStats(const float* x, const Layout& l, int64_t c,
                                                      double* mean, double* var) {
  const float k = *l.Row(x, 0, c);
  const __m256 shift = _mm256_set1_ps(k);
  double sum = 0, squares = 0;
  for (int64_t n = 0; n < l.n; ++n) {
    const float* row = l.Row(x, n, c);
    int64_t i = 0;
    while (i + 8 <= l.s) {
      __m256 s = _mm256_setzero_ps(), q = _mm256_setzero_ps();
      for (int64_t v = 0; v < kFlush && i + 8 <= l.s; ++v, i += 8) {
        const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(row + i), shift);
        s = _mm256_add_ps(s, d);
        q = _mm256_fmadd_ps(d, d, q);
      }
      sum += HorizontalSum(s);
      squares += HorizontalSum(q);
    }
    for (; i < l.s; ++i) {
      const double d = static_cast<double>(row[i]) - k;
      sum += d;
      squares += d * d;
    }
  }
  const double shifted_mean = sum / l.count();
  *mean = k + shifted_mean;
  *var = std::max(0.0, squares / l.count() - shifted_mean * shifted_mean);
}

__attribute__((target("avx2,fma"))) void ChannelApply(const float* x, float* y, const Layout& l,
                                                      int64_t c, Affine a, bool relu) {
  const __m256 scale = _mm256_set1_ps(a.scale), shift = _mm256_set1_ps(a.shift);
  const __m256 floor = _mm256_set1_ps(relu ? 0.f : -INFINITY);
  for (int64_t n = 0; n < l.n; ++n) {
    const float* in = l.Row(x, n, c);
    float* out = l.Row(y, n, c);
    int64_t i = 0;
    for (; i + 8 <= l.s; i += 8) {
      const __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(in + i), scale, shift);
      _mm256_storeu_ps(out + i, _mm256_max_ps(v, floor));
    }
    for (; i < l.s; ++i) {
      const float v = std::fma(in[i], a.scale, a.shift);
      out[i] = relu ? std::max(v, 0.f) : v;
    }
  }
}

// The gradient reaching the normalised value: gy where the ReLU let the value through.
struct GradSums {
  double g = 0;          // sum of g
  double g_centred = 0;  // sum of g * (x - mean)
};

__attribute__((target("avx2,fma"))) GradSums ChannelGradSums(const float* x, const float* gy,
                                                             const Layout& l, int64_t c, Affine a,
                                                             float mean, bool relu) {
  const __m256 scale = _mm256_set1_ps(a.scale), shift = _mm256_set1_ps(a.shift);
  const __m256 m = _mm256_set1_ps(mean), zero = _mm256_setzero_ps();
  GradSums sums;
  for (int64_t n = 0; n < l.n; ++n) {
    const float* in = l.Row(x, n, c);
    const float* grad = l.Row(gy, n, c);
    int64_t i = 0;
    while (i + 8 <= l.s) {
      __m256 s = zero, sc = zero;
      for (int64_t v = 0; v < kFlush && i + 8 <= l.s; ++v, i += 8) {
        const __m256 xv = _mm256_loadu_ps(in + i);
        __m256 g = _mm256_loadu_ps(grad + i);
        if (relu) {
          const __m256 y = _mm256_fmadd_ps(xv, scale, shift);
          g = _mm256_and_ps(g, _mm256_cmp_ps(y, zero, _CMP_GT_OQ));
        }
        s = _mm256_add_ps(s, g);
        sc = _mm256_fmadd_ps(g, _mm256_sub_ps(xv, m), sc);
      }
      sums.g += HorizontalSum(s);
      sums.g_centred += HorizontalSum(sc);
    }
    for (; i < l.s; ++i) {
      const float g = (!relu || std::fma(in[i], a.scale, a.shift) > 0.f) ? grad[i] : 0.f;
      sums.g += g;
      sums.g_centred += static_cast<double>(g) * (in[i] - mean);
    }
  }
  return sums;
}

// dx = scale * (g - mean(g) - (x - mean) * invstd^2 * mean(g * (x - mean))).
__attribute__((target("avx2,fma"))) void ChannelGradInput(const float* x, const float* gy,
                                                          float* gx, const Layout& l, int64_t c,
                                                          Affine a, float mean, float invstd,
                                                          GradSums sums, bool relu) {
  const float mean_g = static_cast<float>(sums.g / l.count());
  const float slope = static_cast<float>(sums.g_centred / l.count()) * invstd * invstd;
  const __m256 scale = _mm256_set1_ps(a.scale), shift = _mm256_set1_ps(a.shift);
  const __m256 m = _mm256_set1_ps(mean), zero = _mm256_setzero_ps();
  const __m256 vmean_g = _mm256_set1_ps(mean_g), vslope = _mm256_set1_ps(slope);
  for (int64_t n = 0; n < l.n; ++n) {
    const float* in = l.Row(x, n, c);
    const float* grad = l.Row(gy, n, c);
    float* out = l.Row(gx, n, c);
    int64_t i = 0;
    for (; i + 8 <= l.s; i += 8) {
      const __m256 xv = _mm256_loadu_ps(in + i);
      __m256 g = _mm256_loadu_ps(grad + i);
      if (relu) {
        const __m256 y = _mm256_fmadd_ps(xv, scale, shift);
        g = _mm256_and_ps(g, _mm256_cmp_ps(y, zero, _CMP_GT_OQ));
      }
      const __m256 centred = _mm256_sub_ps(xv, m);
      const __m256 inner = _mm256_fnmadd_ps(centred, vslope, _mm256_sub_ps(g, vmean_g));
      _mm256_storeu_ps(out + i, _mm256_mul_ps(scale, inner));
    }
    for (; i < l.s; ++i) {
      const float g = (!relu || std::fma(in[i], a.scale, a.shift) > 0.f) ? grad[i] : 0.f;
      out[i] = a.scale * (g - mean_g - (in[i] - mean) * slope);
    }
  }
}

Layout LayoutOf(const torch::Tensor& x) {
  const int64_t n = x.size(0), c = x.size(1);
  return {n, c, n * c == 0 ? 0 : x.numel() / (n * c)};
}

// Training forward and backward, for contiguous float32 CPU batches (FusedBatchNormApplies).
class FusedBatchNormFunction : public torch::autograd::Function<FusedBatchNormFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               torch::Tensor running_mean, torch::Tensor running_var,
                               double momentum, double eps, bool relu) {
    const Layout l = LayoutOf(x);
    torch::Tensor mean = torch::empty({l.c}, x.options());
    torch::Tensor invstd = torch::empty({l.c}, x.options());
    torch::Tensor var = torch::empty({l.c}, x.options());
    torch::Tensor y = torch::empty_like(x);
    const float* px = x.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const float *w = weight.data_ptr<float>(), *b = bias.data_ptr<float>();
    float *pm = mean.data_ptr<float>(), *pi = invstd.data_ptr<float>(), *pv = var.data_ptr<float>();
    at::parallel_for(0, l.c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        double m = 0, v = 0;
        ChannelStats(px, l, c, &m, &v);
        const double inv = 1.0 / std::sqrt(v + eps);
        const float scale = static_cast<float>(w[c] * inv);
        ChannelApply(px, py, l, c, {scale, static_cast<float>(b[c] - m * w[c] * inv)}, relu);
        pm[c] = static_cast<float>(m);
        pi[c] = static_cast<float>(inv);
        pv[c] = static_cast<float>(v);
      }
    });
    UpdateRunningStats(running_mean, running_var, mean, var, l.count(), momentum);
    ctx->save_for_backward({x, weight, bias, mean, invstd});
    ctx->saved_data["relu"] = relu;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[1], &bias = saved[2];
    const torch::Tensor &mean = saved[3], &invstd = saved[4];
    const bool relu = ctx->saved_data["relu"].toBool();
    const torch::Tensor gy = grad_outputs[0].contiguous();
    const Layout l = LayoutOf(x);
    torch::Tensor gx = torch::empty_like(x);
    torch::Tensor gw = torch::empty_like(weight), gb = torch::empty_like(bias);
    const float *px = x.data_ptr<float>(), *pg = gy.data_ptr<float>();
    const float *w = weight.data_ptr<float>(), *b = bias.data_ptr<float>();
    const float *pm = mean.data_ptr<float>(), *pi = invstd.data_ptr<float>();
    float *pgx = gx.data_ptr<float>(), *pgw = gw.data_ptr<float>(), *pgb = gb.data_ptr<float>();
    at::parallel_for(0, l.c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        const float scale = w[c] * pi[c];
        const Affine a{scale, b[c] - pm[c] * scale};
        const GradSums sums = ChannelGradSums(px, pg, l, c, a, pm[c], relu);
        ChannelGradInput(px, pg, pgx, l, c, a, pm[c], pi[c], sums, relu);
        pgw[c] = static_cast<float>(sums.g_centred * pi[c]);
        pgb[c] = static_cast<float>(sums.g);
      }
    });
    return {gx,
            gw,
            gb,
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }

 private:
  // As LibTorch: running = (1 - momentum) * running + momentum * batch, the variance unbiased.
  static void UpdateRunningStats(torch::Tensor& running_mean, torch::Tensor& running_var,
                                 const torch::Tensor& mean, const torch::Tensor& var, double count,
                                 double momentum) {
    torch::NoGradGuard no_grad;
    running_mean.mul_(1 - momentum).add_(mean, momentum);
    const double unbias = count > 1 ? count / (count - 1) : 1.0;
    running_var.mul_(1 - momentum).add_(var, momentum * unbias);
  }
};

}  // namespace

bool FusedBatchNormApplies(const torch::Tensor& x) {
  return HasAvx2Fma() && x.device().is_cpu() && x.scalar_type() == torch::kFloat && x.dim() >= 2 &&
         x.is_contiguous() && x.size(0) > 0 && x.numel() > 0;
}

BatchNormReluImpl::BatchNormReluImpl(BatchNormReluOptions options) : options_(options) {
  const int64_t f = options_.features;
  weight = register_parameter("weight", torch::ones({f}));
  bias = register_parameter("bias", torch::zeros({f}));
  running_mean = register_buffer("running_mean", torch::zeros({f}));
  running_var = register_buffer("running_var", torch::ones({f}));
  num_batches_tracked = register_buffer("num_batches_tracked", torch::zeros({}, torch::kLong));
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): by value, as every LibTorch module's
torch::Tensor BatchNormReluImpl::forward(torch::Tensor x) {
  if (is_training()) {
    torch::NoGradGuard no_grad;
    num_batches_tracked += 1;
  }
  const bool fused = is_training() && FusedBatchNormApplies(x) &&
                     weight.scalar_type() == torch::kFloat && x.size(1) == options_.features;
  if (fused) {
    // Named for profilers (bench/op_profile.h), as LibTorch's own operators are.
    RECORD_FUNCTION(options_.relu ? "reel::batch_norm_relu" : "reel::batch_norm",
                    std::vector<c10::IValue>({x}));
    return FusedBatchNormFunction::apply(x, weight, bias, running_mean, running_var,
                                         options_.momentum, options_.eps, options_.relu);
  }
  torch::Tensor y = torch::batch_norm(x, weight, bias, running_mean, running_var, is_training(),
                                      options_.momentum, options_.eps,
                                      /*cudnn_enabled=*/true);
  return options_.relu ? torch::relu_(y) : y;
}

}  // namespace reel::models
