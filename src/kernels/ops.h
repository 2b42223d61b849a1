// Element-wise and per-row kernels of the transformer block (scalar references).
#pragma once

#include <cstdint>

namespace tokamak::kernels {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], over one row of n. The sum of
// squares is accumulated in double, as ggml does. out may alias x.
void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps);

// gate[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + e^-x).
void swiglu(float* gate, const float* up, int64_t n);

// In-place softmax of x[0..n) (max subtracted; sum accumulated in double).
void softmax(float* x, int64_t n);

}  // namespace tokamak::kernels
