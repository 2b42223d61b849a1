// Internal to matmul_avx512.cpp and matmul_avx512_vnni.cpp: the AVX-512
// kernels, written once and compiled by each of those files under its own
// target (plain AVX-512 BW, or with VNNI). Everything here has internal
// linkage, so each file keeps its own copy and no function compiled for one
// target can stand in for the other's at link time.
//
// The including file defines a Dot policy:
//   static constexpr bool kVnni;
//   __m512i dot4(__m512i acc, __m512i u8, __m512i s8): acc += sums of 4 u8*s8 products per int32 lane
//   __m512i dot2w(__m512i acc, __m512i a16, __m512i b16): acc += sums of 2 int16 products per int32 lane
// Without VNNI dot4 goes through int16 pair sums (maddubs), which saturate
// past 32767; the kernels keep unsigned operands <= 63 there (signed weights
// use |w| and move the sign onto the activation).
//
// Kernels tile R weight rows x T tokens in registers. Each output element
// (row r, token t) owns one accumulator and goes through the same operations
// in the same order for any R and T, so results are batch invariant (see
// matmul_kernels.h). The weights of a tile are decoded once and used for T
// tokens; a token's activations are loaded once and used for R rows.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/matmul_kernels.h"
#include "kernels/quants_blocks.h"

namespace tokamak::kernels {
namespace {

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline float fp16(uint16_t h) { return _cvtsh_ss(h); }

template <class T, size_t N>
inline __m512i load_table(const T (&table)[N]) {
  static_assert(sizeof(table) == 64);
  return _mm512_loadu_si512(table);
}

// Per 16-bit lane shift counts: [0, 4, 0, 4] by 128-bit lane, and [0, 4] by 256-bit half.
alignas(64) constexpr uint16_t kShift0404[32] = {0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4,
                                                 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4};
alignas(64) constexpr uint16_t kShift0044[32] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};

// [a x8, b x8]: the scales of a pair of 32-element blocks, one per int32 lane
// of the products of that block.
inline __m512 pair_f16(uint16_t a, uint16_t b) {
  return _mm512_cvtph_ps(_mm256_mask_blend_epi16(0xFF00, _mm256_set1_epi16(static_cast<short>(a)),
                                                 _mm256_set1_epi16(static_cast<short>(b))));
}
template <bool kTwo>
inline __m512 pair_f32(const float* p) {
  const __m128 v = kTwo ? _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))) : _mm_load_ss(p);
  return _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), _mm512_castps128_ps512(v));
}

// A tile walks R rows side by side, each only a few KiB long, which the
// hardware prefetchers do not pick up in time (measured: Q4_0 GEMV streamed
// 11 GB/s per core without this, 19 with it). So each step also fetches the
// same bytes of the next tile's rows, which follow these in memory.
template <int R>
inline void prefetch_next_rows(const uint8_t* p, size_t ws) {
  for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(p + static_cast<size_t>(R + r) * ws), _MM_HINT_T0);
}

// ======================= 32-element formats x Q8_0 =======================

