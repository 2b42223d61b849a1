// Internal to matmul_avx2_interleaved_impl.h (AVX2 and AVX-VNNI builds) and
// matmul_avx512_vnni_interleaved.cpp:
// reading groups of 8 interleaved rows (kernels/interleave.h) with 256-bit
// vectors, one row per 32-bit lane: the activation rows, the K-quants' scale
// unpacking, and a super-block's values unpacked once for many tokens.
// Written once and compiled by each of those files under its own target
// (included inside its target region); everything has internal linkage, so
// no function compiled for one target stands in for the other's.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/matmul_act.h"

namespace tokamak::kernels {
namespace {

// How far ahead a 16-bit (F16, BF16) decode prefetches each group's weights
// (2 KiB: 128 elements of 8 rows). A decode tile reads 4 groups, 4 streams,
// which the hardware prefetchers alone followed at ~22-27 GB/s on one Zen 5
// core; with these ~26-33 (matmul_bench GemvX8/f16 threads:1,
// TOKAMAK_BENCH_ISA=avx2, 4 alternations; 1 KiB ahead ~22-28, 3 and 4 KiB
// level with 2).
constexpr size_t kPrefetchBytesF16 = 2048;

// Where a decode tile of n_groups streams prefetches at element i, from the
// start of each group: kPrefetchBytesF16 ahead, and past a group's end in
// the group n_groups on, which the same stream reads in the next tile (the
// group after it is the next stream's, already read). Going on into the next
// group, the next tile's 4 streams started cold: tg32 F16 6-7% slower when
// the host read ~83 GB/s (AVX2 and AVX-512 kernels), 2% at ~49 (Zen 5 VM).
inline size_t prefetch_offset_f16(int64_t i, size_t group_bytes, int n_groups) {
  const size_t at = 16 * static_cast<size_t>(i) + kPrefetchBytesF16;
  return at < group_bytes ? at : at + static_cast<size_t>(n_groups - 1) * group_bytes;
}

inline __m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
// Activations j*4 .. j*4+3 of a block in every 32-bit lane.
inline __m256i broadcast4(const uint8_t* xq, int j) {
  int32_t v;
  std::memcpy(&v, xq + 4 * j, sizeof(v));
  return _mm256_set1_epi32(v);
}

struct ActRows {
  const uint8_t* base;
  size_t stride;
  ActLayout layout;
  const uint8_t* qs(int64_t t) const { return base + static_cast<size_t>(t) * stride; }
  const float* d(int64_t t) const { return reinterpret_cast<const float*>(qs(t) + layout.d_offset); }
  const int16_t* sums(int64_t t) const { return reinterpret_cast<const int16_t*>(qs(t) + layout.sums_offset); }
};

// A super-block's scales and mins for 8 rows: scales as bytes at 8s + r
// (sub-block s, row r); mins as 4 vectors of int16 pairs (m[2p][r],
// m[2p + 1][r]) per row lane r, for vpmaddwd against the activations' sub-block sums.
struct Q4KScales {
  alignas(32) uint8_t sc[64];
  __m256i m16[4];
};

inline void unpack_q4_k_scales(const uint8_t* p, Q4KScales& out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const __m256i l0 = load256(p + 32), l1 = load256(p + 64), h = load256(p + 96);
  _mm256_store_si256(reinterpret_cast<__m256i*>(out.sc), _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30)));
  _mm256_store_si256(reinterpret_cast<__m256i*>(out.sc + 32), _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(h, m30)));
  alignas(32) uint8_t mn[64];
  _mm256_store_si256(reinterpret_cast<__m256i*>(mn),
                     _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30)));
  _mm256_store_si256(reinterpret_cast<__m256i*>(mn + 32),
                     _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30)));
  for (int q = 0; q < 4; ++q) {
    const __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn + 16 * q));
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn + 16 * q + 8));
    out.m16[q] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, b));
  }
}

inline __m256i scales_of(const Q4KScales& s, int sub) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s.sc + 8 * sub)));
}

// Row lane r of the result: the int8 at bytes[8s + r], widened (signed or not).
template <bool kSigned>
inline __m256i byte_per_row(const uint8_t* bytes) {
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes));
  return kSigned ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v);
}
// Int16 pairs (v[2c], v[2c + 1]) per row lane from bytes at 8s + r, for vpmaddwd
// against the activations' sums per 16 (pair c: permutevar8x32 lane c).
template <bool kSigned>
inline __m256i byte_pairs_per_row(const uint8_t* bytes, int c) {
  const __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes + 16 * c));
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes + 16 * c + 8));
  return kSigned ? _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b)) : _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, b));
}

