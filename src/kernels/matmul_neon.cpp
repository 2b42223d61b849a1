// The AArch64 NEON matmul kernels. NEON multiplies signed bytes directly, so
// every decoder produces the true signed quants (offsets folded in) and one
// integer dot serves all formats: SDOT where the build targets it
// (__ARM_FEATURE_DOTPROD, ARMv8.2+), else widening multiplies (8 x 8 -> 16
// bits, |q * x| <= 128 * 127) summed pairwise into int32 lanes. As on x86,
// each output element owns one float accumulator whose operations do not
// depend on the tile shape (batch invariance).
#include "kernels/matmul_kernels.h"

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "core/half.h"
#include "kernels/quants_blocks.h"
#include "kernels/quants_impl.h"

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

// acc += sums of 4 consecutive products of signed bytes, per int32 lane.
inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, a, b);
#else
  const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
  const int16x8_t hi = vmull_high_s8(a, b);
  return vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
#endif
}

// 16 packed bytes -> their 32 nibbles in element order (low nibbles first).
struct Bytes32 {
  int8x16_t lo, hi;  // elements 0-15, 16-31
};
inline Bytes32 nibbles(const uint8_t* p) {
  const uint8x16_t v = vld1q_u8(p);
  return {vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), vreinterpretq_s8_u8(vshrq_n_u8(v, 4))};
}
// Bits 0-15 / 16-31 of `bits` -> bytes: `value` where set, else 0.
inline Bytes32 bits_to_bytes(uint32_t bits, int8_t value) {
  static constexpr uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t mask = vld1q_u8(kBit);
  const uint8x16_t b0 = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(bits)), vdup_n_u8(static_cast<uint8_t>(bits >> 8)));
  const uint8x16_t b1 = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(bits >> 16)), vdup_n_u8(static_cast<uint8_t>(bits >> 24)));
  const int8x16_t v = vdupq_n_s8(value);
  return {vandq_s8(vreinterpretq_s8_u8(vtstq_u8(b0, mask)), v), vandq_s8(vreinterpretq_s8_u8(vtstq_u8(b1, mask)), v)};
}

inline float hsum(float32x4_t v) { return vaddvq_f32(v); }

// ======================= 32-element formats x Q8_0 =======================

struct WBlock {
  Bytes32 q;  // signed quants (offsets folded in)
  float d;
  float m;
};

struct DecQ4_0 {
  static constexpr int kBytes = 18;
  static constexpr bool kHasMin = false;
  static WBlock decode(const uint8_t* p) {
    Bytes32 q = nibbles(p + 2);
    q.lo = vsubq_s8(q.lo, vdupq_n_s8(8));
    q.hi = vsubq_s8(q.hi, vdupq_n_s8(8));
    return {q, fp16_to_fp32(load_u16(p)), 0.0f};
  }
};
struct DecQ4_1 {
  static constexpr int kBytes = 20;
  static constexpr bool kHasMin = true;
  static WBlock decode(const uint8_t* p) { return {nibbles(p + 4), fp16_to_fp32(load_u16(p)), fp16_to_fp32(load_u16(p + 2))}; }
};
template <int kQh, int kQs, int kOffset>
inline Bytes32 five_bits(const uint8_t* p) {
  Bytes32 q = nibbles(p + kQs);
  const Bytes32 h = bits_to_bytes(load_u32(p + kQh), 16);
  q.lo = vsubq_s8(vorrq_s8(q.lo, h.lo), vdupq_n_s8(kOffset));
  q.hi = vsubq_s8(vorrq_s8(q.hi, h.hi), vdupq_n_s8(kOffset));
  return q;
}
struct DecQ5_0 {
  static constexpr int kBytes = 22;
  static constexpr bool kHasMin = false;
  static WBlock decode(const uint8_t* p) { return {five_bits<2, 6, 16>(p), fp16_to_fp32(load_u16(p)), 0.0f}; }
};
struct DecQ5_1 {
  static constexpr int kBytes = 24;
  static constexpr bool kHasMin = true;
  static WBlock decode(const uint8_t* p) { return {five_bits<4, 8, 0>(p), fp16_to_fp32(load_u16(p)), fp16_to_fp32(load_u16(p + 2))}; }
};
struct DecQ8_0 {
  static constexpr int kBytes = 34;
  static constexpr bool kHasMin = false;
  static WBlock decode(const uint8_t* p) {
    return {{vld1q_s8(reinterpret_cast<const int8_t*>(p + 2)), vld1q_s8(reinterpret_cast<const int8_t*>(p + 18))}, fp16_to_fp32(load_u16(p)), 0.0f};
  }
};
// 32 nibbles looked up in a table of 16 levels (IQ4_NL's by default).
inline Bytes32 iq4nl(const uint8_t* p, const int8_t* levels = kIQ4NLValues) {
  const int8x16_t values = vld1q_s8(levels);
  const Bytes32 n = nibbles(p);
  return {vqtbl1q_s8(values, vreinterpretq_u8_s8(n.lo)), vqtbl1q_s8(values, vreinterpretq_u8_s8(n.hi))};
}
struct DecIQ4_NL {
  static constexpr int kBytes = 18;
  static constexpr bool kHasMin = false;
  static WBlock decode(const uint8_t* p) { return {iq4nl(p + 2), fp16_to_fp32(load_u16(p)), 0.0f}; }
};

