// Internal to attention_avx2*.cpp: the vector operations of attention_impl.h
// with AVX2 + FMA + F16C, 8 lanes; head_dim a multiple of 8. Include inside
// a target region that has at least AVX2, in an anonymous namespace, after
// attention_impl.h and exp_avx2.h.
#pragma once

struct Avx2Ops {
  static constexpr int kWidth = 8;
  static constexpr bool kTransposedScores = true;

  static float reduce_add(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }

  static __m256 exp(__m256 x) { return exp_avx2(x); }  // exp_avx2.h

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

  // Head blocks (attention_impl.h, update_heads) in 16 registers: scores of
  // 3 heads (12 sums of 8 keys; K read as the FMAs' memory operands), values
  // of 3 heads x 32 values; 8 heads run as 3 + 3 + 2. 2 + 2 + 2 + 2 was 2%
  // slower (attention_bench f16 at 8K, 5 alternations), 4 heads x 16 values
  // level.
  static constexpr int kScoreHeads = 3;
  static constexpr int kValueHeads = 3;
  static constexpr int kValueVectors = 4;
  using Vec = __m256;
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static Vec set1(float x) { return _mm256_set1_ps(x); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  static Vec vmax(Vec a, Vec b) { return _mm256_max_ps(a, b); }
  static Vec load_kv(KvType t, const uint8_t* row, int c) { return load8(t, row, c); }
  static float first(Vec v) { return _mm256_cvtss_f32(v); }
  // The largest of v's lanes, in every lane.
  static Vec max_all(Vec v) {
    v = _mm256_max_ps(v, _mm256_permute2f128_ps(v, v, 0x01));
    v = _mm256_max_ps(v, _mm256_permute_ps(v, 0x4E));
    return _mm256_max_ps(v, _mm256_permute_ps(v, 0xB1));
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
  static float reduce_max(__m256 m) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }
  static float max(const float* s, int n) {
    __m256 m = _mm256_loadu_ps(s);
    for (int j = 8; j < n; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(s + j));
    return reduce_max(m);
  }
  static void scale(float* s, int n, float c) {
    const __m256 vc = _mm256_set1_ps(c);
    for (int j = 0; j < n; j += 8) _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), vc));
  }
  static float sum(const float* s, int n) {
    __m256 acc = _mm256_loadu_ps(s);
    for (int j = 8; j < n; j += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(s + j));
    return reduce_add(acc);
  }
  // As in attention_avx512_ops.h: NV vectors, even and odd keys in two sums.
  template <int NV>
  static void axpy_block(float* acc, __m256 c, const float* p, const float* vt, int n, int d) {
    __m256 a[NV], b[NV];
    for (int v = 0; v < NV; ++v) {
      a[v] = _mm256_mul_ps(_mm256_loadu_ps(acc + 8 * v), c);
      b[v] = _mm256_setzero_ps();
    }
    int j = 0;
    for (; j + 1 < n; j += 2) {
      const __m256 pa = _mm256_set1_ps(p[j]);
      const __m256 pb = _mm256_set1_ps(p[j + 1]);
      const float* va = vt + static_cast<int64_t>(j) * d;
      for (int v = 0; v < NV; ++v) {
        a[v] = _mm256_fmadd_ps(pa, _mm256_loadu_ps(va + 8 * v), a[v]);
        b[v] = _mm256_fmadd_ps(pb, _mm256_loadu_ps(va + d + 8 * v), b[v]);
      }
    }
    if (j < n) {
      const __m256 pa = _mm256_set1_ps(p[j]);
      for (int v = 0; v < NV; ++v) a[v] = _mm256_fmadd_ps(pa, _mm256_loadu_ps(vt + static_cast<int64_t>(j) * d + 8 * v), a[v]);
    }
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(acc + 8 * v, _mm256_add_ps(a[v], b[v]));
  }
  static void axpy_tile(float* acc, float c, const float* p, const float* vt, int n, int d) {
    const __m256 vc = _mm256_set1_ps(c);
    int i = 0;
    for (; i + 32 <= d; i += 32) axpy_block<4>(acc + i, vc, p, vt + i, n, d);
    for (; i < d; i += 8) axpy_block<1>(acc + i, vc, p, vt + i, n, d);
  }

  // dst[c * ds ..] = lane c of r[0..7] (an 8 x 8 block transposed from registers).
  static void transpose8(const __m256 (&r)[8], float* dst, int64_t ds) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[g * 4 + k], lane L: column 4L + k of rows 4g .. 4g + 3.
    for (int g = 0; g < 2; ++g) {
      u[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
      u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
      u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
      u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int k = 0; k < 4; ++k) {
      _mm256_storeu_ps(dst + k * ds, _mm256_permute2f128_ps(u[k], u[4 + k], 0x20));
      _mm256_storeu_ps(dst + (4 + k) * ds, _mm256_permute2f128_ps(u[k], u[4 + k], 0x31));
    }
  }
  // dst[c * ds + r] = src[r * ss + c] for an 8 x 8 block.
  static void transpose8(const float* src, int64_t ss, float* dst, int64_t ds) {
    __m256 r[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ss);
    transpose8(r, dst, ds);
  }
  static void transpose_tile(const float* kt, int d, float* ktt) {
    for (int64_t kb = 0; kb < kKeyTile; kb += 8) {
      for (int c = 0; c < d; c += 8) transpose8(kt + kb * d + c, d, ktt + c * kKeyTile + kb, kKeyTile);
    }
  }
  // Values c .. c + 7 of a row of type t as f32; t is f32, f16 or bf16.
  static __m256 load8(KvType t, const uint8_t* row, int c) {
    if (t == KvType::F32) return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c));
    if (t == KvType::F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static bool load_transposed(KvType t, const uint8_t* const* rows, int d, float* ktt) {
    if (kv_type_is_quantized(t)) return false;
    for (int64_t kb = 0; kb < kKeyTile; kb += 8) {
      for (int c = 0; c < d; c += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; ++i) r[i] = load8(t, rows[kb + i], c);
        transpose8(r, ktt + c * kKeyTile + kb, kKeyTile);
      }
    }
    return true;
  }
};
