#include "kernels/ops.h"

#include <cmath>

namespace tokamak::kernels {

void swiglu_avx2(float* gate, const float* up, int64_t n);  // ops_avx2.cpp, x86-64 only

void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void swiglu(Isa isa, float* gate, const float* up, int64_t n) {
#if TOKAMAK_HAVE_X86_SIMD
  if (isa != Isa::kScalar && isa != Isa::kNeon) return swiglu_avx2(gate, up, n);
#endif
  (void)isa;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void softmax(float* x, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace tokamak::kernels
