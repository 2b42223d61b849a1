// attention_chunk with AVX-512 VNNI for q8 / q4 K and V: integer dot products
// on the stored values instead of dequantizing them to f32.
//
// Why: decode attention over a long context is bound by arithmetic, not by
// reading the cache: with 8 query heads per KV head (TinyLlama, Llama 3) each
// key costs 2 x 8 x head_dim multiply-adds, and f32 FMAs top out near the
// cost of streaming the weights once 8K keys are cached. VPDPBUSD does 64
// u8 x s8 multiply-adds per instruction against 16 for an f32 FMA.
//
// The arithmetic, per tile of kKeyTile keys and per query head:
//   scores: the query is quantized to int8 q (absmax / 127, scale sq) plus
//     an int8 correction of its rounding (QuantizedQuery); K rows are int8 k
//     with a row scale sk. VPDPBUSD wants one unsigned operand, so K is
//     stored into the tile as k + 128 (u8) and 128 * sum(q) is subtracted:
//     s_j = sq * sk_j * (sum_c (k_jc + 128) q_c - 128 sum_c q_c) / sqrt(d),
//     for each part. Exact integer sums; the query's residual rounding is
//     ~2^-15 of its largest value. q4 rows are unpacked to int8 (nibble - 8)
//     and have a scale per 32 values: the sums then run per such group, and
//     the correction part is skipped (K's own 4-bit rounding dwarfs it).
//   values: p_j = exp(s_j - m) is exact f32 for the softmax sum l; the
//     weights p_j * |sv_j| (sv_j V's row scale, or group scale for q4; the
//     sign goes into the values) are quantized to u8 over the tile (a bound
//     on their largest, exp(tile max - m) * max |sv_j|, -> 255) and VPDPBUSD
//     sums them against the int8 V rows. Rounding each weight to 1/255 of
//     that bound moves an output by at most ~0.2% of the bound's share of
//     |v|, times the spread of the V scales (stated bounds in
//     tests/kernels/attention_test.cpp).
// Tiles that touch the f16 rows of mixed precision, and other K/V types, go
// through the float path of attention_impl.h, so one chunk may mix both; the
// choice depends on positions only, never on the batch.
//
// Tile layouts (head_dim d a multiple of 64, in segments of 64 values):
//   K: [segment][d/4 per segment = 16 dwords][kKeyTile keys] dwords of 4
//      consecutive values of one key, + 128: lane j of a vector is key j.
//   V: [segment][key group of 4][4 vectors] where vector m, 128-bit lane L,
//      dword t holds value 16L + 4m + t of the 4 keys (a byte each).
//   The V sums come out in that order and are put back in value order (a
//   4 x 4 transposition of 128-bit lanes) before they meet the f32 state.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "kernels/attention.h"
#include "kernels/exp2_poly.h"
#include "kernels/exp_cephes.h"
#include "kernels/isa.h"
#include "kernels/kv_format.h"

#if TOKAMAK_HAVE_X86_SIMD
#include <immintrin.h>

TOKAMAK_TARGET_REGION(TOKAMAK_ISA_AVX512_VNNI)
#include "kernels/attention_impl.h"

namespace tokamak::kernels {
namespace {

#include "kernels/attention_avx512_ops.h"

constexpr int kSegment = 64;                                // values per 64-byte row segment
constexpr int kMaxSegments = kMaxHeadDim / kSegment;        // of a head row
constexpr int kGroups = static_cast<int>(kKeyTile) / 4;    // key groups of 4 in a tile
static_assert(kKeyTile == 32, "the tile layouts below assume two halves of 16 keys");

constexpr int kMaxScaleGroups = kMaxHeadDim / 32;  // of a q4 row (q8 rows have 1)

// A tile of K and V in the layouts above, with the rows' scales: one per row
// for q8, one per 32 values for q4 ([group][key]).
struct IntTile {
  alignas(64) uint8_t k[kMaxSegments][16][kKeyTile * 4];  // [segment][dword][key]: u8 (k + 128)
  alignas(64) int8_t v[kMaxSegments][kGroups][4][64];     // [segment][key group][vector]
  alignas(64) float k_scale[kMaxScaleGroups][kKeyTile];
  alignas(64) float v_scale[kMaxScaleGroups][kKeyTile];
};

constexpr int scale_groups(KvType t, int d) { return t == KvType::Q4 ? d / 32 : 1; }
// Per-head values kept for each V scale group (the softmax weights' maxima,
// their scales) are indexed head * stride + group: q8 rows have one group,
// so their heads lie side by side, one vector for all of them.
template <KvType VT>
constexpr int kWeightStride = VT == KvType::Q4 ? kMaxScaleGroups : 1;

// Values [64 s, 64 s + 64) of a q8 or q4 row as int8. A q4 group of 32 keeps
// value i in the low nibble of byte i and value i + 16 in its high nibble.
template <KvType T>
__m512i row_segment(const uint8_t* row, int s) {
  if constexpr (T == KvType::Q8) return _mm512_loadu_si512(row + s * kSegment);
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + s * kSegment / 2));
  const __m256i mask = _mm256_set1_epi8(0x0f);
  const __m256i lo = _mm256_and_si256(x, mask);                          // [group 2s: 0..15][group 2s+1: 0..15]
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), mask);    // [.. 16..31][.. 16..31]
  const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  return _mm512_sub_epi8(_mm512_shuffle_i32x4(z, z, _MM_SHUFFLE(3, 1, 2, 0)), _mm512_set1_epi8(8));
}

