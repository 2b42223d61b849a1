// Internal to attention_avx2_int.cpp and attention_avx_vnni_int.cpp, which
// include it inside their target regions, in an anonymous namespace, after
// attention_impl.h (and exp_cephes.h and exp2_poly.h outside the regions):
// attention_chunk with AVX2 for q8 / q4 K and V, integer dot products on the
// stored values instead of dequantizing them to f32, the AVX2 counterpart of
// attention_avx512_vnni.cpp (its header says why: with 8 query heads per KV
// head, f32 FMAs make decode at long context compute bound). int_chunk below
// is the entry point.
//
// The instruction: VPMADDWD (int16 x int16, adjacent pairs summed into
// int32), 16 multiply-adds each, and a VPADDD to accumulate; with AVX-VNNI
// (TOKAMAK_ATTENTION_INT_VNNI set by the includer: Alder Lake and later
// Intel client CPUs, Zen 5) VPDPWSSD does both, the same exact sums in half
// the instructions, and q8 V's products take VPDPBUSD with 8-bit weights
// (byte_values below: 32 multiply-adds an instruction; attention_bench q8 at
// 8K on Zen 5, min of 5 in 5 alternations, 748-776 -> 637-684 us in cache,
// 759-824 -> 659-702 from DRAM; tokamak bench tg32 at ctx 8192, Q4_0, 4 of
// 4 pairs, 41.6-44.2 -> 44.9-45.4 t/s). Its byte sibling VPMADDUBSW (u8 x s8 into
// saturating int16 pairs) needs a VPMADDWD after it to reach int32 too, so it
// also spends two multiplier instructions per 32 multiply-adds, and its
// operands would need the sign trick (|a| against b * sign(a)) or a query cut
// to 7 bits to keep the pairs in int16. Widening K and V to int16 once per
// tile (shared by the query heads of the group) costs less, and a query of
// 15 bits takes one pass where VPDPBUSD's 8 bits take two.
//
// Lanes are query heads: the 8 lanes of a vector are up to 8 query heads of
// one token that share the KV head (a "head block"). A key's int16 pair is
// broadcast against the heads' query pairs, so K is widened but never
// transposed, every score of a key lands in one vector, and the online
// softmax (max, exp, sum, the weights' rounding) runs down the keys with no
// horizontal reduction. The weights of a key pair meet the broadcast V pair
// of each value likewise, and the running state stays [value][head] for the
// whole chunk, written out as [head][m, l, acc] at its end. A lane's
// arithmetic never depends on the other lanes, so a query's result is the
// same whichever heads, tokens or chunks share its vectors.
//
// The arithmetic, per tile of kKeyTile keys and per query head:
//   scores: the query is rounded to int16 q (absmax -> 32767, scale sq); K
//     rows are int8 k (q8, or q4 nibble - 8) with a scale sk per row (q8) or
//     per 32 values (q4): s_j = sq * sum over groups (sk_jg * sum_c k_jc q_c)
//     / sqrt(d). Exact integer sums; the query's rounding is 2^-16 of its
//     largest value, far below K's own storage error.
//   values: p_j = exp(s_j - m) is exact f32 for the softmax sum l; the
//     weights w_j = p_j * sv_j (signed: a q4 scale is negative when its
//     largest value is positive) are rounded to int16 over the tile (max |w|
//     -> 32767) and VPMADDWD sums them against the int16 V values, per V
//     scale group. Each weight moves by at most 2^-16 of the tile's largest
//     (with byte_values, to u8 over the tile, max -> 255: 2^-9 of it).
// Why no sum can overflow (VPMADDWD cannot saturate; only int32 sums could
// wrap): |q|, |w| <= 32767 and a stored value |k|, |v| <= 128 whatever its
// bytes, so a pair sums to at most 2 * 32767 * 128 < 2^23; a score lane adds
// d / 2 <= 128 pairs (< 2^30), a value lane kKeyTile / 2 = 16 pairs (< 2^27),
// both below 2^31.
// Tiles that touch the f16 rows of mixed precision go through the float path
// of attention_impl.h, as on VNNI; the choice depends on positions only, and
// those tiles follow all the integer ones of a chunk (the f16 rows are the
// newest positions).
//
// Tile layouts (head_dim d a multiple of 32):
//   K: [key j][value c] int16: the widened rows; (k_j[2c], k_j[2c + 1]) is
//      one dword, broadcast against 8 heads' (q[2c], q[2c + 1]).
//   V: [key pair p][value i] = (v_2p[i], v_2p+1[i]) int16 pairs in dwords,
//      broadcast against 8 heads' (w_2p, w_2p+1); with byte_values, [key quad
//      p][value i] = (v_4p[i], .., v_4p+3[i]) int8 in dwords against 8 heads'
//      u8 (w_4p, .., w_4p+3).
#pragma once

