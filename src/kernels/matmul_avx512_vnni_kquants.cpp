// AVX-512 VNNI kernels over K-quant weights interleaved 8 rows at a time
// (kernels/interleave.h), against Q8_K activations: prompts unpack each pair
// of groups once (UnpackedPair) and run token tiles over it; decode reads the
// packed lines directly, super-blocks sb and sb + 1 of one group side by side
// (Q2_K .. Q5_K; Q6_K decode goes to the AVX2 kernel). Per super-block each
// lane's integer sum is the AVX2 kernels' exact value and its float steps are
// theirs, lane for lane (tested bitwise in interleave_test.cpp).
#include "kernels/isa.h"
#include "kernels/matmul_kernels.h"

#if TOKAMAK_HAVE_X86_SIMD
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>  // std::is_same_v
#include <vector>

#include "kernels/interleave.h"
#include "kernels/matmul_act.h"

TOKAMAK_TARGET_REGION(TOKAMAK_ISA_AVX512_VNNI)

#include "kernels/interleaved_unpack.h"
#include "kernels/matmul_avx512_vnni_pairs.h"

namespace tokamak::kernels {
namespace {

// ---- K-quants: two groups unpacked once per call ----

// One super-block of two groups, unpacked (UnpackedSuperBlock's values and
// scales, the two groups side by side): line L holds elements 4L..4L+3 of
// the 16 rows.
struct UnpackedPair {
  alignas(64) uint8_t q[64 * 64];
  __m512i scale[16];  // the sub-block's scale per row lane, int32
  __m512i offset[8];  // UnpackedSuperBlock::offset of both groups
  __m512 d, dmin;
};

// The sub-block scales of u0 and u1 side by side, int32 per row lane.
// UnpackedSuperBlock's scales are (v, v) int16 pairs: the high half, shifted
// down, is v.
template <class K>
void pair_scale_lines(const UnpackedSuperBlock& u0, const UnpackedSuperBlock& u1, __m512i* scale) {
  for (int s = 0; s < 64 / K::kScaleLines; ++s) scale[s] = _mm512_srai_epi32(halves(u0.scale[s], u1.scale[s]), 16);
}

// Two groups' scales, offsets, d and dmin side by side.
template <class K>
void pair_scales(const UnpackedSuperBlock& u0, const UnpackedSuperBlock& u1, UnpackedPair& out) {
  pair_scale_lines<K>(u0, u1, out.scale);
  for (int c = 0; c < K::kOffsets; ++c) out.offset[c] = halves(u0.offset[c], u1.offset[c]);
  out.d = halves(u0.d, u1.d);
  out.dmin = halves(u0.dmin, u1.dmin);
}

template <class K>
void unpack_pair(const uint8_t* p0, const uint8_t* p1, UnpackedPair& out) {
  UnpackedSuperBlock u0, u1;
  K::unpack(p0, u0);
  K::unpack(p1, u1);
  for (int line = 0; line < 64; ++line) {
    const __m512i v = halves(_mm256_load_si256(reinterpret_cast<const __m256i*>(u0.q + 32 * line)),
                             _mm256_load_si256(reinterpret_cast<const __m256i*>(u1.q + 32 * line)));
    _mm512_store_si512(out.q + 64 * line, v);
  }
  pair_scales<K>(u0, u1, out);
}

// K::finish (the AVX2 unpacked kernels' float steps) for 16 row lanes: the
// same integer offsets and float steps, lane for lane.
template <class K>
__m512 finish_pair(const UnpackedPair& u, __m512i isum, const ActRows& x, int64_t t, int64_t sb, __m512 acc) {
  const uint8_t* bs = reinterpret_cast<const uint8_t*>(x.sums(t) + 16 * sb);  // int16 sums per 16 activations
  const __m512 dx = _mm512_set1_ps(x.d(t)[sb]);
  if constexpr (std::is_same_v<K, Q4_KUnpacked> || std::is_same_v<K, Q5_KUnpacked>) {
    // Sums per 32 as int16 pairs: (s0, s1) (s2, s3) in dwords 0, 1, (s4, s5) (s6, s7) in 4, 5.
    const __m256i b = load256(bs);
    const __m512i xs = _mm512_castsi256_si512(_mm256_hadd_epi16(b, b));
    __m512i msum = _mm512_setzero_si512();
    for (int q = 0; q < 4; ++q) {
      const __m512i pair = _mm512_permutexvar_epi32(_mm512_set1_epi32(q < 2 ? q : q + 2), xs);
      msum = _mm512_add_epi32(msum, _mm512_madd_epi16(u.offset[q], pair));
    }
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(u.d, dx), acc);
    return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(u.dmin, dx), acc);
  } else {
    // pairs_dot_sums: the offsets (Q2_K's mins, Q3_K's and Q6_K's scales) against the sums per 16.
    __m512i offset = _mm512_setzero_si512();
    for (int c = 0; c < 8; ++c) offset = _mm512_add_epi32(offset, _mm512_madd_epi16(u.offset[c], broadcast4_16(bs, c)));
    if constexpr (std::is_same_v<K, Q2_KUnpacked>) {
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(u.d, dx), acc);
      return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(offset), _mm512_mul_ps(u.dmin, dx), acc);
    } else {
      const __m512i total = _mm512_sub_epi32(isum, _mm512_slli_epi32(offset, K::kOffsetShift));
      return _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(u.d, dx), acc);
    }
  }
}

