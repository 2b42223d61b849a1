#include "kernels/widen.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "kernels/quants_blocks.h"
#include "kernels/quants_impl.h"

namespace tokamak::kernels {
namespace {

// The trits of a TQ1_0 block (digits 0..2, value + 1) in element order, as
// dequant_tq1_0 reads them: 32 bytes x 5 digits, 16 bytes x 5, qh's 4 x 4.
void tq1_0_digits(const BlockTQ1_0& b, uint8_t (&digits)[kQK_K]) {
  constexpr int kHead = 32, kTail = sizeof(BlockTQ1_0::qs) - kHead, kQh = sizeof(BlockTQ1_0::qh);
  int e = 0;
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < kHead; ++m) digits[e++] = static_cast<uint8_t>(detail::ternary_digit(b.qs[m], n));
  }
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < kTail; ++m) digits[e++] = static_cast<uint8_t>(detail::ternary_digit(b.qs[kHead + m], n));
  }
  for (int n = 0; n < 4; ++n) {
    for (int j = 0; j < kQh; ++j) digits[e++] = static_cast<uint8_t>(detail::ternary_digit(b.qh[j], n));
  }
}

// TQ2_0 stores value + 1 in 2 bits, Q2_K's order (detail::unpack_2bit):
// element e in bits 2((e % 128) / 32) of byte 32(e / 128) + e % 32.
BlockTQ2_0 tq1_0_to_tq2_0(const BlockTQ1_0& in) {
  uint8_t digits[kQK_K];
  tq1_0_digits(in, digits);
  BlockTQ2_0 out{};
  for (int e = 0; e < kQK_K; ++e) out.qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(digits[e] << (2 * (e % 128 / 32)));
  out.d = in.d;
  return out;
}

// IQ3_S -> IQ3_S_WIDE: each value sign x magnitude (the grid bytes are odd,
// 1..15) as the level (value + 15) / 2 of kIQ3SWideLevels, in IQ4_XS's
// nibble order (value j of a group in the low nibble of byte j, j + 16 in
// its high one); each scale s (standing for 1 + 2s) as IQ4_XS's ls = 33 +
// 2s, so that ls - 32 is the same factor; the same d. Dequantizing gives
// the same floats: d x (1 + 2s) x value either way.
BlockIQ3_S_WIDE iq3_s_to_wide(const BlockIQ3_S& in) {
  BlockIQ3_S_WIDE out{};
  out.d = in.d;
  for (int g = 0; g < kQK_K / 32; ++g) {
    const int ls = 33 + 2 * ((in.scales[g / 2] >> (4 * (g % 2))) & 0xf);
    out.scales_l[g / 2] |= static_cast<uint8_t>((ls & 0xf) << (4 * (g % 2)));
    out.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * g));
    for (int j = 0; j < 32; ++j) {
      const uint32_t entry = detail::kIQ3SGrid[detail::iq3s_index(in.qs, in.qh, g, j / 4)];
      const int magnitude = detail::grid_byte(entry, j % 4);
      const int value = (in.signs[4 * g + j / 8] >> (j % 8)) & 1 ? -magnitude : magnitude;
      out.qs[16 * g + j % 16] |= static_cast<uint8_t>(((value + 15) / 2) << (j < 16 ? 0 : 4));
    }
  }
  return out;
}

template <class From, class To, To (*kWiden)(const From&)>
void widen_blocks(const std::byte* src, std::byte* dst, int64_t blocks) {
  for (int64_t i = 0; i < blocks; ++i) {
    From in;
    std::memcpy(&in, src + i * sizeof(From), sizeof(in));
    const To out = kWiden(in);
    std::memcpy(dst + i * sizeof(To), &out, sizeof(out));
  }
}

}  // namespace

std::optional<DType> widened_type(DType t, Isa isa) {
  // The scalar variant is the reference the others are tested against: it
  // reads every format as stored. NEON has IQ4_XS's kernel (so IQ3_S_WIDE's)
  // and none for either ternary format.
  const bool x86 = isa == Isa::kAvx2 || isa == Isa::kAvx512 || isa == Isa::kAvx512Vnni || isa == Isa::kAvx512Bf16;
  if (x86 && t == DType::TQ1_0) return DType::TQ2_0;
  if ((x86 || isa == Isa::kNeon) && t == DType::IQ3_S) return DType::IQ3_S_WIDE;
  return std::nullopt;
}

void widen_rows(DType from, const std::byte* src, DType to, std::byte* dst, int64_t n_rows, int64_t k) {
  const int64_t blocks = n_rows * (k / kQK_K);
  if (from == DType::TQ1_0 && to == DType::TQ2_0) return widen_blocks<BlockTQ1_0, BlockTQ2_0, tq1_0_to_tq2_0>(src, dst, blocks);
  if (from == DType::IQ3_S && to == DType::IQ3_S_WIDE) {
    return widen_blocks<BlockIQ3_S, BlockIQ3_S_WIDE, iq3_s_to_wide>(src, dst, blocks);
  }
  throw Error("widen_rows: no widening of " + std::string(dtype_name(from)) + " into " + std::string(dtype_name(to)));
}

}  // namespace tokamak::kernels