#include "kernels/exp_avx2.h"
#include "kernels/attention_avx2_ops.h"

// exp(x) for the softmax step, x <= 0 (scores less their running max):
// 2^n 2^f with n = round(x log2 e), 2^f by exp2_poly.h's polynomial (relative
// error <= 3e-6, against Cephes' ~1e-7 in exp_avx2), 14 instructions where
// exp_avx2 takes 20; below ln(FLT_MIN), and for -inf, 0. The weights p go on
// to be rounded to 16 bits (1/65535 of the tile's largest): a third of their
// error at most.
inline __m256 softmax_exp(__m256 x) {
  const __m256 lo = _mm256_set1_ps(cephes_exp::kMin);
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_max_ps(x, lo);
  const __m256 log2e = _mm256_set1_ps(cephes_exp::kLog2e);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_fmsub_ps(x, log2e, n);
  __m256 y = _mm256_set1_ps(exp2_poly::kPoly[0]);
#pragma GCC unroll 4
  for (size_t i = 1; i < std::size(exp2_poly::kPoly); ++i) {
    y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(exp2_poly::kPoly[i]));
  }
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(under, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}

constexpr int kSegment = 16;                        // values of one 128-bit load of int8
constexpr int kMaxScaleGroups = kMaxHeadDim / 32;   // of a q4 row (q8 rows have 1)
constexpr int kKeyPairs = static_cast<int>(kKeyTile) / 2;
constexpr int kKeyQuads = static_cast<int>(kKeyTile) / 4;
constexpr int kLanes = 8;                           // query heads of a head block
constexpr int kKeyBlock = 8;                        // keys whose scores are summed together
static_assert(kKeyTile % kKeyBlock == 0);

// Whether the values go through VPDPBUSD, 32 multiply-adds an instruction:
// with AVX-VNNI and q8 V (whose row scales are never negative, so that the
// weights p_j * sv_j meet V as unsigned bytes), the weights are rounded to 8
// bits (1/255 of the tile's largest, as the AVX-512 VNNI kernel does) and V
// stays int8, key quads interleaved: half the product instructions of
// VPDPWSSD's int16 pairs, and no widening of V. Otherwise 16-bit weights.
template <KvType VT>
constexpr bool byte_values() {
  return TOKAMAK_ATTENTION_INT_VNNI && VT == KvType::Q8;
}

// int32 lanes as a GCC vector: `acc += x` on it keeps loop-carried sums in
// their registers, where _mm256_add_epi32(acc, x) makes GCC 12 copy every
// sum back after each add (8 moves and a spill per 8 multiply-adds).
typedef int32_t Sums __attribute__((vector_size(32)));

// acc + the sums of the adjacent int16 products of a and b (exact: see the
// top for why neither can wrap).
[[gnu::always_inline]] inline Sums add_pair_products(Sums acc, __m256i a, __m256i b) {
#if TOKAMAK_ATTENTION_INT_VNNI
  return Sums(_mm256_dpwssd_avx_epi32(__m256i(acc), a, b));
#else
  return acc + Sums(_mm256_madd_epi16(a, b));
#endif
}

