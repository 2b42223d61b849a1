// attention_chunk with AVX2 for q8 / q4 K and V: integer dot products on the
// stored values instead of dequantizing them to f32, the AVX2 counterpart of
// attention_avx512_vnni.cpp (its header says why: with 8 query heads per KV
// head, f32 FMAs make decode at long context compute bound).
//
// The instruction: VPMADDWD (int16 x int16, adjacent pairs summed into
// int32), 16 multiply-adds each. Its byte sibling VPMADDUBSW (u8 x s8 into
// saturating int16 pairs) needs a VPMADDWD after it to reach int32 too, so it
// also spends two multiplier instructions per 32 multiply-adds, and its
// operands would need the sign trick (|a| against b * sign(a)) or a query cut
// to 7 bits to keep the pairs in int16. Widening K and V to int16 once per
// tile (shared by the query heads of the group) costs less, and a query of
// 15 bits takes one pass where VPDPBUSD's 8 bits take two.
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
//     scale group. Each weight moves by at most 2^-16 of the tile's largest.
// Why no sum can overflow (VPMADDWD cannot saturate; only int32 sums could
// wrap): |q|, |w| <= 32767 and a stored value |k|, |v| <= 128 whatever its
// bytes, so a pair sums to at most 2 * 32767 * 128 < 2^23; a score lane adds
// d / 2 <= 128 pairs (< 2^30), a value lane kKeyTile / 2 = 16 pairs (< 2^27),
// both below 2^31.
// Tiles that touch the f16 rows of mixed precision go through the float path
// of attention_impl.h, as on VNNI; the choice depends on positions only.
//
// Tile layouts (head_dim d a multiple of 32), int16 pairs in dwords:
//   K: [value pair c][key j] = (k_j[2c], k_j[2c + 1]): lane j of a vector is
//      key j, and a broadcast query pair meets 8 keys per instruction.
//   V: [key pair p][value i] = (v_2p[i], v_2p+1[i]): lane i is value i, and a
//      broadcast weight pair meets 8 values per instruction.
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
#include <immintrin.h>

TOKAMAK_TARGET_REGION_AVX2
#include "kernels/attention_impl.h"