// [16 bytes at a, twice; 16 bytes at b, twice]; b is not read when !kTwo
// (zeros instead): only the bytes of the blocks are read, never past them.
template <bool kTwo>
inline __m512i two_qs16(const uint8_t* a, const uint8_t* b) {
  const __m512i lo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
  if constexpr (!kTwo) return _mm512_maskz_mov_epi64(0x0F, lo);
  return _mm512_mask_broadcast_i32x4(lo, 0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
}
// The 64 nibbles of two_qs16 in element order: block 0's low nibbles
// (elements 0-15), its high nibbles (16-31), then block 1's.
inline __m512i nibbles(__m512i qs) {
  return _mm512_and_si512(_mm512_srlv_epi16(qs, load_table(kShift0404)), _mm512_set1_epi8(0x0F));
}

// Each decoder: kBytes per block; quants<kTwo> reads the quants of two blocks
// at p, or of one (the second then decodes as zeros): unsigned with true
// value q - kOffset (kSigned false) or signed; kHasMin adds m * sum(x).

// Every 32-element format stores its fp16 scale d first and, with kHasMin,
// its fp16 min m right after it.
struct DecQ4_0 {
  static constexpr int kBytes = 18, kOffset = 8;
  static constexpr bool kSigned = false, kHasMin = false;
  template <bool kTwo>
  static __m512i quants(const uint8_t* p) {
    return nibbles(two_qs16<kTwo>(p + 2, p + kBytes + 2));
  }
};
struct DecQ4_1 {
  static constexpr int kBytes = 20, kOffset = 0;
  static constexpr bool kSigned = false, kHasMin = true;
  template <bool kTwo>
  static __m512i quants(const uint8_t* p) {
    return nibbles(two_qs16<kTwo>(p + 4, p + kBytes + 4));
  }
};
// The fifth bits: bit e of qh (little-endian u32 per block) is element e's.
template <bool kTwo, int kQhOffset, int kBytes>
inline __m512i add_fifth_bits(__m512i q, const uint8_t* p) {
  uint64_t bits = load_u32(p + kQhOffset);
  if constexpr (kTwo) bits |= uint64_t{load_u32(p + kBytes + kQhOffset)} << 32;
  return _mm512_mask_add_epi8(q, _cvtu64_mask64(bits), q, _mm512_set1_epi8(16));
}
struct DecQ5_0 {
  static constexpr int kBytes = 22, kOffset = 16;
  static constexpr bool kSigned = false, kHasMin = false;
  template <bool kTwo>
  static __m512i quants(const uint8_t* p) {
    return add_fifth_bits<kTwo, 2, kBytes>(nibbles(two_qs16<kTwo>(p + 6, p + kBytes + 6)), p);
  }
};
struct DecQ5_1 {
  static constexpr int kBytes = 24, kOffset = 0;
  static constexpr bool kSigned = false, kHasMin = true;
  template <bool kTwo>
  static __m512i quants(const uint8_t* p) {
    return add_fifth_bits<kTwo, 4, kBytes>(nibbles(two_qs16<kTwo>(p + 8, p + kBytes + 8)), p);
  }
};
struct DecQ8_0 {
  static constexpr int kBytes = 34, kOffset = 0;
  static constexpr bool kSigned = true, kHasMin = false;
  template <bool kTwo>
  static __m512i quants(const uint8_t* p) {
    const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    if constexpr (!kTwo) return _mm512_zextsi256_si512(q0);
    return _mm512_inserti64x4(_mm512_castsi256_si512(q0), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kBytes + 2)), 1);
  }
};
struct DecIQ4_NL {
  static constexpr int kBytes = 18, kOffset = 0;
  static constexpr bool kSigned = true, kHasMin = false;
  template <bool kTwo>
  static __m512i quants(const uint8_t* p) {
    const __m512i values = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues)));
    return _mm512_shuffle_epi8(values, nibbles(two_qs16<kTwo>(p + 2, p + kBytes + 2)));
  }
};

// Where token t's Q8_0 activation row lies.
struct Q8Rows {
  const uint8_t* base;
  size_t stride;
  size_t d_offset;
  const uint8_t* qs(int t) const { return base + static_cast<size_t>(t) * stride; }
  const float* d(int t) const { return reinterpret_cast<const float*>(qs(t) + d_offset); }
};

