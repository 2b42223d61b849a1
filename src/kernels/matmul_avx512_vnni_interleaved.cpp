// AVX-512 VNNI kernels over weights interleaved 8 rows at a time
// (kernels/interleave.h): the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, IQ4_NL) against Q8_0 activations, IQ4_XS, and Q4_K, Q5_K and Q6_K
// prompts against Q8_K ones.
//
// Two groups side by side fill a 512-bit register: a 32-byte line of group g
// (4 quants of each of its 8 rows) in the low half, the same line of group
// g + 1 in the high half, one row per 32-bit lane. Each token's 4 activations
// of that line are one broadcast, and one vpdpbusd adds the 16 rows' 4
// products into their lanes: per line and token one instruction, against the
// AVX2 kernels' vpmaddubsw and its add (and their widening) for 8 rows.
//
// Q4_K and Q5_K decode (one token) have pair kernels that read the packed
// lines directly (unpacking a group costs about what one token's pass over it
// does); Q6_K decode goes to the AVX2 kernel, as do the last odd group and
// the plain tail rows of every format.
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

namespace tokamak::kernels {
namespace {

// [a, b]: group g's half in the low 256 bits, group g + 1's in the high.
inline __m512i halves(__m256i a, __m256i b) { return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1); }
inline __m512 halves(__m256 a, __m256 b) { return _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1); }
// The 8 fp16 values at a and the 8 at b, as floats, a's in the low half.
inline __m512 fp16_halves(const uint8_t* a, const uint8_t* b) {
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(load128(a)), load128(b), 1));
}
// Activations 4j .. 4j + 3 of a block in every 32-bit lane (a broadcast load).
inline __m512i broadcast4_16(const uint8_t* xq, int j) {
  int32_t v;
  std::memcpy(&v, xq + 4 * j, sizeof(v));
  return _mm512_set1_epi32(v);
}

// Tokens per tile: T sums and T float accumulators in registers.
constexpr int kTokens = 8;
// How far ahead a prompt's pair tiles prefetch each group's weights.
constexpr size_t kPrefetchBlocks = 16;
// Decode (group_decode_32) prefetches ~4 KiB ahead, whole blocks: 16 of
// Q8_0's, 30 of Q4_0's (16 of those, 2.3 KiB, streamed one core at 24-27 GB/s
// against ~30-32; tg64 Q4_0, 4 alternations with ik_llama.cpp, twice: 59-61 ->
// 67-69 t/s).
constexpr size_t kDecodePrefetchBytes = 16 * (8 * 34);  // 16 blocks of a Q8_0 group

// Rows [r, n_rows) of a (r a multiple of 8): the AVX2 kernel's share.
GemmArgs rows_from(const GemmArgs& a, int64_t r) {
  GemmArgs rest = a;
  rest.w = a.w + static_cast<size_t>(r) * a.w_stride;
  rest.y = a.y + r;
  rest.n_rows = a.n_rows - r;
  return rest;
}

// ---- Q4_0 and Q8_0: lines outside, tokens inside ----
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

// ---- One token: blocks b and b + 1 of one group side by side ----
//
// A decode reads each weight once, so the order of its reads matters as much
// as its instruction count. The pair kernels read groups g and g + 1 as two
// streams, which a Zen 5 host (2 threads) streams ~20% slower than one: a
// bare read loop of the same pattern, 39 against 51 GB/s; GemvX8 ffn_up Q4_K
// 34 GB/s on them against 40-45 on the AVX2 kernel's one stream. Here a register
// holds blocks b and b + 1 of one group (8 rows each), so each thread reads
// its groups as one stream, with VNNI's instructions. Each half's integer sum
// is exact and its float step is the AVX2 kernel's, in block order, so a
// token alone is bitwise the same token in a batch.

// Activations 4j .. 4j + 3 of x0 in the low 256 bits, of x1 in the high.
inline __m512i broadcast4_two(const uint8_t* x0, const uint8_t* x1, int j) {
  int32_t a, b;
  std::memcpy(&a, x0 + 4 * j, sizeof(a));
  std::memcpy(&b, x1 + 4 * j, sizeof(b));
  return halves(_mm256_set1_epi32(a), _mm256_set1_epi32(b));
}
inline __m256i low_half(__m512i v) { return _mm512_castsi512_si256(v); }
inline __m256i high_half(__m512i v) { return _mm512_extracti64x4_epi64(v, 1); }