// One unpacked pair of groups against activation rows [t0, t0 + T): per
// sub-block each token's sum of value x activation (int32, exact), times the
// row's scale.
template <class K, int T>
void unpacked_pair_tile(const UnpackedPair* u, int64_t n_sb, const ActRows& x, int64_t t0, float* y, int64_t ldy) {
  __m512 acc[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    const UnpackedPair& b = u[sb];
    const uint8_t* xq[T];
    __m512i isum[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      xq[t] = x.qs(t0 + t) + 256 * sb;
      isum[t] = _mm512_setzero_si512();
    }
    for (int sub = 0; sub < 64 / K::kScaleLines; ++sub) {
      __m512i s[T];
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) s[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int l = 0; l < K::kScaleLines; ++l) {
        const int line = sub * K::kScaleLines + l;
        const __m512i w = _mm512_load_si512(b.q + 64 * line);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          s[t] = _mm512_dpbusd_epi32(s[t], w, broadcast4_16(xq[t], line));
          asm("" : "+v"(s[t]));  // one chain per token in a register (see unpacked_tile)
        }
      }
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s[t], b.scale[sub]));
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[t] = finish_pair<K>(b, isum[t], x, t0 + t, sb, acc[t]);
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + (t0 + t) * ldy, acc[t]);
}

template <class K, int T>
void unpacked_pair_rest(const UnpackedPair* u, int64_t n_sb, const ActRows& x, int64_t t0, int64_t rest, float* y, int64_t ldy) {
  if constexpr (T > 0) {
    if (rest == T) {
      unpacked_pair_tile<K, T>(u, n_sb, x, t0, y, ldy);
    } else {
      unpacked_pair_rest<K, T - 1>(u, n_sb, x, t0, rest, y, ldy);
    }
  }
}

// Row lanes 0-7: the bytes at a (8s + r, as byte_per_row), 8-15: at b, widened to int32.
template <bool kSigned>
inline __m512i bytes_two(const uint8_t* a, const uint8_t* b) {
  const __m128i v = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a)),
                                       _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b)));
  return kSigned ? _mm512_cvtepi8_epi32(v) : _mm512_cvtepu8_epi32(v);
}
// byte_pairs_per_row of a in row lanes 0-7, of b in 8-15.
template <bool kSigned>
inline __m512i byte_pairs_two(const uint8_t* a, const uint8_t* b, int c) {
  auto pairs = [c](const uint8_t* x) {
    return _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + 16 * c)),
                             _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + 16 * c + 8)));
  };
  const __m256i v = _mm256_set_m128i(pairs(b), pairs(a));
  return kSigned ? _mm512_cvtepi8_epi16(v) : _mm512_cvtepu8_epi16(v);
}