namespace tokamak::kernels {
namespace {

#include "kernels/attention_avx2_ops.h"

constexpr int kSegment = 16;                        // values of one 128-bit load of int8
constexpr int kMaxScaleGroups = kMaxHeadDim / 32;   // of a q4 row (q8 rows have 1)
constexpr int kKeyPairs = static_cast<int>(kKeyTile) / 2;
static_assert(kKeyTile == 32, "the score and weight vectors below are 4 x 8 keys");

struct IntTile {
  alignas(32) int32_t k[kMaxHeadDim / 2][kKeyTile];  // [value pair][key]: 2 x int16
  alignas(32) int32_t v[kKeyPairs][kMaxHeadDim];     // [key pair][value]: 2 x int16
  alignas(32) float k_scale[kMaxScaleGroups][kKeyTile];
  alignas(32) float v_scale[kMaxScaleGroups][kKeyTile];
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

// Loads keys [t0, t0 + n) of the KV head into `t`; keys past n read a zero
// row (scale 0: their scores are masked, their weights 0).
template <KvType KT, KvType VT>
void load_int_tile(const KvView& kv, int head, int64_t t0, int64_t n, int d, IntTile& t) {
  alignas(32) static constexpr uint8_t kZeroRow[kMaxHeadDim + 4 * kMaxScaleGroups] = {};
  const int segments = d / kSegment;
  const uint8_t* k_rows[kKeyTile];
  const uint8_t* v_rows[kKeyTile];
  for (bool keys : {true, false}) {
    const uint8_t** rows = keys ? k_rows : v_rows;
    detail::for_each_run(kv, keys, head, t0, n, [&](KvType, const uint8_t* src, int32_t row_bytes, int64_t j, int64_t run) {
      for (int64_t r = 0; r < run; ++r) rows[j + r] = src + r * row_bytes;
    });
    for (int64_t j = n; j < kKeyTile; ++j) rows[j] = kZeroRow;
  }
  for (int g = 0; g < scale_groups(KT, d); ++g) {
    for (int j = 0; j < kKeyTile; ++j) t.k_scale[g][j] = row_scale<KT>(k_rows[j], d, g);
  }
  for (int g = 0; g < scale_groups(VT, d); ++g) {
    for (int j = 0; j < kKeyTile; ++j) t.v_scale[g][j] = row_scale<VT>(v_rows[j], d, g);
  }
  // K: 8 keys x 8 value pairs widened in registers, transposed into place.
  for (int kb = 0; kb < kKeyTile; kb += 8) {
    for (int s = 0; s < segments; ++s) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_castsi256_ps(_mm256_cvtepi8_epi16(row_segment<KT>(k_rows[kb + i], s)));
      Avx2Ops::transpose8(r, reinterpret_cast<float*>(&t.k[s * kSegment / 2][kb]), kKeyTile);
    }
  }
  // V: the bytes of two keys interleaved, then widened: (v_2p[i], v_2p+1[i]).
  for (int p = 0; p < kKeyPairs; ++p) {
    for (int s = 0; s < segments; ++s) {
      const __m128i a = row_segment<VT>(v_rows[2 * p], s);
      const __m128i b = row_segment<VT>(v_rows[2 * p + 1], s);
      __m256i* dst = reinterpret_cast<__m256i*>(&t.v[p][s * kSegment]);
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

// sc[h][j] = sum over K's scale groups of the integer dot product of query
// h with key j times the key's scale, for H heads side by side (2 x 4
// accumulators and the 4 key vectors of a value pair stay in registers).
template <KvType KT, int H>
void scores(const QuantizedQuery* const* q, const IntTile& t, int d, float (*sc)[kKeyTile]) {
  const int groups = scale_groups(KT, d);
  const int pairs = d / 2 / groups;
  for (int g = 0; g < groups; ++g) {
    __m256i acc[H][4];
    for (auto& a : acc) {
      for (__m256i& x : a) x = _mm256_setzero_si256();
    }
    for (int c = g * pairs; c < (g + 1) * pairs; ++c) {
      __m256i k[4];
      for (int v = 0; v < 4; ++v) k[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(&t.k[c][8 * v]));
      for (int h = 0; h < H; ++h) {
        const __m256i qv = _mm256_set1_epi32(q[h]->pair(c));
        for (int v = 0; v < 4; ++v) acc[h][v] = _mm256_add_epi32(acc[h][v], _mm256_madd_epi16(qv, k[v]));
      }
    }
    for (int h = 0; h < H; ++h) {
      for (int v = 0; v < 4; ++v) {
        const __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(acc[h][v]), _mm256_load_ps(t.k_scale[g] + 8 * v));
        _mm256_store_ps(sc[h] + 8 * v, g == 0 ? s : _mm256_add_ps(_mm256_load_ps(sc[h] + 8 * v), s));
      }
    }
  }
}

// The rounded softmax weights of one query head over the tile and what
// folds them into its state: wq[g] = round(w * 32767 / max|w|) per V scale
// group g, w_scale[g] = max|w| / 32767, corr = exp(m_old - m_new).
struct Weights {
  alignas(32) int16_t wq[kMaxScaleGroups][kKeyTile];
  float w_scale[kMaxScaleGroups];
  float corr;
  // (wq[g][2p], wq[g][2p + 1]) as one dword.
  int32_t pair(int g, int p) const {
    int32_t x;
    std::memcpy(&x, wq[g] + 2 * p, sizeof(x));
    return x;
  }
};

// acc[32 b .. 32 b + 32) of H heads = acc * corr + w_scale * sum_j wq_j v_j
// over the key pairs [pb, pe), for values [32 b, 32 b + 32) (one q4 group).
template <int H>
void values(const Weights* const* w, const IntTile& t, int b, int g, int pb, int pe, float* const* states) {
  __m256i acc[H][4];
  for (auto& a : acc) {
    for (__m256i& x : a) x = _mm256_setzero_si256();
  }
  for (int p = pb; p < pe; ++p) {
    __m256i v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(&t.v[p][32 * b + 8 * i]));
    for (int h = 0; h < H; ++h) {
      const __m256i wv = _mm256_set1_epi32(w[h]->pair(g, p));
      for (int i = 0; i < 4; ++i) acc[h][i] = _mm256_add_epi32(acc[h][i], _mm256_madd_epi16(wv, v[i]));
    }
  }
  for (int h = 0; h < H; ++h) {
    const __m256 corr = _mm256_set1_ps(w[h]->corr);
    const __m256 ws = _mm256_set1_ps(w[h]->w_scale[g]);
    float* out = states[h] + 2 + 32 * b;
    for (int i = 0; i < 4; ++i) {
      _mm256_storeu_ps(out + 8 * i, _mm256_fmadd_ps(_mm256_loadu_ps(out + 8 * i), corr,
                                                     _mm256_mul_ps(_mm256_cvtepi32_ps(acc[h][i]), ws)));
    }
  }
}

constexpr int kHeadBlock = 8;  // query heads of one token updated together

// One online-softmax step of n (<= kHeadBlock) query heads of one token over
// keys [jb, je) of the tile. states[h]: [m, l, acc[d]] of head h.
template <KvType KT, KvType VT>
void update_heads(const AttentionParams& p, const QuantizedQuery* const* q, int n, const IntTile& t, int jb, int je,
                  float scale, float* const* states) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int d = p.head_dim;
  alignas(32) float sc[kHeadBlock][kKeyTile];
  for (int h = 0; h < n; h += 2) {
    if (n - h >= 2) {
      scores<KT, 2>(q + h, t, d, sc + h);
    } else {
      scores<KT, 1>(q + h, t, d, sc + h);
    }
  }
  Weights w[kHeadBlock];
  const Weights* wp[kHeadBlock];
  const int v_groups = scale_groups(VT, d);
  for (int h = 0; h < n; ++h) {
    Avx2Ops::scale(sc[h], kKeyTile, q[h]->scale * scale);
    if (p.softcap > 0.0f) {
      for (int j = jb; j < je; ++j) sc[h][j] = p.softcap * std::tanh(sc[h][j] / p.softcap);
    }
    for (int j = 0; j < jb; ++j) sc[h][j] = kNegInf;
    for (int j = je; j < kKeyTile; ++j) sc[h][j] = kNegInf;
    const float m_old = states[h][0];
    const float m_new = std::max(m_old, Avx2Ops::max(sc[h], kKeyTile));
    w[h].corr = m_old == kNegInf ? 0.0f : Avx2Ops::exp1(m_old - m_new);
    Avx2Ops::exp_shift(sc[h], kKeyTile, m_new);
    states[h][0] = m_new;
    states[h][1] = states[h][1] * w[h].corr + Avx2Ops::sum(sc[h], kKeyTile);
    for (int g = 0; g < v_groups; ++g) {
      __m256 wf[4];
      __m256 amax = _mm256_setzero_ps();
      for (int i = 0; i < 4; ++i) {
        wf[i] = _mm256_mul_ps(_mm256_load_ps(sc[h] + 8 * i), _mm256_load_ps(t.v_scale[g] + 8 * i));
        amax = _mm256_max_ps(amax, abs_ps(wf[i]));
      }
      const float m = Avx2Ops::reduce_max(amax);
      const __m256 inv = _mm256_set1_ps(m > 0.0f ? 32767.0f / m : 0.0f);
      w[h].w_scale[g] = m / 32767.0f;
      alignas(32) float wv[kKeyTile];
      for (int i = 0; i < 4; ++i) _mm256_store_ps(wv + 8 * i, wf[i]);
      for (int i = 0; i < 2; ++i) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(w[h].wq[g] + 16 * i), round16(wv + 16 * i, inv));
      }
    }
    wp[h] = &w[h];
  }
  // Key pairs holding [jb, je): the other keys' weights are 0.
  const int pb = jb / 2, pe = (je + 1) / 2;
  for (int b = 0; b < d / 32; ++b) {
    const int g = v_groups == 1 ? 0 : b;
    for (int h = 0; h < n; h += 2) {
      if (n - h >= 2) {
        values<2>(wp + h, t, b, g, pb, pe, states + h);
      } else {
        values<1>(wp + h, t, b, g, pb, pe, states + h);
      }
    }
  }
}

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
  // Queries are rounded once per chunk when they fit in `cached` (a prefill
  // query tile of 16 tokens x 8 heads: 66 KB of stack), else once per tile;
  // the values are the same either way.
  constexpr int kCached = 128;
  QuantizedQuery cached[kCached];
  const bool all_cached = n_queries <= kCached;
  if (all_cached) {
    for (int64_t query = 0; query < n_queries; ++query) quantize_query(query_row(query), d, cached[query]);
  }
  QuantizedQuery local[kHeadBlock];
  detail::FloatTileBuffers<Avx2Ops> fb;
  IntTile t;
  detail::for_each_chunk_tile(p, kv, tile, chunk, partial, [&](int64_t t0, int64_t n_tile) {
    if (!detail::in_main_pages(kv, t0, n_tile)) {
      detail::float_tile_step<Avx2Ops>(p, kv, tile, t0, n_tile, fb, partial);
      return;
    }
    load_int_tile<KT, VT>(kv, tile.kv_head, t0, n_tile, d, t);
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
          states[h] = partial + query * sf;
        }
        update_heads<KT, VT>(p, qs, n, t, k.jb, k.je, scale, states);
      }
    }
  });
}

}  // namespace

void attention_chunk_avx2_int(const AttentionParams& p, const KvView& kv, const QueryTile& tile, int64_t chunk,
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
