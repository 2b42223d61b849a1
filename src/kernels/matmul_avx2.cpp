// The AVX2 matmul kernels (AVX2 + FMA + F16C + BMI2): the fallback for
// x86-64 CPUs without AVX-512. Same structure as matmul_avx512.h at half the
// width: a 32-element block or chunk per 256-bit register, integer dots
// through vpmaddubsw (unsigned operands <= 63, or |w| with the sign moved
// onto the activation), one float accumulator per output element with the
// same operations whatever the tile shape (batch invariance).
#include "kernels/isa.h"
#include "kernels/matmul_kernels.h"

#if TOKAMAK_HAVE_X86_SIMD
// Every header the kernels use is included before the target switch, so no
// inline function shared with other files gets compiled for AVX2 here.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/quants_blocks.h"
#include "kernels/quants_impl.h"  // the IQ3 codebooks

TOKAMAK_TARGET_REGION_AVX2

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
inline __m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Sum of the 8 lanes in a fixed order.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Sums of 4 products of unsigned bytes (<= 63, or |w|) and signed bytes per int32 lane.
inline __m256i dot_u(__m256i u, __m256i s) { return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)); }
// The same for signed w: |w| times x with w's sign (activations are never -128).
inline __m256i dot_s(__m256i w, __m256i x) { return dot_u(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)); }

// See matmul_avx512.h: the same bytes of the next tile's rows.
template <int R>
inline void prefetch_next_rows(const uint8_t* p, size_t ws) {
  for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(p + static_cast<size_t>(R + r) * ws), _MM_HINT_T0);
}

// ======================= 32-element formats x Q8_0 =======================

struct WBlock {
  __m256i q;  // 32 quants in element order
  float d;
  float m;
};

// 16 packed bytes -> 32 nibbles in element order (low nibbles, then high).
inline __m256i nibbles(__m128i v) {
  const __m128i m4 = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
}
// Bit e of `bits` -> byte e: 0xFF if set, else 0.
inline __m256i bits_to_bytes(uint32_t bits) {
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                  _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  v = _mm256_or_si256(v, _mm256_set1_epi64x(0x7FBFDFEFF7FBFDFE));
  return _mm256_cmpeq_epi8(v, _mm256_set1_epi8(-1));
}
// A table of 16 int8 levels in both 128-bit lanes, for vpshufb.
inline __m256i levels(const int8_t* table) { return _mm256_broadcastsi128_si256(load128(reinterpret_cast<const uint8_t*>(table))); }
inline __m256i iq4nl_values() { return levels(kIQ4NLValues); }

struct DecQ4_0 {
  static constexpr int kBytes = 18, kOffset = 8;
  static constexpr bool kSigned = false, kHasMin = false;
  static WBlock decode(const uint8_t* p) { return {nibbles(load128(p + 2)), fp16(load_u16(p)), 0.0f}; }
};
struct DecQ4_1 {
  static constexpr int kBytes = 20, kOffset = 0;
  static constexpr bool kSigned = false, kHasMin = true;
  static WBlock decode(const uint8_t* p) { return {nibbles(load128(p + 4)), fp16(load_u16(p)), fp16(load_u16(p + 2))}; }
};
struct DecQ5_0 {
  static constexpr int kBytes = 22, kOffset = 16;
  static constexpr bool kSigned = false, kHasMin = false;
  static WBlock decode(const uint8_t* p) {
    const __m256i high = _mm256_and_si256(bits_to_bytes(load_u32(p + 2)), _mm256_set1_epi8(16));
    return {_mm256_or_si256(nibbles(load128(p + 6)), high), fp16(load_u16(p)), 0.0f};
  }
};
struct DecQ5_1 {
  static constexpr int kBytes = 24, kOffset = 0;
  static constexpr bool kSigned = false, kHasMin = true;
  static WBlock decode(const uint8_t* p) {
    const __m256i high = _mm256_and_si256(bits_to_bytes(load_u32(p + 4)), _mm256_set1_epi8(16));
    return {_mm256_or_si256(nibbles(load128(p + 8)), high), fp16(load_u16(p)), fp16(load_u16(p + 2))};
  }
};
struct DecQ8_0 {
  static constexpr int kBytes = 34, kOffset = 0;
  static constexpr bool kSigned = true, kHasMin = false;
  static WBlock decode(const uint8_t* p) { return {load256(p + 2), fp16(load_u16(p)), 0.0f}; }
};
struct DecIQ4_NL {
  static constexpr int kBytes = 18, kOffset = 0;
  static constexpr bool kSigned = true, kHasMin = false;
  static WBlock decode(const uint8_t* p) {
    return {_mm256_shuffle_epi8(iq4nl_values(), nibbles(load128(p + 2))), fp16(load_u16(p)), 0.0f};
  }
};