// The scale of group g of a row.
template <KvType T>
float row_scale(const uint8_t* row, int d, int g) {
  if constexpr (T == KvType::Q8) {
    float f;
    std::memcpy(&f, row + d, sizeof(f));
    return f;
  }
  uint16_t h;
  std::memcpy(&h, row + d / 2 + 2 * g, sizeof(h));
  return _cvtsh_ss(h);
}

// Values [64 s, 64 s + 64) of a V row, signed so that their scales are not
// negative: the weights p_j * sv_j meet VPDPBUSD as unsigned bytes. A q4
// group's scale is negative when its value of largest magnitude is positive
// (that value maps to -8), so such groups are negated ([-8, 7] -> [-7, 8]).
template <KvType T>
__m512i v_segment(const uint8_t* row, int d, int s) {
  const __m512i r = row_segment<T>(row, s);
  if constexpr (T != KvType::Q4) return r;
  const __mmask64 neg = (row_scale<T>(row, d, 2 * s) < 0.0f ? 0x00000000ffffffffULL : 0) |
                        (row_scale<T>(row, d, 2 * s + 1) < 0.0f ? 0xffffffff00000000ULL : 0);
  return _mm512_mask_sub_epi8(r, neg, _mm512_setzero_si512(), r);
}

// Loads the keys whose rows are `tile_rows` (TilePrefetch::rows) into `t`;
// keys past the tile's end read a zero row (their scores are masked, their
// weights 0). Rows are read in place: a staging copy of V compiled to a
// memcpy call per row, 10% of decode time.
template <KvType KT, KvType VT>
void load_int_tile(const detail::TilePrefetch::TileRows& tile_rows, int d, IntTile& t) {
  const int segments = d / kSegment;
  const uint8_t* const* k_rows = tile_rows.k;
  const uint8_t* const* v_rows = tile_rows.v;
  for (int g = 0; g < scale_groups(KT, d); ++g) {
    for (int j = 0; j < kKeyTile; ++j) t.k_scale[g][j] = row_scale<KT>(k_rows[j], d, g);
  }
  for (int g = 0; g < scale_groups(VT, d); ++g) {
    for (int j = 0; j < kKeyTile; ++j) t.v_scale[g][j] = std::fabs(row_scale<VT>(v_rows[j], d, g));  // see v_segment
  }
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int s = 0; s < segments; ++s) {
    // 16 keys at a time, transposed in registers: 32 rows would not fit
    // in them, and a staging copy costs a store and a load per row.
    for (int half = 0; half < 2; ++half) {
      __m512 rows[16];
      for (int j = 0; j < 16; ++j) {
        rows[j] = _mm512_castsi512_ps(_mm512_xor_si512(row_segment<KT>(k_rows[16 * half + j], s), bias));
      }
      Avx512Ops::transpose16(rows, reinterpret_cast<float*>(&t.k[s][0][64 * half]), kKeyTile);
    }
    for (int g = 0; g < kGroups; ++g) {
      const __m512i r0 = v_segment<VT>(v_rows[4 * g], d, s);
      const __m512i r1 = v_segment<VT>(v_rows[4 * g + 1], d, s);
      const __m512i r2 = v_segment<VT>(v_rows[4 * g + 2], d, s);
      const __m512i r3 = v_segment<VT>(v_rows[4 * g + 3], d, s);
      const __m512i a = _mm512_unpacklo_epi8(r0, r1);
      const __m512i b = _mm512_unpackhi_epi8(r0, r1);
      const __m512i c = _mm512_unpacklo_epi8(r2, r3);
      const __m512i e = _mm512_unpackhi_epi8(r2, r3);
      _mm512_store_si512(t.v[s][g][0], _mm512_unpacklo_epi16(a, c));
      _mm512_store_si512(t.v[s][g][1], _mm512_unpackhi_epi16(a, c));
      _mm512_store_si512(t.v[s][g][2], _mm512_unpacklo_epi16(b, e));
      _mm512_store_si512(t.v[s][g][3], _mm512_unpackhi_epi16(b, e));
    }
  }
}

// A query head as two int8 parts: x ~ scale * (hi + lo / kLoSteps), hi the
// q8 rounding (absmax -> 127) and lo the rounding of what hi leaves, so the
// query carries ~15 bits: with hi alone, its rounding would perturb scores
// about as much as K's own q8 storage does (measured: it doubled the KL
// divergence of q8 KV against f32 KV); lo costs a second pass of dot products.
constexpr float kLoSteps = 254.0f;  // lo = round(residual * 254), residual in [-0.5, 0.5]
struct QuantizedQuery {
  alignas(64) int8_t hi[kMaxHeadDim];
  alignas(64) int8_t lo[kMaxHeadDim];
  // Set by quantize_query, sum for the row's d / 32 groups only; no
  // initializers, as a chunk keeps 128 of these on its stack.
  float scale;
  int32_t sum[2][kMaxScaleGroups];  // [hi, lo][32 values]
  int32_t total[2];                 // [hi, lo] over the row
  // Sum of part `part` over the values of K scale group g of `groups`.
  int32_t group_sum(int part, int g, int groups) const { return groups == 1 ? total[part] : sum[part][g]; }
};