// Q6_K values (0..63) of ql and qh line m of half h: q[j] holds elements
// 128h + 32j + 4m .. +3 of each row.
inline void q6_k_values(const uint8_t* p, int h, int m, __m256i q[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const __m256i ql0 = load256(p + 144 + 256 * (2 * h) + 32 * m);
  const __m256i ql1 = load256(p + 144 + 256 * (2 * h + 1) + 32 * m);
  const __m256i qh = load256(p + 1168 + 256 * h + 32 * m);
  q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
  q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
}

// ---- K-quants, many tokens: each group unpacked once per call ----
//
// A prompt's tokens meet every group of weights many times, and the kernels
// above unpack nibbles (Q4_K) or assemble 6-bit values (Q6_K) again for every
// pair of tokens. Unpacked once into a buffer (L1 for k = 2048, L2 beyond),
// each 32-byte line of 8 rows' values costs a token tile one load, and each
// token's work per line is the vpmaddubsw, its add and the activations'
// broadcast. The integer sums are the same exact values (only grouped
// differently: scale x (pair sum) by vpmaddwd), and the float steps per
// super-block are the direct kernels' own, so results are bitwise the same.

// One super-block of a group, unpacked. Line L holds elements 4L..4L+3 of
// each row, as unsigned values (Q2_K 0..3, Q3_K 0..7, Q4_K 0..15, Q5_K 0..31, Q6_K 0..63).
struct UnpackedSuperBlock {
  alignas(32) uint8_t q[64 * 32];
  __m256i scale[16];   // row r's scale of sub-block s as an int16 pair in lane r (Q4_K: 8 of 32, Q2_K, Q3_K, Q6_K: 16 of 16)
  __m256i offset[8];   // Q4_K: the mins as Q4KScales::m16; Q2_K: the mins, Q3_K, Q6_K: the scales, as int16 pairs (s = 2c, 2c + 1)
  __m256 d, dmin;
};

// (v, v) int16 pairs from int32 lanes (|v| < 2^15).
inline __m256i int16_pairs(__m256i v) {
  return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(v, 16));
}

// IQ4_XS's scales of 8 rows as int16 pairs (scale - 32) per row lane, sub-block s in sc[s].
inline void unpack_iq4_xs_scales(const uint8_t* p, __m256i sc[8]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
  const __m256i lo = load256(p + 16);
  const __m128i hi = load128(p + 48);
  // Scales 0, 1 (bytes 0-15) take bits 0-1 of the high bytes, 2, 3 bits 2-3; 4, 5 bits 4-5, 6, 7 bits 6-7.
  const __m256i h = _mm256_set_m128i(_mm_srli_epi16(hi, 2), hi);
  alignas(32) int8_t v[64];
  _mm256_store_si256(reinterpret_cast<__m256i*>(v),
                     _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(lo, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30)), k32));
  _mm256_store_si256(reinterpret_cast<__m256i*>(v + 32),
                     _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo, 4), m4), _mm256_and_si256(h, m30)), k32));
  for (int s = 0; s < 8; ++s) sc[s] = int16_pairs(byte_per_row<true>(reinterpret_cast<const uint8_t*>(v + 8 * s)));
}

// Sum over c of pairs[c] = (v[2c], v[2c + 1]) per row lane (byte_pairs_per_row)
// against the activations' sums per 16 of token t's super-block sb (int32 per row).
inline __m256i pairs_dot_sums(const __m256i* pairs, const ActRows& x, int64_t t, int64_t sb) {
  const __m256i bs = load256(reinterpret_cast<const uint8_t*>(x.sums(t) + 16 * sb));
  __m256i sum = _mm256_setzero_si256();
  for (int c = 0; c < 8; ++c) sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs[c], _mm256_permutevar8x32_epi32(bs, _mm256_set1_epi32(c))));
  return sum;
}