// Rows are d values long, not kMaxHeadDim: a tile of heads of 64 then fills
// 8 KB of L1 in two runs instead of 64 scattered lines that share 8 sets
// (strides of 512 B and 1 KB), which evicted the next tile's prefetched rows.
struct IntTile {
  alignas(32) int16_t k[kKeyTile * kMaxHeadDim];   // [key j][value c] at j * d + c
  alignas(32) int32_t v[kKeyPairs * kMaxHeadDim];  // [key pair p][value i] at p * d + i: 2 x int16
  alignas(32) int32_t v8[kKeyQuads * kMaxHeadDim];  // byte_values: [key quad p][value i] at p * d + i: 4 x int8
  alignas(32) float k_scale[kMaxScaleGroups][kKeyTile];
  alignas(32) float v_scale[kMaxScaleGroups][kKeyTile];
  int d = 0;
  // (k_j[2c], k_j[2c + 1]) as one dword.
  int32_t k_pair(int j, int c) const {
    int32_t x;
    std::memcpy(&x, k + j * d + 2 * c, sizeof(x));
    return x;
  }
  int32_t v_pair(int p, int i) const { return v[p * d + i]; }
};

constexpr int scale_groups(KvType t, int d) { return t == KvType::Q4 ? d / 32 : 1; }

// Values [16 s, 16 s + 16) of a q8 or q4 row as int8. A q4 group of 32 keeps
// value i in the low nibble of byte i and value i + 16 in its high nibble.
template <KvType T>
__m128i row_segment(const uint8_t* row, int s) {
  if constexpr (T == KvType::Q8) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + s * kSegment));
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + s / 2 * kSegment));
  const __m128i nibbles = s % 2 == 0 ? x : _mm_srli_epi16(x, 4);
  return _mm_sub_epi8(_mm_and_si128(nibbles, _mm_set1_epi8(0x0f)), _mm_set1_epi8(8));
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
  return fp16_to_fp32(h);
}

// Loads the keys whose rows are `tile_rows` (TilePrefetch::rows) into `t`;
// keys past the tile's end read a zero row (scale 0: their scores are
// masked, their weights 0).
template <KvType KT, KvType VT>
void load_int_tile(const detail::TilePrefetch::TileRows& tile_rows, int d, IntTile& t) {
  const int segments = d / kSegment;
  const uint8_t* const* k_rows = tile_rows.k;
  const uint8_t* const* v_rows = tile_rows.v;
  for (int g = 0; g < scale_groups(KT, d); ++g) {
    for (int j = 0; j < kKeyTile; ++j) t.k_scale[g][j] = row_scale<KT>(k_rows[j], d, g);
  }
  for (int g = 0; g < scale_groups(VT, d); ++g) {
    for (int j = 0; j < kKeyTile; ++j) t.v_scale[g][j] = row_scale<VT>(v_rows[j], d, g);
  }
  t.d = d;
  for (int j = 0; j < kKeyTile; ++j) {
    for (int s = 0; s < segments; ++s) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(t.k + j * d + s * kSegment),
                         _mm256_cvtepi8_epi16(row_segment<KT>(k_rows[j], s)));
    }
  }
  if constexpr (byte_values<VT>()) {
    // V: the bytes of four keys interleaved: (v_4p[i], .., v_4p+3[i]).
    for (int p = 0; p < kKeyQuads; ++p) {
      for (int s = 0; s < segments; ++s) {
        const __m128i a = row_segment<VT>(v_rows[4 * p], s);
        const __m128i b = row_segment<VT>(v_rows[4 * p + 1], s);
        const __m128i c = row_segment<VT>(v_rows[4 * p + 2], s);
        const __m128i e = row_segment<VT>(v_rows[4 * p + 3], s);
        const __m128i ab_lo = _mm_unpacklo_epi8(a, b), ab_hi = _mm_unpackhi_epi8(a, b);
        const __m128i ce_lo = _mm_unpacklo_epi8(c, e), ce_hi = _mm_unpackhi_epi8(c, e);
        __m128i* dst = reinterpret_cast<__m128i*>(t.v8 + p * d + s * kSegment);
        _mm_store_si128(dst, _mm_unpacklo_epi16(ab_lo, ce_lo));      // values 0-3 of the segment
        _mm_store_si128(dst + 1, _mm_unpackhi_epi16(ab_lo, ce_lo));  // 4-7
        _mm_store_si128(dst + 2, _mm_unpacklo_epi16(ab_hi, ce_hi));  // 8-11
        _mm_store_si128(dst + 3, _mm_unpackhi_epi16(ab_hi, ce_hi));  // 12-15
      }
    }
    return;
  }
  // V: the bytes of two keys interleaved, then widened: (v_2p[i], v_2p+1[i]).
  for (int p = 0; p < kKeyPairs; ++p) {
    for (int s = 0; s < segments; ++s) {
      const __m128i a = row_segment<VT>(v_rows[2 * p], s);
      const __m128i b = row_segment<VT>(v_rows[2 * p + 1], s);
      __m256i* dst = reinterpret_cast<__m256i*>(t.v + p * d + s * kSegment);
      _mm256_store_si256(dst, _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b)));
      _mm256_store_si256(dst + 1, _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(a, b)));
    }
  }
}