struct Q8Rows {
  const uint8_t* base;
  size_t stride;
  size_t d_offset;
  size_t sums_offset;
  const uint8_t* qs(int t) const { return base + static_cast<size_t>(t) * stride; }
  const float* d(int t) const { return reinterpret_cast<const float*>(qs(t) + d_offset); }
  const int16_t* sums(int t) const { return reinterpret_cast<const int16_t*>(qs(t) + sums_offset); }
};

template <class Dec, int R, int T>
void tile32(const uint8_t* w, size_t ws, const Q8Rows& x, int64_t nb, float* y, int64_t ldy) {
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    if (b % 2 == 0) prefetch_next_rows<R>(w + b * Dec::kBytes, ws);
    WBlock wb[R];
    for (int r = 0; r < R; ++r) wb[r] = Dec::decode(w + static_cast<size_t>(r) * ws + b * Dec::kBytes);
    for (int t = 0; t < T; ++t) {
      const __m256i xq = load256(x.qs(t) + 32 * b);
      const float dx = x.d(t)[b];
      // Unsigned weights stand for q - offset: subtract offset * (sums of 4 x).
      [[maybe_unused]] __m256i offset;
      if constexpr (Dec::kOffset != 0) offset = dot_u(_mm256_set1_epi8(Dec::kOffset), xq);
      [[maybe_unused]] __m256 xsum;
      if constexpr (Dec::kHasMin) xsum = _mm256_cvtepi32_ps(dot_u(_mm256_set1_epi8(1), xq));
      for (int r = 0; r < R; ++r) {
        __m256i isum = Dec::kSigned ? dot_s(wb[r].q, xq) : dot_u(wb[r].q, xq);
        if constexpr (Dec::kOffset != 0) isum = _mm256_sub_epi32(isum, offset);
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(wb[r].d * dx), acc[r][t]);
        if constexpr (Dec::kHasMin) acc[r][t] = _mm256_fmadd_ps(xsum, _mm256_set1_ps(wb[r].m * dx), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[t * ldy + r] = hsum(acc[r][t]);
}

template <class Dec>
struct Tile32 {
  const GemmArgs& a;
  ActLayout layout;
  template <int R, int T>
  void run(int64_t r, int64_t t) const {
    const Q8Rows x{reinterpret_cast<const uint8_t*>(a.act) + static_cast<size_t>(t) * a.act_stride, a.act_stride,
                   layout.d_offset, layout.sums_offset};
    tile32<Dec, R, T>(reinterpret_cast<const uint8_t*>(a.w) + static_cast<size_t>(r) * a.w_stride, a.w_stride, x, a.k / 32,
                      a.y + t * a.ldy + r, a.ldy);
  }
};

template <class Dec>
void gemm32(const GemmArgs& a) {
  const Tile32<Dec> tile{a, act_layout(ActFormat::kQ8_0, a.k)};
  if (a.n_tokens == 1) {
    for_each_tile<4, 1>(a, tile);
  } else {
    for_each_tile<2, 4>(a, tile);
  }
}

// ======================= K-quants x Q8_K =======================

// A super-block of one row, prepared for its eight 32-element chunks.
struct KPrep {
  const uint8_t* p;
  __m256i sc;  // int16 scales: 16 per 16 elements, or 8 per 32 repeated in both 128-bit lanes
  __m256i mn;  // int16 per 16 elements for the bsums: mins (kHasMin) or scales (kOffset)
  float d;
  float dmin;
};

// Scales of chunk c (elements 32c..32c+31) per int16 pair lane.
template <int kSubBlock>
inline __m256i chunk_scales(__m256i sc, int c) {
  if constexpr (kSubBlock == 32) {
    const int w = c;  // one scale for the whole chunk; sc holds 8 in each lane
    return _mm256_shuffle_epi8(sc, _mm256_set1_epi16(static_cast<short>(2 * w | (2 * w + 1) << 8)));
  } else {
    // Sub-blocks 2c (first 16 elements, low lane) and 2c + 1 (high lane).
    const __m256i lane = c < 4 ? _mm256_permute2x128_si256(sc, sc, 0x00) : _mm256_permute2x128_si256(sc, sc, 0x11);
    const int lo = (2 * c) % 8, hi = (2 * c + 1) % 8;
    const __m256i idx = _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(2 * hi | (2 * hi + 1) << 8)),
                                         _mm_set1_epi16(static_cast<short>(2 * lo | (2 * lo + 1) << 8)));
    return _mm256_shuffle_epi8(lane, idx);
  }
}