// ---- Q4_K and Q5_K decode: two super-blocks per pass, straight from the packed lines ----
//
// Their one-token AVX2 kernels are bound by instructions as much as by
// memory (GemvX8 ffn_up on the Xeon: Q8_0 streamed at ~28 GB/s, the read
// bandwidth, Q4_K at ~22; bench's compute roofline for Q5_K_M decode sat
// below the bandwidth one): unpacking the nibbles (and Q5_K's fifth bit)
// costs as much as the products. Super-blocks sb and sb + 1 of one group per
// register halve the instructions per weight and keep one stream per thread
// (see group_decode_32). Per super-block and row lane the same exact integer
// sums as group_tile_q4_k / group_tile_q5_k_decode (per sub-block, times its
// scale) and their float steps (K::finish), in super-block order, so a token
// alone equals the same token in a batch, bitwise.

// Bit B of each byte moved to bit 4 (0x10 or 0), 16 rows.
template <int B>
inline __m512i bit_to_16x2(__m512i v) {
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  if constexpr (B <= 4) return _mm512_and_si512(_mm512_slli_epi16(v, 4 - B), bit4);
  return _mm512_and_si512(_mm512_srli_epi16(v, B - 4), bit4);
}

// Sub-blocks 2J (low nibbles) and 2J + 1 (high) of the two super-blocks (p0:
// low 256 bits; p1: high; xb their pair_entries), added into
// isum times their scales. kFifthBit (Q5_K): qh holds the 8 qh lines of both.
template <int J, bool kFifthBit>
[[gnu::always_inline]] inline __m512i k_pair_chunk(const uint8_t* p0, const uint8_t* p1, const __m512i (&qh)[8],
                                                   const __m512i* scale, const __m512i* xb, __m512i isum) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    const __m512i v = halves(load256(p0 + 128 + 256 * J + 32 * c), load256(p1 + 128 + 256 * J + 32 * c));
    __m512i q_lo = _mm512_and_si512(v, m4), q_hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    if constexpr (kFifthBit) {
      q_lo = _mm512_or_si512(q_lo, bit_to_16x2<2 * J>(qh[c]));
      q_hi = _mm512_or_si512(q_hi, bit_to_16x2<2 * J + 1>(qh[c]));
    }
    lo = _mm512_dpbusd_epi32(lo, q_lo, pair_operand(xb, 16 * J + c));
    hi = _mm512_dpbusd_epi32(hi, q_hi, pair_operand(xb, 16 * J + 8 + c));
  }
  isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(lo, scale[2 * J]));
  return _mm512_add_epi32(isum, _mm512_mullo_epi32(hi, scale[2 * J + 1]));
}

// Super-blocks prefetched ahead by the Q4_K, Q5_K and Q6_K decode kernels.
// With their operands from pair_entries they ran GemvX8 q4_K ffn_down (from
// DRAM, one thread, Zen 5) 8% slower than before at 2 ahead although faster
// in L2; 6 ahead (~7-10 KiB) brought it back level (3 alternations).
constexpr size_t kKDecodeAhead = 6;