struct Q8Rows {
  const uint8_t* base;
  size_t stride;
  size_t d_offset;
  size_t sums_offset;
  const int8_t* qs(int t) const { return reinterpret_cast<const int8_t*>(base + static_cast<size_t>(t) * stride); }
  const float* d(int t) const { return reinterpret_cast<const float*>(base + static_cast<size_t>(t) * stride + d_offset); }
  const int16_t* sums(int t) const { return reinterpret_cast<const int16_t*>(base + static_cast<size_t>(t) * stride + sums_offset); }
};

template <class Dec, int R, int T>
void tile32(const uint8_t* w, size_t ws, const Q8Rows& x, int64_t nb, float* y, int64_t ldy) {
  float32x4_t acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    WBlock wb[R];
    for (int r = 0; r < R; ++r) wb[r] = Dec::decode(w + static_cast<size_t>(r) * ws + b * Dec::kBytes);
    for (int t = 0; t < T; ++t) {
      const int8x16_t x0 = vld1q_s8(x.qs(t) + 32 * b), x1 = vld1q_s8(x.qs(t) + 32 * b + 16);
      const float dx = x.d(t)[b];
      for (int r = 0; r < R; ++r) {
        const int32x4_t isum = dot16(dot16(vdupq_n_s32(0), wb[r].q.lo, x0), wb[r].q.hi, x1);
        acc[r][t] = vfmaq_n_f32(acc[r][t], vcvtq_f32_s32(isum), wb[r].d * dx);
        if constexpr (Dec::kHasMin) {
          // The min term as one more lane-0 product: m * dx * sum(q of x).
          const float32x4_t xsum = vsetq_lane_f32(static_cast<float>(x.sums(t)[b]), vdupq_n_f32(0.0f), 0);
          acc[r][t] = vfmaq_n_f32(acc[r][t], xsum, wb[r].m * dx);
        }
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

// One super-block of one row: its signed scale per 16 elements and, for the
// formats with mins, the min per 16 elements.
struct KPrep {
  const uint8_t* p;
  int16_t sc[16];
  int16_t mn[16];
  float d;
  float dmin;
};

inline void scales_k4(const uint8_t* s, KPrep& k) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    detail::scale_min_k4(j, s, &sc, &m);
    k.sc[2 * j] = k.sc[2 * j + 1] = sc;
    k.mn[2 * j] = k.mn[2 * j + 1] = m;
  }
}

// Chunk c (elements 32c..32c+31) of 2-bit quants: half c / 4, bits 2(c % 4) of qs[32 * half + l].
inline Bytes32 two_bits(const uint8_t* qs, int c) {
  qs += 32 * (c / 4);
  const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * (c % 4)));
  const uint8x16_t m3 = vdupq_n_u8(3);
  return {vreinterpretq_s8_u8(vandq_u8(vshlq_u8(vld1q_u8(qs), shift), m3)),
          vreinterpretq_s8_u8(vandq_u8(vshlq_u8(vld1q_u8(qs + 16), shift), m3))};
}

