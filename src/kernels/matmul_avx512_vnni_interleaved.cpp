// AVX-512 VNNI kernels over weights interleaved 8 rows at a time
// (kernels/interleave.h): the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, IQ4_NL) against Q8_0 activations, IQ4_XS against Q8_K ones and F16
// against f32 ones (FMAs, no VNNI); the K-quants are in
// matmul_avx512_vnni_kquants.cpp, the helpers both share in
// matmul_avx512_vnni_pairs.h.
//
// Two groups side by side fill a 512-bit register: a 32-byte line of group g
// (4 quants of each of its 8 rows) in the low half, the same line of group
// g + 1 in the high half, one row per 32-bit lane. Each token's 4 activations
// of that line are one broadcast, and one vpdpbusd adds the 16 rows' 4
// products into their lanes: per line and token one instruction, against the
// AVX2 kernels' vpmaddubsw and its add (and their widening) for 8 rows.
//
// Decode (one token) puts blocks b and b + 1 of one group side by side
// instead (one stream per thread), but for Q8_0, whose one-token calls go to
// the AVX2 kernel (gemm_q8_0). The last odd group and the plain tail rows of
// every format go to the AVX2 kernel.
// Batch invariance holds across the two: per block (super-block) each lane's
// integer sum is the same exact value, and the float steps on it are the AVX2
// kernels' own, lane for lane (tested bitwise in interleave_test.cpp).
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
#include "kernels/quants_blocks.h"  // kIQ4NLValues

TOKAMAK_TARGET_REGION(TOKAMAK_ISA_AVX512_VNNI)

#include "kernels/interleaved_unpack.h"
#include "kernels/matmul_avx512_vnni_pairs.h"

namespace tokamak::kernels {
namespace {

// ---- The 32-element formats: lines outside, tokens inside ----
//
// F::sums<T>(p0, p1, act, s) adds each token's products of one block of the
// two halves' weights (p0: low 256 bits, p1: high) into s[t], act(t, j)
// giving token t's activations 4j .. 4j + 3 as each half wants them; the
// block's exact integer dot (as the AVX2 Q4_0Lines / Q8_0Lines totals) is
// s[t] - kSumScale x the activations' block sum.

// Q4_0 and Q4_1: nibbles 0..15 (unsigned, as vpdpbusd wants) in 4 lines
// from byte kLines (interleave.h). Q4_0's value is q - 8, so 8 x the
// activations' sum comes off; Q4_1's is d q + m, the min a float step of its
// own (kHasMin).
template <size_t kLines, bool kMin>
struct Nibble4Pair {
  static constexpr size_t kBlockBytes = kMin ? 8 * 20 : 8 * 18;
  static constexpr int32_t kSumScale = kMin ? 0 : 8;
  static constexpr bool kHasMin = kMin;
  template <int T, class Act>
  [[gnu::always_inline]] static inline void sums(const uint8_t* p0, const uint8_t* p1, Act act, __m512i* s) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i v = halves(load256(p0 + kLines + 32 * c), load256(p1 + kLines + 32 * c));
      const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        s[t] = _mm512_dpbusd_epi32(s[t], lo, act(t, c));
        s[t] = _mm512_dpbusd_epi32(s[t], hi, act(t, c + 4));
      }
    }
  }
};
using Q4_0Pair = Nibble4Pair<16, false>;
using Q4_1Pair = Nibble4Pair<32, true>;

