// Internal to attention_avx512*.cpp: the vector operations of
// attention_impl.h with AVX-512 (F, BW, VL, DQ), 16 lanes; head_dim a multiple
// of 16. Include inside a target region that has at least AVX-512, in an
// anonymous namespace, after attention_impl.h (and exp_cephes.h, outside the
// region).
#pragma once

struct Avx512Ops {
  static constexpr int kWidth = 16;
  static constexpr bool kTransposedScores = true;

  static float reduce_add(__m512 v) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }

  // Cephes' expf as in exp_avx2.h, 16 lanes, with VSCALEFPS for
  // the 2^n step: y * 2^n rounds once either way, so the values are the
  // AVX2 form's, but no clamps and no exponent built in integer lanes (14
  // instructions where that form takes 20; the integer attention runs two
  // of these per 32 keys and query head). Below -87.34 (the AVX2 form's
  // clamp) the result is 0, above 88.7 it is inf.
  static __m512 exp(__m512 x) {
    namespace c = cephes_exp;
    const __mmask16 in_range = _mm512_cmp_ps_mask(x, _mm512_set1_ps(c::kMin), _CMP_GE_OQ);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(c::kLog2e)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(c::kLn2Hi), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(c::kLn2Lo), r);
    __m512 y = _mm512_set1_ps(c::kPoly[0]);
#pragma GCC unroll 8
    for (size_t i = 1; i < std::size(c::kPoly); ++i) y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(c::kPoly[i]));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_scalef_ps(in_range, y, n);
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
  // The largest of v's lanes, in every lane.
  static __m512 max_all(__m512 v) {
    v = _mm512_max_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));
    v = _mm512_max_ps(v, _mm512_shuffle_f32x4(v, v, 0xB1));
    v = _mm512_max_ps(v, _mm512_permute_ps(v, 0x4E));
    return _mm512_max_ps(v, _mm512_permute_ps(v, 0xB1));
  }
  static float max(const float* s, int n) {
    __m512 m = _mm512_loadu_ps(s);
    for (int j = 16; j < n; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(s + j));
    return _mm512_reduce_max_ps(m);
  }
  static void scale(float* s, int n, float c) {
    const __m512 vc = _mm512_set1_ps(c);
    for (int j = 0; j < n; j += 16) _mm512_storeu_ps(s + j, _mm512_mul_ps(_mm512_loadu_ps(s + j), vc));
  }
  static float sum(const float* s, int n) {
    __m512 acc = _mm512_loadu_ps(s);
    for (int j = 16; j < n; j += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(s + j));
    return reduce_add(acc);
  }
  // acc = acc * c + sum_j p[j] v_j over NV vectors of 16 values, the keys
  // alternating between two sums (even j, odd j) that are added at the end.
  template <int NV>
  static void axpy_block(float* acc, __m512 c, const float* p, const float* vt, int n, int d) {
    __m512 a[NV], b[NV];
    for (int v = 0; v < NV; ++v) {
      a[v] = _mm512_mul_ps(_mm512_loadu_ps(acc + 16 * v), c);
      b[v] = _mm512_setzero_ps();
    }
    int j = 0;
    for (; j + 1 < n; j += 2) {
      const __m512 pa = _mm512_set1_ps(p[j]);
      const __m512 pb = _mm512_set1_ps(p[j + 1]);
      const float* va = vt + static_cast<int64_t>(j) * d;
      for (int v = 0; v < NV; ++v) {
        a[v] = _mm512_fmadd_ps(pa, _mm512_loadu_ps(va + 16 * v), a[v]);
        b[v] = _mm512_fmadd_ps(pb, _mm512_loadu_ps(va + d + 16 * v), b[v]);
      }
    }
    if (j < n) {
      const __m512 pa = _mm512_set1_ps(p[j]);
      for (int v = 0; v < NV; ++v) a[v] = _mm512_fmadd_ps(pa, _mm512_loadu_ps(vt + static_cast<int64_t>(j) * d + 16 * v), a[v]);
    }
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(acc + 16 * v, _mm512_add_ps(a[v], b[v]));
  }
  static void axpy_tile(float* acc, float c, const float* p, const float* vt, int n, int d) {
    const __m512 vc = _mm512_set1_ps(c);
    int i = 0;
    for (; i + 64 <= d; i += 64) axpy_block<4>(acc + i, vc, p, vt + i, n, d);
    for (; i < d; i += 16) axpy_block<1>(acc + i, vc, p, vt + i, n, d);
  }

  // dst[c * ds + r] = src[r * ss + c] for a 16 x 16 block.
  static void transpose16(const float* src, int64_t ss, float* dst, int64_t ds) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ss);
    transpose16(r, dst, ds);
  }
  // dst[c * ds + i] = lane c of r[i]: pairs of rows interleave, then 4-row
  // groups, then 128-bit lanes across groups.
  [[gnu::always_inline]] static void transpose16(const __m512 (&r)[16], float* dst, int64_t ds) {
    __m512 t[16];
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[g * 4 + k], lane L: column 4L + k of rows 4g .. 4g + 3.
    __m512 u[16];
    for (int g = 0; g < 4; ++g) {
      u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
      u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
      u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
      u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int k = 0; k < 4; ++k) {
      const __m512 x0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x88);
      const __m512 x1 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xDD);
      const __m512 x2 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x88);
      const __m512 x3 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xDD);
      _mm512_storeu_ps(dst + k * ds, _mm512_shuffle_f32x4(x0, x2, 0x88));
      _mm512_storeu_ps(dst + (8 + k) * ds, _mm512_shuffle_f32x4(x0, x2, 0xDD));
      _mm512_storeu_ps(dst + (4 + k) * ds, _mm512_shuffle_f32x4(x1, x3, 0x88));
      _mm512_storeu_ps(dst + (12 + k) * ds, _mm512_shuffle_f32x4(x1, x3, 0xDD));
    }
  }
  static void transpose_tile(const float* kt, int d, float* ktt) {
    for (int64_t kb = 0; kb < kKeyTile; kb += 16) {
      for (int c = 0; c < d; c += 16) transpose16(kt + kb * d + c, d, ktt + c * kKeyTile + kb, kKeyTile);
    }
  }
  // Values c .. c + 15 of a row of type t as f32; t is f32, f16 or bf16.
  static __m512 load16(KvType t, const uint8_t* row, int c) {
    if (t == KvType::F32) return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + c);
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c));
    if (t == KvType::F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static bool load_transposed(KvType t, const uint8_t* const* rows, int d, float* ktt) {
    if (kv_type_is_quantized(t)) return false;
    for (int64_t kb = 0; kb < kKeyTile; kb += 16) {
      for (int c = 0; c < d; c += 16) {
        __m512 r[16];
        for (int i = 0; i < 16; ++i) r[i] = load16(t, rows[kb + i], c);
        transpose16(r, ktt + c * kKeyTile + kb, kKeyTile);
      }
    }
    return true;
  }
  // Head blocks (attention_impl.h, update_heads): scores of 8 heads (16
  // sums of 16 keys in registers), values of 4 heads x 64 values.
  static constexpr int kScoreHeads = 8;
  static constexpr int kValueHeads = 4;
  static constexpr int kValueVectors = 4;
  using Vec = __m512;
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static Vec set1(float x) { return _mm512_set1_ps(x); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
  static Vec vmax(Vec a, Vec b) { return _mm512_max_ps(a, b); }
  static Vec load_kv(KvType t, const uint8_t* row, int c) { return load16(t, row, c); }
  static float first(Vec v) { return _mm512_cvtss_f32(v); }
};