// One group of 8 rows (at g, n_sb super-blocks) against one token.
template <class K>
void k_group_decode(const uint8_t* g, int64_t n_sb, const ActRows& x, const GemmArgs& a, float* y) {
  constexpr bool kFifthBit = std::is_same_v<K, Q5_KUnpacked>;
  constexpr size_t kBlock = K::kBlockBytes;
  __m256 acc = _mm256_setzero_ps();
  for_each_block_pair<kBlock>(g, n_sb, kKDecodeAhead, [&](int64_t sb, bool both, const uint8_t* p0, const uint8_t* p1) __attribute__((always_inline)) {
    // The 6-bit scales and mins (Q4_K's layout, Q5_K's too); the scales go
    // straight from their bytes to the 16 row lanes: through K::unpack_scales'
    // int16 pairs and pair_scale_lines they cost ~90 instructions a pair.
    Q4KScales s0, s1;
    unpack_q4_k_scales(p0, s0);
    unpack_q4_k_scales(p1, s1);
    __m512i scale[8];
    for (int sub = 0; sub < 8; ++sub) scale[sub] = bytes_two<false>(s0.sc + 8 * sub, s1.sc + 8 * sub);
    UnpackedSuperBlock u0, u1;  // what K::finish reads: the mins' pairs, d and dmin
    K::unpack_finish_inputs(p0, s0, u0);
    K::unpack_finish_inputs(p1, s1, u1);
    __m512i qh[8];
    if constexpr (kFifthBit) {
      for (int c = 0; c < 8; ++c) qh[c] = halves(load256(p0 + 1152 + 32 * c), load256(p1 + 1152 + 32 * c));
    }
    const __m512i* xp = pair_entries<256>(a, sb);
    __m512i isum = _mm512_setzero_si512();
    isum = k_pair_chunk<0, kFifthBit>(p0, p1, qh, scale, xp, isum);
    isum = k_pair_chunk<1, kFifthBit>(p0, p1, qh, scale, xp, isum);
    isum = k_pair_chunk<2, kFifthBit>(p0, p1, qh, scale, xp, isum);
    isum = k_pair_chunk<3, kFifthBit>(p0, p1, qh, scale, xp, isum);
    acc = K::finish(u0, low_half(isum), x, 0, sb, acc);
    if (both) acc = K::finish(u1, high_half(isum), x, 0, sb + 1, acc);
  });
  _mm256_storeu_ps(y, acc);
}

// ---- Q2_K and Q3_K decode: two super-blocks per pass, straight from the packed lines ----
//
// The AVX2 group_tile_2bit_decode with super-blocks sb and sb + 1 of one
// group in the halves (one stream): per sub-block of 16 each lane's exact
// sum by vpdpbusd, times its row's scale (vpmulld), and each half's float
// steps by K::finish, so a token alone is bitwise the token in a batch.

// Element 128H + 32J + l of the 16 row lanes (Q2_KUnpacked / Q3_KUnpacked::values).
template <class K, int J, int H>
[[gnu::always_inline]] inline __m512i values_2bit(__m512i qs, __m512i hm) {
  const __m512i low = _mm512_and_si512(_mm512_srli_epi16(qs, 2 * J), _mm512_set1_epi8(3));
  if constexpr (!K::kHasHmask) {
    return low;
  } else {
    constexpr int kBit = 4 * H + J;
    const __m512i high = kBit >= 2 ? _mm512_srli_epi16(hm, kBit - 2) : _mm512_slli_epi16(hm, 2 - kBit);
    return _mm512_or_si512(low, _mm512_and_si512(high, _mm512_set1_epi8(4)));
  }
}