// Q5_0 and Q5_1: Q4's nibble lines from byte kLines with their fifth bits
// from the line at kFifth, moved to bit 4 by one shift (as the AVX2
// Nibble5Lines). q is 0..31, unsigned; Q5_0's value is q - 16.
template <size_t kFifth, size_t kLines, bool kMin>
struct Nibble5Pair {
  static constexpr size_t kBlockBytes = kMin ? 8 * 24 : 8 * 22;
  static constexpr int32_t kSumScale = kMin ? 0 : 16;
  static constexpr bool kHasMin = kMin;
  template <int shift>
  [[gnu::always_inline]] static inline __m512i fifth_bits(__m512i h) {
    const __m512i b = shift >= 0 ? _mm512_slli_epi16(h, shift) : _mm512_srli_epi16(h, -shift);
    return _mm512_and_si512(b, _mm512_set1_epi8(0x10));
  }
  template <int c, int T, class Act>
  [[gnu::always_inline]] static inline void line(const uint8_t* p0, const uint8_t* p1, __m512i h, Act act, __m512i* s) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i v = halves(load256(p0 + kLines + 32 * c), load256(p1 + kLines + 32 * c));
    const __m512i lo = _mm512_or_si512(_mm512_and_si512(v, m4), fifth_bits<4 - 2 * c>(h));
    const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), fifth_bits<3 - 2 * c>(h));
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      s[t] = _mm512_dpbusd_epi32(s[t], lo, act(t, c));
      s[t] = _mm512_dpbusd_epi32(s[t], hi, act(t, c + 4));
    }
  }
  template <int T, class Act>
  [[gnu::always_inline]] static inline void sums(const uint8_t* p0, const uint8_t* p1, Act act, __m512i* s) {
    const __m512i h = halves(load256(p0 + kFifth), load256(p1 + kFifth));
    line<0, T>(p0, p1, h, act, s);
    line<1, T>(p0, p1, h, act, s);
    line<2, T>(p0, p1, h, act, s);
    line<3, T>(p0, p1, h, act, s);
  }
};
using Q5_0Pair = Nibble5Pair<16, 48, false>;
using Q5_1Pair = Nibble5Pair<32, 64, true>;

// IQ4_NL: Q4_0's lines, each nibble an index into the 16 int8 values; the
// table is looked up with 128 added (a flipped top bit), unsigned as
// vpdpbusd wants, so 128 x the activations' sum comes off (as Q8_0's).
struct IQ4_NLPair {
  static constexpr size_t kBlockBytes = 8 * 18;
  static constexpr int32_t kSumScale = 128;
  static constexpr bool kHasMin = false;
  template <int T, class Act>
  [[gnu::always_inline]] static inline void sums(const uint8_t* p0, const uint8_t* p1, Act act, __m512i* s) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i values = _mm512_xor_si512(_mm512_broadcast_i32x4(load128(reinterpret_cast<const uint8_t*>(kIQ4NLValues))),
                                            _mm512_set1_epi8(static_cast<char>(0x80)));
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i v = halves(load256(p0 + 16 + 32 * c), load256(p1 + 16 + 32 * c));
      const __m512i lo = _mm512_shuffle_epi8(values, _mm512_and_si512(v, m4));
      const __m512i hi = _mm512_shuffle_epi8(values, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        s[t] = _mm512_dpbusd_epi32(s[t], lo, act(t, c));
        s[t] = _mm512_dpbusd_epi32(s[t], hi, act(t, c + 4));
      }
    }
  }
};

// Q8_0: signed weights made unsigned by w + 128 (a flipped top bit); 128 x
// the activations' sum comes off.
struct Q8_0Pair {
  static constexpr size_t kBlockBytes = 8 * 34;
  static constexpr int32_t kSumScale = 128;
  static constexpr bool kHasMin = false;
  template <int T, class Act>
  [[gnu::always_inline]] static inline void sums(const uint8_t* p0, const uint8_t* p1, Act act, __m512i* s) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m512i w = _mm512_xor_si512(halves(load256(p0 + 16 + 32 * c), load256(p1 + 16 + 32 * c)), flip);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) s[t] = _mm512_dpbusd_epi32(s[t], w, act(t, c));
    }
  }
};