void quantize_query(const float* x, int d, QuantizedQuery& out) {
  __m512 amax = _mm512_setzero_ps();
  for (int c = 0; c < d; c += 16) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(x + c)));
  const float m = _mm512_reduce_max_ps(amax);
  out.scale = m / 127.0f;
  const __m512 inv = _mm512_set1_ps(m > 0.0f ? 127.0f / m : 0.0f);
  out.total[0] = out.total[1] = 0;
  for (int c0 = 0; c0 < d; c0 += 32) {
    __m512i sum_hi = _mm512_setzero_si512(), sum_lo = _mm512_setzero_si512();
    for (int c = c0; c < c0 + 32; c += 16) {
      const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + c), inv);
      const __m512 hi = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m512i h = _mm512_cvtps_epi32(hi);
      const __m512i l = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_sub_ps(v, hi), _mm512_set1_ps(kLoSteps)),
                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      sum_hi = _mm512_add_epi32(sum_hi, h);
      sum_lo = _mm512_add_epi32(sum_lo, l);
      _mm_store_si128(reinterpret_cast<__m128i*>(out.hi + c), _mm512_cvtepi32_epi8(h));
      _mm_store_si128(reinterpret_cast<__m128i*>(out.lo + c), _mm512_cvtepi32_epi8(l));
    }
    out.total[0] += out.sum[0][c0 / 32] = _mm512_reduce_add_epi32(sum_hi);
    out.total[1] += out.sum[1][c0 / 32] = _mm512_reduce_add_epi32(sum_lo);
  }
}

// The V sums of a segment come out with vector m, 128-bit lane L holding
// values 16L + 4m .. 16L + 4m + 3 (see the top): a 4 x 4 transposition of
// 128-bit blocks away from value order, and its own inverse. The states'
// acc rows stay in that order while a chunk's integer tiles run (the value
// pass adds to them as the sums come), and swap_value_order puts them in
// value order for the float tiles and the chunk's partial, and back: once a
// chunk instead of once a tile and head (8 shuffles each).
void swap_value_order(float* acc, int d) {
  for (int s = 0; s < d; s += kSegment) {
    float* x = acc + s;
    const __m512 r0 = _mm512_loadu_ps(x), r1 = _mm512_loadu_ps(x + 16), r2 = _mm512_loadu_ps(x + 32),
                 r3 = _mm512_loadu_ps(x + 48);
    const __m512 a = _mm512_shuffle_f32x4(r0, r1, 0x44);
    const __m512 b = _mm512_shuffle_f32x4(r2, r3, 0x44);
    const __m512 c = _mm512_shuffle_f32x4(r0, r1, 0xEE);
    const __m512 e = _mm512_shuffle_f32x4(r2, r3, 0xEE);
    _mm512_storeu_ps(x, _mm512_shuffle_f32x4(a, b, 0x88));
    _mm512_storeu_ps(x + 16, _mm512_shuffle_f32x4(a, b, 0xDD));
    _mm512_storeu_ps(x + 32, _mm512_shuffle_f32x4(c, e, 0x88));
    _mm512_storeu_ps(x + 48, _mm512_shuffle_f32x4(c, e, 0xDD));
  }
}

// swap_value_order for the acc rows of n states [m, l, acc] of sf floats.
void swap_value_order(float* states, int64_t n, int64_t sf, int d) {
  for (int64_t q = 0; q < n; ++q) swap_value_order(states + q * sf + 2, d);
}

// exp(x) for the softmax step, x <= 0 (scores less their running max; -inf
// gives 0): 2^n 2^f with n = round(x log2 e), 2^f by exp2_poly.h's
// polynomial (relative error <= 3e-6, against Cephes' ~1e-7 in
// Avx512Ops::exp), 9 instructions where Cephes' form takes 13. The weights p
// go on to be rounded to 1/255 of the tile's largest, and the sum l of them
// carries the 3e-6 into the output: ~0.1% of the weights' own error.
__m512 softmax_exp(__m512 x) {
  const __mmask16 finite = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-std::numeric_limits<float>::infinity()), _CMP_NEQ_OQ);
  const __m512 log2e = _mm512_set1_ps(cephes_exp::kLog2e);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_fmsub_ps(x, log2e, n);
  __m512 y = _mm512_set1_ps(exp2_poly::kPoly[0]);
#pragma GCC unroll 4
  for (size_t i = 1; i < std::size(exp2_poly::kPoly); ++i) {
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(exp2_poly::kPoly[i]));
  }
  return _mm512_maskz_scalef_ps(finite, y, n);
}

constexpr int kHeadBlock = 8;  // query heads whose scores are computed side by side