struct Q4_KUnpacked {
  static constexpr size_t kBlockBytes = 8 * 144;
  static constexpr int64_t kMinTokens = 4;  // below: group_tile_q4_k
  // Lines summed in int16 before the scale: |pair| <= 2 x 15 x 128, 8 lines <= 30720.
  static constexpr int kPieceLines = 8;
  static constexpr int kScaleLines = 8;  // 32 elements per scale
  static constexpr int kOffsets = 4;     // UnpackedSuperBlock::offset vectors in use
  // Everything but the values (Q5_K's too).
  static void unpack_scales(const uint8_t* p, UnpackedSuperBlock& u) {
    Q4KScales sc;
    unpack_q4_k_scales(p, sc);
    for (int s = 0; s < 8; ++s) u.scale[s] = int16_pairs(scales_of(sc, s));
    unpack_finish_inputs(p, sc, u);
  }
  // What finish reads (the mins' pairs, d, dmin), from the unpacked scales.
  static void unpack_finish_inputs(const uint8_t* p, const Q4KScales& sc, UnpackedSuperBlock& u) {
    for (int q = 0; q < 4; ++q) u.offset[q] = sc.m16[q];
    u.d = _mm256_cvtph_ps(load128(p));
    u.dmin = _mm256_cvtph_ps(load128(p + 16));
  }
  static void unpack(const uint8_t* p, UnpackedSuperBlock& u) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    unpack_scales(p, u);
    for (int j = 0; j < 4; ++j) {
      for (int c = 0; c < 8; ++c) {
        const __m256i v = load256(p + 128 + 256 * j + 32 * c);
        _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 32 * (16 * j + c)), _mm256_and_si256(v, m4));
        _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 32 * (16 * j + 8 + c)), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
      }
    }
  }
  // group_tile_q4_k's float steps for one token and super-block.
  static __m256 finish(const UnpackedSuperBlock& u, __m256i isum, const ActRows& x, int64_t t, int64_t sb, __m256 acc) {
    const __m256i bs = load256(reinterpret_cast<const uint8_t*>(x.sums(t) + 16 * sb));
    const __m256i xs = _mm256_hadd_epi16(bs, bs);
    __m256i msum = _mm256_setzero_si256();
    for (int q = 0; q < 4; ++q) {
      const __m256i pair = _mm256_permutevar8x32_epi32(xs, _mm256_set1_epi32(q < 2 ? q : q + 2));
      msum = _mm256_add_epi32(msum, _mm256_madd_epi16(u.offset[q], pair));
    }
    const __m256 dx = _mm256_set1_ps(x.d(t)[sb]);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(u.d, dx), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(u.dmin, dx), acc);
  }
};

// Bit b of each byte of v moved to bit 4 (0x10 or 0).
template <int B>
inline __m256i bit_to_16(__m256i v) {
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  if constexpr (B <= 4) return _mm256_and_si256(_mm256_slli_epi16(v, 4 - B), bit4);
  return _mm256_and_si256(_mm256_srli_epi16(v, B - 4), bit4);
}

// Q5_K: Q4_K's nibbles plus a fifth bit from qh (element 64j + l: bit 2j of
// qh[l]; 64j + 32 + l: bit 2j + 1), the same scales, mins and float steps.
struct Q5_KUnpacked : Q4_KUnpacked {  // Q4_K's unpack_scales and finish
  static constexpr size_t kBlockBytes = 8 * 176;
  static constexpr int64_t kMinTokens = 2;  // below: group_tile_q5_k_decode
  // |pair| <= 2 x 31 x 128: four lines fit int16 (31,744).
  static constexpr int kPieceLines = 4;
  static constexpr int kScaleLines = 8;
  template <int J>
  static void unpack_chunk(const uint8_t* p, UnpackedSuperBlock& u) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int c = 0; c < 8; ++c) {
      const __m256i v = load256(p + 128 + 256 * J + 32 * c), h = load256(p + 1152 + 32 * c);
      _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 32 * (16 * J + c)), _mm256_or_si256(_mm256_and_si256(v, m4), bit_to_16<2 * J>(h)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 32 * (16 * J + 8 + c)),
                         _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), bit_to_16<2 * J + 1>(h)));
    }
  }
  static void unpack(const uint8_t* p, UnpackedSuperBlock& u) {
    unpack_scales(p, u);
    unpack_chunk<0>(p, u);
    unpack_chunk<1>(p, u);
    unpack_chunk<2>(p, u);
    unpack_chunk<3>(p, u);
  }
};

