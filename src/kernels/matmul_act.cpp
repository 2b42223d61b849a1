#include "kernels/matmul_act.h"

#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/isa.h"
#include "kernels/quants_impl.h"

#if TOKAMAK_HAVE_X86_SIMD
#include <immintrin.h>
#endif

namespace tokamak::kernels {
namespace {

// The parts of a Q8_0 or Q8_K activation row (act_layout).
struct Q8Row {
  int8_t* qs;
  float* d;
  int16_t* sums;
};
Q8Row q8_row(std::byte* dst, const ActLayout& l) {
  return {reinterpret_cast<int8_t*>(dst), reinterpret_cast<float*>(dst + l.d_offset),
          reinterpret_cast<int16_t*>(dst + l.sums_offset)};
}

void quantize_q8_0(const float* x, int64_t k, const Q8Row& row) {
  auto [qs, d, sums] = row;
  for (int64_t b = 0; b < k / 32; ++b, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float a = std::fabs(x[j]);
      amax = a > amax ? a : amax;
    }
    d[b] = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = detail::nearest_int(x[j] * id);
      qs[32 * b + j] = static_cast<int8_t>(q);
      sum += q;
    }
    sums[b] = static_cast<int16_t>(sum);
  }
}

void quantize_q8_k(const float* x, int64_t k, const Q8Row& row) {
  auto [qs, d, bsums] = row;
  for (int64_t b = 0; b < k / 256; ++b) {
    BlockQ8_K blk;
    detail::quant_q8_k(x + 256 * b, &blk, 1);
    std::memcpy(qs + 256 * b, blk.qs, sizeof(blk.qs));
    std::memcpy(bsums + 16 * b, blk.bsums, sizeof(blk.bsums));
    d[b] = blk.d;
  }
}

}  // namespace

#if TOKAMAK_HAVE_X86_SIMD
TOKAMAK_TARGET_REGION_AVX2
namespace {

// The largest |x| of n floats (n a multiple of 8); a NaN never wins, as in
// the scalar loops' compares (vmaxps returns its second operand then).
inline float abs_max(const float* x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), m);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
}

// q = round-half-even(x * scale) of 32 floats (|q| <= 2^22: what cvtps does
// under the default rounding mode equals nearest_int), optionally capped at
// 127, stored as int8 at q; sums[0] and sums[1] get the int32 lanes whose
// totals are the sums of q 0..15 and 16..31.
template <bool kCap127>
inline void quantize32(const float* x, float scale, int8_t* q, __m256i sums[2]) {
  const __m256 s = _mm256_set1_ps(scale);
  __m256i v[4];
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), s));
    if constexpr (kCap127) v[i] = _mm256_min_epi32(v[i], _mm256_set1_epi32(127));
  }
  // The packs work per 128-bit lane: dword j of the result holds q 4j..4j+3 of
  // the order 0 4 1 5 2 6 3 7, which the permutation undoes.
  const __m256i p16 = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_permutevar8x32_epi32(p16, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  sums[0] = _mm256_add_epi32(v[0], v[1]);
  sums[1] = _mm256_add_epi32(v[2], v[3]);
}

inline int32_t sum8(__m256i v) {
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
  return _mm_cvtsi128_si32(_mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1)));
}

// fp32_to_fp16 of 8 floats: vcvtps2ph rounds to nearest even, to subnormals
// and to infinity exactly as fp32_to_fp16; only a NaN's payload would survive
// in it, so a NaN first becomes the quiet NaN of its sign, which it turns
// into fp32_to_fp16's sign | 0x7e00.
inline __m128i to_f16_8(__m256 v) {
  const __m256 sign = _mm256_set1_ps(-0.0f), qnan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
  const __m256 nan = _mm256_or_ps(_mm256_and_ps(v, sign), qnan);
  return _mm256_cvtps_ph(_mm256_blendv_ps(v, nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q)),
                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// fp16_to_fp32(fp32_to_fp16(x)) of 8 floats at a time. Returns how many
// elements it did (a multiple of 8); a prefill's activations pass through
// here once per matmul input, where the scalar loop was 4% of an F16 pp512.
int64_t round_f16_avx2(const float* x, float* out, int64_t k) {
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(to_f16_8(_mm256_loadu_ps(x + i))));
  return i;
}

// fp32_to_fp16(x) of 8 floats at a time (ActFormat::kF16); returns how many
// elements it did (a multiple of 8).
int64_t to_f16_avx2(const float* x, uint16_t* out, int64_t k) {
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), to_f16_8(_mm256_loadu_ps(x + i)));
  return i;
}

// bf16_to_fp32(fp32_to_bf16(x)) of 8 floats at a time, in integers as the
// scalar code: x + 0x7fff + (bit 16 of x), cut to the high half; a NaN keeps
// its high half with the quiet bit (0x00400000) set.
int64_t round_bf16_avx2(const float* x, float* out, int64_t k) {
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u)), one = _mm256_set1_epi32(1);
  const __m256i half = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x00400000);
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256i b = _mm256_castps_si256(v);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, 16), one);
    const __m256i rounded = _mm256_and_si256(_mm256_add_epi32(b, _mm256_add_epi32(half, odd)), high);
    const __m256i nan = _mm256_or_si256(_mm256_and_si256(b, high), quiet);
    const __m256 is_nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    _mm256_storeu_ps(out + i, _mm256_blendv_ps(_mm256_castsi256_ps(rounded), _mm256_castsi256_ps(nan), is_nan));
  }
  return i;
}