// Q4_K / Q5_K: 8 six-bit scales and mins in 12 bytes -> bytes [sc0..sc7, m0..m7].
inline __m128i unpack_scale_min_k4(const uint8_t* s) {
  const uint32_t a = load_u32(s), b = load_u32(s + 4), c = load_u32(s + 8);
  const uint32_t sc03 = a & 0x3F3F3F3Fu, m03 = b & 0x3F3F3F3Fu;
  const uint32_t sc47 = (c & 0x0F0F0F0Fu) | ((a >> 6) & 0x03030303u) << 4;
  const uint32_t m47 = ((c >> 4) & 0x0F0F0F0Fu) | ((b >> 6) & 0x03030303u) << 4;
  return _mm_set_epi32(static_cast<int>(m47), static_cast<int>(m03), static_cast<int>(sc47), static_cast<int>(sc03));
}
inline KPrep prep_k45(const uint8_t* p) {
  const __m128i sm = unpack_scale_min_k4(p + 4);
  const __m128i sc8 = _mm_cvtepu8_epi16(sm);
  const __m128i m8 = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
  return {p, _mm256_broadcastsi128_si256(sc8), _mm256_set_m128i(_mm_unpackhi_epi16(m8, m8), _mm_unpacklo_epi16(m8, m8)),
          fp16(load_u16(p)), fp16(load_u16(p + 2))};
}
// Byte e of qh has element 32j + e's high bit at bit j: 0 or `value` per byte.
inline __m256i high_bits(__m256i qh, int j, char value) {
  const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << j));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit), _mm256_set1_epi8(value));
}

struct DecQ2_K {
  static constexpr int kBytes = 84, kSubBlock = 16, kOffset = 0;
  static constexpr bool kSigned = false, kHasMin = true;
  static constexpr bool kPredecode = false;
  static KPrep prep(const uint8_t* p) {
    const __m256i v = _mm256_cvtepu8_epi16(load128(p));
    return {p, _mm256_and_si256(v, _mm256_set1_epi16(15)), _mm256_srli_epi16(v, 4), fp16(load_u16(p + 80)), fp16(load_u16(p + 82))};
  }
  static __m256i chunk(const KPrep& k, int c) {
    return _mm256_and_si256(_mm256_srli_epi16(load256(k.p + 16 + 32 * (c / 4)), 2 * (c % 4)), _mm256_set1_epi8(3));
  }
};
struct DecQ3_K {
  static constexpr int kBytes = 110, kSubBlock = 16, kOffset = 4;
  static constexpr bool kSigned = false, kHasMin = false;
  static constexpr bool kPredecode = false;
  static KPrep prep(const uint8_t* p) {
    const uint32_t a = load_u32(p + 96), b = load_u32(p + 100), c = load_u32(p + 104);
    const uint32_t v0 = (a & 0x0F0F0F0Fu) | (c & 0x03030303u) << 4;
    const uint32_t v1 = (b & 0x0F0F0F0Fu) | ((c >> 2) & 0x03030303u) << 4;
    const uint32_t v2 = ((a >> 4) & 0x0F0F0F0Fu) | ((c >> 4) & 0x03030303u) << 4;
    const uint32_t v3 = ((b >> 4) & 0x0F0F0F0Fu) | ((c >> 6) & 0x03030303u) << 4;
    const __m256i sc = _mm256_sub_epi16(
        _mm256_cvtepu8_epi16(_mm_set_epi32(static_cast<int>(v3), static_cast<int>(v2), static_cast<int>(v1), static_cast<int>(v0))),
        _mm256_set1_epi16(32));
    return {p, sc, sc, fp16(load_u16(p + 108)), 0.0f};
  }
  static __m256i chunk(const KPrep& k, int c) {
    const __m256i q = _mm256_and_si256(_mm256_srli_epi16(load256(k.p + 32 + 32 * (c / 4)), 2 * (c % 4)), _mm256_set1_epi8(3));
    return _mm256_or_si256(q, high_bits(load256(k.p), c, 4));
  }
};
struct DecQ4_K {
  static constexpr int kBytes = 144, kSubBlock = 32, kOffset = 0;
  static constexpr bool kSigned = false, kHasMin = true;
  static constexpr bool kPredecode = false;
  static KPrep prep(const uint8_t* p) { return prep_k45(p); }
  static __m256i chunk(const KPrep& k, int c) {
    const __m256i qs = load256(k.p + 16 + 32 * (c / 2));
    return _mm256_and_si256(c % 2 == 0 ? qs : _mm256_srli_epi16(qs, 4), _mm256_set1_epi8(0x0F));
  }
};
struct DecQ5_K {
  static constexpr int kBytes = 176, kSubBlock = 32, kOffset = 0;
  static constexpr bool kSigned = false, kHasMin = true;
  static constexpr bool kPredecode = false;
  static KPrep prep(const uint8_t* p) { return prep_k45(p); }
  static __m256i chunk(const KPrep& k, int c) {
    const __m256i qs = load256(k.p + 48 + 32 * (c / 2));
    const __m256i q = _mm256_and_si256(c % 2 == 0 ? qs : _mm256_srli_epi16(qs, 4), _mm256_set1_epi8(0x0F));
    return _mm256_or_si256(q, high_bits(load256(k.p + 16), c, 16));
  }
};
struct DecQ6_K {
  static constexpr int kBytes = 210, kSubBlock = 16, kOffset = 32;
  static constexpr bool kSigned = false, kHasMin = false;
  static constexpr bool kPredecode = false;
  static KPrep prep(const uint8_t* p) {
    const __m256i sc = _mm256_cvtepi8_epi16(load128(p + 192));
    return {p, sc, sc, fp16(load_u16(p + 208)), 0.0f};
  }
  // Chunk c: half h = c / 4 (128 elements), j = c % 4: the low (j < 2) or
  // high nibbles of ql[64h + 32(j % 2) + l] and bits 2j..2j+1 of qh[32h + l].
  static __m256i chunk(const KPrep& k, int c) {
    const int h = c / 4, j = c % 4;
    const __m256i ql = load256(k.p + 64 * h + 32 * (j % 2));
    const __m256i lo = _mm256_and_si256(j < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0F));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(load256(k.p + 128 + 32 * h), 2 * j), _mm256_set1_epi8(3));
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
  }
};
// IQ4_XS's layout with the levels and d factor of Block (kLevelsOf, kDScaleOf):
// IQ4_XS itself, or a widened IQ3 format (kernels/widen.h).
template <class Block>
struct DecIQ4_XSLayout {
  static constexpr int kBytes = 136, kSubBlock = 32, kOffset = 0;
  static constexpr bool kSigned = true, kHasMin = false;
  static constexpr bool kPredecode = false;
  static KPrep prep(const uint8_t* p) {
    const uint64_t lo = _pdep_u64(load_u32(p + 4), 0x0F0F0F0F0F0F0F0Full);
    const uint64_t hi = _pdep_u64(load_u16(p + 2), 0x3030303030303030ull);
    const __m128i sc = _mm_sub_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(lo | hi))), _mm_set1_epi16(32));
    return {p, _mm256_broadcastsi128_si256(sc), _mm256_setzero_si256(), fp16(load_u16(p)) * kDScaleOf<Block>, 0.0f};
  }
  static __m256i chunk(const KPrep& k, int c) {
    return _mm256_shuffle_epi8(levels(kLevelsOf<Block>), nibbles(load128(k.p + 8 + 16 * c)));
  }
};

