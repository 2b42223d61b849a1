// The 32-element block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (and IQ4_NL's
// dequantization, which shares Q4_0's nibble layout).
//
// The quantizers follow ggml's quantize_row_*_ref expression by expression
// (the same float operations in the same order, including how ties round), so
// that the bytes equal ggml's; that is why some arithmetic below is written in
// a particular way, e.g. x * (1/d) rather than x / d.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/half.h"
#include "kernels/quants_impl.h"

namespace tokamak::kernels::detail {
namespace {

// Element j (0..31) of a 32-element block whose low 4 bits are packed two per
// byte (j < 16: low nibble of byte j; j >= 16: high nibble of byte j - 16).
inline int nibble(const uint8_t* qs, int j) { return j < kQK / 2 ? qs[j] & 0xf : qs[j - kQK / 2] >> 4; }

// The 5th bit of element j of Q5_0/Q5_1 (bit j of the little-endian qh).
inline int fifth_bit(const uint8_t qh[4], int j) { return (qh[j / 8] >> (j % 8)) & 1; }

// Value of largest magnitude, the first one on ties (ggml's "max" of Q4_0/Q5_0).
float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Packs 5-bit quants l[0..32) into Q5's low nibbles and high-bit word.
void pack_q5(const uint8_t* l, uint8_t qs[kQK / 2], uint8_t qh[4]) {
  uint32_t high = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = static_cast<uint8_t>((l[j] & 0xf) | ((l[j + kQK / 2] & 0xf) << 4));
    high |= static_cast<uint32_t>((l[j] >> 4) & 1) << j;
    high |= static_cast<uint32_t>((l[j + kQK / 2] >> 4) & 1) << (j + kQK / 2);
  }
  for (int b = 0; b < 4; ++b) qh[b] = static_cast<uint8_t>(high >> (8 * b));
}

}  // namespace

void dequant_q4_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK) {
    const auto b = load_block<BlockQ4_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(nibble(b.qs, j) - 8) * d;
  }
}

void dequant_q4_1(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK) {
    const auto b = load_block<BlockQ4_1>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float m = fp16_to_fp32(b.m);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(nibble(b.qs, j)) * d + m;
  }
}

void dequant_q5_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK) {
    const auto b = load_block<BlockQ5_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK; ++j) {
      const int q = nibble(b.qs, j) | fifth_bit(b.qh, j) << 4;
      dst[j] = static_cast<float>(q - 16) * d;
    }
  }
}

void dequant_q5_1(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK) {
    const auto b = load_block<BlockQ5_1>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float m = fp16_to_fp32(b.m);
    for (int j = 0; j < kQK; ++j) {
      const int q = nibble(b.qs, j) | fifth_bit(b.qh, j) << 4;
      dst[j] = static_cast<float>(q) * d + m;
    }
  }
}

void dequant_q8_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK) {
    const auto b = load_block<BlockQ8_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(b.qs[j]) * d;
  }
}

void dequant_iq4_nl(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK) {
    const auto b = load_block<BlockIQ4_NL>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK; ++j) dst[j] = d * static_cast<float>(kIQ4NLValues[nibble(b.qs, j)]);
  }
}

// Symmetric, 16 levels: the value of largest magnitude maps to -8 exactly, so
// the other sign gets one level less (it is clamped at +7).
void quant_q4_0(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK) {
    const float d = signed_absmax(src, kQK) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_0 b;
    b.d = fp32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(src[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(src[j + kQK / 2] * id + 8.5f));
      b.qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
    store_block(dst, i, b);
  }
}

// Affine, 16 levels spanning [min, max].
void quant_q4_1(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK) {
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (int j = 0; j < kQK; ++j) {
      if (src[j] < min) min = src[j];
      if (src[j] > max) max = src[j];
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_1 b;
    b.d = fp32_to_fp16(d);
    b.m = fp32_to_fp16(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>((src[j] - min) * id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((src[j + kQK / 2] - min) * id + 0.5f));
      b.qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
    store_block(dst, i, b);
  }
}

void quant_q5_0(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK) {
    const float d = signed_absmax(src, kQK) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ5_0 b;
    b.d = fp32_to_fp16(d);
    uint8_t l[kQK];
    for (int j = 0; j < kQK; ++j) l[j] = static_cast<uint8_t>(std::min(31, static_cast<int>(src[j] * id + 16.5f)));
    pack_q5(l, b.qs, b.qh);
    store_block(dst, i, b);
  }
}

void quant_q5_1(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK) {
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (int j = 0; j < kQK; ++j) {
      if (src[j] < min) min = src[j];
      if (src[j] > max) max = src[j];
    }
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ5_1 b;
    b.d = fp32_to_fp16(d);
    b.m = fp32_to_fp16(min);
    uint8_t l[kQK];
    // Unclamped like ggml: (src - min) * id + 0.5 stays below 32 because
    // (max - min) * id exceeds 31 by an ulp at most; only the low 5 bits are stored.
    for (int j = 0; j < kQK; ++j) l[j] = static_cast<uint8_t>(static_cast<int>((src[j] - min) * id + 0.5f) & 31);
    pack_q5(l, b.qs, b.qh);
    store_block(dst, i, b);
  }
}

// Symmetric, levels -127..127, rounding halves away from zero.
void quant_q8_0(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 b;
    b.d = fp32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) b.qs[j] = static_cast<int8_t>(std::round(src[j] * id));
    store_block(dst, i, b);
  }
}

}  // namespace tokamak::kernels::detail