// The decode kernels' walk over one group's blocks (super-blocks) of
// kBlock bytes: fn(b, both, p0, p1) for blocks b and b + 1 side by side, in
// order (both false: the last block of an odd count meets itself in the
// high half, whose sums go unused), with the lines `ahead` blocks on
// prefetched. Callers mark fn always_inline: a call per pair kept Q2_K's
// decode ~7% slower (GemvX8 q2_K ffn_up one thread).
template <size_t kBlock, class Fn>
[[gnu::always_inline]] inline void for_each_block_pair(const uint8_t* g, int64_t n, size_t ahead, Fn fn) {
  for (int64_t b = 0; b < n; b += 2) {
    const bool both = b + 1 < n;
    const uint8_t* p0 = g + static_cast<size_t>(b) * kBlock;
    const uint8_t* p1 = both ? p0 + kBlock : p0;
    for (size_t line = 0; line < 2 * kBlock; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p0 + ahead * kBlock + line), _MM_HINT_T0);
    }
    fn(b, both, p0, p1);
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
void group_decode_32(const uint8_t* g, int64_t nb, const ActRows& x, float* y) {
  const uint8_t* xq = x.qs(0);
  const float* xd = x.d(0);
  const int16_t* xs = x.sums(0);
  __m256 acc = _mm256_setzero_ps();
  for_each_block_pair<F::kBlockBytes>(g, nb, kDecodePrefetchBytes / F::kBlockBytes, [&](int64_t b, bool both, const uint8_t* p0, const uint8_t* p1) __attribute__((always_inline)) {
    const uint8_t* x0 = xq + 32 * b;
    const uint8_t* x1 = both ? x0 + 32 : x0;
    __m512i s = _mm512_setzero_si512();
    F::template sums<1>(p0, p1, [&](int, int j) { return broadcast4_two(x0, x1, j); }, &s);
    const int32_t xs0 = F::kSumScale * xs[b], xs1 = F::kSumScale * xs[both ? b + 1 : b];
    const __m512i total = _mm512_sub_epi32(s, halves(_mm256_set1_epi32(xs0), _mm256_set1_epi32(xs1)));
    acc = block_step<F>(low_half(total), p0, xd[b], xs[b], acc);
    if (both) acc = block_step<F>(high_half(total), p1, xd[b + 1], xs[b + 1], acc);
  });
  _mm256_storeu_ps(y, acc);
}

// One token: decode(group, x, y) for each group of 8 rows in turn (one
// stream), then the plain tail rows on the AVX2 kernel.
template <class Decode>
void gemm_groups_decode(const GemmArgs& a, ActFormat act, Decode decode) {
  const ActRows x{reinterpret_cast<const uint8_t*>(a.act), a.act_stride, act_layout(act, a.k)};
  const size_t group_bytes = kInterleaveRows * a.w_stride;
  const int64_t groups = a.n_rows / kInterleaveRows;
  for (int64_t gi = 0; gi < groups; ++gi) {
    decode(reinterpret_cast<const uint8_t*>(a.w) + static_cast<size_t>(gi) * group_bytes, x, a.y + gi * kInterleaveRows);
  }
  if (groups * kInterleaveRows < a.n_rows) gemm_kernel_avx2_interleaved(a.type).fn(rows_from(a, groups * kInterleaveRows));
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
                              [&](const uint8_t* g, const ActRows& x, float* y) { group_decode_32<F>(g, a.k / 32, x, y); });
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
// sb and sb + 1 of one group (one stream, as group_decode_32).
struct IQ4_XSPair {
  static constexpr size_t kBlockBytes = 8 * 136;
  // isum[t] += the two halves' integer sums, act(t, ib, j) giving token t's
  // activations 32 ib + 4j .. + 3 as each half wants them and bsums(t, c) its
  // sums per 16 (2c, 2c + 1) as an int16 pair, likewise.
  template <int T, class Act, class Sums>
  [[gnu::always_inline]] static inline void sums(const uint8_t* p0, const uint8_t* p1, Act act, Sums bsums, __m512i* isum) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i values = _mm512_xor_si512(_mm512_broadcast_i32x4(load128(reinterpret_cast<const uint8_t*>(kIQ4NLValues))),
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
template <int T>
void iq4_xs_pair_tile(const uint8_t* g, size_t group_bytes, int64_t n_sb, const ActRows& x, int64_t t0, float* y, int64_t ldy) {
  constexpr size_t kBlock = IQ4_XSPair::kBlockBytes;
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
    IQ4_XSPair::sums<T>(
        p0, p1, [&](int t, int ib, int j) { return broadcast4_16(xq[t] + 32 * ib, j); },
        [&](int t, int c) { return broadcast4_16(bs[t], c); }, isum);
    const __m512 d = fp16_halves(p0, p1);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, _mm512_set1_ps(x.d(t0 + t)[sb])), acc[t]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + (t0 + t) * ldy, acc[t]);
}