// A query head rounded to int16: x ~ scale * q, q = round(x * 32767 / max|x|).
struct QuantizedQuery {
  alignas(32) int16_t q[kMaxHeadDim];
  float scale = 0.0f;
  // (q[2c], q[2c + 1]) as one dword.
  int32_t pair(int c) const {
    int32_t x;
    std::memcpy(&x, q + 2 * c, sizeof(x));
    return x;
  }
};

__m256 abs_ps(__m256 x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }

// int16 of 16 floats times `scale`, rounded to nearest, in order.
__m256i round16(const float* x, __m256 scale) {
  const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), scale));
  const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), scale));
  return _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), _MM_SHUFFLE(3, 1, 2, 0));
}

void quantize_query(const float* x, int d, QuantizedQuery& out) {
  __m256 amax = _mm256_setzero_ps();
  for (int c = 0; c < d; c += 8) amax = _mm256_max_ps(amax, abs_ps(_mm256_loadu_ps(x + c)));
  const float m = Avx2Ops::reduce_max(amax);
  out.scale = m / 32767.0f;
  const __m256 inv = _mm256_set1_ps(m > 0.0f ? 32767.0f / m : 0.0f);
  for (int c = 0; c < d; c += 16) _mm256_store_si256(reinterpret_cast<__m256i*>(out.q + c), round16(x + c, inv));
}

// A head block: n <= kLanes query heads of one token, head h in lane h, as
// views into a pass buffer of floats (block_floats(d) each, 32-byte aligned).
struct HeadBlock {
  int32_t* q;      // [d / 2][kLanes]: (q[2c], q[2c + 1]) of each head
  float* q_scale;  // [kLanes]: the query's scale / sqrt(d); 0 in unused lanes
  float* m;        // [kLanes]: running max of scores
  float* l;        // [kLanes]: running sum of exp(score - m)
  float* acc;      // [d][kLanes]: running sum of exp(score - m) * v
};
constexpr int block_floats(int d) { return (d / 2 + 3 + d) * kLanes; }
HeadBlock head_block(float* at, int d) {
  HeadBlock b;
  b.q = reinterpret_cast<int32_t*>(at);
  b.q_scale = at + d / 2 * kLanes;
  b.m = b.q_scale + kLanes;
  b.l = b.m + kLanes;
  b.acc = b.l + kLanes;
  return b;
}