// Groups g0 and g0 + 1 (g0 at `g`, the next group_bytes on) against
// activation rows [t0, t0 + T).
template <class F, int T>
void pair_tile_32(const uint8_t* g, size_t group_bytes, int64_t nb, const ActRows& x, int64_t t0, float* y, int64_t ldy) {
  const uint8_t* xq[T];
  __m512 acc[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    xq[t] = x.qs(t0 + t);
    acc[t] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p0 = g + static_cast<size_t>(b) * F::kBlockBytes;
    const uint8_t* p1 = p0 + group_bytes;
    for (size_t line = 0; line < F::kBlockBytes; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p0 + kPrefetchBlocks * F::kBlockBytes + line), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p1 + kPrefetchBlocks * F::kBlockBytes + line), _MM_HINT_T0);
    }
    const uint8_t* xb[T];
    __m512i s[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      xb[t] = xq[t] + 32 * b;
      s[t] = _mm512_setzero_si512();
    }
    F::template sums<T>(p0, p1, [&](int t, int j) { return broadcast4_16(xb[t], j); }, s);
    const __m512 d = fp16_halves(p0, p1);
    [[maybe_unused]] __m512 m;
    if constexpr (F::kHasMin) m = fp16_halves(p0 + 16, p1 + 16);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const int16_t xsum = x.sums(t0 + t)[b];
      const float dx = x.d(t0 + t)[b];
      const __m512i total = _mm512_sub_epi32(s[t], _mm512_set1_epi32(F::kSumScale * xsum));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(d, _mm512_set1_ps(dx)), acc[t]);
      // The AVX2 kernels' second step for rows with a min.
      if constexpr (F::kHasMin) acc[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(dx * static_cast<float>(xsum)), acc[t]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + (t0 + t) * ldy, acc[t]);
}

// The last n % kTokens tokens of a pair of groups: one tile of exactly that many.
template <class F, int T>
void pair_rest_32(const uint8_t* g, size_t group_bytes, int64_t nb, const ActRows& x, int64_t t0, int64_t rest, float* y,
                  int64_t ldy) {
  if constexpr (T > 0) {
    if (rest == T) {
      pair_tile_32<F, T>(g, group_bytes, nb, x, t0, y, ldy);
    } else {
      pair_rest_32<F, T - 1>(g, group_bytes, nb, x, t0, rest, y, ldy);
    }
  }
}

// The AVX2 kernels' float steps of one block of 8 rows at p, lane for lane.
template <class F>
[[gnu::always_inline]] inline __m256 block_step(__m256i total, const uint8_t* p, float dx, int16_t xsum, __m256 acc) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(_mm256_cvtph_ps(load128(p)), _mm256_set1_ps(dx)), acc);
  if constexpr (F::kHasMin) acc = _mm256_fmadd_ps(_mm256_cvtph_ps(load128(p + 16)), _mm256_set1_ps(dx * static_cast<float>(xsum)), acc);
  return acc;
}

// One group of 8 rows (at g, nb blocks) against one token.
template <class F>
void group_decode_32(const uint8_t* g, int64_t nb, const ActRows& x, const GemmArgs& a, float* y) {
  const float* xd = x.d(0);
  const int16_t* xs = x.sums(0);
  __m256 acc = _mm256_setzero_ps();
  for_each_block_pair<F::kBlockBytes>(g, nb, kDecodePrefetchBytes / F::kBlockBytes, [&](int64_t b, bool both, const uint8_t* p0, const uint8_t* p1) __attribute__((always_inline)) {
    const __m512i* xp = pair_entries<32>(a, b);
    __m512i s = _mm512_setzero_si512();
    F::template sums<1>(p0, p1, [&](int, int j) { return pair_operand(xp, j); }, &s);
    const int32_t xs0 = F::kSumScale * xs[b], xs1 = F::kSumScale * xs[both ? b + 1 : b];
    const __m512i total = _mm512_sub_epi32(s, halves(_mm256_set1_epi32(xs0), _mm256_set1_epi32(xs1)));
    acc = block_step<F>(low_half(total), p0, xd[b], xs[b], acc);
    if (both) acc = block_step<F>(high_half(total), p1, xd[b + 1], xs[b + 1], acc);
  });
  _mm256_storeu_ps(y, acc);
}