// v with byte e negated where bit e of `bits` is set.
inline __m256i apply_signs(__m256i v, uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                             _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_sub_epi8(_mm256_xor_si256(v, neg), neg);
}

// IQ3_S: per group of 32, 8 codebook entries (9-bit indices: a qs byte and a
// qh bit), 32 sign bits and a 4-bit scale s standing for 1 + 2s. The grid
// lookups are scalar loads (as ggml's AVX2 kernel; vpgatherdd is slower on
// AMD cores).
struct DecIQ3_S {
  static constexpr int kBytes = 110, kSubBlock = 32, kOffset = 0;
  static constexpr bool kSigned = true, kHasMin = false;
  static constexpr bool kPredecode = true;
  static KPrep prep(const uint8_t* p) {
    const uint64_t s = _pdep_u64(load_u32(p + 106), 0x0F0F0F0F0F0F0F0Full);
    const __m128i sc = _mm_add_epi16(_mm_slli_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(s))), 1), _mm_set1_epi16(1));
    return {p, _mm256_broadcastsi128_si256(sc), _mm256_setzero_si256(), fp16(load_u16(p)), 0.0f};
  }
  static __m256i chunk(const KPrep& k, int c) {
    const uint8_t* qs = k.p + 2;
    const uint8_t* qh = k.p + 66;
    auto entry = [&](int i) { return static_cast<int>(detail::kIQ3SGrid[detail::iq3s_index(qs, qh, c, i)]); };
    const __m256i grid = _mm256_set_epi32(entry(7), entry(6), entry(5), entry(4), entry(3), entry(2), entry(1), entry(0));
    return apply_signs(grid, load_u32(k.p + 74 + 4 * c));
  }
};
// IQ3_XXS: per group of 32, 8 codebook entries (8-bit indices) and a word of
// 4 x 7 sign bits (the 8th of each 8 by even parity) and a 4-bit scale s:
// d (0.5 + s) / 2 = (d / 4)(2s + 1).
struct DecIQ3_XXS {
  static constexpr int kBytes = 98, kSubBlock = 32, kOffset = 0;
  static constexpr bool kSigned = true, kHasMin = false;
  static constexpr bool kPredecode = true;
  static KPrep prep(const uint8_t* p) {
    const __m256i s = _mm256_add_epi32(_mm256_slli_epi32(_mm256_srli_epi32(load256(p + 66), 28), 1), _mm256_set1_epi32(1));
    const __m128i sc = _mm_packs_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return {p, _mm256_broadcastsi128_si256(sc), _mm256_setzero_si256(), fp16(load_u16(p)) * 0.25f, 0.0f};
  }
  static __m256i chunk(const KPrep& k, int c) {
    const uint8_t* qs = k.p + 2 + 8 * c;
    auto entry = [&](int i) { return static_cast<int>(detail::kIQ3XXSGrid[qs[i]]); };
    const __m256i grid = _mm256_set_epi32(entry(7), entry(6), entry(5), entry(4), entry(3), entry(2), entry(1), entry(0));
    // The 4 sign bytes: 7 bits each, the 8th the parity of the 7 (folded per byte).
    const uint32_t b = _pdep_u32(load_u32(k.p + 66 + 4 * c), 0x7F7F7F7Fu);
    uint32_t parity = b ^ (b >> 4);
    parity ^= parity >> 2;
    parity ^= parity >> 1;
    return apply_signs(grid, b | (parity & 0x01010101u) << 7);
  }
};
// The ternary formats: no sub-block scales, the offset of 1 against every
// activation (mn all ones), the fp16 d at d_at.
inline KPrep ternary_prep(const uint8_t* p, size_t d_at) {
  const __m256i ones = _mm256_set1_epi16(1);
  return {p, ones, ones, fp16(load_u16(p + d_at)), 0.0f};
}
// TQ2_0: Q2_K's 2-bit layout without scales; the value is q - 1.
struct DecTQ2_0 {
  static constexpr int kBytes = 66, kSubBlock = 32, kOffset = 1;
  static constexpr bool kSigned = false, kHasMin = false, kUnitScales = true;
  static constexpr bool kPredecode = false;
  static KPrep prep(const uint8_t* p) { return ternary_prep(p, 64); }
  static __m256i chunk(const KPrep& k, int c) {
    return _mm256_and_si256(_mm256_srli_epi16(load256(k.p + 32 * (c / 4)), 2 * (c % 4)), _mm256_set1_epi8(3));
  }
};