// Sets b to the empty state of the n heads whose rows are rows[0..n).
void init_block(const float* const* rows, int n, int d, float scale, const HeadBlock& b) {
  std::fill(b.q, b.q + d / 2 * kLanes, 0);
  std::fill(b.q_scale, b.q_scale + kLanes, 0.0f);
  QuantizedQuery qq;
  for (int h = 0; h < n; ++h) {
    quantize_query(rows[h], d, qq);
    for (int c = 0; c < d / 2; ++c) b.q[c * kLanes + h] = qq.pair(c);
    b.q_scale[h] = qq.scale * scale;
  }
  std::fill(b.m, b.m + kLanes, -std::numeric_limits<float>::infinity());
  std::fill(b.l, b.l + kLanes, 0.0f);
  std::fill(b.acc, b.acc + d * kLanes, 0.0f);
}

// states[h] = [m, l, acc[d]] of lane h, h < n.
void store_block(const HeadBlock& b, int n, int d, float* const* states) {
  for (int h = 0; h < n; ++h) {
    states[h][0] = b.m[h];
    states[h][1] = b.l[h];
    for (int i = 0; i < d; ++i) states[h][2 + i] = b.acc[i * kLanes + h];
  }
}

// s[j] = the block's scores of keys [kb, ke) (whole key blocks): per head,
// the sum over K's scale groups of the integer dot product times the key's
// scale, times the query's scale.
// Asks for the next tile's lines as it goes (TilePrefetch::issue), one per
// step of 8 keys x a value pair: ~70 lines go out over the first two of
// the tile's four key blocks.
template <KvType KT>
void scores(const HeadBlock& b, const IntTile& t, int d, int kb, int ke, float (*s)[kLanes], detail::TilePrefetch& ahead) {
  const int groups = scale_groups(KT, d);
  const int pairs = d / 2 / groups;
  for (int j0 = kb; j0 < ke; j0 += kKeyBlock) {
    for (int g = 0; g < groups; ++g) {
      Sums acc[kKeyBlock] = {};
      for (int c = g * pairs; c < (g + 1) * pairs; ++c) {
        ahead.issue(1);
        const __m256i qv = _mm256_load_si256(reinterpret_cast<const __m256i*>(b.q + c * kLanes));
        for (int u = 0; u < kKeyBlock; ++u) acc[u] = add_pair_products(acc[u], _mm256_set1_epi32(t.k_pair(j0 + u, c)), qv);
      }
      for (int u = 0; u < kKeyBlock; ++u) {
        const __m256 x = _mm256_mul_ps(_mm256_cvtepi32_ps(__m256i(acc[u])), _mm256_set1_ps(t.k_scale[g][j0 + u]));
        _mm256_store_ps(s[j0 + u], g == 0 ? x : _mm256_add_ps(_mm256_load_ps(s[j0 + u]), x));
      }
    }
  }
  const __m256 qs = _mm256_load_ps(b.q_scale);
  for (int j = kb; j < ke; ++j) _mm256_store_ps(s[j], _mm256_mul_ps(_mm256_load_ps(s[j]), qs));
}

// The softmax weights p_j * sv_j of keys [jb, je) (p in s[j], sv in
// scales[j]), rounded to integers over the tile: the largest |weight| of
// each lane -> `levels`. inv is the factor into that range (0 in a lane
// without weight), scale the one back (max |weight| / levels).
struct WeightRounding {
  __m256 inv, scale;
};
WeightRounding weight_rounding(const float (*s)[kLanes], const float* scales, int jb, int je, float levels) {
  __m256 amax = _mm256_setzero_ps();
  for (int j = jb; j < je; ++j) amax = _mm256_max_ps(amax, abs_ps(_mm256_mul_ps(_mm256_load_ps(s[j]), _mm256_set1_ps(scales[j]))));
  const __m256 positive = _mm256_cmp_ps(amax, _mm256_setzero_ps(), _CMP_GT_OQ);
  return {_mm256_and_ps(positive, _mm256_div_ps(_mm256_set1_ps(levels), amax)),
          _mm256_div_ps(amax, _mm256_set1_ps(levels))};
}
// The weight of key j so rounded, 0 outside [jb, je).
__m256i rounded_weight(const float (*s)[kLanes], const float* scales, int j, int jb, int je, __m256 inv) {
  if (j < jb || j >= je) return _mm256_setzero_si256();
  return _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_mul_ps(_mm256_load_ps(s[j]), _mm256_set1_ps(scales[j])), inv));
}
// acc[i0 + u] = acc[i0 + u] * corr + sums[u] * scale for the 8 values from i0.
[[gnu::always_inline]] inline void add_value_sums(const HeadBlock& b, int i0, const Sums (&sums)[8], __m256 corr,
                                                  __m256 scale) {
  for (int u = 0; u < 8; ++u) {
    float* out = b.acc + (i0 + u) * kLanes;
    _mm256_store_ps(out, _mm256_fmadd_ps(_mm256_load_ps(out), corr, _mm256_mul_ps(_mm256_cvtepi32_ps(__m256i(sums[u])), scale)));
  }
}