struct DecQ2_K {
  static constexpr int kBytes = 84;
  static constexpr bool kHasMin = true;
  static KPrep prep(const uint8_t* p) {
    KPrep k{};
    k.p = p;
    for (int s = 0; s < 16; ++s) {
      k.sc[s] = p[s] & 15;
      k.mn[s] = p[s] >> 4;
    }
    k.d = fp16_to_fp32(load_u16(p + 80));
    k.dmin = fp16_to_fp32(load_u16(p + 82));
    return k;
  }
  static Bytes32 chunk(const KPrep& k, int c) { return two_bits(k.p + 16, c); }
};
struct DecQ3_K {
  static constexpr int kBytes = 110;
  static constexpr bool kHasMin = false;
  static KPrep prep(const uint8_t* p) {
    KPrep k{};
    k.p = p;
    for (int s = 0; s < 16; ++s) k.sc[s] = static_cast<int16_t>(detail::q3k_scale(p + 96, s));
    k.d = fp16_to_fp32(load_u16(p + 108));
    return k;
  }
  // Two bits as Q2_K, minus 4 where the element's bit c of hmask[l] is clear.
  static Bytes32 chunk(const KPrep& k, int c) {
    Bytes32 q = two_bits(k.p + 32, c);
    const uint8x16_t bit = vdupq_n_u8(static_cast<uint8_t>(1 << c));
    const int8x16_t four = vdupq_n_s8(4);
    q.lo = vsubq_s8(q.lo, vbicq_s8(four, vreinterpretq_s8_u8(vtstq_u8(vld1q_u8(k.p), bit))));
    q.hi = vsubq_s8(q.hi, vbicq_s8(four, vreinterpretq_s8_u8(vtstq_u8(vld1q_u8(k.p + 16), bit))));
    return q;
  }
};
struct DecQ4_K {
  static constexpr int kBytes = 144;
  static constexpr bool kHasMin = true;
  static KPrep prep(const uint8_t* p) {
    KPrep k{};
    k.p = p;
    scales_k4(p + 4, k);
    k.d = fp16_to_fp32(load_u16(p));
    k.dmin = fp16_to_fp32(load_u16(p + 2));
    return k;
  }
  // Chunk c: low (c even) or high nibbles of qs[32 * (c / 2) + l].
  static Bytes32 nib(const uint8_t* qs, int c) {
    const uint8x16_t a = vld1q_u8(qs), b = vld1q_u8(qs + 16);
    if (c % 2 == 0) {
      const uint8x16_t m4 = vdupq_n_u8(0x0F);
      return {vreinterpretq_s8_u8(vandq_u8(a, m4)), vreinterpretq_s8_u8(vandq_u8(b, m4))};
    }
    return {vreinterpretq_s8_u8(vshrq_n_u8(a, 4)), vreinterpretq_s8_u8(vshrq_n_u8(b, 4))};
  }
  static Bytes32 chunk(const KPrep& k, int c) { return nib(k.p + 16 + 32 * (c / 2), c); }
};
struct DecQ5_K {
  static constexpr int kBytes = 176;
  static constexpr bool kHasMin = true;
  static KPrep prep(const uint8_t* p) { return DecQ4_K::prep(p); }
  static Bytes32 chunk(const KPrep& k, int c) {
    Bytes32 q = DecQ4_K::nib(k.p + 48 + 32 * (c / 2), c);
    const uint8x16_t bit = vdupq_n_u8(static_cast<uint8_t>(1 << c));
    const int8x16_t sixteen = vdupq_n_s8(16);
    q.lo = vorrq_s8(q.lo, vandq_s8(sixteen, vreinterpretq_s8_u8(vtstq_u8(vld1q_u8(k.p + 16), bit))));
    q.hi = vorrq_s8(q.hi, vandq_s8(sixteen, vreinterpretq_s8_u8(vtstq_u8(vld1q_u8(k.p + 32), bit))));
    return q;
  }
};
struct DecQ6_K {
  static constexpr int kBytes = 210;
  static constexpr bool kHasMin = false;
  static KPrep prep(const uint8_t* p) {
    KPrep k{};
    k.p = p;
    for (int s = 0; s < 16; ++s) k.sc[s] = static_cast<int8_t>(p[192 + s]);
    k.d = fp16_to_fp32(load_u16(p + 208));
    return k;
  }
  // Chunk c: half h = c / 4, j = c % 4: low (j < 2) or high nibbles of
  // ql[64h + 32(j % 2) + l], bits 2j..2j+1 of qh[32h + l]; minus 32.
  static Bytes32 chunk(const KPrep& k, int c) {
    const int h = c / 4, j = c % 4;
    const Bytes32 lo = DecQ4_K::nib(k.p + 64 * h + 32 * (j % 2), j < 2 ? 0 : 1);
    const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * j));
    const uint8x16_t m3 = vdupq_n_u8(3);
    const uint8_t* qh = k.p + 128 + 32 * h;
    const int8x16_t h0 = vreinterpretq_s8_u8(vshlq_n_u8(vandq_u8(vshlq_u8(vld1q_u8(qh), shift), m3), 4));
    const int8x16_t h1 = vreinterpretq_s8_u8(vshlq_n_u8(vandq_u8(vshlq_u8(vld1q_u8(qh + 16), shift), m3), 4));
    const int8x16_t m32 = vdupq_n_s8(32);
    return {vsubq_s8(vorrq_s8(lo.lo, h0), m32), vsubq_s8(vorrq_s8(lo.hi, h1), m32)};
  }
};
// IQ4_XS's layout with the levels and d factor of Block (kLevelsOf, kDScaleOf):
// IQ4_XS itself, or a widened IQ3 format (kernels/widen.h).
template <class Block>
struct DecIQ4_XSLayout {
  static constexpr int kBytes = 136;
  static constexpr bool kHasMin = false;
  static KPrep prep(const uint8_t* p) {
    KPrep k{};
    k.p = p;
    const uint16_t h = load_u16(p + 2);
    for (int s = 0; s < 8; ++s) {
      const int ls = ((p[4 + s / 2] >> (4 * (s % 2))) & 15) | ((h >> (2 * s)) & 3) << 4;
      k.sc[2 * s] = k.sc[2 * s + 1] = static_cast<int16_t>(ls - 32);
    }
    k.d = fp16_to_fp32(load_u16(p)) * kDScaleOf<Block>;
    return k;
  }
  static Bytes32 chunk(const KPrep& k, int c) { return iq4nl(k.p + 8 + 16 * c, kLevelsOf<Block>); }
};