// One pair of blocks (index `pair` in the row) of R rows against T tokens.
template <class Dec, class Dot, int R, int T, bool kTwo>
inline void step32(const uint8_t* w, size_t ws, const Q8Rows& x, int64_t pair, __m512 (&acc)[R][T]) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i q[R];
  __m512 dw[R], mw[R];
  [[maybe_unused]] __mmask64 negative[R];
  for (int r = 0; r < R; ++r) {
    const uint8_t* p = w + static_cast<size_t>(r) * ws;
    q[r] = Dec::template quants<kTwo>(p);
    dw[r] = pair_f16(load_u16(p), kTwo ? load_u16(p + Dec::kBytes) : 0);
    if constexpr (Dec::kHasMin) mw[r] = pair_f16(load_u16(p + 2), kTwo ? load_u16(p + Dec::kBytes + 2) : 0);
    if constexpr (Dec::kSigned && Dot::kVnni) {
      q[r] = _mm512_xor_si512(q[r], _mm512_set1_epi8(static_cast<char>(0x80)));  // w + 128, unsigned
    } else if constexpr (Dec::kSigned) {
      negative[r] = _mm512_movepi8_mask(q[r]);
      q[r] = _mm512_abs_epi8(q[r]);
    }
  }
  // Unsigned weights stand for q - offset: start each sum at -offset * sum(x).
  constexpr int kOffset = Dec::kSigned ? (Dot::kVnni ? 128 : 0) : Dec::kOffset;
  for (int t = 0; t < T; ++t) {
    const __m512i xq = _mm512_loadu_si512(x.qs(t) + 64 * pair);
    const __m512 dx = pair_f32<kTwo>(x.d(t) + 2 * pair);
    __m512i base = zero;
    if constexpr (kOffset != 0) base = _mm512_sub_epi32(zero, Dot::dot4(zero, _mm512_set1_epi8(static_cast<char>(kOffset)), xq));
    [[maybe_unused]] __m512 xsum;
    if constexpr (Dec::kHasMin) xsum = _mm512_cvtepi32_ps(Dot::dot4(zero, _mm512_set1_epi8(1), xq));
    for (int r = 0; r < R; ++r) {
      __m512i isum;
      if constexpr (Dec::kSigned && !Dot::kVnni) {
        isum = Dot::dot4(zero, q[r], _mm512_mask_sub_epi8(xq, negative[r], zero, xq));
      } else {
        isum = Dot::dot4(base, q[r], xq);
      }
      acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw[r], dx), acc[r][t]);
      if constexpr (Dec::kHasMin) acc[r][t] = _mm512_fmadd_ps(xsum, _mm512_mul_ps(mw[r], dx), acc[r][t]);
    }
  }
}