template <int T>
void iq4_xs_pair_rest(const uint8_t* g, size_t group_bytes, int64_t n_sb, const ActRows& x, int64_t t0, int64_t rest, float* y,
                      int64_t ldy) {
  if constexpr (T > 0) {
    if (rest == T) {
      iq4_xs_pair_tile<T>(g, group_bytes, n_sb, x, t0, y, ldy);
    } else {
      iq4_xs_pair_rest<T - 1>(g, group_bytes, n_sb, x, t0, rest, y, ldy);
    }
  }
}

// One group of 8 rows (at g, n_sb super-blocks) against one token.
void iq4_xs_group_decode(const uint8_t* g, int64_t n_sb, const ActRows& x, float* y) {
  constexpr size_t kBlock = IQ4_XSPair::kBlockBytes;
  const uint8_t* xq = x.qs(0);
  const float* xd = x.d(0);
  const uint8_t* bs = reinterpret_cast<const uint8_t*>(x.sums(0));
  __m256 acc = _mm256_setzero_ps();
  for_each_block_pair<kBlock>(g, n_sb, 4, [&](int64_t sb, bool both, const uint8_t* p0, const uint8_t* p1) __attribute__((always_inline)) {
    const uint8_t* x0 = xq + 256 * sb;
    const uint8_t* x1 = both ? x0 + 256 : x0;
    const uint8_t* b0 = bs + 32 * sb;  // 16 int16 sums a super-block
    const uint8_t* b1 = both ? b0 + 32 : b0;
    __m512i isum = _mm512_setzero_si512();
    IQ4_XSPair::sums<1>(
        p0, p1, [&](int, int ib, int j) { return broadcast4_two(x0 + 32 * ib, x1 + 32 * ib, j); },
        [&](int, int c) { return broadcast4_two(b0, b1, c); }, &isum);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(low_half(isum)), _mm256_mul_ps(_mm256_cvtph_ps(load128(p0)), _mm256_set1_ps(xd[sb])), acc);
    if (both) {
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(high_half(isum)),
                            _mm256_mul_ps(_mm256_cvtph_ps(load128(p1)), _mm256_set1_ps(xd[sb + 1])), acc);
    }
  });
  _mm256_storeu_ps(y, acc);
}

void gemm_iq4_xs_pairs(const GemmArgs& a) {
  const int64_t n_sb = a.k / 256;
  if (a.n_tokens == 1) {
    return gemm_groups_decode(a, ActFormat::kQ8_K,
                              [&](const uint8_t* g, const ActRows& x, float* y) { iq4_xs_group_decode(g, n_sb, x, y); });
  }
  for_each_pair_tile(a, ActFormat::kQ8_K, [&](const uint8_t* g, size_t group_bytes, const ActRows& x, int64_t t, int64_t n, float* y) {
    if (n == kTokens) return iq4_xs_pair_tile<kTokens>(g, group_bytes, n_sb, x, t, y, a.ldy);
    iq4_xs_pair_rest<kTokens - 1>(g, group_bytes, n_sb, x, t, n, y, a.ldy);
  });
}

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
// low 256 bits, activations x0; p1: high, x1), added into isum times their
// scales. kFifthBit (Q5_K): qh holds the 8 qh lines of both.
template <int J, bool kFifthBit>
[[gnu::always_inline]] inline __m512i k_pair_chunk(const uint8_t* p0, const uint8_t* p1, const __m512i (&qh)[8],
                                                   const __m512i* scale, const uint8_t* x0, const uint8_t* x1,
                                                   __m512i isum) {
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
    lo = _mm512_dpbusd_epi32(lo, q_lo, broadcast4_two(x0 + 64 * J, x1 + 64 * J, c));
    hi = _mm512_dpbusd_epi32(hi, q_hi, broadcast4_two(x0 + 64 * J + 32, x1 + 64 * J + 32, c));
  }
  isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(lo, scale[2 * J]));
  return _mm512_add_epi32(isum, _mm512_mullo_epi32(hi, scale[2 * J + 1]));
}