template <class Dec, int R, int T>
void tile_k(const uint8_t* w, size_t ws, const Q8Rows& x, int64_t n_sb, float* y, int64_t ldy) {
  float32x4_t acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = vdupq_n_f32(0.0f);
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    KPrep prep[R];
    for (int r = 0; r < R; ++r) prep[r] = Dec::prep(w + static_cast<size_t>(r) * ws + sb * Dec::kBytes);
    int32x4_t isum[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) isum[r][t] = vdupq_n_s32(0);
    for (int c = 0; c < 8; ++c) {
      Bytes32 q[R];
      for (int r = 0; r < R; ++r) q[r] = Dec::chunk(prep[r], c);
      for (int t = 0; t < T; ++t) {
        const int8_t* xq = x.qs(t) + 256 * sb + 32 * c;
        const int8x16_t x0 = vld1q_s8(xq), x1 = vld1q_s8(xq + 16);
        for (int r = 0; r < R; ++r) {
          isum[r][t] = vmlaq_n_s32(isum[r][t], dot16(vdupq_n_s32(0), q[r].lo, x0), prep[r].sc[2 * c]);
          isum[r][t] = vmlaq_n_s32(isum[r][t], dot16(vdupq_n_s32(0), q[r].hi, x1), prep[r].sc[2 * c + 1]);
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const float dx = x.d(t)[sb];
      const int16_t* bsums = x.sums(t) + 16 * sb;
      for (int r = 0; r < R; ++r) {
        acc[r][t] = vfmaq_n_f32(acc[r][t], vcvtq_f32_s32(isum[r][t]), prep[r].d * dx);
        if constexpr (Dec::kHasMin) {
          const int16x8_t m0 = vld1q_s16(prep[r].mn), m1 = vld1q_s16(prep[r].mn + 8);
          const int16x8_t b0 = vld1q_s16(bsums), b1 = vld1q_s16(bsums + 8);
          int32x4_t msum = vmull_s16(vget_low_s16(m0), vget_low_s16(b0));
          msum = vmlal_high_s16(msum, m0, b0);
          msum = vmlal_s16(msum, vget_low_s16(m1), vget_low_s16(b1));
          msum = vmlal_high_s16(msum, m1, b1);
          acc[r][t] = vfmsq_n_f32(acc[r][t], vcvtq_f32_s32(msum), prep[r].dmin * dx);
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

template <class Dec>
void gemm_k(const GemmArgs& a) {
  const TileK<Dec> tile{a, act_layout(ActFormat::kQ8_K, a.k)};
  if (a.n_tokens == 1) {
    for_each_tile<4, 1>(a, tile);
  } else {
    for_each_tile<2, 4>(a, tile);
  }
}

// ======================= float formats x f32 =======================

struct LoadF32 {
  static constexpr int kBytes = 4;
  static float32x4_t load(const uint8_t* p) { return vld1q_f32(reinterpret_cast<const float*>(p)); }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static float32x4_t load(const uint8_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p)))); }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;
  static float32x4_t load(const uint8_t* p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p)), 16));
  }
};