// Adds one part (the query's hi or lo bytes, a pointer per head) of N heads'
// integer dot products with the tile's keys over dwords [c0, c1) into
// dot[h][half of 16 keys]. N is a constant so that the 2N accumulators stay
// in registers (a run-time head count kept them in memory: a load and a store
// around every VPDPBUSD).
template <int N>
[[gnu::always_inline]] inline void score_pass(const IntTile& t, const int8_t* const (&q)[N], int c0, int c1,
                                                  __m512i (&dot)[N][2], detail::TilePrefetch& ahead) {
  for (int h = 0; h < N; ++h) dot[h][0] = dot[h][1] = _mm512_setzero_si512();
  for (int cc = c0; cc < c1; ++cc) {
    ahead.issue(2);
    const __m512i k0 = _mm512_load_si512(&t.k[cc / 16][cc % 16][0]);
    const __m512i k1 = _mm512_load_si512(&t.k[cc / 16][cc % 16][64]);
#pragma GCC unroll 8
    for (int h = 0; h < N; ++h) {
      int32_t qd;
      std::memcpy(&qd, q[h] + 4 * cc, sizeof(qd));
      const __m512i qv = _mm512_set1_epi32(qd);
      dot[h][0] = _mm512_dpbusd_epi32(dot[h][0], k0, qv);
      dot[h][1] = _mm512_dpbusd_epi32(dot[h][1], k1, qv);
    }
  }
}

// acc[h] = acc[h] * corr[h] + w_scale * sum_j wq_j v_j for the HN heads at
// h0, each V vector loaded serving all of them (4 x HN accumulators in
// registers). In a segment, 128-bit lanes 0-1 hold values of V scale group
// 2s and lanes 2-3 of group 2s + 1 (q4), or all of the row's one group (q8):
// each half of the broadcast weights comes from its group.
template <KvType VT, int HN>
[[gnu::always_inline]] inline void value_pass(const IntTile& t, int s, int g_lo, int g_hi, int h0,
                                             const uint8_t (&wq)[kHeadBlock][kMaxScaleGroups][kKeyTile],
                                             const float* corr, const float* w_scale, float* const* states,
                                             detail::TilePrefetch& ahead) {
  __m512i sums[HN][4];
  for (int h = 0; h < HN; ++h) {
    for (int v = 0; v < 4; ++v) sums[h][v] = _mm512_setzero_si512();
  }
  // Unrolled: as a loop, GCC moved each of the 4 x HN accumulators to
  // another register and back at every step, and spilled one (hot q8 at 8K
  // 5% slower, q4 10%).
#pragma GCC unroll 8
  for (int kg = 0; kg < kGroups; ++kg) {
    ahead.issue(2);
    const __m512i v0 = _mm512_load_si512(t.v[s][kg][0]);
    const __m512i v1 = _mm512_load_si512(t.v[s][kg][1]);
    const __m512i v2 = _mm512_load_si512(t.v[s][kg][2]);
    const __m512i v3 = _mm512_load_si512(t.v[s][kg][3]);
#pragma GCC unroll 4
    for (int h = 0; h < HN; ++h) {
      int32_t w_lo;
      std::memcpy(&w_lo, wq[h0 + h][g_lo] + 4 * kg, sizeof(w_lo));
      __m512i wv = _mm512_set1_epi32(w_lo);
      if constexpr (VT == KvType::Q4) {  // q8 rows have one scale group: g_hi == g_lo
        int32_t w_hi;
        std::memcpy(&w_hi, wq[h0 + h][g_hi] + 4 * kg, sizeof(w_hi));
        wv = _mm512_inserti64x4(wv, _mm256_set1_epi32(w_hi), 1);
      }
      sums[h][0] = _mm512_dpbusd_epi32(sums[h][0], wv, v0);
      sums[h][1] = _mm512_dpbusd_epi32(sums[h][1], wv, v1);
      sums[h][2] = _mm512_dpbusd_epi32(sums[h][2], wv, v2);
      sums[h][3] = _mm512_dpbusd_epi32(sums[h][3], wv, v3);
    }
  }
  // acc is in the sums' order (swap_value_order): lanes 0-7 of each vector
  // hold values of V scale group g_lo, lanes 8-15 of g_hi.
  for (int h = 0; h < HN; ++h) {
    const __m512 vc = _mm512_set1_ps(corr[h0 + h]);
    const float* ws_h = w_scale + (h0 + h) * kWeightStride<VT>;
    const __m512 ws = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(ws_h[g_lo]), _mm512_set1_ps(ws_h[g_hi]));
    float* acc = states[h0 + h] + 2 + s * kSegment;
    for (int v = 0; v < 4; ++v) {
      _mm512_storeu_ps(acc + 16 * v,
                       _mm512_fmadd_ps(_mm512_loadu_ps(acc + 16 * v), vc, _mm512_mul_ps(_mm512_cvtepi32_ps(sums[h][v]), ws)));
    }
  }
}

// out[h] = the sum of the 16 lanes of v[h], h < 8, for 8 vectors at once:
// halves, then quarters, ... of all of them meet in one vector per level (15
// shuffles and 8 adds where 8 single sums take 56 steps, each a chain that
// held up the state's update). The tree is Avx512Ops::reduce_add's: lane i
// meets i + 8, then i + 4, i + 2, i + 1, so the sums round as its do.
[[gnu::always_inline]] inline void reduce_add8(const __m512 (&v)[8], float* out) {
  __m512 w[4];  // w[k]: 128-bit lanes 0-1 sum v[2k]'s halves, 2-3 v[2k + 1]'s
  for (int k = 0; k < 4; ++k) {
    w[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xEE));
  }
  __m512 x[2];  // x[k]: 128-bit lane L holds 4 partial sums of v[4k + L]
  for (int k = 0; k < 2; ++k) {
    x[k] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], 0x88),
                         _mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], 0xDD));
  }
  // 128-bit lane L: [v[L] twice, v[L + 4] twice], then each pair added.
  const __m512 y = _mm512_add_ps(_mm512_shuffle_ps(x[0], x[1], 0x44), _mm512_shuffle_ps(x[0], x[1], 0xEE));
  const __m512 z = _mm512_add_ps(y, _mm512_shuffle_ps(y, y, 0xB1));
  // v[h]'s sum sits at lane 4h (h < 4) and 4 (h - 4) + 2.
  const __m512i to_head = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  _mm256_store_ps(out, _mm512_castps512_ps256(_mm512_permutexvar_ps(to_head, z)));
}