// The values of update_block with byte_values<VT>() (instantiated by the
// AVX-VNNI build only): acc[i] = acc[i] * corr +
// w_scale * sum over key quads of w . (v_4p[i], .., v_4p+3[i]), the weights
// p_j * sv_j of keys [jb, je) (s[j], not negative) rounded to u8 over the
// tile (max -> 255; other keys weigh 0). Exact int32 sums: a quad adds at
// most 4 * 255 * 128 < 2^17, a lane kKeyQuads of them.
template <KvType VT>
void byte_values_step(const HeadBlock& b, const IntTile& t, int d, int jb, int je, const float (*s)[kLanes],
                      __m256 corr) {
  static_assert(byte_values<VT>());
  const WeightRounding r = weight_rounding(s, t.v_scale[0], jb, je, 255.0f);
  auto rounded = [&](int j) { return rounded_weight(s, t.v_scale[0], j, jb, je, r.inv); };
  const int qb = jb / 4, qe = (je + 3) / 4;
  alignas(32) int32_t w[kKeyQuads][kLanes];  // [quad][head]: 4 x u8, key 4q in the low byte
  for (int q = qb; q < qe; ++q) {
    const __m256i lo = _mm256_or_si256(rounded(4 * q), _mm256_slli_epi32(rounded(4 * q + 1), 8));
    const __m256i hi = _mm256_or_si256(_mm256_slli_epi32(rounded(4 * q + 2), 16), _mm256_slli_epi32(rounded(4 * q + 3), 24));
    _mm256_store_si256(reinterpret_cast<__m256i*>(w[q]), _mm256_or_si256(lo, hi));
  }
  for (int i0 = 0; i0 < d; i0 += 8) {
    Sums acc[8] = {};
    for (int q = qb; q < qe; ++q) {
      const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(w[q]));
      for (int u = 0; u < 8; ++u) {
        acc[u] = Sums(_mm256_dpbusd_avx_epi32(__m256i(acc[u]), wv, _mm256_set1_epi32(t.v8[q * d + i0 + u])));
      }
    }
    add_value_sums(b, i0, acc, corr, r.scale);
  }
}

