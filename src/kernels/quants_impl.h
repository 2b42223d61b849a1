// Internal to src/kernels/quants*.cpp: the per-type scalar kernels behind
// dequantize_row / quantize_row, and the helpers they share. Every function
// takes a count of whole blocks (nb); the public functions check n.
#pragma once

#include <bit>

#include <cstdint>
#include <cstring>

#include "kernels/quants_blocks.h"

namespace tokamak::kernels::detail {

// Copies block i out of a packed, possibly unaligned array of blocks.
template <class Block>
Block load_block(const void* blocks, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const uint8_t*>(blocks) + i * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
  return b;
}

template <class Block>
void store_block(void* blocks, int64_t i, const Block& b) {
  std::memcpy(static_cast<uint8_t*>(blocks) + i * static_cast<int64_t>(sizeof(Block)), &b, sizeof(Block));
}

// ggml's nearest_int: adding 1.5 * 2^23 leaves round(x) (ties to even) in the
// low mantissa bits. Exact for |x| < 2^22; past that (which ggml's scale
// searches can reach) it returns the same bits as ggml's, which is what
// bit-exact output needs.
inline int nearest_int(float x) {
  const float v = x + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

// 6-bit scale and min of sub-block j (0..7) of Q4_K / Q5_K, packed in 12 bytes:
// bytes 0-3 hold scales 0-3 (low 6 bits), bytes 4-7 mins 0-3, bytes 8-11 the
// low nibbles of scale/min 4-7, and the top 2 bits of bytes 0-7 their high bits.
inline void scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q4_K / Q5_K: packs 8 six-bit scales and mins into 12 bytes (see scale_min_k4).
inline void pack_scale_min_k4(const uint8_t ls[8], const uint8_t lm[8], uint8_t q[12]) {
  std::memset(q, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      q[j] = ls[j];
      q[j + 4] = lm[j];
    } else {
      q[j + 4] = static_cast<uint8_t>((ls[j] & 0xf) | (lm[j] & 0xf) << 4);
      q[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      q[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// Q2_K / Q3_K / TQ2_0 layout of 2-bit values: 128 elements per 32 bytes,
// element 32k + l of the half in bits 2k..2k+1 of byte l.
inline int unpack_2bit(const uint8_t* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3; }

// Q3_K: 16 six-bit scales in 12 bytes. Bytes 0-7 hold the low nibbles
// (scale j < 8 low, j >= 8 high nibble of byte j-8); bytes 8-11 the high 2
// bits, scale j at bits 2*(j/4) of byte 8 + j%4. Returns the signed scale (- 32).
inline int q3k_scale(const uint8_t s[12], int j) {
  const int low = j < 8 ? s[j] & 0xf : s[j - 8] >> 4;
  return (low | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
}

// 32-element formats (quants_legacy.cpp).
void dequant_q4_0(const void* src, float* dst, int64_t nb);
void dequant_q4_1(const void* src, float* dst, int64_t nb);
void dequant_q5_0(const void* src, float* dst, int64_t nb);
void dequant_q5_1(const void* src, float* dst, int64_t nb);
void dequant_q8_0(const void* src, float* dst, int64_t nb);
void dequant_iq4_nl(const void* src, float* dst, int64_t nb);
void quant_q4_0(const float* src, void* dst, int64_t nb);
void quant_q4_1(const float* src, void* dst, int64_t nb);
void quant_q5_0(const float* src, void* dst, int64_t nb);
void quant_q5_1(const float* src, void* dst, int64_t nb);
void quant_q8_0(const float* src, void* dst, int64_t nb);

// K-quants (quants_k.cpp).
void dequant_q2_k(const void* src, float* dst, int64_t nb);
void dequant_q3_k(const void* src, float* dst, int64_t nb);
void dequant_q4_k(const void* src, float* dst, int64_t nb);
void dequant_q5_k(const void* src, float* dst, int64_t nb);
void dequant_q6_k(const void* src, float* dst, int64_t nb);
void dequant_q8_k(const void* src, float* dst, int64_t nb);
void quant_q2_k(const float* src, void* dst, int64_t nb);
void quant_q3_k(const float* src, void* dst, int64_t nb);
void quant_q4_k(const float* src, void* dst, int64_t nb);
void quant_q5_k(const float* src, void* dst, int64_t nb);
void quant_q6_k(const float* src, void* dst, int64_t nb);
void quant_q8_k(const float* src, void* dst, int64_t nb);

// IQ and ternary formats (quants_iq.cpp).
void dequant_iq4_xs(const void* src, float* dst, int64_t nb);
void dequant_iq3_s_wide(const void* src, float* dst, int64_t nb);
void dequant_iq3_xxs_wide(const void* src, float* dst, int64_t nb);
void dequant_iq3_xxs(const void* src, float* dst, int64_t nb);
void dequant_iq3_s(const void* src, float* dst, int64_t nb);
void dequant_tq1_0(const void* src, float* dst, int64_t nb);
void dequant_tq2_0(const void* src, float* dst, int64_t nb);

// The IQ3 codebooks (quants_iq_grids.cpp): each entry packs 4 unsigned
// magnitudes, one per byte, element 0 in the lowest byte.
extern const uint32_t kIQ3XXSGrid[256];
extern const uint32_t kIQ3SGrid[512];

// Byte k (0..3) of a codebook entry.
inline int grid_byte(uint32_t entry, int k) { return static_cast<int>((entry >> (8 * k)) & 0xff); }

// IQ2/IQ3 sign codes: 7 stored sign bits, the 8th implied so that the number
// of negative values in a group of 8 is even (ggml's ksigns_iq2xs table).
inline uint8_t even_parity_signs(uint32_t seven_bits) {
  return static_cast<uint8_t>(seven_bits | (std::popcount(seven_bits) & 1u) << 7);
}

// Digit n (0..2) of a TQ1_0 byte: ggml stores a byte q ~ 256 * t / 243 (t a
// base-3 number of 5 digits), so multiplying q by 3^n (mod 256) moves digit n
// to the top and (q * 3) >> 8 reads it out.
inline int ternary_digit(uint8_t q, int n) {
  constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const auto shifted = static_cast<uint8_t>(q * kPow3[n]);
  return (shifted * 3) >> 8;
}

// The 9-bit grid index of IQ3_S's entry k (0..7) of group g.
inline int iq3s_index(const uint8_t* qs, const uint8_t* qh, int g, int k) { return qs[8 * g + k] | ((qh[g] >> k) & 1) << 8; }

}  // namespace tokamak::kernels::detail