template <class Dec, class Dot, int R, int T>
void tile32(const uint8_t* w, size_t ws, const Q8Rows& x, int64_t nb, float* y, int64_t ldy) {
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  const int64_t n_pairs = nb / 2;
  for (int64_t p = 0; p < n_pairs; ++p) {
    for (int line = 0; line < 2 * Dec::kBytes; line += 64) prefetch_next_rows<R>(w + 2 * p * Dec::kBytes + line, ws);
    step32<Dec, Dot, R, T, true>(w + 2 * p * Dec::kBytes, ws, x, p, acc);
  }
  if (nb % 2 != 0) step32<Dec, Dot, R, T, false>(w + 2 * n_pairs * Dec::kBytes, ws, x, n_pairs, acc);
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <class Dec, class Dot>
struct Tile32 {
  const GemmArgs& a;
  size_t d_offset;
  template <int R, int T>
  void run(int64_t r, int64_t t) const {
    const Q8Rows x{reinterpret_cast<const uint8_t*>(a.act) + static_cast<size_t>(t) * a.act_stride, a.act_stride, d_offset};
    tile32<Dec, Dot, R, T>(reinterpret_cast<const uint8_t*>(a.w) + static_cast<size_t>(r) * a.w_stride, a.w_stride, x,
                           a.k / 32, a.y + t * a.ldy + r, a.ldy);
  }
};

template <class Dec, class Dot>
void gemm32(const GemmArgs& a) {
  const Tile32<Dec, Dot> tile{a, act_layout(ActFormat::kQ8_0, a.k).d_offset};
  if (a.n_tokens == 1) {
    // Decode streams R rows (and prefetches the next R): ~300 bytes a step
    // keeps the miss queue full without overflowing it. Measured in A/B runs
    // on the reference machine, % of roofline: Q4_0 (18-byte blocks) 86 with
    // 8 rows against 75 with 4; Q8_0 (34 bytes) 83 with 4 against 76 with 8.
    if constexpr (Dec::kBytes >= 32) {
      for_each_tile<4, 1>(a, tile);
    } else {
      for_each_tile<8, 1>(a, tile);
    }
  } else {
    for_each_tile<4, 4>(a, tile);
  }
}

// ======================= K-quants x Q8_K =======================

// One super-block of one weight row, prepared for its four 64-element chunks.
struct KPrep {
  const uint8_t* p;
  __m512i sc;  // int16 scale per sub-block in lanes 0..7 (32-element sub-blocks) or 0..15 (16)
  __m256i mn;  // int16 per 16 elements: the mins (kHasMin) or the scales (kOffset), for the bsums
  float d;
  float dmin;
};

// For chunk c, int16 lane j (the products of elements 64c + 2j and 64c + 2j + 1)
// -> the index of their sub-block's scale.
template <int kSubBlock>
constexpr std::array<std::array<uint16_t, 32>, 4> chunk_scale_idx() {
  std::array<std::array<uint16_t, 32>, 4> idx{};
  for (int c = 0; c < 4; ++c)
    for (int j = 0; j < 32; ++j) idx[static_cast<size_t>(c)][static_cast<size_t>(j)] = static_cast<uint16_t>((64 * c + 2 * j) / kSubBlock);
  return idx;
}
template <int kSubBlock>
alignas(64) inline constexpr std::array<std::array<uint16_t, 32>, 4> kChunkScaleIdx = chunk_scale_idx<kSubBlock>();

// Per chunk half (32 bytes): a byte or shift pattern [lo x32, hi x32].
inline __m512i halves_epi8(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(lo)), _mm256_set1_epi8(static_cast<char>(hi)), 1);
}
inline __m512i halves_epi16(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(lo)), _mm256_set1_epi16(static_cast<short>(hi)), 1);
}
inline __m512i bcast256(const uint8_t* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Q4_K / Q5_K scales: 8 six-bit scales and mins in 12 bytes (scale_min_k4)
// -> int16 [sc0..sc7, m0..m7].
inline __m256i unpack_scale_min_k4(const uint8_t* s) {
  const uint32_t a = load_u32(s), b = load_u32(s + 4), c = load_u32(s + 8);
  const uint32_t sc03 = a & 0x3F3F3F3Fu, m03 = b & 0x3F3F3F3Fu;
  const uint32_t sc47 = (c & 0x0F0F0F0Fu) | ((a >> 6) & 0x03030303u) << 4;
  const uint32_t m47 = ((c >> 4) & 0x0F0F0F0Fu) | ((b >> 6) & 0x03030303u) << 4;
  return _mm256_cvtepu8_epi16(_mm_set_epi32(static_cast<int>(m47), static_cast<int>(m03), static_cast<int>(sc47), static_cast<int>(sc03)));
}
// [m0, m0, m1, m1, ..., m7, m7] from [sc0..sc7, m0..m7].
inline __m256i mins_per_16(__m256i scale_min) {
  return _mm256_permutexvar_epi16(_mm256_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8), scale_min);
}