// Prompts read straight from the lines: for each pair of groups (16 rows),
// tile(g, group_bytes, x, t, n, y) for tokens [t, t + n), n = kTokens but
// for the last n_tokens % kTokens; then the rows after the last pair on the
// AVX2 kernel.
template <class Tile>
void for_each_pair_tile(const GemmArgs& a, ActFormat act, Tile tile) {
  const ActRows x{reinterpret_cast<const uint8_t*>(a.act), a.act_stride, act_layout(act, a.k)};
  const size_t group_bytes = kInterleaveRows * a.w_stride;
  const int64_t pairs = a.n_rows / (2 * kInterleaveRows);
  for (int64_t p = 0; p < pairs; ++p) {
    const uint8_t* g = reinterpret_cast<const uint8_t*>(a.w) + static_cast<size_t>(2 * p) * group_bytes;
    float* y = a.y + 2 * p * kInterleaveRows;
    for (int64_t t = 0; t < a.n_tokens; t += kTokens) tile(g, group_bytes, x, t, std::min<int64_t>(kTokens, a.n_tokens - t), y);
  }
  if (2 * pairs * kInterleaveRows < a.n_rows) gemm_kernel_avx2_interleaved(a.type).fn(rows_from(a, 2 * pairs * kInterleaveRows));
}

// Batches: per byte of weights half the instructions of the AVX2 kernels.
template <class F>
void gemm_pairs_32(const GemmArgs& a) {
  if (a.n_tokens == 1) {
    return gemm_groups_decode(a, ActFormat::kQ8_0,
                              [&](const uint8_t* g, const ActRows& x, float* y) { group_decode_32<F>(g, a.k / 32, x, a, y); });
  }
  for_each_pair_tile(a, ActFormat::kQ8_0, [&](const uint8_t* g, size_t group_bytes, const ActRows& x, int64_t t, int64_t n, float* y) {
    if (n == kTokens) return pair_tile_32<F, kTokens>(g, group_bytes, a.k / 32, x, t, y, a.ldy);
    pair_rest_32<F, kTokens - 1>(g, group_bytes, a.k / 32, x, t, n, y, a.ldy);
  });
}

// ---- IQ4_XS: two super-blocks side by side, read straight from the lines ----
//
// Values looked up with 128 added (unsigned, as vpdpbusd wants; the table as
// IQ4_NLPair's). Per sub-block of 32, each lane's sum times its row's scale
// (scale - 32); at the end 128 x (the scales against the activations' sums
// per 16, as pairs) comes off, which leaves the exact integer sum of the
// AVX2 group_tile_iq4_xs, so its float step serves, lane for lane. Prompts
// put super-block sb of groups g and g + 1 in the halves, decode super-blocks
// sb and sb + 1 of one group (one stream, as group_decode_32). The levels
// and d factor of Block (kLevelsOf, kDScaleOf): IQ4_XS's, or a widened IQ3
// format's on the same layout.
template <class Block>
struct IQ4_XSPair {
  static constexpr size_t kBlockBytes = 8 * 136;
  // isum[t] += the two halves' integer sums, act(t, ib, j) giving token t's
  // activations 32 ib + 4j .. + 3 as each half wants them and bsums(t, c) its
  // sums per 16 (2c, 2c + 1) as an int16 pair, likewise.
  template <int T, class Act, class Sums>
  [[gnu::always_inline]] static inline void sums(const uint8_t* p0, const uint8_t* p1, Act act, Sums bsums, __m512i* isum) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i values = _mm512_xor_si512(_mm512_broadcast_i32x4(load128(reinterpret_cast<const uint8_t*>(kLevelsOf<Block>))),
                                            _mm512_set1_epi8(static_cast<char>(0x80)));
    __m256i sc0[8], sc1[8];
    unpack_iq4_xs_scales(p0, sc0);
    unpack_iq4_xs_scales(p1, sc1);
    __m512i pairs[8];
    for (int ib = 0; ib < 8; ++ib) pairs[ib] = halves(sc0[ib], sc1[ib]);
#pragma GCC unroll 1
    for (int ib = 0; ib < 8; ++ib) {
      __m512i s[T];
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) s[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const size_t at = 64 + 32 * (4 * ib + c);
        const __m512i v = halves(load256(p0 + at), load256(p1 + at));
        const __m512i lo = _mm512_shuffle_epi8(values, _mm512_and_si512(v, m4));
        const __m512i hi = _mm512_shuffle_epi8(values, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          s[t] = _mm512_dpbusd_epi32(s[t], lo, act(t, ib, c));
          s[t] = _mm512_dpbusd_epi32(s[t], hi, act(t, ib, c + 4));
        }
      }
      const __m512i scale = _mm512_srai_epi32(pairs[ib], 16);  // (v, v) int16 pairs: v
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s[t], scale));
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      __m512i offset = _mm512_setzero_si512();
      for (int c = 0; c < 8; ++c) offset = _mm512_add_epi32(offset, _mm512_madd_epi16(pairs[c], bsums(t, c)));
      isum[t] = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(offset, 7));
    }
  }
};

