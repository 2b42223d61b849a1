// Rotary position embeddings, as ggml computes them (so logits match
// llama.cpp): NORM (adjacent pairs, llama) and NEOX (halves, qwen2/gpt-neox)
// layouts, partial rotation, linear and YaRN context scaling, and per-pair
// frequency factors (Llama 3's rope_freqs).
#pragma once

#include <cstdint>

namespace tokamak::kernels {

enum class RopeStyle { Norm, Neox };

struct RopeParams {
  RopeStyle style = RopeStyle::Norm;
  int32_t n_dims = 0;            // rotated dims per head (<= head_dim, even)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;       // 1 / linear scaling factor
  float ext_factor = 0.0f;       // YaRN ramp mix; 0 = off
  float attn_factor = 1.0f;      // YaRN magnitude scale
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int32_t n_ctx_orig = 0;        // training context before scaling (YaRN)
  const float* freq_factors = nullptr;  // [n_dims / 2] divisors of each pair's frequency, or null
};

// cos_sin[2i], cos_sin[2i+1] = cos, sin of pair i's angle at `pos` (n_dims values).
void rope_cache(const RopeParams& p, int32_t pos, float* cos_sin);

// Rotates the first n_dims of each of `n_heads` heads of `head_dim` values in place.
void rope_apply(const RopeParams& p, const float* cos_sin, float* x, int n_heads, int head_dim);

}  // namespace tokamak::kernels