// Half H (128 elements) of both super-blocks: 8 lines, each giving 4
// sub-blocks' values; the 8 sub-blocks' sums, scaled, into isum.
template <class K, int H>
[[gnu::always_inline]] inline __m512i half_2bit_pair(const uint8_t* p0, const uint8_t* p1, const __m512i* scale, const __m512i* xb,
                                                     __m512i isum) {
  __m512i s[8];  // s[2j + mm / 4]: sub-block 8H + 2j + mm / 4
  for (__m512i& v : s) v = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int mm = 0; mm < 8; ++mm) {
    const size_t at = K::kQs + 32 * (8 * H + mm);
    const __m512i qs = halves(load256(p0 + at), load256(p1 + at));
    __m512i hm = _mm512_setzero_si512();
    if constexpr (K::kHasHmask) hm = halves(load256(p0 + K::kHmask + 32 * mm), load256(p1 + K::kHmask + 32 * mm));
    const int op = 32 * H + mm;  // operand 32H + 8j + mm: elements 128H + 32j + 4mm
    const int h = mm / 4;
    s[h] = _mm512_dpbusd_epi32(s[h], values_2bit<K, 0, H>(qs, hm), pair_operand(xb, op));
    s[2 + h] = _mm512_dpbusd_epi32(s[2 + h], values_2bit<K, 1, H>(qs, hm), pair_operand(xb, op + 8));
    s[4 + h] = _mm512_dpbusd_epi32(s[4 + h], values_2bit<K, 2, H>(qs, hm), pair_operand(xb, op + 16));
    s[6 + h] = _mm512_dpbusd_epi32(s[6 + h], values_2bit<K, 3, H>(qs, hm), pair_operand(xb, op + 24));
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s[i], scale[8 * H + i]));
  return isum;
}

// K::finish of one super-block (8 rows at p) from its integer sum and its
// offsets' sum against the activations' sums per 16 (K::finish_sums, the
// AVX2 kernels' own float steps).
template <class K>
[[gnu::always_inline]] inline __m256 finish_2bit(__m256i isum, __m256i osum, const uint8_t* p, float dx, __m256 acc) {
  return K::finish_sums(isum, osum, _mm256_cvtph_ps(load128(p)), K::dmin(p), dx, acc);
}

// Scales and offsets go straight from their bytes to the 16 row lanes: through
// UnpackedSuperBlock (K::unpack_scales, K::finish per half) they took ~40% of
// the time (GemvX8 q2_K ffn_up one thread ~19 GB/s, ~27 without them).
template <class K>
void group_decode_2bit(const uint8_t* g, int64_t n_sb, const ActRows& x, const GemmArgs& a, float* y) {
  constexpr bool kSigned = K::kSignedScales;
  const float* xd = x.d(0);
  const uint8_t* bs = reinterpret_cast<const uint8_t*>(x.sums(0));
  __m256 acc = _mm256_setzero_ps();
  for_each_block_pair<K::kBlockBytes>(g, n_sb, 4, [&](int64_t sb, bool both, const uint8_t* p0, const uint8_t* p1) __attribute__((always_inline)) {
    alignas(32) uint8_t sc0[128], sc1[128], off0[128], off1[128];
    K::scale_bytes(p0, sc0, off0);
    K::scale_bytes(p1, sc1, off1);
    __m512i scale[16];
    for (int s = 0; s < 16; ++s) scale[s] = bytes_two<kSigned>(sc0 + 8 * s, sc1 + 8 * s);
    const __m512i* xp = pair_entries<256>(a, sb);
    __m512i isum = half_2bit_pair<K, 0>(p0, p1, scale, xp, _mm512_setzero_si512());
    isum = half_2bit_pair<K, 1>(p0, p1, scale, xp, isum);
    const uint8_t* b0 = bs + 32 * sb;  // 16 int16 sums a super-block
    const uint8_t* b1 = both ? b0 + 32 : b0;
    __m512i osum = _mm512_setzero_si512();
    const uint8_t* o0 = K::kOffsetsAreScales ? sc0 : off0;
    const uint8_t* o1 = K::kOffsetsAreScales ? sc1 : off1;
    for (int c = 0; c < 8; ++c) osum = _mm512_add_epi32(osum, _mm512_madd_epi16(byte_pairs_two<kSigned>(o0, o1, c), broadcast4_two(b0, b1, c)));
    acc = finish_2bit<K>(low_half(isum), low_half(osum), p0, xd[sb], acc);
    if (both) acc = finish_2bit<K>(high_half(isum), high_half(osum), p1, xd[sb + 1], acc);
  });
  _mm256_storeu_ps(y, acc);
}