// Groups g0 and g0 + 1 (g0 at `g`, the next group_bytes on) against
// activation rows [t0, t0 + T).
template <class Block, int T>
void iq4_xs_pair_tile(const uint8_t* g, size_t group_bytes, int64_t n_sb, const ActRows& x, int64_t t0, float* y, int64_t ldy) {
  constexpr size_t kBlock = IQ4_XSPair<Block>::kBlockBytes;
  __m512 acc[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    const uint8_t* p0 = g + static_cast<size_t>(sb) * kBlock;
    const uint8_t* p1 = p0 + group_bytes;
    for (size_t line = 0; line < kBlock; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p0 + 2 * kBlock + line), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p1 + 2 * kBlock + line), _MM_HINT_T0);
    }
    const uint8_t* xq[T];
    const uint8_t* bs[T];
    __m512i isum[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      xq[t] = x.qs(t0 + t) + 256 * sb;
      bs[t] = reinterpret_cast<const uint8_t*>(x.sums(t0 + t) + 16 * sb);
      isum[t] = _mm512_setzero_si512();
    }
    IQ4_XSPair<Block>::template sums<T>(
        p0, p1, [&](int t, int ib, int j) { return broadcast4_16(xq[t] + 32 * ib, j); },
        [&](int t, int c) { return broadcast4_16(bs[t], c); }, isum);
    const __m512 d = _mm512_mul_ps(fp16_halves(p0, p1), _mm512_set1_ps(kDScaleOf<Block>));
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, _mm512_set1_ps(x.d(t0 + t)[sb])), acc[t]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + (t0 + t) * ldy, acc[t]);
}

template <class Block, int T>
void iq4_xs_pair_rest(const uint8_t* g, size_t group_bytes, int64_t n_sb, const ActRows& x, int64_t t0, int64_t rest, float* y,
                      int64_t ldy) {
  if constexpr (T > 0) {
    if (rest == T) {
      iq4_xs_pair_tile<Block, T>(g, group_bytes, n_sb, x, t0, y, ldy);
    } else {
      iq4_xs_pair_rest<Block, T - 1>(g, group_bytes, n_sb, x, t0, rest, y, ldy);
    }
  }
}

// One group of 8 rows (at g, n_sb super-blocks) against one token.
template <class Block>
void iq4_xs_group_decode(const uint8_t* g, int64_t n_sb, const ActRows& x, const GemmArgs& a, float* y) {
  constexpr size_t kBlock = IQ4_XSPair<Block>::kBlockBytes;
  const float* xd = x.d(0);
  const uint8_t* bs = reinterpret_cast<const uint8_t*>(x.sums(0));
  __m256 acc = _mm256_setzero_ps();
  const __m256 dscale = _mm256_set1_ps(kDScaleOf<Block>);
  for_each_block_pair<kBlock>(g, n_sb, 4, [&](int64_t sb, bool both, const uint8_t* p0, const uint8_t* p1) __attribute__((always_inline)) {
    const __m512i* xp = pair_entries<256>(a, sb);
    const uint8_t* b0 = bs + 32 * sb;  // 16 int16 sums a super-block
    const uint8_t* b1 = both ? b0 + 32 : b0;
    __m512i isum = _mm512_setzero_si512();
    IQ4_XSPair<Block>::template sums<1>(
        p0, p1, [&](int, int ib, int j) { return pair_operand(xp, 8 * ib + j); },
        [&](int, int c) { return broadcast4_two(b0, b1, c); }, &isum);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(low_half(isum)), _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtph_ps(load128(p0)), dscale), _mm256_set1_ps(xd[sb])), acc);
    if (both) {
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(high_half(isum)),
                            _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtph_ps(load128(p1)), dscale), _mm256_set1_ps(xd[sb + 1])), acc);
    }
  });
  _mm256_storeu_ps(y, acc);
}

