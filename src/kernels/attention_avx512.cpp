// attention_chunk with AVX-512 (F, BW, VL, DQ): 16 lanes; head_dim a multiple of 16.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's avx512fintrin.h builds _mm512_undefined_* as `__m512 __Y = __Y;`,
// which -Wmaybe-uninitialized reports wherever such intrinsics are inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
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
TOKAMAK_TARGET_REGION_AVX512
#include "kernels/attention_impl.h"

namespace tokamak::kernels {
namespace {

struct Avx512Ops {
  static constexpr int kWidth = 16;

  static float reduce_add(__m512 v) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }

  // Cephes' expf as in the AVX2 file, 16 lanes.
  static __m512 exp(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.33654f);
    const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(88.37626f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(~under), _mm512_mul_ps(y, _mm512_castsi512_ps(e)));
  }

  static void store_q4(float* at, __m512i q, __m512i eight, __m512 scale) {
    _mm512_storeu_ps(at, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, eight)), scale));
  }

  static void dequant_row(KvType t, const uint8_t* row, int d, float* dst) {
    switch (t) {
      case KvType::F32:
        for (int c = 0; c < d; c += 16) {
          _mm512_storeu_ps(dst + c, _mm512_loadu_ps(reinterpret_cast<const float*>(row) + c));
        }
        return;
      case KvType::F16:
        for (int c = 0; c < d; c += 16) {
          _mm512_storeu_ps(dst + c, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c))));
        }
        return;
      case KvType::BF16:
        for (int c = 0; c < d; c += 16) {
          const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
          _mm512_storeu_ps(dst + c, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
        }
        return;
      case KvType::Q8: {
        float scale;
        std::memcpy(&scale, row + d, sizeof(scale));
        const __m512 vs = _mm512_set1_ps(scale);
        for (int c = 0; c < d; c += 16) {
          const __m512i w = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c)));
          _mm512_storeu_ps(dst + c, _mm512_mul_ps(_mm512_cvtepi32_ps(w), vs));
        }
        return;
      }
      case KvType::Q4: {
        if (d % 32 != 0) {
          dequantize_kv_row(t, row, d, dst);
          return;
        }
        const __m512i mask = _mm512_set1_epi32(0xf);
        const __m512i eight = _mm512_set1_epi32(8);
        for (int k = 0; k < d / 32; ++k) {
          uint16_t scale_h;
          std::memcpy(&scale_h, row + d / 2 + 2 * k, 2);
          const __m512 vs = _mm512_set1_ps(fp16_to_fp32(scale_h));
          const __m512i w = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16 * k)));
          store_q4(dst + 32 * k, _mm512_and_si512(w, mask), eight, vs);
          store_q4(dst + 32 * k + 16, _mm512_srli_epi32(w, 4), eight, vs);
        }
        return;
      }
    }
  }

  static float dot(const float* a, const float* b, int d) {
    __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(a), _mm512_loadu_ps(b));
    for (int c = 16; c < d; c += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + c), _mm512_loadu_ps(b + c), acc);
    return reduce_add(acc);
  }
  static float exp1(float x) { return _mm512_cvtss_f32(exp(_mm512_set1_ps(x))); }
  static void exp_shift(float* s, int n, float m) {
    const __m512 vm = _mm512_set1_ps(m);
    for (int j = 0; j < n; j += 16) _mm512_storeu_ps(s + j, exp(_mm512_sub_ps(_mm512_loadu_ps(s + j), vm)));
  }
  static float sum(const float* s, int n) {
    __m512 acc = _mm512_loadu_ps(s);
    for (int j = 16; j < n; j += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(s + j));
    return reduce_add(acc);
  }
  static void axpy_tile(float* acc, float c, const float* p, const float* vt, int n, int d) {
    const __m512 vc = _mm512_set1_ps(c);
    for (int i = 0; i < d; i += 16) {
      __m512 a = _mm512_mul_ps(_mm512_loadu_ps(acc + i), vc);
      for (int j = 0; j < n; ++j) {
        a = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_loadu_ps(vt + static_cast<int64_t>(j) * d + i), a);
      }
      _mm512_storeu_ps(acc + i, a);
    }
  }
};

}  // namespace

void attention_chunk_avx512(const AttentionParams& dims, const KvView& kv, const QueryTile& tile, int64_t chunk,
                            float* partial) {
  detail::chunk_kernel<Avx512Ops>(dims, kv, tile, chunk, partial);
}

}  // namespace tokamak::kernels
TOKAMAK_TARGET_REGION_END
#endif