template <class Load, int R, int T>
void tile_f(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t k, float* y, int64_t ldy) {
  float32x4_t acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 4 <= k; i += 4) {
    float32x4_t wv[R];
    for (int r = 0; r < R; ++r) wv[r] = Load::load(w + static_cast<size_t>(r) * ws + i * Load::kBytes);
    for (int t = 0; t < T; ++t) {
      const float32x4_t xv = vld1q_f32(reinterpret_cast<const float*>(x + static_cast<size_t>(t) * xs) + i);
      for (int r = 0; r < R; ++r) acc[r][t] = vfmaq_f32(acc[r][t], wv[r], xv);
    }
  }
  if (i < k) {
    const auto rem = static_cast<size_t>(k - i);
    float32x4_t wv[R];
    for (int r = 0; r < R; ++r) {
      alignas(16) uint8_t buf[16] = {};
      std::memcpy(buf, w + static_cast<size_t>(r) * ws + i * Load::kBytes, rem * Load::kBytes);
      wv[r] = Load::load(buf);
    }
    for (int t = 0; t < T; ++t) {
      alignas(16) float buf[4] = {};
      std::memcpy(buf, reinterpret_cast<const float*>(x + static_cast<size_t>(t) * xs) + i, rem * sizeof(float));
      const float32x4_t xv = vld1q_f32(buf);
      for (int r = 0; r < R; ++r) acc[r][t] = vfmaq_f32(acc[r][t], wv[r], xv);
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
    for_each_tile<4, 1>(a, tile);
  } else {
    for_each_tile<4, 4>(a, tile);
  }
}

}  // namespace

GemmKernel gemm_kernel_neon(DType t) {
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
    default: return {};
  }
}

}  // namespace tokamak::kernels

#else  // not AArch64

namespace tokamak::kernels {
GemmKernel gemm_kernel_neon(DType) { return {}; }
}  // namespace tokamak::kernels

#endif