// Digit n of each byte's base-3 code (detail::ternary_digit), pow = 3^n per
// 16-bit lane: AVX2 has no byte multiply, so the low and high bytes of each
// 16-bit lane are multiplied (mod 256) and read out (x 3 >> 8) apart.
inline __m256i ternary_digits(__m256i q, __m256i pow) {
  const __m256i low = _mm256_set1_epi16(0x00FF);
  const __m256i lo = _mm256_and_si256(_mm256_mullo_epi16(q, pow), low);      // (q_lo 3^n mod 256)
  const __m256i hi = _mm256_mullo_epi16(_mm256_andnot_si256(low, q), pow);   // (q_hi 3^n mod 256) << 8
  return _mm256_or_si256(_mm256_mulhi_epu16(lo, _mm256_set1_epi16(3 << 8)),
                         _mm256_slli_epi16(_mm256_mulhi_epu16(hi, _mm256_set1_epi16(3)), 8));
}
template <int N>
inline __m256i ternary_digits(__m256i q) {
  constexpr short kPow3[5] = {1, 3, 9, 27, 81};
  return ternary_digits(q, _mm256_set1_epi16(kPow3[N]));
}
// TQ1_0: elements 32n + m (n < 5) are digit n of qs[m] (m < 32); 160 + 16n +
// m digit n of qs[32 + m] (m < 16); 240 + 4n + m digit n of qh[m]. The value
// is the digit - 1.
struct DecTQ1_0 {
  static constexpr int kBytes = 54, kSubBlock = 32, kOffset = 1;
  static constexpr bool kSigned = false, kHasMin = false;
  static constexpr bool kPredecode = true;
  static KPrep prep(const uint8_t* p) { return ternary_prep(p, 52); }
  static __m256i chunk(const KPrep& k, int c) {
    if (c < 5) {
      switch (c) {
        case 0: return ternary_digits<0>(load256(k.p));
        case 1: return ternary_digits<1>(load256(k.p));
        case 2: return ternary_digits<2>(load256(k.p));
        case 3: return ternary_digits<3>(load256(k.p));
        default: return ternary_digits<4>(load256(k.p));
      }
    }
    const __m256i tail = _mm256_broadcastsi128_si256(load128(k.p + 32));
    if (c == 5) return _mm256_blend_epi32(ternary_digits<0>(tail), ternary_digits<1>(tail), 0xF0);
    if (c == 6) return _mm256_blend_epi32(ternary_digits<2>(tail), ternary_digits<3>(tail), 0xF0);
    // Elements 240 + 4n + m: dword n of qh's 4 bytes repeated, times 3^n.
    const __m256i qh = _mm256_set1_epi32(static_cast<int>(load_u32(k.p + 48)));
    const __m256i qh_digits = ternary_digits(qh, _mm256_set_epi16(27, 27, 9, 9, 3, 3, 1, 1, 27, 27, 9, 9, 3, 3, 1, 1));
    return _mm256_blend_epi32(ternary_digits<4>(tail), qh_digits, 0xF0);
  }
};

