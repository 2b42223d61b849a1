// Internal to the AVX2 kernel files: Cephes' expf on 8 lanes, the one
// exponential of the AVX2 attention (attention_avx2_ops.h) and of swiglu
// (ops_avx2.cpp). Include inside a target region that has at least AVX2, in
// an anonymous namespace, after exp_cephes.h (outside the region): each file
// then keeps its own copy, compiled for its region (one inline function
// shared by regions of different targets could link to the wider one's code).
#pragma once

// 2^n * p(r), x = n ln2 + r, |r| <= ln2 / 2; about 1 ulp. Below ln(FLT_MIN)
// the result is 0; above 88.38 it stays e^88.38.
inline __m256 exp_avx2(__m256 x) {
  namespace c = cephes_exp;
  const __m256 lo = _mm256_set1_ps(c::kMin);
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(c::kMax));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(c::kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(c::kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(c::kLn2Lo), r);
  __m256 y = _mm256_set1_ps(c::kPoly[0]);
#pragma GCC unroll 8
  for (size_t i = 1; i < std::size(c::kPoly); ++i) y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(c::kPoly[i]));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(under, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}