struct DecQ2_K {
  static constexpr int kBytes = 84, kSubBlock = 16, kOffset = 0;
  static constexpr bool kSigned = false, kHasMin = true;
  static KPrep prep(const uint8_t* p) {
    const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return {p, _mm512_castsi256_si512(_mm256_and_si256(v, _mm256_set1_epi16(15))), _mm256_srli_epi16(v, 4),
            fp16(load_u16(p + 80)), fp16(load_u16(p + 82))};
  }
  static __m512i chunk(const KPrep& k, int c) {
    const __m512i qs = bcast256(k.p + 16 + 32 * (c / 2));
    return _mm512_and_si512(_mm512_srlv_epi16(qs, halves_epi16(4 * (c % 2), 4 * (c % 2) + 2)), _mm512_set1_epi8(3));
  }
};
struct DecQ3_K {
  static constexpr int kBytes = 110, kSubBlock = 16, kOffset = 4;
  static constexpr bool kSigned = false, kHasMin = false;
  static KPrep prep(const uint8_t* p) {
    const uint32_t a = load_u32(p + 96), b = load_u32(p + 100), c = load_u32(p + 104);
    const uint32_t v0 = (a & 0x0F0F0F0Fu) | (c & 0x03030303u) << 4;
    const uint32_t v1 = (b & 0x0F0F0F0Fu) | ((c >> 2) & 0x03030303u) << 4;
    const uint32_t v2 = ((a >> 4) & 0x0F0F0F0Fu) | ((c >> 4) & 0x03030303u) << 4;
    const uint32_t v3 = ((b >> 4) & 0x0F0F0F0Fu) | ((c >> 6) & 0x03030303u) << 4;
    const __m256i sc = _mm256_sub_epi16(
        _mm256_cvtepu8_epi16(_mm_set_epi32(static_cast<int>(v3), static_cast<int>(v2), static_cast<int>(v1), static_cast<int>(v0))),
        _mm256_set1_epi16(32));
    return {p, _mm512_castsi256_si512(sc), sc, fp16(load_u16(p + 108)), 0.0f};
  }
  static __m512i chunk(const KPrep& k, int c) {
    const __m512i qs = bcast256(k.p + 32 + 32 * (c / 2));
    const __m512i q = _mm512_and_si512(_mm512_srlv_epi16(qs, halves_epi16(4 * (c % 2), 4 * (c % 2) + 2)), _mm512_set1_epi8(3));
    const __mmask64 high = _mm512_test_epi8_mask(bcast256(k.p), halves_epi8(1 << (2 * c), 1 << (2 * c + 1)));
    return _mm512_mask_add_epi8(q, high, q, _mm512_set1_epi8(4));
  }
};
struct DecQ4_K {
  static constexpr int kBytes = 144, kSubBlock = 32, kOffset = 0;
  static constexpr bool kSigned = false, kHasMin = true;
  static KPrep prep(const uint8_t* p) {
    const __m256i sm = unpack_scale_min_k4(p + 4);
    return {p, _mm512_castsi256_si512(sm), mins_per_16(sm), fp16(load_u16(p)), fp16(load_u16(p + 2))};
  }
  static __m512i chunk(const KPrep& k, int c) {
    const __m512i qs = bcast256(k.p + 16 + 32 * c);
    return _mm512_and_si512(_mm512_srlv_epi16(qs, load_table(kShift0044)), _mm512_set1_epi8(0x0F));
  }
};
struct DecQ5_K {
  static constexpr int kBytes = 176, kSubBlock = 32, kOffset = 0;
  static constexpr bool kSigned = false, kHasMin = true;
  static KPrep prep(const uint8_t* p) { return DecQ4_K::prep(p); }
  static __m512i chunk(const KPrep& k, int c) {
    const __m512i qs = bcast256(k.p + 48 + 32 * c);
    const __m512i q = _mm512_and_si512(_mm512_srlv_epi16(qs, load_table(kShift0044)), _mm512_set1_epi8(0x0F));
    const __mmask64 high = _mm512_test_epi8_mask(bcast256(k.p + 16), halves_epi8(1 << (2 * c), 1 << (2 * c + 1)));
    return _mm512_mask_add_epi8(q, high, q, _mm512_set1_epi8(16));
  }
};
struct DecQ6_K {
  static constexpr int kBytes = 210, kSubBlock = 16, kOffset = 32;
  static constexpr bool kSigned = false, kHasMin = false;
  static KPrep prep(const uint8_t* p) {
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));
    return {p, _mm512_castsi256_si512(sc), sc, fp16(load_u16(p + 208)), 0.0f};
  }
  // Per 128 elements: 64 bytes of ql, 32 of qh. Chunk 0 of the half takes the
  // low nibbles of ql and qh bits 0-1 (first 32) / 2-3; chunk 1 the high
  // nibbles and bits 4-5 / 6-7.
  static __m512i chunk(const KPrep& k, int c) {
    const int half = c / 2;
    const __m512i ql = _mm512_loadu_si512(k.p + 64 * half);
    const __m512i qh = bcast256(k.p + 128 + 32 * half);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    if (c % 2 == 0) {
      const __m512i hi = _mm512_sllv_epi16(_mm512_and_si512(qh, halves_epi8(0x03, 0x0C)), halves_epi16(4, 2));
      return _mm512_or_si512(_mm512_and_si512(ql, m4), hi);
    }
    const __m512i hi = _mm512_srlv_epi16(_mm512_and_si512(qh, halves_epi8(0x30, 0xC0)), halves_epi16(0, 2));
    return _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), hi);
  }
};
// IQ4_XS's layout with the levels and d factor of Block (kLevelsOf, kDScaleOf):
// IQ4_XS itself, or a widened IQ3 format (kernels/widen.h).
template <class Block>
struct DecIQ4_XSLayout {
  static constexpr int kBytes = 136, kSubBlock = 32, kOffset = 0;
  static constexpr bool kSigned = true, kHasMin = false;
  static KPrep prep(const uint8_t* p) {
    const uint64_t lo = _pdep_u64(load_u32(p + 4), 0x0F0F0F0F0F0F0F0Full);
    const uint64_t hi = _pdep_u64(load_u16(p + 2), 0x3030303030303030ull);
    const __m256i sc = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(lo | hi))), _mm256_set1_epi16(32));
    return {p, _mm512_castsi256_si512(sc), _mm256_setzero_si256(), fp16(load_u16(p)) * kDScaleOf<Block>, 0.0f};
  }
  static __m512i chunk(const KPrep& k, int c) {
    const uint8_t* qs = k.p + 8 + 32 * c;
    const __m512i v = _mm512_mask_blend_epi64(0xF0, _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs))),
                                              _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16))));
    const __m512i values = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kLevelsOf<Block>)));
    return _mm512_shuffle_epi8(values, _mm512_and_si512(_mm512_srlv_epi16(v, load_table(kShift0404)), _mm512_set1_epi8(0x0F)));
  }
};