struct Q6_KUnpacked {
  static constexpr size_t kBlockBytes = 8 * 210;
  static constexpr int64_t kMinTokens = 4;  // below: group_tile_q6_k
  // |pair| <= 2 x 63 x 128: two lines fit int16.
  static constexpr int kPieceLines = 2;
  static constexpr int kScaleLines = 4;  // 16 elements per scale
  static constexpr int kOffsets = 8;
  static constexpr int kOffsetShift = 5;  // values stand for q - 32
  static void unpack(const uint8_t* p, UnpackedSuperBlock& u) {
    const uint8_t* scales = p + 16;
    for (int s = 0; s < 16; ++s) u.scale[s] = int16_pairs(byte_per_row<true>(scales + 8 * s));
    for (int c = 0; c < 8; ++c) u.offset[c] = byte_pairs_per_row<true>(scales, c);
    u.d = _mm256_cvtph_ps(load128(p));
    u.dmin = _mm256_setzero_ps();
    for (int h = 0; h < 2; ++h) {
      for (int m = 0; m < 8; ++m) {
        __m256i q[4];
        q6_k_values(p, h, m, q);
        for (int j = 0; j < 4; ++j) _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 32 * (32 * h + 8 * j + m)), q[j]);
      }
    }
  }
  // group_tile_q6_k's steps for one token and super-block: minus 32 x the
  // scales against the activations' sums per 16, then one float step.
  static __m256 finish(const UnpackedSuperBlock& u, __m256i isum, const ActRows& x, int64_t t, int64_t sb, __m256 acc) {
    const __m256i total = _mm256_sub_epi32(isum, _mm256_slli_epi32(pairs_dot_sums(u.offset, x, t, sb), kOffsetShift));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(u.d, _mm256_set1_ps(x.d(t)[sb])), acc);
  }
};

// ---- Q2_K and Q3_K x Q8_K: 2-bit lines (Q3_K: a third bit from hmask) ----
//
// qs line m (interleave.h) holds qs[4m .. 4m + 3] of each row: with h = m / 8,
// l = 4(m % 8) + i, bits 2j..2j + 1 of its byte i are element 128h + 32j + l
// (16 sub-blocks of 16: 8h + 2j + (m % 8) / 4). Q3_K's third bit of that
// element is bit 4h + j of hmask line m % 8. Values stay unsigned (Q2_K
// 0..3, Q3_K 0..7 standing for q - 4); the sums are exact in int16 per sub-block
// (|pair| <= 2 x 7 x 128).

// Unpacked line 32h + 8j + m % 8 = elements 128h + 32j + 4(m % 8) .. + 3 (defined below).
template <class K>
void unpack_2bit(const uint8_t* p, UnpackedSuperBlock& u);

// Q3_K's scales of 8 rows as int8 (scale - 32) at 8s + r.
inline void unpack_q3_k_scales(const uint8_t* p, int8_t* sc) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
  const __m256i a = load256(p + 16), b = load256(p + 48), h = load256(p + 80);
  const __m256i v[4] = {_mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30)),
                        _mm256_or_si256(_mm256_and_si256(b, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30)),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(h, m30)),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30))};
  for (int i = 0; i < 4; ++i) _mm256_storeu_si256(reinterpret_cast<__m256i*>(sc + 32 * i), _mm256_sub_epi8(v[i], k32));
}

struct Q2_KUnpacked {
  static constexpr size_t kBlockBytes = 8 * 84;
  static constexpr size_t kQs = 160;
  static constexpr bool kHasHmask = false;
  static constexpr int64_t kMinTokens = 2;  // below: group_tile_2bit_decode
  static constexpr int kPieceLines = 4;
  static constexpr int kScaleLines = 4;  // 16 elements per scale
  static constexpr int kOffsets = 8;     // the mins
  static constexpr bool kSignedScales = false;
  static constexpr bool kOffsetsAreScales = false;
  // Sub-block s's scale (sc) and min (off) of row r as bytes at 8s + r.
  static void scale_bytes(const uint8_t* p, uint8_t* sc, uint8_t* off) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int i = 0; i < 4; ++i) {
      const __m256i v = load256(p + 32 + 32 * i);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(sc + 32 * i), _mm256_and_si256(v, m4));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(off + 32 * i), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    }
  }
  static void unpack_scales(const uint8_t* p, UnpackedSuperBlock& u) {
    alignas(32) uint8_t sc[128], mn[128];
    scale_bytes(p, sc, mn);
    for (int s = 0; s < 16; ++s) u.scale[s] = int16_pairs(byte_per_row<false>(sc + 8 * s));
    for (int c = 0; c < 8; ++c) u.offset[c] = byte_pairs_per_row<false>(mn, c);
    u.d = _mm256_cvtph_ps(load128(p));
    u.dmin = dmin(p);
  }
  static __m256 dmin(const uint8_t* p) { return _mm256_cvtph_ps(load128(p + 16)); }
  static void unpack(const uint8_t* p, UnpackedSuperBlock& u) { unpack_2bit<Q2_KUnpacked>(p, u); }
  template <int J, int H>
  static __m256i values(__m256i qs, __m256i) {
    return _mm256_and_si256(_mm256_srli_epi16(qs, 2 * J), _mm256_set1_epi8(3));
  }
  // d x sum - dmin x msum, msum the mins against the activations' sums per
  // 16 (the VNNI decode computes it its own way and takes these steps too).
  static __m256 finish_sums(__m256i isum, __m256i msum, __m256 d, __m256 dmin, float dx, __m256 acc) {
    const __m256 dxv = _mm256_set1_ps(dx);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, dxv), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, dxv), acc);
  }
  static __m256 finish(const UnpackedSuperBlock& u, __m256i isum, const ActRows& x, int64_t t, int64_t sb, __m256 acc) {
    return finish_sums(isum, pairs_dot_sums(u.offset, x, t, sb), u.d, u.dmin, x.d(t)[sb], acc);
  }
};