void quantize_q8_0_avx2(const float* x, int64_t k, const Q8Row& row) {
  auto [qs, d, sums] = row;
  for (int64_t b = 0; b < k / 32; ++b, x += 32) {
    const float amax = abs_max(x, 32);
    d[b] = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    __m256i s[2];
    quantize32<false>(x, id, qs + 32 * b, s);
    sums[b] = static_cast<int16_t>(sum8(_mm256_add_epi32(s[0], s[1])));
  }
}

void quantize_q8_k_avx2(const float* x, int64_t k, const Q8Row& row) {
  auto [qs, d, bsums] = row;
  for (int64_t b = 0; b < k / 256; ++b, x += 256) {
    const float amax = abs_max(x, 256);
    if (amax == 0.0f) continue;  // zeros, as quant_q8_k leaves the block (the row was cleared)
    // signed_absmax: the first value of that magnitude, with its sign.
    const __m256 target = _mm256_set1_ps(amax), sign = _mm256_set1_ps(-0.0f);
    float max = 0.0f;
    for (int i = 0; i < 256; i += 8) {
      const int hits = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), target, _CMP_EQ_OQ));
      if (hits != 0) {
        max = x[i + __builtin_ctz(static_cast<unsigned>(hits))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < 8; ++j) {  // 32 values: two sums of 16
      __m256i s[2];
      quantize32<true>(x + 32 * j, iscale, qs + 256 * b + 32 * j, s);
      bsums[16 * b + 2 * j] = static_cast<int16_t>(sum8(s[0]));
      bsums[16 * b + 2 * j + 1] = static_cast<int16_t>(sum8(s[1]));
    }
    d[b] = 1.0f / iscale;
  }
}

}  // namespace
TOKAMAK_TARGET_REGION_END
#endif

namespace {

// x rounded to f16 or bf16 precision, back in f32; from element `from` on (the
// vectorized versions do the rest).
void round_f16(const float* x, float* out, int64_t from, int64_t k) {
  for (int64_t i = from; i < k; ++i) out[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}
void round_bf16(const float* x, float* out, int64_t from, int64_t k) {
  for (int64_t i = from; i < k; ++i) out[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
}

// One row in format f; `vectorized`: through the AVX2 code.
void convert_row(ActFormat f, const float* x, std::byte* dst, int64_t k, bool vectorized) {
  const ActLayout l = act_layout(f, k);
  std::memset(dst, 0, l.row_bytes);  // the padding the kernels may read
  switch (f) {
    case ActFormat::kF32: std::memcpy(dst, x, static_cast<size_t>(k) * sizeof(float)); break;
#if TOKAMAK_HAVE_X86_SIMD
    case ActFormat::kF32RoundF16:
      round_f16(x, reinterpret_cast<float*>(dst), vectorized ? round_f16_avx2(x, reinterpret_cast<float*>(dst), k) : 0, k);
      break;
    case ActFormat::kF32RoundBF16:
      round_bf16(x, reinterpret_cast<float*>(dst), vectorized ? round_bf16_avx2(x, reinterpret_cast<float*>(dst), k) : 0, k);
      break;
#else
    case ActFormat::kF32RoundF16: round_f16(x, reinterpret_cast<float*>(dst), 0, k); break;
    case ActFormat::kF32RoundBF16: round_bf16(x, reinterpret_cast<float*>(dst), 0, k); break;
#endif
    case ActFormat::kBF16: {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < k; ++i) out[i] = fp32_to_bf16(x[i]);
      break;
    }
    case ActFormat::kF16: {
      auto* out = reinterpret_cast<uint16_t*>(dst);
#if TOKAMAK_HAVE_X86_SIMD
      const int64_t from = vectorized ? to_f16_avx2(x, out, k) : 0;
#else
      const int64_t from = 0;
#endif
      for (int64_t i = from; i < k; ++i) out[i] = fp32_to_fp16(x[i]);
      break;
    }
#if TOKAMAK_HAVE_X86_SIMD
    case ActFormat::kQ8_0: vectorized ? quantize_q8_0_avx2(x, k, q8_row(dst, l)) : quantize_q8_0(x, k, q8_row(dst, l)); break;
    case ActFormat::kQ8_K: vectorized ? quantize_q8_k_avx2(x, k, q8_row(dst, l)) : quantize_q8_k(x, k, q8_row(dst, l)); break;
#else
    case ActFormat::kQ8_0: (void)vectorized; quantize_q8_0(x, k, q8_row(dst, l)); break;
    case ActFormat::kQ8_K: quantize_q8_k(x, k, q8_row(dst, l)); break;
#endif
  }
}

}  // namespace

void quantize_act_row(ActFormat f, const float* x, std::byte* dst, int64_t k) {
  static const bool avx2 = isa_supported(Isa::kAvx2);
  convert_row(f, x, dst, k, avx2);
}

void quantize_act_row_scalar(ActFormat f, const float* x, std::byte* dst, int64_t k) { convert_row(f, x, dst, k, false); }

}  // namespace tokamak::kernels