// One online-softmax step of N (1, 2, 4 or 8) query heads sharing the KV
// head over keys [jb, je) of the tile. states[h]: [m, l, acc[d]] of head h.
// The heads go side by side through each phase so that their dependency
// chains (dot products, reductions, exp) overlap instead of queueing. Each
// head's arithmetic is its own: how a group is split into N's changes no value.
// Inlined by force: with the tile walk (attention_impl.h) inlined into
// chunk_int as well, GCC kept update_heads<8> out of line, 8% slower.
template <KvType KT, KvType VT, int N>
[[gnu::always_inline]] inline void update_heads(const AttentionParams& p, const QuantizedQuery* const* q,
                                                const IntTile& t, int jb, int je, float scale, float* const* states,
                                                detail::TilePrefetch& ahead) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int d = p.head_dim;
  const int segments = d / kSegment;
  // Scores: sum over K's scale groups of the group's integer dot products
  // (hi and lo parts, a pass each) times the keys' scales of that group.
  // [head][key].
  alignas(64) float sc[N][kKeyTile];  // set by the first group (a zeroing here was a rep stosq)
  const int k_groups = scale_groups(KT, d), v_groups = scale_groups(VT, d);
  const int dwords_per_group = d / 4 / k_groups;
  const int8_t* q_hi[N];
  const int8_t* q_lo[N];
  for (int h = 0; h < N; ++h) {
    q_hi[h] = q[h]->hi;
    q_lo[h] = q[h]->lo;
  }
  for (int g = 0; g < k_groups; ++g) {
    const int c0 = g * dwords_per_group, c1 = c0 + dwords_per_group;
    __m512i dot[N][2];
    score_pass<N>(t, q_hi, c0, c1, dot, ahead);
    // raw = hi - 128 sum(hi), the hi part's exact dot products.
    alignas(64) float raw[N][kKeyTile];
    for (int h = 0; h < N; ++h) {
      const __m512i offset_hi = _mm512_set1_epi32(128 * q[h]->group_sum(0, g, k_groups));
      for (int half = 0; half < 2; ++half) {
        _mm512_store_ps(raw[h] + 16 * half, _mm512_cvtepi32_ps(_mm512_sub_epi32(dot[h][half], offset_hi)));
      }
    }
    // q4 K rounds to 1/16 of a row's range: the query's 8-bit rounding is
    // noise beside it, so q4 K skips the correction pass (KL unchanged) and
    // sums its groups' products times their scales; the query's scale
    // follows over the whole row.
    if constexpr (KT == KvType::Q4) {
      for (int h = 0; h < N; ++h) {
        for (int half = 0; half < 2; ++half) {
          float* at = sc[h] + 16 * half;
          const __m512 r = _mm512_load_ps(raw[h] + 16 * half), ks = _mm512_load_ps(t.k_scale[g] + 16 * half);
          _mm512_store_ps(at, g == 0 ? _mm512_mul_ps(r, ks) : _mm512_fmadd_ps(r, ks, _mm512_load_ps(at)));
        }
      }
    } else {
      // q8 K has one scale group: score = (raw + (lo - 128 sum(lo)) /
      // kLoSteps) * sk * sq / sqrt(d) in one pass over the scores, the key's
      // and the query's scales as one factor (a separate pass for the
      // query's scale cost 2% of the kernel).
      score_pass<N>(t, q_lo, c0, c1, dot, ahead);
      const __m512 ks[2] = {_mm512_load_ps(t.k_scale[0]), _mm512_load_ps(t.k_scale[0] + 16)};
      for (int h = 0; h < N; ++h) {
        const __m512i offset_lo = _mm512_set1_epi32(128 * q[h]->group_sum(1, g, k_groups));
        const __m512 qs = _mm512_set1_ps(q[h]->scale * scale);
        for (int half = 0; half < 2; ++half) {
          const __m512 kq = _mm512_mul_ps(ks[half], qs);
          const __m512 lo = _mm512_cvtepi32_ps(_mm512_sub_epi32(dot[h][half], offset_lo));
          _mm512_store_ps(sc[h] + 16 * half, _mm512_fmadd_ps(lo, _mm512_mul_ps(kq, _mm512_set1_ps(1.0f / kLoSteps)),
                                                             _mm512_mul_ps(_mm512_load_ps(raw[h] + 16 * half), kq)));
        }
      }
    }
  }
  // The softmax step and the weights p_j * sv_j (each V scale group) as u8
  // over a bound on their largest (below), in phases that each loop over the
  // heads: an iteration is a short dependency chain (a reduction, an exp),
  // independent of the others, so the out-of-order core runs the heads'
  // chains side by side.
  alignas(64) uint8_t wq[kHeadBlock][kMaxScaleGroups][kKeyTile];
  // Per-head maxima go into lanes of a vector (lane h: head h) in registers:
  // written as scalars and read back as a vector, they waited on a store
  // that cannot forward (~20 cycles each time).
  constexpr int kWStride = kWeightStride<VT>;
  alignas(64) float corr[16];
  alignas(64) float w_inv[kHeadBlock * kMaxScaleGroups], w_scale[kHeadBlock * kMaxScaleGroups];
  __m512 m_old_v = _mm512_setzero_ps(), m_new_v = _mm512_setzero_ps();
  __m512 tile_max_v = _mm512_setzero_ps();
  __m512 m_new_b[N];
  for (int h = 0; h < N; ++h) {
    if constexpr (KT == KvType::Q4) {
      const __m512 qs = _mm512_set1_ps(q[h]->scale * scale);
      for (int half = 0; half < 2; ++half) _mm512_store_ps(sc[h] + 16 * half, _mm512_mul_ps(_mm512_load_ps(sc[h] + 16 * half), qs));
    }
    if (p.softcap > 0.0f) {
      for (int j = jb; j < je; ++j) sc[h][j] = p.softcap * std::tanh(sc[h][j] / p.softcap);
    }
    for (int j = 0; j < jb; ++j) sc[h][j] = kNegInf;
    for (int j = je; j < kKeyTile; ++j) sc[h][j] = kNegInf;
    const __m512 m_old_b = _mm512_set1_ps(states[h][0]);
    const __m512 tile_max = Avx512Ops::max_all(_mm512_max_ps(_mm512_load_ps(sc[h]), _mm512_load_ps(sc[h] + 16)));
    m_new_b[h] = _mm512_max_ps(m_old_b, tile_max);
    tile_max_v = _mm512_mask_mov_ps(tile_max_v, static_cast<__mmask16>(1u << h), tile_max);
    m_old_v = _mm512_mask_mov_ps(m_old_v, static_cast<__mmask16>(1u << h), m_old_b);
    m_new_v = _mm512_mask_mov_ps(m_new_v, static_cast<__mmask16>(1u << h), m_new_b[h]);
  }
  // corr = exp(m_old - m_new), 0 for a state that saw no key yet (m_old = -inf).
  const __mmask16 seen = _mm512_cmp_ps_mask(m_old_v, _mm512_set1_ps(kNegInf), _CMP_NEQ_OQ);
  _mm512_store_ps(corr, _mm512_maskz_mov_ps(seen, softmax_exp(_mm512_sub_ps(m_old_v, m_new_v))));
  __m512 row_sum[8];
  for (int h = 0; h < N; ++h) {
    const __m512 p0 = softmax_exp(_mm512_sub_ps(_mm512_load_ps(sc[h]), m_new_b[h]));
    const __m512 p1 = softmax_exp(_mm512_sub_ps(_mm512_load_ps(sc[h] + 16), m_new_b[h]));
    states[h][0] = _mm512_cvtss_f32(m_new_b[h]);
    row_sum[h] = _mm512_add_ps(p0, p1);
    if constexpr (VT == KvType::Q4) {
      _mm512_store_ps(sc[h], p0);
      _mm512_store_ps(sc[h] + 16, p1);
    } else {
      // q8 V's one group: sc keeps the weights, not p, for their rounding.
      const __m512 w0 = _mm512_mul_ps(p0, _mm512_load_ps(t.v_scale[0]));
      const __m512 w1 = _mm512_mul_ps(p1, _mm512_load_ps(t.v_scale[0] + 16));
      _mm512_store_ps(sc[h], w0);
      _mm512_store_ps(sc[h] + 16, w1);
    }
  }
  // The weights of a head (and V scale group) are rounded to 1/255 of a
  // bound on their largest, not of the largest itself: exp(tile max - m)
  // times the largest V scale among keys [jb, je), which the head's largest
  // weight reaches when its best-scoring key also has the largest scale, and
  // is within the V rows' spread of scales of otherwise. The exact maximum
  // took a reduction per head (and group) on the path to the rounding: 5% of
  // the kernel (attention_bench q8/8192). Only the keys the query sees count,
  // so a query's bound, like the rest of its arithmetic, is the same in any
  // batch.
  const uint32_t keys = static_cast<uint32_t>((uint64_t{1} << je) - (uint64_t{1} << jb));
  const __m512 p_max = softmax_exp(_mm512_sub_ps(tile_max_v, m_new_v));  // lane h: head h
  auto scale_max = [&](int g) {  // in every lane
    return Avx512Ops::max_all(
        _mm512_max_ps(_mm512_maskz_mov_ps(static_cast<__mmask16>(keys), _mm512_load_ps(t.v_scale[g])),
                      _mm512_maskz_mov_ps(static_cast<__mmask16>(keys >> 16), _mm512_load_ps(t.v_scale[g] + 16))));
  };
  // The bounds in w_inv's order (head h, group g at h * kWStride + g), 16 at
  // a time, built in registers: stored as scalars and read back as vectors,
  // they would wait on stores that cannot forward.
  __m512 sv_max = scale_max(0);  // q4: lanes g and 8 + g hold group g's
  if constexpr (VT == KvType::Q4) {
    static_assert(kWStride == 8, "two heads of q4 groups to a vector");
    for (int g = 1; g < v_groups; ++g) {
      sv_max = _mm512_mask_mov_ps(sv_max, static_cast<__mmask16>(0x0101u << g), scale_max(g));
    }
  }
  auto bounds = [&](int i) {
    if constexpr (VT != KvType::Q4) return _mm512_mul_ps(p_max, sv_max);
    // Heads i / 8 and i / 8 + 1, a half each.
    const __m512i heads =
        _mm512_add_epi32(_mm512_set1_epi32(i / 8), _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    return _mm512_mul_ps(_mm512_permutexvar_ps(heads, p_max), sv_max);
  };
  for (int h = N; h < 8; ++h) row_sum[h] = row_sum[0];
  alignas(32) float tile_sum[8];
  // Only the sums go through reduce_add8: batching the max before the exps
  // was slower (it sits on the path to the next phase).
  reduce_add8(row_sum, tile_sum);  // Avx512Ops::sum's order
  for (int h = 0; h < N; ++h) states[h][1] = states[h][1] * corr[h] + tile_sum[h];
  for (int i = 0; i < N * kWStride; i += 16) {
    const __m512 wm = bounds(i);
    const __mmask16 positive = _mm512_cmp_ps_mask(wm, _mm512_setzero_ps(), _CMP_GT_OQ);
    _mm512_store_ps(w_inv + i, _mm512_maskz_div_ps(positive, _mm512_set1_ps(255.0f), wm));
    _mm512_store_ps(w_scale + i, _mm512_div_ps(wm, _mm512_set1_ps(255.0f)));
  }
  for (int h = 0; h < N; ++h) {
    for (int g = 0; g < v_groups; ++g) {
      const __m512 inv = _mm512_set1_ps(w_inv[h * kWStride + g]);
      for (int half = 0; half < 2; ++half) {
        const __m512 w = VT == KvType::Q4 ? _mm512_mul_ps(_mm512_load_ps(sc[h] + 16 * half), _mm512_load_ps(t.v_scale[g] + 16 * half))
                                          : _mm512_load_ps(sc[h] + 16 * half);
        const __m512i u = _mm512_cvt_roundps_epi32(_mm512_mul_ps(w, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_store_si128(reinterpret_cast<__m128i*>(wq[h][g] + 16 * half), _mm512_cvtusepi32_epi8(u));
      }
    }
  }
  constexpr int kValueHeads = N < 4 ? N : 4;
  for (int s = 0; s < segments; ++s) {
    const int g_lo = v_groups == 1 ? 0 : 2 * s;
    const int g_hi = v_groups == 1 ? 0 : 2 * s + 1;
    for (int h0 = 0; h0 < N; h0 += kValueHeads) value_pass<VT, kValueHeads>(t, s, g_lo, g_hi, h0, wq, corr, w_scale, states, ahead);
  }
}

// update_heads over n <= kHeadBlock heads, as blocks of 8, 4, 2 and 1, but
// that 5 to 7 heads run as one block of 8 and 3 as one of 4, the spare slots
// repeating the last head into `spare` states (results dropped): one pass
// over the tile instead of three or two, as a head's arithmetic is its own.
// Measured per query head (attention_bench BM_Groups, q8 over 2,048 keys):
// 7 heads a KV head (Qwen2.5) cost 1.4x what 8 do as 4 + 2 + 1.
template <KvType KT, KvType VT>
void update_head_block(const AttentionParams& p, const QuantizedQuery* const* q, int n, const IntTile& t, int jb,
                       int je, float scale, float* const* states, float* spare, detail::TilePrefetch& ahead) {
  // One call site per block size: a second one of update_heads<8> took it out
  // of line, 10% slower at 8 heads.
  const int padded = n > 4 ? 8 : n == 3 ? 4 : n;
  const QuantizedQuery* const* qp = q;
  float* const* sp = states;
  const QuantizedQuery* qs[kHeadBlock];
  float* st[kHeadBlock];
  if (padded > n) {
    for (int h = 0; h < padded; ++h) {
      qs[h] = q[std::min(h, n - 1)];
      st[h] = h < n ? states[h] : spare + static_cast<int64_t>(h - n) * attention_state_floats(p);
    }
    qp = qs;
    sp = st;
  }
  if (padded == 8) return update_heads<KT, VT, 8>(p, qp, t, jb, je, scale, sp, ahead);
  if (padded == 4) return update_heads<KT, VT, 4>(p, qp, t, jb, je, scale, sp, ahead);
  if (padded == 2) return update_heads<KT, VT, 2>(p, qp, t, jb, je, scale, sp, ahead);
  update_heads<KT, VT, 1>(p, qp, t, jb, je, scale, sp, ahead);
}

// The states of a chunk's queries with acc starting on a cache line. In
// `partial` a state is [m, l, acc] back to back, so acc starts 8 bytes into a
// line and each 64-byte load and store of the value pass's update spans two
// lines (attention_bench q8 at 8K: 347 -> 333 us with them aligned). Each row
// is [14 unused, m, l, acc]: state(q) is where m is, so acc = state(q) + 2.
struct AlignedStates {
  static constexpr int kMax = 16;  // decode: one token's heads of a KV head
  static constexpr int kM = 14;    // m's index in a row: acc at 16, 64 bytes in
  static constexpr int kStride = 16 + kMaxHeadDim;
  alignas(64) float rows[kMax][kStride];
  float* state(int64_t q) { return rows[q] + kM; }
  // Copies the first n states to or from `partial` (stride sf).
  void copy_to(float* partial, int64_t n, int64_t sf) {
    for (int64_t q = 0; q < n; ++q) std::memcpy(partial + q * sf, state(q), static_cast<size_t>(sf) * sizeof(float));
  }
  void copy_from(const float* partial, int64_t n, int64_t sf) {
    for (int64_t q = 0; q < n; ++q) std::memcpy(state(q), partial + q * sf, static_cast<size_t>(sf) * sizeof(float));
  }
};

template <KvType KT, KvType VT>
void chunk_int(const AttentionParams& p, const KvView& kv, const QueryTile& tile, int64_t chunk, float* partial) {
  const int d = p.head_dim;
  const int group = p.group();
  const int64_t sf = attention_state_floats(p);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t n_queries = static_cast<int64_t>(tile.n_tokens) * group;
  auto query_row = [&](int64_t query) {  // query = token * group + head in group
    return tile.q[query / group] + (static_cast<int64_t>(tile.kv_head) * group + query % group) * d;
  };
  // Queries are quantized once per chunk when they fit in `cached` (decode:
  // one token's group; prefill: a query tile of 16 tokens x 8 heads, 75 KB of
  // stack), else once per tile; the values are the same either way. Once per
  // chunk made prefill of 2048 tokens with q8 KV 5% faster than per tile.
  constexpr int kCached = 128;
  QuantizedQuery cached[kCached];
  const bool all_cached = n_queries <= kCached;
  if (all_cached) {
    for (int64_t query = 0; query < n_queries; ++query) quantize_query(query_row(query), d, cached[query]);
  }
  QuantizedQuery local[kHeadBlock];
  // The states of update_head_block's spare slots (at most 3), reset with the
  // chunk's so that their arithmetic stays finite; a tile's tokens share them,
  // as nothing reads their results.
  alignas(64) float spare[3 * (kMaxHeadDim + 2)];
  attention_reset(p, 3, spare);
  detail::FloatTileBuffers<Avx512Ops> fb;
  IntTile t;
  // Few states (decode) live in `aligned` during the tile loop, which starts
  // them empty as it does `partial`; the float path reads them in `partial`.
  AlignedStates aligned;
  const bool in_aligned = n_queries <= AlignedStates::kMax;
  if (in_aligned) {
    for (int64_t query = 0; query < n_queries; ++query) attention_reset(p, 1, aligned.state(query));
  }
  detail::TilePrefetch ahead(true);
  detail::for_each_chunk_tile(p, kv, tile, chunk, partial, ahead, [&](int64_t t0, int64_t n_tile) {
    if (!detail::in_main_pages(kv, t0, n_tile)) {
      ahead.issue_all();
      if (in_aligned) aligned.copy_to(partial, n_queries, sf);
      swap_value_order(partial, n_queries, sf, d);
      detail::float_tile_step<Avx512Ops>(p, kv, tile, t0, n_tile, ahead.rows(), fb, partial);
      swap_value_order(partial, n_queries, sf, d);
      if (in_aligned) aligned.copy_from(partial, n_queries, sf);
      return;
    }
    load_int_tile<KT, VT>(ahead.rows(), d, t);
    for (int i = 0; i < tile.n_tokens; ++i) {
      const detail::TileKeys k = detail::tile_keys(p, tile.positions[i], t0, n_tile);
      if (k.jb >= k.je) continue;
      for (int g0 = 0; g0 < group; g0 += kHeadBlock) {
        const int n = std::min(kHeadBlock, group - g0);
        const QuantizedQuery* qs[kHeadBlock];
        float* states[kHeadBlock];
        for (int h = 0; h < n; ++h) {
          const int64_t query = static_cast<int64_t>(i) * group + g0 + h;
          if (all_cached) {
            qs[h] = &cached[query];
          } else {
            quantize_query(query_row(query), d, local[h]);
            qs[h] = &local[h];
          }
          states[h] = in_aligned ? aligned.state(query) : partial + query * sf;
        }
        update_head_block<KT, VT>(p, qs, n, t, k.jb, k.je, scale, states, spare, ahead);
      }
    }
  });
  if (in_aligned) aligned.copy_to(partial, n_queries, sf);
  swap_value_order(partial, n_queries, sf, d);
}

}  // namespace

void attention_chunk_avx512_vnni_int(const AttentionParams& p, const KvView& kv, const QueryTile& tile, int64_t chunk,
                                     float* partial) {
  const bool k4 = kv.main.k_type == KvType::Q4, v4 = kv.main.v_type == KvType::Q4;
  if (k4 && v4) return chunk_int<KvType::Q4, KvType::Q4>(p, kv, tile, chunk, partial);
  if (k4) return chunk_int<KvType::Q4, KvType::Q8>(p, kv, tile, chunk, partial);
  if (v4) return chunk_int<KvType::Q8, KvType::Q4>(p, kv, tile, chunk, partial);
  chunk_int<KvType::Q8, KvType::Q8>(p, kv, tile, chunk, partial);
}

}  // namespace tokamak::kernels
TOKAMAK_TARGET_REGION_END
#endif