template <class Block>
void gemm_iq4_xs_pairs(const GemmArgs& a) {
  const int64_t n_sb = a.k / 256;
  if (a.n_tokens == 1) {
    return gemm_groups_decode(a, ActFormat::kQ8_K,
                              [&](const uint8_t* g, const ActRows& x, float* y) { iq4_xs_group_decode<Block>(g, n_sb, x, a, y); });
  }
  for_each_pair_tile(a, ActFormat::kQ8_K, [&](const uint8_t* g, size_t group_bytes, const ActRows& x, int64_t t, int64_t n, float* y) {
    if (n == kTokens) return iq4_xs_pair_tile<Block, kTokens>(g, group_bytes, n_sb, x, t, y, a.ldy);
    iq4_xs_pair_rest<Block, kTokens - 1>(g, group_bytes, n_sb, x, t, n, y, a.ldy);
  });
}

// ---- F16 x f32: two groups side by side ----
//
// Element i of groups g and g + 1 (8 rows each, 16 bytes apiece) converted
// into one register, a row per lane, against each token's activation i (f32,
// rounded to f16) broadcast: per lane acc = fma(w[i], x[i], acc) for i in
// order, the AVX2 kernel's arithmetic lane for lane (groups_tile_f), so both
// paths give the same bits and the last odd group goes to it. No VNNI: the
// table of the VNNI levels is where the AVX-512 kernels over interleaved rows
// live. Decode reads 2 pairs (4 groups, 4 streams, each prefetched
// kPrefetchBytesF16 ahead, as the AVX2 kernel does): the plain AVX-512
// kernel's one row at a time is a single chain of FMAs, 32 bytes per FMA
// latency, below what a core streams once the bandwidth passes ~55 GB/s
// (tg64 19-22 t/s against 24-25 for the AVX2 kernel on the Zen 5 host).
// Prompts: 2 pairs x 6 tokens, 12 FMAs of 16 lanes per 2 conversions.
template <int P, int T>
void f16_pairs_tile(const GemmArgs& a, int64_t g0, int64_t t0) {
  const size_t group_bytes = kInterleaveRows * a.w_stride;
  const uint8_t* w = reinterpret_cast<const uint8_t*>(a.w) + static_cast<size_t>(g0) * group_bytes;
  const float* x[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(a.act) + static_cast<size_t>(t0 + t) * a.act_stride);
  __m512 acc[P * T];  // flat and unrolled, or GCC keeps the sums in memory
#pragma GCC unroll 32
  for (int j = 0; j < P * T; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t i = 0; i < a.k; ++i) {
    const uint8_t* line = w + 16 * static_cast<size_t>(i);
    if (T == 1 && i % 4 == 0) {  // a 64-byte line of each group every 4 elements
      const size_t at = prefetch_offset_f16(i, group_bytes, 2 * P);
#pragma GCC unroll 8
      for (int g = 0; g < 2 * P; ++g) _mm_prefetch(reinterpret_cast<const char*>(w + g * group_bytes + at), _MM_HINT_T0);
    }
    __m512 wv[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) wv[p] = fp16_halves(line + 2 * p * group_bytes, line + (2 * p + 1) * group_bytes);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_set1_ps(x[t][i]);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[p * T + t] = _mm512_fmadd_ps(wv[p], xv, acc[p * T + t]);
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(a.y + (t0 + t) * a.ldy + (g0 + 2 * p) * kInterleaveRows, acc[p * T + t]);
}

// P pairs of groups from g0 against every token: 6-token tiles, then the rest in one.
template <int P>
void f16_pairs(const GemmArgs& a, int64_t g0) {
  constexpr int kTokensF16 = 6;
  int64_t t = 0;
  for (; t + kTokensF16 <= a.n_tokens; t += kTokensF16) f16_pairs_tile<P, kTokensF16>(a, g0, t);
  switch (a.n_tokens - t) {
    case 5: f16_pairs_tile<P, 5>(a, g0, t); break;
    case 4: f16_pairs_tile<P, 4>(a, g0, t); break;
    case 3: f16_pairs_tile<P, 3>(a, g0, t); break;
    case 2: f16_pairs_tile<P, 2>(a, g0, t); break;
    case 1: f16_pairs_tile<P, 1>(a, g0, t); break;
    default: break;
  }
}

void gemm_f16_pairs(const GemmArgs& a) {
  const int64_t groups = a.n_rows / kInterleaveRows;
  int64_t g = 0;
  for (; g + 4 <= groups; g += 4) f16_pairs<2>(a, g);
  for (; g + 2 <= groups; g += 2) f16_pairs<1>(a, g);
  if (g * kInterleaveRows < a.n_rows) gemm_kernel_avx2_interleaved(a.type).fn(rows_from(a, g * kInterleaveRows));
}

// Q8_0: one token goes to the AVX2 kernel (the same sums, vpmaddubsw; see
// Q8_0Lines in matmul_avx2_interleaved_impl.h): on the Zen 5 host the pair
// decode's vpdpbusd read Q8_0 from DRAM slower (tg64 TinyLlama Q8_0 51.9 ->
// 55.2 t/s on the AVX2 kernel, 5 of 5 alternations; Q4_0 level, Q4_K_M 86
// -> 64 t/s, so the K-quants keep their pair decode). No pair operands.
void gemm_q8_0(const GemmArgs& a) {
  if (a.n_tokens == 1) return gemm_kernel_avx2_interleaved(DType::Q8_0).fn(a);
  gemm_pairs_32<Q8_0Pair>(a);
}

}  // namespace