struct Q3_KUnpacked {
  static constexpr size_t kBlockBytes = 8 * 110;
  static constexpr size_t kQs = 112, kHmask = 624;
  static constexpr bool kHasHmask = true;
  static constexpr int64_t kMinTokens = 2;  // below: group_tile_2bit_decode
  static constexpr int kPieceLines = 4;
  static constexpr int kScaleLines = 4;
  static constexpr int kOffsets = 8;  // the scales, for the values' offset of 4
  static constexpr int kOffsetShift = 2;
  static constexpr bool kSignedScales = true;
  // Sub-block s's scale - 32 of row r as int8 at 8s + r, in sc; the offsets
  // are the same bytes (kOffsetsAreScales), so off is left alone.
  static constexpr bool kOffsetsAreScales = true;
  static void scale_bytes(const uint8_t* p, uint8_t* sc, uint8_t*) { unpack_q3_k_scales(p, reinterpret_cast<int8_t*>(sc)); }
  static void unpack_scales(const uint8_t* p, UnpackedSuperBlock& u) {
    alignas(32) int8_t sc[128];
    unpack_q3_k_scales(p, sc);
    const auto* b = reinterpret_cast<const uint8_t*>(sc);
    for (int s = 0; s < 16; ++s) u.scale[s] = int16_pairs(byte_per_row<true>(b + 8 * s));
    for (int c = 0; c < 8; ++c) u.offset[c] = byte_pairs_per_row<true>(b, c);
    u.d = _mm256_cvtph_ps(load128(p));
    u.dmin = dmin(p);
  }
  static __m256 dmin(const uint8_t*) { return _mm256_setzero_ps(); }
  static void unpack(const uint8_t* p, UnpackedSuperBlock& u) { unpack_2bit<Q3_KUnpacked>(p, u); }
  // Element 128H + 32J + l: 2 bits of qs, bit 4H + J of hmask as 4.
  template <int J, int H>
  static __m256i values(__m256i qs, __m256i hm) {
    constexpr int kBit = 4 * H + J;
    __m256i high;
    if constexpr (kBit >= 2) {
      high = _mm256_srli_epi16(hm, kBit - 2);
    } else {
      high = _mm256_slli_epi16(hm, 2 - kBit);
    }
    return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qs, 2 * J), _mm256_set1_epi8(3)),
                           _mm256_and_si256(high, _mm256_set1_epi8(4)));
  }
  // The values stand for q - 4: minus 4 x osum, the scales against the
  // activations' sums per 16, then one float step.
  static __m256 finish_sums(__m256i isum, __m256i osum, __m256 d, __m256, float dx, __m256 acc) {
    const __m256i total = _mm256_sub_epi32(isum, _mm256_slli_epi32(osum, kOffsetShift));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc);
  }
  static __m256 finish(const UnpackedSuperBlock& u, __m256i isum, const ActRows& x, int64_t t, int64_t sb, __m256 acc) {
    return finish_sums(isum, pairs_dot_sums(u.offset, x, t, sb), u.d, u.dmin, x.d(t)[sb], acc);
  }
};

template <class K, int H>
inline void unpack_2bit_half(const uint8_t* p, UnpackedSuperBlock& u) {
#pragma GCC unroll 8
  for (int mm = 0; mm < 8; ++mm) {
    const __m256i qs = load256(p + K::kQs + 32 * (8 * H + mm));
    __m256i hm = _mm256_setzero_si256();
    if constexpr (K::kHasHmask) hm = load256(p + K::kHmask + 32 * mm);
    auto store = [&](int j, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 32 * (32 * H + 8 * j + mm)), v); };
    store(0, K::template values<0, H>(qs, hm));
    store(1, K::template values<1, H>(qs, hm));
    store(2, K::template values<2, H>(qs, hm));
    store(3, K::template values<3, H>(qs, hm));
  }
}
template <class K>
void unpack_2bit(const uint8_t* p, UnpackedSuperBlock& u) {
  K::unpack_scales(p, u);
  unpack_2bit_half<K, 0>(p, u);
  unpack_2bit_half<K, 1>(p, u);
}

}  // namespace
}  // namespace tokamak::kernels