// Formats without sub-block scales (unit_scales: the ternary TQ2_0): their
// quants meet the activations in one dot4, no scale multiply.
template <class Dec>
inline constexpr bool kUnitScales = unit_scales<Dec>();

// TQ2_0: Q2_K's 2-bit lines without scales, the value q - 1, d last.
struct DecTQ2_0 {
  static constexpr int kBytes = 66, kSubBlock = 32, kOffset = 1;
  static constexpr bool kSigned = false, kHasMin = false, kUnitScales = true;
  static KPrep prep(const uint8_t* p) { return {p, _mm512_set1_epi16(1), _mm256_set1_epi16(1), fp16(load_u16(p + 64)), 0.0f}; }
  static __m512i chunk(const KPrep& k, int c) {
    const __m512i qs = bcast256(k.p + 32 * (c / 2));
    return _mm512_and_si512(_mm512_srlv_epi16(qs, halves_epi16(4 * (c % 2), 4 * (c % 2) + 2)), _mm512_set1_epi8(3));
  }
};

struct Q8KRows {
  const uint8_t* base;
  size_t stride;
  size_t d_offset;
  size_t sums_offset;
  const uint8_t* qs(int t) const { return base + static_cast<size_t>(t) * stride; }
  const float* d(int t) const { return reinterpret_cast<const float*>(qs(t) + d_offset); }
  const int16_t* bsums(int t) const { return reinterpret_cast<const int16_t*>(qs(t) + sums_offset); }
};

