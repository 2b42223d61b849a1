#include "kernels/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tokamak::kernels {
namespace {

// YaRN: the dimension index at which a pair completes n_rot rotations over the
// original context (ggml's ggml_rope_yarn_corr_dim).
float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2.0f * std::numbers::pi_v<float>)) /
         (2.0f * std::log(base));
}

float yarn_ramp(float low, float high, int i0) {
  const float y = (static_cast<float>(i0) / 2.0f - low) / std::max(0.001f, high - low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

}  // namespace

void rope_cache(const RopeParams& p, int32_t pos, float* cos_sin) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_dims));
  float corr_low = 0.0f, corr_high = 0.0f;
  if (p.ext_factor != 0.0f) {
    corr_low = std::max(0.0f, std::floor(corr_dim(p.n_dims, p.n_ctx_orig, p.beta_fast, p.freq_base)));
    corr_high = std::min(static_cast<float>(p.n_dims - 1),
                         std::ceil(corr_dim(p.n_dims, p.n_ctx_orig, p.beta_slow, p.freq_base)));
  }
  // The angle is built by repeated multiplication, as ggml does, so the
  // rounding matches llama.cpp's.
  float theta_base = static_cast<float>(pos);
  for (int i0 = 0; i0 < p.n_dims; i0 += 2) {
    const float ff = p.freq_factors != nullptr ? p.freq_factors[i0 / 2] : 1.0f;
    const float theta_extrap = theta_base / ff;
    const float theta_interp = p.freq_scale * theta_extrap;
    float theta = theta_interp;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      const float mix = yarn_ramp(corr_low, corr_high, i0) * p.ext_factor;
      theta = theta_interp * (1.0f - mix) + theta_extrap * mix;
      mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    cos_sin[i0] = std::cos(theta) * mscale;
    cos_sin[i0 + 1] = std::sin(theta) * mscale;
    theta_base *= theta_scale;
  }
}

void rope_apply(const RopeParams& p, const float* cos_sin, float* x, int n_heads, int head_dim) {
  const int half = p.n_dims / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      // NORM rotates (2i, 2i+1); NEOX rotates (i, i + n_dims/2).
      float& a = p.style == RopeStyle::Norm ? v[2 * i] : v[i];
      float& b = p.style == RopeStyle::Norm ? v[2 * i + 1] : v[i + half];
      const float x0 = a, x1 = b;
      a = x0 * c - x1 * s;
      b = x0 * s + x1 * c;
    }
  }
}

}  // namespace tokamak::kernels