// One group of 8 rows (at g, n_sb super-blocks) against token t.
template <class K>
void k_group_decode(const uint8_t* g, int64_t n_sb, const ActRows& x, int64_t t, float* y) {
  constexpr bool kFifthBit = std::is_same_v<K, Q5_KUnpacked>;
  constexpr size_t kBlock = K::kBlockBytes;
  __m256 acc = _mm256_setzero_ps();
  for_each_block_pair<kBlock>(g, n_sb, 2, [&](int64_t sb, bool both, const uint8_t* p0, const uint8_t* p1) __attribute__((always_inline)) {
    UnpackedSuperBlock u0, u1;  // scales, mins and d only
    K::unpack_scales(p0, u0);
    K::unpack_scales(p1, u1);
    __m512i scale[8];  // the float steps below take u0's and u1's offsets and d themselves
    pair_scale_lines<K>(u0, u1, scale);
    __m512i qh[8];
    if constexpr (kFifthBit) {
      for (int c = 0; c < 8; ++c) qh[c] = halves(load256(p0 + 1152 + 32 * c), load256(p1 + 1152 + 32 * c));
    }
    const uint8_t* x0 = x.qs(t) + 256 * sb;
    const uint8_t* x1 = both ? x0 + 256 : x0;
    __m512i isum = _mm512_setzero_si512();
    isum = k_pair_chunk<0, kFifthBit>(p0, p1, qh, scale, x0, x1, isum);
    isum = k_pair_chunk<1, kFifthBit>(p0, p1, qh, scale, x0, x1, isum);
    isum = k_pair_chunk<2, kFifthBit>(p0, p1, qh, scale, x0, x1, isum);
    isum = k_pair_chunk<3, kFifthBit>(p0, p1, qh, scale, x0, x1, isum);
    acc = K::finish(u0, low_half(isum), x, t, sb, acc);
    if (both) acc = K::finish(u1, high_half(isum), x, t, sb + 1, acc);
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
[[gnu::always_inline]] inline __m512i half_2bit_pair(const uint8_t* p0, const uint8_t* p1, const __m512i* scale, const uint8_t* x0,
                                                     const uint8_t* x1, __m512i isum) {
  __m512i s[8];  // s[2j + mm / 4]: sub-block 8H + 2j + mm / 4
  for (__m512i& v : s) v = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int mm = 0; mm < 8; ++mm) {
    const size_t at = K::kQs + 32 * (8 * H + mm);
    const __m512i qs = halves(load256(p0 + at), load256(p1 + at));
    __m512i hm = _mm512_setzero_si512();
    if constexpr (K::kHasHmask) hm = halves(load256(p0 + K::kHmask + 32 * mm), load256(p1 + K::kHmask + 32 * mm));
    const uint8_t* a = x0 + 128 * H;
    const uint8_t* b = x1 + 128 * H;
    const int h = mm / 4;
    s[h] = _mm512_dpbusd_epi32(s[h], values_2bit<K, 0, H>(qs, hm), broadcast4_two(a, b, mm));
    s[2 + h] = _mm512_dpbusd_epi32(s[2 + h], values_2bit<K, 1, H>(qs, hm), broadcast4_two(a + 32, b + 32, mm));
    s[4 + h] = _mm512_dpbusd_epi32(s[4 + h], values_2bit<K, 2, H>(qs, hm), broadcast4_two(a + 64, b + 64, mm));
    s[6 + h] = _mm512_dpbusd_epi32(s[6 + h], values_2bit<K, 3, H>(qs, hm), broadcast4_two(a + 96, b + 96, mm));
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s[i], scale[8 * H + i]));
  return isum;
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

// K::finish of one super-block (8 rows at p) from its integer sum and its
// offsets' sum against the activations' sums per 16 (pairs_dot_sums).
template <class K>
[[gnu::always_inline]] inline __m256 finish_2bit(__m256i isum, __m256i osum, const uint8_t* p, float dx, __m256 acc) {
  const __m256 dxv = _mm256_set1_ps(dx);
  if constexpr (std::is_same_v<K, Q2_KUnpacked>) {
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(_mm256_cvtph_ps(load128(p)), dxv), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(osum), _mm256_mul_ps(_mm256_cvtph_ps(load128(p + 16)), dxv), acc);
  } else {
    const __m256i total = _mm256_sub_epi32(isum, _mm256_slli_epi32(osum, K::kOffsetShift));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(_mm256_cvtph_ps(load128(p)), dxv), acc);
  }
}