// ---- Q6_K decode: two super-blocks per pass, straight from the packed lines ----
//
// group_tile_q6_k (AVX2) with super-blocks sb and sb + 1 of one group in the
// halves (one stream). Per sub-block of 16 and row lane the exact sum of
// q (0..63) x activation by vpdpbusd (4 lines), times the row's int8 scale;
// minus 32 x the scales against the activations' sums per 16; each half's
// float step is group_tile_q6_k's, in super-block order, so a token alone is
// bitwise the token in a batch. GemvX8Hot q6_K (in L2, one thread, Zen 5):
// 11.8 us on the AVX2 kernel (the same values assembled 256 bits at a time,
// summed by vpmaddubsw + vpmaddwd), 8.1 here, 7.1 with pair_operand.
void group_decode_q6_k(const uint8_t* g, int64_t n_sb, const ActRows& x, const GemmArgs& a, float* y) {
  constexpr size_t kBlock = 8 * 210;
  const float* xd = x.d(0);
  const uint8_t* bs = reinterpret_cast<const uint8_t*>(x.sums(0));
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  __m256 acc = _mm256_setzero_ps();
  for_each_block_pair<kBlock>(g, n_sb, kKDecodeAhead, [&](int64_t sb, bool both, const uint8_t* p0, const uint8_t* p1) __attribute__((always_inline)) {
    const uint8_t* sc0 = p0 + 16;  // int8 scales at 8s + r
    const uint8_t* sc1 = p1 + 16;
    const __m512i* xp = pair_entries<256>(a, sb);  // operand 32h + 8j + m: elements 128h + 32j + 4m
    __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m512i s[4][2];  // [j][m / 4]: sub-block 8h + 2j + m / 4
      for (auto& sj : s) sj[0] = sj[1] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        const size_t l0 = 144 + 256 * (2 * h) + 32 * m, l1 = l0 + 256, lh = 1168 + 256 * h + 32 * m;
        const __m512i ql0 = halves(load256(p0 + l0), load256(p1 + l0));
        const __m512i ql1 = halves(load256(p0 + l1), load256(p1 + l1));
        const __m512i qh = halves(load256(p0 + lh), load256(p1 + lh));
        const __m512i q[4] = {
            _mm512_or_si512(_mm512_and_si512(ql0, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30)),
            _mm512_or_si512(_mm512_and_si512(ql1, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 2), m30)),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql0, 4), m4), _mm512_and_si512(qh, m30)),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql1, 4), m4), _mm512_and_si512(_mm512_srli_epi16(qh, 2), m30))};
        for (int j = 0; j < 4; ++j) s[j][m / 4] = _mm512_dpbusd_epi32(s[j][m / 4], q[j], pair_operand(xp, 32 * h + 8 * j + m));
      }
      for (int j = 0; j < 4; ++j) {
        for (int half = 0; half < 2; ++half) {
          const int sub = 8 * h + 2 * j + half;
          isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s[j][half], bytes_two<true>(sc0 + 8 * sub, sc1 + 8 * sub)));
        }
      }
    }
    // The scales against the activations' 16 sums (int16 pairs, s = 2c, 2c + 1).
    const uint8_t* b0 = bs + 32 * sb;
    const uint8_t* b1 = both ? b0 + 32 : b0;
    __m512i osum = _mm512_setzero_si512();
    for (int c = 0; c < 8; ++c) osum = _mm512_add_epi32(osum, _mm512_madd_epi16(byte_pairs_two<true>(sc0, sc1, c), broadcast4_two(b0, b1, c)));
    const __m512i total = _mm512_sub_epi32(isum, _mm512_slli_epi32(osum, 5));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(low_half(total)), _mm256_mul_ps(_mm256_cvtph_ps(load128(p0)), _mm256_set1_ps(xd[sb])), acc);
    if (both) {
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(high_half(total)), _mm256_mul_ps(_mm256_cvtph_ps(load128(p1)), _mm256_set1_ps(xd[sb + 1])),
                            acc);
    }
  });
  _mm256_storeu_ps(y, acc);
}

