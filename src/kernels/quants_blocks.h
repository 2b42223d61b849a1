// GGML block layouts, byte for byte as ggml-common.h defines them (little
// endian; fp16 fields are stored as raw uint16_t bits). One block holds
// kQK (32) or kQK_K (256) elements; sizes match dtype_traits(t).block_bytes.
//
// Blocks inside a GGUF tensor are packed back to back, so a block need not be
// aligned to its struct: readers copy a block out (std::memcpy) before use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace tokamak::kernels {

constexpr int kQK = 32;     // elements per block of the 32-element formats
constexpr int kQK_K = 256;  // elements per super-block of the K and IQ formats

// ---- 32-element formats: x = d * q (+ m) ----

struct BlockQ4_0 {
  uint16_t d;              // fp16 scale
  uint8_t qs[kQK / 2];     // byte j: element j in the low nibble, j+16 in the high; x = d * (q - 8)
};
struct BlockQ4_1 {
  uint16_t d, m;           // fp16 scale and min; x = d * q + m
  uint8_t qs[kQK / 2];     // nibbles as in Q4_0
};
struct BlockQ5_0 {
  uint16_t d;              // fp16 scale; x = d * (q - 16)
  uint8_t qh[4];           // bit j of the little-endian u32 = 5th bit of element j
  uint8_t qs[kQK / 2];     // low 4 bits, nibbles as in Q4_0
};
struct BlockQ5_1 {
  uint16_t d, m;           // x = d * q + m
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {
  uint16_t d;              // fp16 scale
  int8_t qs[kQK];          // x = d * q
};
struct BlockIQ4_NL {
  uint16_t d;              // x = d * kIQ4NLValues[q], nibbles as in Q4_0
  uint8_t qs[kQK / 2];
};

// ---- 256-element super-blocks ----

// 16 sub-blocks of 16: x = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4), q in 0..3.
// qs: for each half h (128 elements), byte 32*h + l holds elements
// 128*h + l + 32*k in bits 2k..2k+1 (k = 0..3).
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d, dmin;
};
// 16 sub-blocks of 16: x = d * (s - 32) * (q - 4 * !high_bit), q = 2 low bits laid out as Q2_K.
// hmask bit k of byte l: the high bit of element 32*k + l. scales: 16 6-bit values packed in 12 bytes.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
// 8 sub-blocks of 32: x = d * sc * q - dmin * m with 6-bit sc, m packed in 12 bytes.
// qs: for each 64 elements, 32 bytes: element l in the low nibble, l+32 in the high.
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
// As Q4_K plus a 5th bit: qh bit 2c (2c+1) of byte l = high bit of element 64c + l (64c + 32 + l).
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// 16 sub-blocks of 16: x = d * scales[s] * (q - 32), q 6 bits: 4 in ql, 2 in qh.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
// Activations for K-quant dot products: x = d * q, with the sums of each 16 q.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
// 8 sub-blocks of 32: x = d * (ls - 32) * kIQ4NLValues[q], ls 6 bits (4 in scales_l, 2 in scales_h).
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];   // per 32 elements: 16 bytes, nibbles as in Q4_0
};
// IQ3_S widened (kernels/widen.h): IQ4_XS's layout, the levels kIQ3SWideLevels.
struct BlockIQ3_S_WIDE : BlockIQ4_XS {};
// IQ3_XXS widened: IQ4_XS's layout, the levels kIQ3XXSWideLevels, d x 1/4.
struct BlockIQ3_XXS_WIDE : BlockIQ4_XS {};
// 8 groups of 32: qs[0..64) are grid indices (8 per group, 4 elements each);
// qs[64..96) are one u32 per group: 4 x 7 sign bits, then a 4-bit scale.
struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[3 * kQK_K / 8];
};
// 8 groups of 32: 9-bit grid indices (8 bits in qs, 9th in qh), explicit sign
// bits, and a 4-bit scale per 32 elements.
struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[kQK_K / 4];
  uint8_t qh[kQK_K / 32];
  uint8_t signs[kQK_K / 8];
  uint8_t scales[kQK_K / 64];
};
// Ternary, base 3: qs holds 5 trits per byte (240 elements), qh 4 per byte (16).
struct BlockTQ1_0 {
  uint8_t qs[(kQK_K - 4 * kQK_K / 64) / 5];
  uint8_t qh[kQK_K / 64];
  uint16_t d;
};
// Ternary, 2 bits per element: x = d * (q - 1), laid out as Q2_K's qs.
struct BlockTQ2_0 {
  uint8_t qs[kQK_K / 4];
  uint16_t d;
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_XS) == 136 && sizeof(BlockIQ3_S_WIDE) == 136 && sizeof(BlockIQ3_XXS_WIDE) == 136 &&
              sizeof(BlockIQ3_XXS) == 98 &&
              sizeof(BlockIQ3_S) == 110 && sizeof(BlockTQ1_0) == 54 && sizeof(BlockTQ2_0) == 66);
static_assert(offsetof(BlockQ6_K, d) == 208 && offsetof(BlockQ3_K, d) == 108 && offsetof(BlockTQ1_0, d) == 52);

// The 16 levels of IQ4_NL / IQ4_XS (non-uniform, denser near zero).
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// The 16 signed values of IQ3_S: its codebook's magnitudes 1, 3, .., 15 with
// either sign, level n standing for 2n - 15 (kernels/widen.h).
inline constexpr int8_t kIQ3SWideLevels[16] = {-15, -13, -11, -9, -7, -5, -3, -1, 1, 3, 5, 7, 9, 11, 13, 15};
// The 16 signed values of IQ3_XXS: its codebook's 8 magnitudes with either
// sign (level 8 + i for magnitude i, 7 - i for its negative).
inline constexpr int8_t kIQ3XXSWideLevels[16] = {-62, -52, -44, -36, -28, -20, -12, -4, 4, 12, 20, 28, 36, 44, 52, 62};
// The levels of a format with IQ4_XS's layout, and the factor on its d.
template <class Block>
inline constexpr const int8_t* kLevelsOf = std::is_same_v<Block, BlockIQ3_S_WIDE>     ? kIQ3SWideLevels
                                           : std::is_same_v<Block, BlockIQ3_XXS_WIDE> ? kIQ3XXSWideLevels
                                                                                      : kIQ4NLValues;
template <class Block>
inline constexpr float kDScaleOf = std::is_same_v<Block, BlockIQ3_XXS_WIDE> ? 0.25f : 1.0f;

}  // namespace tokamak::kernels