template <class Dec, class Dot, int R, int T>
void tile_k(const uint8_t* w, size_t ws, const Q8KRows& x, int64_t n_sb, float* y, int64_t ldy) {
  static_assert(Dec::kOffset == 0 || Dec::kOffset == 1 || Dec::kOffset == 4 || Dec::kOffset == 32);
  constexpr int kOffsetShift = Dec::kOffset == 1 ? 0 : Dec::kOffset == 4 ? 2 : 5;
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    for (int line = 0; line < Dec::kBytes; line += 64) prefetch_next_rows<R>(w + sb * Dec::kBytes + line, ws);
    KPrep prep[R];
    for (int r = 0; r < R; ++r) prep[r] = Dec::prep(w + static_cast<size_t>(r) * ws + sb * Dec::kBytes);
    __m512i isum[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) isum[r][t] = zero;
    for (int c = 0; c < 4; ++c) {
      __m512i q[R], scale[R];
      [[maybe_unused]] __mmask64 negative[R];
      for (int r = 0; r < R; ++r) {
        q[r] = Dec::chunk(prep[r], c);
        if constexpr (kUnitScales<Dec>) continue;
        scale[r] = _mm512_permutexvar_epi16(_mm512_load_si512(kChunkScaleIdx<Dec::kSubBlock>[static_cast<size_t>(c)].data()), prep[r].sc);
        if constexpr (Dec::kSigned) {
          negative[r] = _mm512_movepi8_mask(q[r]);
          q[r] = _mm512_abs_epi8(q[r]);
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m512i xq = _mm512_loadu_si512(x.qs(t) + 256 * sb + 64 * c);
        for (int r = 0; r < R; ++r) {
          if constexpr (kUnitScales<Dec>) {
            isum[r][t] = Dot::dot4(isum[r][t], q[r], xq);
            continue;
          }
          __m512i pairs;
          if constexpr (Dec::kSigned) {
            pairs = _mm512_maddubs_epi16(q[r], _mm512_mask_sub_epi8(xq, negative[r], zero, xq));
          } else {
            pairs = _mm512_maddubs_epi16(q[r], xq);
          }
          isum[r][t] = Dot::dot2w(isum[r][t], pairs, scale[r]);
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const float dx = x.d(t)[sb];
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums(t) + 16 * sb));
      for (int r = 0; r < R; ++r) {
        __m512i i = isum[r][t];
        if constexpr (Dec::kOffset != 0) {
          // Stored quants stand for q - offset: subtract offset * sum(scale * sum(x)) per 16.
          const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(prep[r].mn, bsums), kOffsetShift);
          i = _mm512_sub_epi32(i, _mm512_zextsi256_si512(corr));
        }
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), _mm512_set1_ps(prep[r].d * dx), acc[r][t]);
        if constexpr (Dec::kHasMin) {
          const __m256 msum = _mm256_cvtepi32_ps(_mm256_madd_epi16(prep[r].mn, bsums));
          acc[r][t] = _mm512_fnmadd_ps(_mm512_zextps256_ps512(msum), _mm512_set1_ps(prep[r].dmin * dx), acc[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <class Dec, class Dot>
struct TileK {
  const GemmArgs& a;
  ActLayout layout;
  template <int R, int T>
  void run(int64_t r, int64_t t) const {
    const Q8KRows x{reinterpret_cast<const uint8_t*>(a.act) + static_cast<size_t>(t) * a.act_stride, a.act_stride,
                    layout.d_offset, layout.sums_offset};
    tile_k<Dec, Dot, R, T>(reinterpret_cast<const uint8_t*>(a.w) + static_cast<size_t>(r) * a.w_stride, a.w_stride, x,
                           a.k / 256, a.y + t * a.ldy + r, a.ldy);
  }
};

template <class Dec, class Dot>
void gemm_k(const GemmArgs& a) {
  const TileK<Dec, Dot> tile{a, act_layout(ActFormat::kQ8_K, a.k)};
  if (a.n_tokens == 1) {
    for_each_tile<4, 1>(a, tile);
  } else {
    for_each_tile<2, 4>(a, tile);
  }
}

// ======================= float formats x f32 =======================

struct LoadF32 {
  static constexpr int kBytes = 4;
  static __m512 full(const uint8_t* p) { return _mm512_loadu_ps(p); }
  static __m512 part(const uint8_t* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static __m512 full(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 part(const uint8_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 full(const uint8_t* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 part(const uint8_t* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

// The activations of tile_f, read as the weights are: f32 (ActFormat kF32 or
// kF32Round*), or the f16-rounded values stored as f16 (kF16: half the bytes
// a tile streams).
using ActF32 = LoadF32;
using ActF16 = LoadF16;

template <class Load, int R, int T, class Act = ActF32>
void tile_f(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t k, float* y, int64_t ldy) {
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    // 16-bit decode reads one row after the other (gemm_f), one sequential
    // stream the hardware prefetchers follow: software prefetches only cost.
    if (!(T == 1 && Load::kBytes == 2) && i % (64 / Load::kBytes) == 0) prefetch_next_rows<R>(w + i * Load::kBytes, ws);
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = Load::full(w + static_cast<size_t>(r) * ws + i * Load::kBytes);
    for (int t = 0; t < T; ++t) {
      const __m512 xv = Act::full(x + static_cast<size_t>(t) * xs + i * Act::kBytes);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (i < k) {
    const auto m = static_cast<__mmask16>((1u << (k - i)) - 1);
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = Load::part(w + static_cast<size_t>(r) * ws + i * Load::kBytes, m);
    for (int t = 0; t < T; ++t) {
      const __m512 xv = Act::part(x + static_cast<size_t>(t) * xs + i * Act::kBytes, m);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <class Load, class Act>
struct TileF {
  const GemmArgs& a;
  template <int R, int T>
  void run(int64_t r, int64_t t) const {
    tile_f<Load, R, T, Act>(reinterpret_cast<const uint8_t*>(a.w) + static_cast<size_t>(r) * a.w_stride, a.w_stride,
                       reinterpret_cast<const uint8_t*>(a.act) + static_cast<size_t>(t) * a.act_stride, a.act_stride, a.k,
                       a.y + t * a.ldy + r, a.ldy);
  }
};

template <class Load, class Act = ActF32>
void gemm_f(const GemmArgs& a) {
  const TileF<Load, Act> tile{a};
  if (a.n_tokens == 1) {
    // 16-bit decode one row at a time: a 4-row tile read 4 streams a row
    // apart, and a thread reading more than one stream loses bandwidth on
    // Zen 5 (as the VNNI decode did). tokamak bench tg64 F16 TinyLlama,
    // 6 alternations: 19.3 -> 21.1 t/s; in another 4, two rows at a time
    // without software prefetches 17.4 and one row with them 22.3 against
    // 23.6 (4 rows) and 25.3 (this). One FMA chain per row bounds a
    // core at 32 bytes per FMA latency (~30 GB/s at 4 cycles, 3.8 GHz): above
    // what one core streams.
    if constexpr (Load::kBytes == 2) {
      for_each_tile<1, 1>(a, tile);
    } else {
      for_each_tile<4, 1>(a, tile);
    }
  } else {
    for_each_tile<4, 6>(a, tile);
  }
}

// The table of one AVX-512 variant.
template <class Dot>
GemmKernel avx512_kernel(DType t) {
  using F = ActFormat;
  switch (t) {
    case DType::F32: return {gemm_f<LoadF32>, F::kF32};
    case DType::F16: return {gemm_f<LoadF16, ActF16>, F::kF16};
    case DType::BF16: return {gemm_f<LoadBF16>, F::kF32RoundBF16};
    case DType::Q4_0: return {gemm32<DecQ4_0, Dot>, F::kQ8_0};
    case DType::Q4_1: return {gemm32<DecQ4_1, Dot>, F::kQ8_0};
    case DType::Q5_0: return {gemm32<DecQ5_0, Dot>, F::kQ8_0};
    case DType::Q5_1: return {gemm32<DecQ5_1, Dot>, F::kQ8_0};
    case DType::Q8_0: return {gemm32<DecQ8_0, Dot>, F::kQ8_0};
    case DType::IQ4_NL: return {gemm32<DecIQ4_NL, Dot>, F::kQ8_0};
    case DType::Q2_K: return {gemm_k<DecQ2_K, Dot>, F::kQ8_K};
    case DType::Q3_K: return {gemm_k<DecQ3_K, Dot>, F::kQ8_K};
    case DType::Q4_K: return {gemm_k<DecQ4_K, Dot>, F::kQ8_K};
    case DType::Q5_K: return {gemm_k<DecQ5_K, Dot>, F::kQ8_K};
    case DType::Q6_K: return {gemm_k<DecQ6_K, Dot>, F::kQ8_K};
    case DType::IQ4_XS: return {gemm_k<DecIQ4_XSLayout<BlockIQ4_XS>, Dot>, F::kQ8_K};
    case DType::IQ3_S_WIDE: return {gemm_k<DecIQ4_XSLayout<BlockIQ3_S_WIDE>, Dot>, F::kQ8_K};
    case DType::IQ3_XXS_WIDE: return {gemm_k<DecIQ4_XSLayout<BlockIQ3_XXS_WIDE>, Dot>, F::kQ8_K};
    case DType::TQ2_0: return {gemm_k<DecTQ2_0, Dot>, F::kQ8_K};
    default: return {};
  }
}

}  // namespace
}  // namespace tokamak::kernels