// Formats whose quants are 0..3 and have no sub-block scales (TQ2_0,
// unit_scales): their vpmaddubsw pairs (|q x| <= 2 x 3 x 128 = 768) add up in
// int16 over a whole super-block (8 x 768 < 2^15), widened once by one
// vpmaddwd against ones instead of once per 32 values against the scales.
template <class Dec, int R, int T>
void tile_k(const uint8_t* w, size_t ws, const Q8Rows& x, int64_t n_sb, float* y, int64_t ldy) {
  constexpr bool kUnitScales = unit_scales<Dec>();
  static_assert(!kUnitScales || (!Dec::kSigned && Dec::kSubBlock == 32));
  static_assert(Dec::kOffset == 0 || Dec::kOffset == 1 || Dec::kOffset == 4 || Dec::kOffset == 32);
  constexpr int kOffsetShift = Dec::kOffset == 4 ? 2 : Dec::kOffset == 32 ? 5 : 0;
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    for (int line = 0; line < Dec::kBytes; line += 64) prefetch_next_rows<R>(w + sb * Dec::kBytes + line, ws);
    KPrep prep[R];
    for (int r = 0; r < R; ++r) prep[r] = Dec::prep(w + static_cast<size_t>(r) * ws + sb * Dec::kBytes);
    __m256i isum[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
    // Unrolled: each chunk's shift counts, bit masks and scale shuffles are
    // then constants (a rolled loop computed them at run time: Q3_K decode
    // ran at ~6 GB/s on one core).
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      __m256i q[R], scale[R];
      for (int r = 0; r < R; ++r) {
        q[r] = Dec::chunk(prep[r], c);
        if constexpr (!kUnitScales) scale[r] = chunk_scales<Dec::kSubBlock>(prep[r].sc, c);
      }
      for (int t = 0; t < T; ++t) {
        const __m256i xq = load256(x.qs(t) + 256 * sb + 32 * c);
        for (int r = 0; r < R; ++r) {
          if constexpr (kUnitScales) {  // int16 sums, widened after the last chunk
            isum[r][t] = _mm256_add_epi16(isum[r][t], _mm256_maddubs_epi16(q[r], xq));
            continue;
          }
          const __m256i pairs = Dec::kSigned ? _mm256_maddubs_epi16(_mm256_sign_epi8(q[r], q[r]), _mm256_sign_epi8(xq, q[r]))
                                             : _mm256_maddubs_epi16(q[r], xq);
          isum[r][t] = _mm256_add_epi32(isum[r][t], _mm256_madd_epi16(pairs, scale[r]));
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const float dx = x.d(t)[sb];
      const __m256i bsums = load256(reinterpret_cast<const uint8_t*>(x.sums(t) + 16 * sb));
      for (int r = 0; r < R; ++r) {
        __m256i i = isum[r][t];
        if constexpr (kUnitScales) i = _mm256_madd_epi16(i, _mm256_set1_epi16(1));
        if constexpr (Dec::kOffset != 0) i = _mm256_sub_epi32(i, _mm256_slli_epi32(_mm256_madd_epi16(prep[r].mn, bsums), kOffsetShift));
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_set1_ps(prep[r].d * dx), acc[r][t]);
        if constexpr (Dec::kHasMin) {
          const __m256 msum = _mm256_cvtepi32_ps(_mm256_madd_epi16(prep[r].mn, bsums));
          acc[r][t] = _mm256_fnmadd_ps(msum, _mm256_set1_ps(prep[r].dmin * dx), acc[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[t * ldy + r] = hsum(acc[r][t]);
}

template <class Dec>
struct TileK {
  const GemmArgs& a;
  ActLayout layout;
  template <int R, int T>
  void run(int64_t r, int64_t t) const {
    const Q8Rows x{reinterpret_cast<const uint8_t*>(a.act) + static_cast<size_t>(t) * a.act_stride, a.act_stride,
                   layout.d_offset, layout.sums_offset};
    tile_k<Dec, R, T>(reinterpret_cast<const uint8_t*>(a.w) + static_cast<size_t>(r) * a.w_stride, a.w_stride, x, a.k / 256,
                      a.y + t * a.ldy + r, a.ldy);
  }
};

// Rows decoded once for a prompt (gemm_k_predecoded), per super-block: the
// 256 values of Dec (signed or not), its 8 int16 scales of the 32-element
// groups, its 16 int16 offsets (KPrep::mn) and d. Read back with Dec's
// flags, so the tiles compute what they compute on Dec itself.
template <class Dec>
struct DecDecoded {
  static constexpr int kBytes = 320, kSubBlock = 32, kOffset = Dec::kOffset;
  static constexpr bool kSigned = Dec::kSigned, kHasMin = false, kPredecode = false;
  static KPrep prep(const uint8_t* p) {
    float d;
    std::memcpy(&d, p + 304, sizeof(d));
    return {p, _mm256_broadcastsi128_si256(load128(p + 256)), load256(p + 272), d, 0.0f};
  }
  static __m256i chunk(const KPrep& k, int c) { return load256(k.p + 32 * c); }
  static void store(const KPrep& k, uint8_t* out) {
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * c), Dec::chunk(k, c));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 256), _mm256_castsi256_si128(k.sc));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 272), k.mn);
    std::memcpy(out + 304, &k.d, sizeof(k.d));
  }
};