// Scales and offsets go straight from their bytes to the 16 row lanes: through
// UnpackedSuperBlock (K::unpack_scales, K::finish per half) they took ~40% of
// the time (GemvX8 q2_K ffn_up one thread ~19 GB/s, ~27 without them).
template <class K>
void group_decode_2bit(const uint8_t* g, int64_t n_sb, const ActRows& x, float* y) {
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
    const uint8_t* x0 = x.qs(0) + 256 * sb;
    const uint8_t* x1 = both ? x0 + 256 : x0;
    __m512i isum = half_2bit_pair<K, 0>(p0, p1, scale, x0, x1, _mm512_setzero_si512());
    isum = half_2bit_pair<K, 1>(p0, p1, scale, x0, x1, isum);
    const uint8_t* b0 = bs + 32 * sb;  // 16 int16 sums a super-block
    const uint8_t* b1 = both ? b0 + 32 : b0;
    __m512i osum = _mm512_setzero_si512();
    for (int c = 0; c < 8; ++c) osum = _mm512_add_epi32(osum, _mm512_madd_epi16(byte_pairs_two<kSigned>(off0, off1, c), broadcast4_two(b0, b1, c)));
    acc = finish_2bit<K>(low_half(isum), low_half(osum), p0, xd[sb], acc);
    if (both) acc = finish_2bit<K>(high_half(isum), high_half(osum), p1, xd[sb + 1], acc);
  });
  _mm256_storeu_ps(y, acc);
}

// Below K::kMinTokens tokens the groups are not unpacked (one token's pass
// over a group costs about what unpacking it does): one token takes the
// decode kernels above (Q4_K, Q5_K), a few tokens and Q6_K the AVX2 direct kernels.
template <class K>
void gemm_k_pairs(const GemmArgs& a) {
  const GemmFn avx2 = gemm_kernel_avx2_interleaved(a.type).fn;
  if (a.n_tokens < K::kMinTokens) {
    if constexpr (std::is_same_v<K, Q2_KUnpacked> || std::is_same_v<K, Q3_KUnpacked>) {
      if (a.n_tokens == 1) {
        return gemm_groups_decode(a, ActFormat::kQ8_K, [&](const uint8_t* g, const ActRows& x, float* y) {
          group_decode_2bit<K>(g, a.k / 256, x, y);
        });
      }
    } else if constexpr (!std::is_same_v<K, Q6_KUnpacked>) {
      if (a.n_tokens == 1) {
        return gemm_groups_decode(a, ActFormat::kQ8_K, [&](const uint8_t* g, const ActRows& x, float* y) {
          k_group_decode<K>(g, a.k / 256, x, 0, y);
        });
      }
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

GemmKernel gemm_kernel_avx512_vnni_interleaved(DType t) {
  switch (t) {
    case DType::Q4_0: return {gemm_pairs_32<Q4_0Pair>, ActFormat::kQ8_0, true};
    case DType::Q8_0: return {gemm_pairs_32<Q8_0Pair>, ActFormat::kQ8_0, true};
    case DType::Q4_1: return {gemm_pairs_32<Q4_1Pair>, ActFormat::kQ8_0, true};
    case DType::Q5_0: return {gemm_pairs_32<Q5_0Pair>, ActFormat::kQ8_0, true};
    case DType::Q5_1: return {gemm_pairs_32<Q5_1Pair>, ActFormat::kQ8_0, true};
    case DType::IQ4_NL: return {gemm_pairs_32<IQ4_NLPair>, ActFormat::kQ8_0, true};
    case DType::IQ4_XS: return {gemm_iq4_xs_pairs, ActFormat::kQ8_K, true};
    case DType::Q2_K: return {gemm_k_pairs<Q2_KUnpacked>, ActFormat::kQ8_K, true};
    case DType::Q3_K: return {gemm_k_pairs<Q3_KUnpacked>, ActFormat::kQ8_K, true};
    case DType::Q4_K: return {gemm_k_pairs<Q4_KUnpacked>, ActFormat::kQ8_K, true};
    case DType::Q5_K: return {gemm_k_pairs<Q5_KUnpacked>, ActFormat::kQ8_K, true};
    case DType::Q6_K: return {gemm_k_pairs<Q6_KUnpacked>, ActFormat::kQ8_K, true};
    default: return {};
  }
}

}  // namespace tokamak::kernels

TOKAMAK_TARGET_REGION_END

#else  // no x86 SIMD in this build

namespace tokamak::kernels {
GemmKernel gemm_kernel_avx512_vnni_interleaved(DType) { return {}; }
}  // namespace tokamak::kernels

#endif