GemmKernel gemm_kernel_avx512_vnni_interleaved(DType t) {
  switch (t) {
    case DType::Q4_0: return {gemm_pairs_32<Q4_0Pair>, ActFormat::kQ8_0, true, build_pair_operands<32>};
    case DType::Q8_0: return {gemm_q8_0, ActFormat::kQ8_0, true, nullptr};
    case DType::Q4_1: return {gemm_pairs_32<Q4_1Pair>, ActFormat::kQ8_0, true, build_pair_operands<32>};
    case DType::Q5_0: return {gemm_pairs_32<Q5_0Pair>, ActFormat::kQ8_0, true, build_pair_operands<32>};
    case DType::Q5_1: return {gemm_pairs_32<Q5_1Pair>, ActFormat::kQ8_0, true, build_pair_operands<32>};
    case DType::IQ4_NL: return {gemm_pairs_32<IQ4_NLPair>, ActFormat::kQ8_0, true, build_pair_operands<32>};
    case DType::IQ4_XS: return {gemm_iq4_xs_pairs<BlockIQ4_XS>, ActFormat::kQ8_K, true, build_pair_operands<256>};
    case DType::IQ3_S_WIDE: return {gemm_iq4_xs_pairs<BlockIQ3_S_WIDE>, ActFormat::kQ8_K, true, build_pair_operands<256>};
    case DType::IQ3_XXS_WIDE: return {gemm_iq4_xs_pairs<BlockIQ3_XXS_WIDE>, ActFormat::kQ8_K, true, build_pair_operands<256>};
    case DType::F16: return {gemm_f16_pairs, ActFormat::kF32RoundF16, true};
    default: return gemm_kernel_avx512_vnni_kquants(t);
  }
}

}  // namespace tokamak::kernels

TOKAMAK_TARGET_REGION_END

#else  // no x86 SIMD in this build

namespace tokamak::kernels {
GemmKernel gemm_kernel_avx512_vnni_interleaved(DType) { return {}; }
}  // namespace tokamak::kernels

#endif
