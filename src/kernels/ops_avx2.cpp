// The element-wise kernels of ops.h with AVX2 + FMA, 8 lanes.
#include <cstdint>

#include "kernels/exp_cephes.h"
#include "kernels/isa.h"
#include "kernels/ops.h"

#if TOKAMAK_HAVE_X86_SIMD
#include <immintrin.h>

TOKAMAK_TARGET_REGION_AVX2
namespace tokamak::kernels {
namespace {

#include "kernels/exp_avx2.h"

// silu(g) * u, 8 lanes; lanes past n (mask 0) are neither read nor written.
inline __m256 swiglu8(__m256 g, __m256 u) {
  const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

}  // namespace

// The tail goes through the same lanes' arithmetic under a mask, so a value
// does not depend on where a range's split puts it (the pool splits a batch's
// gate rows by size).
void swiglu_avx2(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(gate + i, swiglu8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i == n) return;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)), lane);
  _mm256_maskstore_ps(gate + i, mask, swiglu8(_mm256_maskload_ps(gate + i, mask), _mm256_maskload_ps(up + i, mask)));
}

}  // namespace tokamak::kernels
TOKAMAK_TARGET_REGION_END
#endif
