// attention_chunk with AVX2 + FMA + F16C: 8 lanes; head_dim a multiple of 8.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "kernels/attention.h"
#include "kernels/isa.h"
#include "kernels/kv_format.h"

#if TOKAMAK_HAVE_X86_SIMD
TOKAMAK_TARGET_REGION_AVX2
#include "kernels/attention_impl.h"

namespace tokamak::kernels {
namespace {

struct Avx2Ops {
  static constexpr int kWidth = 8;

  static float reduce_add(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }

  // Cephes' expf: 2^n * p(r), x = n ln2 + r, |r| <= ln2 / 2; about 1 ulp.
  // Below ln(FLT_MIN) the result is 0.
  static __m256 exp(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.33654f);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(88.37626f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
  }

  static void store_q4(float* at, __m256i q, __m256i eight, __m256 scale) {
    _mm256_storeu_ps(at, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, eight)), scale));
  }

  static void dequant_row(KvType t, const uint8_t* row, int d, float* dst) {
    switch (t) {
      case KvType::F32:
        for (int c = 0; c < d; c += 8)
          _mm256_storeu_ps(dst + c, _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c));
        return;
      case KvType::F16:
        for (int c = 0; c < d; c += 8) {
          _mm256_storeu_ps(dst + c, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c))));
        }
        return;
      case KvType::BF16:
        for (int c = 0; c < d; c += 8) {
          const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
          _mm256_storeu_ps(dst + c, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
        }
        return;
      case KvType::Q8: {
        float scale;
        std::memcpy(&scale, row + d, sizeof(scale));
        const __m256 vs = _mm256_set1_ps(scale);
        for (int c = 0; c < d; c += 8) {
          const __m256i w = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + c)));
          _mm256_storeu_ps(dst + c, _mm256_mul_ps(_mm256_cvtepi32_ps(w), vs));
        }
        return;
      }
      case KvType::Q4: {
        if (d % 32 != 0) {
          dequantize_kv_row(t, row, d, dst);
          return;
        }
        const __m256i mask = _mm256_set1_epi32(0xf);
        const __m256i eight = _mm256_set1_epi32(8);
        for (int k = 0; k < d / 32; ++k) {
          uint16_t scale_h;
          std::memcpy(&scale_h, row + d / 2 + 2 * k, 2);
          const __m256 vs = _mm256_set1_ps(fp16_to_fp32(scale_h));
          const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16 * k));
          const __m256i w0 = _mm256_cvtepu8_epi32(bytes);
          const __m256i w1 = _mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8));
          float* o = dst + 32 * k;
          store_q4(o, _mm256_and_si256(w0, mask), eight, vs);
          store_q4(o + 8, _mm256_and_si256(w1, mask), eight, vs);
          store_q4(o + 16, _mm256_srli_epi32(w0, 4), eight, vs);
          store_q4(o + 24, _mm256_srli_epi32(w1, 4), eight, vs);
        }
        return;
      }
    }
  }

  static float dot(const float* a, const float* b, int d) {
    __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b));
    for (int c = 8; c < d; c += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + c), _mm256_loadu_ps(b + c), acc);
    return reduce_add(acc);
  }
  static float exp1(float x) { return _mm256_cvtss_f32(exp(_mm256_set1_ps(x))); }
  static void exp_shift(float* s, int n, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    for (int j = 0; j < n; j += 8) _mm256_storeu_ps(s + j, exp(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm)));
  }
  static float sum(const float* s, int n) {
    __m256 acc = _mm256_loadu_ps(s);
    for (int j = 8; j < n; j += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(s + j));
    return reduce_add(acc);
  }
  static void axpy_tile(float* acc, float c, const float* p, const float* vt, int n, int d) {
    const __m256 vc = _mm256_set1_ps(c);
    for (int i = 0; i < d; i += 8) {
      __m256 a = _mm256_mul_ps(_mm256_loadu_ps(acc + i), vc);
      for (int j = 0; j < n; ++j) {
        a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(vt + static_cast<int64_t>(j) * d + i), a);
      }
      _mm256_storeu_ps(acc + i, a);
    }
  }
};

}  // namespace

void attention_chunk_avx2(const AttentionParams& dims, const KvView& kv, const QueryTile& tile, int64_t chunk,
                          float* partial) {
  detail::chunk_kernel<Avx2Ops>(dims, kv, tile, chunk, partial);
}

}  // namespace tokamak::kernels
TOKAMAK_TARGET_REGION_END
#endif