template <class Dec>
void gemm_k_tiles(const GemmArgs& a) {
  const TileK<Dec> tile{a, act_layout(ActFormat::kQ8_K, a.k)};
  if (a.n_tokens == 1) {
    for_each_tile<2, 1>(a, tile);
  } else {
    for_each_tile<2, 2>(a, tile);
  }
}

// The codebook formats take ~30 instructions to decode 32 values (scalar
// codebook loads, sign extraction), TQ1_0 ~12 (base-3 digits), which a 2x2
// tile repeats for every pair of tokens: for prompts each pair of rows is
// decoded once into DecDecoded super-blocks (in L1: 2 x 8 x 320 bytes for
// k = 2048) that every token tile reads. Same values, scales, offsets and d
// in the same lanes, so the same sums and float steps as the direct tiles: a
// token's results do not depend on its batch (a version that stored TQ1_0's
// values less their offset summed the same integers in other lanes and
// failed that test).
template <class Dec>
void gemm_k_predecoded(const GemmArgs& a) {
  static_assert(Dec::kSubBlock == 32 && !Dec::kHasMin, "DecDecoded holds 8 scales and no mins");
  using D = DecDecoded<Dec>;
  const int64_t n_sb = a.k / 256;
  const size_t row_bytes = static_cast<size_t>(n_sb) * D::kBytes;
  thread_local std::vector<uint8_t> buffer;
  buffer.resize(2 * row_bytes);
  uint8_t* rows = buffer.data();
  const auto* w = reinterpret_cast<const uint8_t*>(a.w);
  for (int64_t r0 = 0; r0 < a.n_rows; r0 += 2) {
    const int64_t n = std::min<int64_t>(2, a.n_rows - r0);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t sb = 0; sb < n_sb; ++sb) {
        D::store(Dec::prep(w + static_cast<size_t>(r0 + r) * a.w_stride + sb * Dec::kBytes),
                 rows + static_cast<size_t>(r) * row_bytes + static_cast<size_t>(sb) * D::kBytes);
      }
    }
    GemmArgs b = a;
    b.w = reinterpret_cast<const std::byte*>(rows);
    b.w_stride = row_bytes;
    b.n_rows = n;
    b.y = a.y + r0;
    gemm_k_tiles<D>(b);
  }
}

template <class Dec>
void gemm_k(const GemmArgs& a) {
  if constexpr (Dec::kPredecode) {
    if (a.n_tokens >= 3) return gemm_k_predecoded<Dec>(a);
  }
  gemm_k_tiles<Dec>(a);
}

// ======================= float formats x f32 =======================

struct LoadF32 {
  static constexpr int kBytes = 4;
  static __m256 load(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static __m256 load(const uint8_t* p) { return _mm256_cvtph_ps(load128(p)); }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;
  static __m256 load(const uint8_t* p) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16)); }
};

