// Element-wise and per-row kernels of the transformer block: scalar
// references, and SIMD variants where one pays (ops_avx2.cpp).
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace tokamak::kernels {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], over one row of n. The sum of
// squares is accumulated in double, as ggml does. out may alias x.
void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps);

// gate[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + e^-x), with `isa`'s
// variant: libm's expf on kScalar and kNeon, Cephes' expf (~1 ulp, 8 lanes)
// from AVX2 up. A decode step's 5,632 scalar expf of a TinyLlama layer took
// 14 us, ~2.5% of the step, with the other threads idle.
void swiglu(Isa isa, float* gate, const float* up, int64_t n);

// In-place softmax of x[0..n) (max subtracted; sum accumulated in double).
void softmax(float* x, int64_t n);

}  // namespace tokamak::kernels