// One online-softmax step of a head block over keys [jb, je) of the tile.
template <KvType KT, KvType VT>
void update_block(const AttentionParams& p, const HeadBlock& b, const IntTile& t, int jb, int je,
                  detail::TilePrefetch& ahead) {
  const int d = p.head_dim;
  alignas(32) float s[kKeyTile][kLanes];
  scores<KT>(b, t, d, jb / kKeyBlock * kKeyBlock, (je + kKeyBlock - 1) / kKeyBlock * kKeyBlock, s, ahead);
  if (p.softcap > 0.0f) {
    for (int j = jb; j < je; ++j) {
      for (float& x : s[j]) x = p.softcap * std::tanh(x / p.softcap);
    }
  }
  const __m256 m_old = _mm256_load_ps(b.m);
  __m256 m_new = m_old;
  for (int j = jb; j < je; ++j) m_new = _mm256_max_ps(m_new, _mm256_load_ps(s[j]));
  // exp(-inf) is 0: a head's first keys start its sums afresh.
  const __m256 corr = softmax_exp(_mm256_sub_ps(m_old, m_new));
  __m256 l = _mm256_setzero_ps();
  for (int j = jb; j < je; ++j) {
    const __m256 e = softmax_exp(_mm256_sub_ps(_mm256_load_ps(s[j]), m_new));
    _mm256_store_ps(s[j], e);
    l = _mm256_add_ps(l, e);
  }
  _mm256_store_ps(b.m, m_new);
  _mm256_store_ps(b.l, _mm256_add_ps(_mm256_mul_ps(_mm256_load_ps(b.l), corr), l));

  if constexpr (byte_values<VT>()) {
    byte_values_step<VT>(b, t, d, jb, je, s, corr);
    return;
  }
  // The weights of key pairs [pb, pe), rounded per V scale group; keys
  // outside [jb, je) weigh 0.
  const int pb = jb / 2, pe = (je + 1) / 2;
  const int v_groups = scale_groups(VT, d);
  alignas(32) int32_t w[kMaxScaleGroups][kKeyPairs][kLanes];
  alignas(32) float w_scale[kMaxScaleGroups][kLanes];
  const __m256i low16 = _mm256_set1_epi32(0xffff);
  for (int g = 0; g < v_groups; ++g) {
    const WeightRounding r = weight_rounding(s, t.v_scale[g], jb, je, 32767.0f);
    _mm256_store_ps(w_scale[g], r.scale);
    auto rounded = [&](int j) { return rounded_weight(s, t.v_scale[g], j, jb, je, r.inv); };
    for (int q = pb; q < pe; ++q) {
      const __m256i pair = _mm256_or_si256(_mm256_and_si256(rounded(2 * q), low16), _mm256_slli_epi32(rounded(2 * q + 1), 16));
      _mm256_store_si256(reinterpret_cast<__m256i*>(w[g][q]), pair);
    }
  }

  // acc[i] = acc[i] * corr + w_scale * sum over key pairs of w . (v_2p[i], v_2p+1[i]).
  for (int i0 = 0; i0 < d; i0 += 8) {
    const int g = v_groups == 1 ? 0 : i0 / 32;
    Sums acc[8] = {};
    for (int q = pb; q < pe; ++q) {
      const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(w[g][q]));
      for (int u = 0; u < 8; ++u) acc[u] = add_pair_products(acc[u], _mm256_set1_epi32(t.v_pair(q, i0 + u)), wv);
    }
    add_value_sums(b, i0, acc, corr, _mm256_load_ps(w_scale[g]));
  }
}

// The head blocks' pass buffer: a prefill query tile of 16 tokens x 8 heads
// of 64 takes one pass, of 128 two; each pass reloads the K/V tiles.
constexpr int kPassFloats = 16384;

