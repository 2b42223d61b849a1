// Dequantization of the "IQ" codebook formats (IQ4_XS, IQ3_XXS, IQ3_S) and of
// the ternary formats (TQ1_0, TQ2_0). Quantizing these needs ggml's search
// over the codebooks and is not provided.
#include <bit>

#include "core/half.h"
#include "kernels/quants_impl.h"

namespace tokamak::kernels::detail {
namespace {

// A magnitude times the block scale, negated when its sign bit is set (ggml
// multiplies by -1.f or 1.f, which is exactly this).
inline float signed_value(float db, int magnitude, uint8_t signs, int bit) {
  const float v = db * static_cast<float>(magnitude);
  return (signs >> bit) & 1 ? -v : v;
}

// One ternary element: digit n (ternary_digit) minus 1, times d.
inline float trit(uint8_t q, int n, float d) { return static_cast<float>(ternary_digit(q, n) - 1) * d; }

}  // namespace

namespace {

// IQ4_XS's layout with the levels of `Block`.
template <class Block>
void dequant_iq4_xs_layout(const void* src, float* dst, int64_t nb) {
  constexpr const int8_t* kLevels = kLevelsOf<Block>;
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<Block>(src, i);
    const float d = fp16_to_fp32(b.d) * kDScaleOf<Block>;
    for (int ib = 0; ib < kQK_K / 32; ++ib, dst += 32) {
      const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | ((b.scales_h >> (2 * ib)) & 3) << 4;
      const float dl = d * static_cast<float>(ls - 32);
      const uint8_t* qs = b.qs + 16 * ib;
      for (int j = 0; j < 16; ++j) {
        dst[j] = dl * static_cast<float>(kLevels[qs[j] & 0xf]);
        dst[j + 16] = dl * static_cast<float>(kLevels[qs[j] >> 4]);
      }
    }
  }
}

}  // namespace

void dequant_iq4_xs(const void* src, float* dst, int64_t nb) { dequant_iq4_xs_layout<BlockIQ4_XS>(src, dst, nb); }
void dequant_iq3_s_wide(const void* src, float* dst, int64_t nb) { dequant_iq4_xs_layout<BlockIQ3_S_WIDE>(src, dst, nb); }
void dequant_iq3_xxs_wide(const void* src, float* dst, int64_t nb) { dequant_iq4_xs_layout<BlockIQ3_XXS_WIDE>(src, dst, nb); }

void dequant_iq3_xxs(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockIQ3_XXS>(src, i);
    const float d = fp16_to_fp32(b.d);
    const uint8_t* scales_and_signs = b.qs + kQK_K / 4;
    for (int ib32 = 0; ib32 < kQK_K / 32; ++ib32) {
      uint32_t aux;
      std::memcpy(&aux, scales_and_signs + 4 * ib32, sizeof(aux));
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
      const uint8_t* qs = b.qs + 8 * ib32;
      for (int l = 0; l < 4; ++l, dst += 8) {
        const uint8_t signs = even_parity_signs((aux >> (7 * l)) & 127);
        const uint32_t g1 = kIQ3XXSGrid[qs[2 * l]];
        const uint32_t g2 = kIQ3XXSGrid[qs[2 * l + 1]];
        for (int j = 0; j < 4; ++j) {
          dst[j] = signed_value(db, grid_byte(g1, j), signs, j);
          dst[j + 4] = signed_value(db, grid_byte(g2, j), signs, j + 4);
        }
      }
    }
  }
}

void dequant_iq3_s(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockIQ3_S>(src, i);
    const float d = fp16_to_fp32(b.d);
    // Group g of 32: grid index k (0..7) is qs[8g + k] with 9th bit k of qh[g];
    // signs[4g + l] holds the signs of its l-th 8 elements.
    for (int g = 0; g < kQK_K / 32; ++g) {
      const int scale = (b.scales[g / 2] >> (4 * (g % 2))) & 0xf;
      const float db = d * static_cast<float>(1 + 2 * scale);
      for (int l = 0; l < 4; ++l, dst += 8) {
        const uint8_t signs = b.signs[4 * g + l];
        for (int half = 0; half < 2; ++half) {
          const int k = 2 * l + half;
          const uint32_t entry = kIQ3SGrid[iq3s_index(b.qs, b.qh, g, k)];
          for (int j = 0; j < 4; ++j) dst[4 * half + j] = signed_value(db, grid_byte(entry, j), signs, 4 * half + j);
        }
      }
    }
  }
}

void dequant_tq1_0(const void* src, float* dst, int64_t nb) {
  constexpr int kQs = sizeof(BlockTQ1_0::qs);  // 48: 32 bytes, then 16, 5 trits each
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockTQ1_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int n = 0; n < 5; ++n) {
      for (int m = 0; m < 32; ++m) *dst++ = trit(b.qs[m], n, d);
    }
    for (int n = 0; n < 5; ++n) {
      for (int m = 32; m < kQs; ++m) *dst++ = trit(b.qs[m], n, d);
    }
    for (int n = 0; n < 4; ++n) {
      for (int j = 0; j < kQK_K / 64; ++j) *dst++ = trit(b.qh[j], n, d);
    }
  }
}

void dequant_tq2_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockTQ2_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK_K / 4; j += 32) {
      for (int l = 0; l < 4; ++l) {
        for (int m = 0; m < 32; ++m) *dst++ = static_cast<float>(((b.qs[j + m] >> (2 * l)) & 3) - 1) * d;
      }
    }
  }
}

}  // namespace tokamak::kernels::detail
