// Element-wise and per-row kernels of the transformer block (scalar references).
#pragma once

#include <cstdint>

namespace tokamak::kernels {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], over one row of n. The sum of
// squares is accumulated in double, as ggml does. out may alias x.
void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps);

// Rotates `n_heads` heads of `head_dim` values in place for position `pos`,
// GGML's NORM layout (adjacent pairs (2i, 2i+1), as llama / llama2.c), over
// the first `rope_dim` dims of each head. theta_i = pos * base^(-2i/rope_dim),
// computed by repeated multiplication as ggml does so that results match it.
void rope_norm(float* x, int n_heads, int head_dim, int rope_dim, int32_t pos, float freq_base);

// gate[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + e^-x).
void swiglu(float* gate, const float* up, int64_t n);

// In-place softmax of x[0..n) (max subtracted; sum accumulated in double).
void softmax(float* x, int64_t n);

}  // namespace tokamak::kernels