template <KvType KT, KvType VT>
void chunk_int(const AttentionParams& p, const KvView& kv, const QueryTile& tile, int64_t chunk, float* partial) {
  const int d = p.head_dim;
  const int group = p.group();
  const int64_t sf = attention_state_floats(p);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  attention_reset(p, static_cast<int64_t>(tile.n_tokens) * group, partial);
  const detail::ChunkKeys keys = detail::chunk_keys(p, tile, chunk);
  const int64_t look_ahead = detail::look_ahead_end(p, tile, chunk);
  // The integer tiles: those wholly in the main pages, a prefix of the chunk's.
  int64_t int_end = keys.begin;
  while (int_end < keys.end && detail::in_main_pages(kv, int_end, std::min(kKeyTile, keys.end - int_end))) {
    int_end += kKeyTile;
  }
  int_end = std::min(int_end, keys.end);
  // Block b: token b / head_blocks, heads [(b % head_blocks) * kLanes, ..) of the group.
  const int head_blocks = (group + kLanes - 1) / kLanes;
  const int n_blocks = tile.n_tokens * head_blocks;
  const int per_pass = kPassFloats / block_floats(d);
  auto block_heads = [&](int blk, const float** rows, float** states) {
    const int i = blk / head_blocks, g0 = blk % head_blocks * kLanes;
    const int n = std::min(kLanes, group - g0);
    for (int h = 0; h < n; ++h) {
      const int64_t query = static_cast<int64_t>(i) * group + g0 + h;  // token * group + head in group
      rows[h] = tile.q[i] + (static_cast<int64_t>(tile.kv_head) * group + g0 + h) * d;
      states[h] = partial + query * sf;
    }
    return n;
  };
  alignas(32) float pass[kPassFloats];
  IntTile t;
  for (int b0 = 0; b0 < n_blocks && keys.begin < int_end; b0 += per_pass) {
    const int b1 = std::min(n_blocks, b0 + per_pass);
    for (int blk = b0; blk < b1; ++blk) {
      const float* rows[kLanes];
      float* states[kLanes];
      const int n = block_heads(blk, rows, states);
      init_block(rows, n, d, scale, head_block(pass + (blk - b0) * block_floats(d), d));
    }
    // Each next tile's lines gathered before a step and dripped during it,
    // the one after asked into L2 at once; the last pass looks ahead into the
    // float tiles or the next chunk. The L2 stage was off (723966f: one
    // thread over one layer's cache, 2-5% faster without it), but a decode
    // step at 8K, two threads reading 22 layers' KV beside the weights, runs
    // faster with it (Q4_0, q8 KV, tg32 at ctx 8192 alternated: AVX2 +4% in
    // 5 of 5 pairs and +3% in 4 of 6, AVX-VNNI +3% in 4 of 5); dripping its
    // requests (issue_far beside issue) was 8% slower than asking at once.
    detail::TilePrefetch ahead(true);
    const int64_t ahead_end = b1 < n_blocks ? int_end : int_end < keys.end ? keys.end : look_ahead;
    detail::for_each_tile(kv, tile.kv_head, keys.begin, int_end, ahead_end, ahead, [&](int64_t t0, int64_t n_tile) {
      load_int_tile<KT, VT>(ahead.rows(), d, t);
      for (int blk = b0; blk < b1; ++blk) {
        const detail::TileKeys k = detail::tile_keys(p, tile.positions[blk / head_blocks], t0, n_tile);
        if (k.jb < k.je) update_block<KT, VT>(p, head_block(pass + (blk - b0) * block_floats(d), d), t, k.jb, k.je, ahead);
      }
    });
    for (int blk = b0; blk < b1; ++blk) {
      const float* rows[kLanes];
      float* states[kLanes];
      const int n = block_heads(blk, rows, states);
      store_block(head_block(pass + (blk - b0) * block_floats(d), d), n, d, states);
    }
  }
  if (int_end < keys.end) {
    detail::FloatTileBuffers<Avx2Ops> fb;
    detail::TilePrefetch ahead(false);
    detail::for_each_tile(kv, tile.kv_head, int_end, keys.end, look_ahead, ahead, [&](int64_t t0, int64_t n_tile) {
      detail::float_tile_step<Avx2Ops>(p, kv, tile, t0, n_tile, ahead.rows(), fb, partial);
    });
  }
}

// The chunk kernel for kv's K and V types.
void int_chunk(const AttentionParams& p, const KvView& kv, const QueryTile& tile, int64_t chunk, float* partial) {
  const bool k4 = kv.main.k_type == KvType::Q4, v4 = kv.main.v_type == KvType::Q4;
  if (k4 && v4) return chunk_int<KvType::Q4, KvType::Q4>(p, kv, tile, chunk, partial);
  if (k4) return chunk_int<KvType::Q4, KvType::Q8>(p, kv, tile, chunk, partial);
  if (v4) return chunk_int<KvType::Q8, KvType::Q4>(p, kv, tile, chunk, partial);
  chunk_int<KvType::Q8, KvType::Q8>(p, kv, tile, chunk, partial);
}