template <class Load, int R, int T>
void tile_f(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t k, float* y, int64_t ldy) {
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    if (i % (64 / Load::kBytes) == 0) prefetch_next_rows<R>(w + i * Load::kBytes, ws);
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = Load::load(w + static_cast<size_t>(r) * ws + i * Load::kBytes);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(reinterpret_cast<const float*>(x + static_cast<size_t>(t) * xs) + i);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (i < k) {
    // The last k - i < 8 elements through zero-padded copies (no masked 16-bit loads in AVX2).
    const auto rem = static_cast<size_t>(k - i);
    __m256 wv[R];
    for (int r = 0; r < R; ++r) {
      alignas(32) uint8_t buf[32] = {};
      std::memcpy(buf, w + static_cast<size_t>(r) * ws + i * Load::kBytes, rem * Load::kBytes);
      wv[r] = Load::load(buf);
    }
    for (int t = 0; t < T; ++t) {
      alignas(32) float buf[8] = {};
      std::memcpy(buf, reinterpret_cast<const float*>(x + static_cast<size_t>(t) * xs) + i, rem * sizeof(float));
      const __m256 xv = _mm256_load_ps(buf);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[t * ldy + r] = hsum(acc[r][t]);
}

template <class Load>
struct TileF {
  const GemmArgs& a;
  template <int R, int T>
  void run(int64_t r, int64_t t) const {
    tile_f<Load, R, T>(reinterpret_cast<const uint8_t*>(a.w) + static_cast<size_t>(r) * a.w_stride, a.w_stride,
                       reinterpret_cast<const uint8_t*>(a.act) + static_cast<size_t>(t) * a.act_stride, a.act_stride, a.k,
                       a.y + t * a.ldy + r, a.ldy);
  }
};

template <class Load>
void gemm_f(const GemmArgs& a) {
  const TileF<Load> tile{a};
  if (a.n_tokens == 1) {
    // f32 decode 8 rows at a time: each row's sum is one chain of dependent
    // FMAs, and a small model's rows are short (stories260K: 64 wide, 8
    // steps) and in cache, so 4 chains left the FMA units waiting on their
    // latency (stories260K decode, --isa avx2, 8 alternations: 29.1K -> 32.2K
    // tok/s). Each row's order of additions is the same at any tile height.
    // 16-bit weights stream from memory: 1, 2, 4 or 8 rows measured level.
    if constexpr (Load::kBytes == 4) {
      for_each_tile<8, 1>(a, tile);
    } else {
      for_each_tile<4, 1>(a, tile);
    }
  } else {
    for_each_tile<4, 2>(a, tile);
  }
}

}  // namespace

GemmKernel gemm_kernel_avx2(DType t) {
  using F = ActFormat;
  switch (t) {
    case DType::F32: return {gemm_f<LoadF32>, F::kF32};
    case DType::F16: return {gemm_f<LoadF16>, F::kF32RoundF16};
    case DType::BF16: return {gemm_f<LoadBF16>, F::kF32RoundBF16};
    case DType::Q4_0: return {gemm32<DecQ4_0>, F::kQ8_0};
    case DType::Q4_1: return {gemm32<DecQ4_1>, F::kQ8_0};
    case DType::Q5_0: return {gemm32<DecQ5_0>, F::kQ8_0};
    case DType::Q5_1: return {gemm32<DecQ5_1>, F::kQ8_0};
    case DType::Q8_0: return {gemm32<DecQ8_0>, F::kQ8_0};
    case DType::IQ4_NL: return {gemm32<DecIQ4_NL>, F::kQ8_0};
    case DType::Q2_K: return {gemm_k<DecQ2_K>, F::kQ8_K};
    case DType::Q3_K: return {gemm_k<DecQ3_K>, F::kQ8_K};
    case DType::Q4_K: return {gemm_k<DecQ4_K>, F::kQ8_K};
    case DType::Q5_K: return {gemm_k<DecQ5_K>, F::kQ8_K};
    case DType::Q6_K: return {gemm_k<DecQ6_K>, F::kQ8_K};
    case DType::IQ4_XS: return {gemm_k<DecIQ4_XSLayout<BlockIQ4_XS>>, F::kQ8_K};
    case DType::IQ3_S_WIDE: return {gemm_k<DecIQ4_XSLayout<BlockIQ3_S_WIDE>>, F::kQ8_K};
    case DType::IQ3_XXS_WIDE: return {gemm_k<DecIQ4_XSLayout<BlockIQ3_XXS_WIDE>>, F::kQ8_K};
    case DType::IQ3_XXS: return {gemm_k<DecIQ3_XXS>, F::kQ8_K};
    case DType::IQ3_S: return {gemm_k<DecIQ3_S>, F::kQ8_K};
    case DType::TQ1_0: return {gemm_k<DecTQ1_0>, F::kQ8_K};
    case DType::TQ2_0: return {gemm_k<DecTQ2_0>, F::kQ8_K};
    default: return {};
  }
}

}  // namespace tokamak::kernels

TOKAMAK_TARGET_REGION_END

#else  // no x86 SIMD in this build

namespace tokamak::kernels {
GemmKernel gemm_kernel_avx2(DType) { return {}; }
}  // namespace tokamak::kernels

#endif