// Below K::kMinTokens tokens the groups are not unpacked (one token's pass
// over a group costs about what unpacking it does): one token takes the
// decode kernels above, a few tokens the AVX2 direct kernels.
template <class K>
void gemm_k_pairs(const GemmArgs& a) {
  const GemmFn avx2 = gemm_kernel_avx2_interleaved(a.type).fn;
  if (a.n_tokens < K::kMinTokens) {
    if (a.n_tokens == 1) {
      return gemm_groups_decode(a, ActFormat::kQ8_K, [&](const uint8_t* g, const ActRows& x, float* y) {
        if constexpr (std::is_same_v<K, Q2_KUnpacked> || std::is_same_v<K, Q3_KUnpacked>) {
          group_decode_2bit<K>(g, a.k / 256, x, a, y);
        } else if constexpr (std::is_same_v<K, Q6_KUnpacked>) {
          group_decode_q6_k(g, a.k / 256, x, a, y);
        } else {
          k_group_decode<K>(g, a.k / 256, x, a, y);
        }
      });
    }
    avx2(a);
    return;
  }
  const ActRows x{reinterpret_cast<const uint8_t*>(a.act), a.act_stride, act_layout(ActFormat::kQ8_K, a.k)};
  const int64_t n_sb = a.k / 256;
  thread_local std::vector<UnpackedPair> unpacked;
  if (unpacked.size() < static_cast<size_t>(n_sb)) unpacked.resize(static_cast<size_t>(n_sb));
  const size_t group_bytes = kInterleaveRows * a.w_stride;
  const int64_t pairs = a.n_rows / (2 * kInterleaveRows);
  for (int64_t p = 0; p < pairs; ++p) {
    const uint8_t* g = reinterpret_cast<const uint8_t*>(a.w) + static_cast<size_t>(2 * p) * group_bytes;
    for (int64_t sb = 0; sb < n_sb; ++sb) {
      const size_t at = static_cast<size_t>(sb) * K::kBlockBytes;
      unpack_pair<K>(g + at, g + group_bytes + at, unpacked[static_cast<size_t>(sb)]);
    }
    float* y = a.y + 2 * p * kInterleaveRows;
    int64_t t = 0;
    for (; t + kTokens <= a.n_tokens; t += kTokens) unpacked_pair_tile<K, kTokens>(unpacked.data(), n_sb, x, t, y, a.ldy);
    unpacked_pair_rest<K, kTokens - 1>(unpacked.data(), n_sb, x, t, a.n_tokens - t, y, a.ldy);
  }
  if (2 * pairs * kInterleaveRows < a.n_rows) avx2(rows_from(a, 2 * pairs * kInterleaveRows));
}

}  // namespace

GemmKernel gemm_kernel_avx512_vnni_kquants(DType t) {
  switch (t) {
    case DType::Q2_K: return {gemm_k_pairs<Q2_KUnpacked>, ActFormat::kQ8_K, true, build_pair_operands<256>};
    case DType::Q3_K: return {gemm_k_pairs<Q3_KUnpacked>, ActFormat::kQ8_K, true, build_pair_operands<256>};
    case DType::Q4_K: return {gemm_k_pairs<Q4_KUnpacked>, ActFormat::kQ8_K, true, build_pair_operands<256>};
    case DType::Q5_K: return {gemm_k_pairs<Q5_KUnpacked>, ActFormat::kQ8_K, true, build_pair_operands<256>};
    case DType::Q6_K: return {gemm_k_pairs<Q6_KUnpacked>, ActFormat::kQ8_K, true, build_pair_operands<256>};
    default: return {};
  }
}

}  // namespace tokamak::kernels

TOKAMAK_TARGET_REGION_END

#else  // no x86 SIMD in this build

namespace tokamak::kernels {
GemmKernel gemm_kernel_avx512_vnni_kquants(DType) { return {}; }
}  // namespace tokamak::kernels

#endif
