#include "kernels/widen.h"

#include <bit>
#include <cstring>
#include <string>

#include "core/error.h"
#include "kernels/quants_blocks.h"
#include "kernels/quants_impl.h"

namespace tokamak::kernels {
namespace {

// Loading converts every block of a model, so each conversion works from
// tables instead of element by element (element by element, TinyLlama's
// IQ3_S took 2.9 s to widen and its TQ1_0 1.7 s).

// Digit n of each byte value (detail::ternary_digit), and digits 0-3 packed
// 2 bits each, as a TQ2_0 byte of the first half holds them.
struct TernaryTables {
  uint8_t digit[256][5];
  uint8_t four[256];
};
const TernaryTables& ternary_tables() {
  static const TernaryTables t = [] {
    TernaryTables x{};
    for (int q = 0; q < 256; ++q) {
      for (int n = 0; n < 5; ++n) x.digit[q][n] = static_cast<uint8_t>(detail::ternary_digit(static_cast<uint8_t>(q), n));
      x.four[q] = static_cast<uint8_t>(x.digit[q][0] | x.digit[q][1] << 2 | x.digit[q][2] << 4 | x.digit[q][3] << 6);
    }
    return x;
  }();
  return t;
}

// TQ1_0 -> TQ2_0, the same trits (value + 1) and d. TQ1_0's element order
// (dequant_tq1_0): e = 32n + m is digit n of qs[m] (m < 32, n < 5); e = 160 +
// 16n + m digit n of qs[32 + m] (m < 16); e = 240 + 4n + j digit n of qh[j].
// TQ2_0 (Q2_K's order, detail::unpack_2bit) puts elements 128h + 32k + b in
// bits 2k of byte 32h + b. So byte b < 32 is digits 0-3 of qs[b], and byte
// 32 + b holds elements 128 + b (digit 4 of qs[b]), 160 + b and 192 + b
// (digits b / 16 and 2 + b / 16 of qs[32 + b % 16]) and 224 + b (digit 4 of
// qs[32 + b] for b < 16, else digit (b - 16) / 4 of qh[(b - 16) % 4]).
BlockTQ2_0 tq1_0_to_tq2_0(const BlockTQ1_0& in) {
  const TernaryTables& t = ternary_tables();
  BlockTQ2_0 out{};
  for (int b = 0; b < 32; ++b) {
    out.qs[b] = t.four[in.qs[b]];
    const uint8_t* tail = t.digit[in.qs[32 + b % 16]];
    const uint8_t last = b < 16 ? t.digit[in.qs[32 + b]][4] : t.digit[in.qh[(b - 16) % 4]][(b - 16) / 4];
    out.qs[32 + b] = static_cast<uint8_t>(t.digit[in.qs[b]][4] | tail[b / 16] << 2 | tail[2 + b / 16] << 4 | last << 6);
  }
  out.d = in.d;
  return out;
}

// IQ3_S -> IQ3_S_WIDE: each value sign x magnitude (the grid bytes are odd,
// 1..15) as the level (value + 15) / 2 of kIQ3SWideLevels, in IQ4_XS's
// nibble order (value j of a group in the low nibble of byte j, j + 16 in
// its high one); each scale s (standing for 1 + 2s) as IQ4_XS's ls = 33 +
// 2s, so that ls - 32 is the same factor; the same d. Dequantizing gives
// the same floats: d x (1 + 2s) x value either way.
// Tables: the 4 levels of each grid entry's positive values as 4 bytes (a
// negative value's level is 15 - level = level ^ 15), and each sign byte
// spread to 8 bytes of 0x0F (set bit) or 0.
struct Iq3sTables {
  uint32_t levels[512];
  uint64_t flip[256];
};
const Iq3sTables& iq3s_tables() {
  static const Iq3sTables t = [] {
    Iq3sTables x{};
    for (int i = 0; i < 512; ++i) {
      for (int k = 0; k < 4; ++k) {
        x.levels[i] |= static_cast<uint32_t>((detail::grid_byte(detail::kIQ3SGrid[i], k) + 15) / 2) << (8 * k);
      }
    }
    for (int s = 0; s < 256; ++s) {
      for (int j = 0; j < 8; ++j) x.flip[s] |= static_cast<uint64_t>((s >> j) & 1 ? 0x0F : 0) << (8 * j);
    }
    return x;
  }();
  return t;
}
BlockIQ3_S_WIDE iq3_s_to_wide(const BlockIQ3_S& in) {
  static_assert(std::endian::native == std::endian::little, "value j of a group is byte j of its words");
  const Iq3sTables& t = iq3s_tables();
  BlockIQ3_S_WIDE out{};
  out.d = in.d;
  for (int g = 0; g < kQK_K / 32; ++g) {
    const int ls = 33 + 2 * ((in.scales[g / 2] >> (4 * (g % 2))) & 0xf);
    out.scales_l[g / 2] |= static_cast<uint8_t>((ls & 0xf) << (4 * (g % 2)));
    out.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * g));
    // Levels of the group's 32 values (little endian: value j in byte j % 8
    // of word j / 8), flipped where the sign bit is set.
    uint64_t words[4];
    for (int w = 0; w < 4; ++w) {
      const uint64_t lo = t.levels[detail::iq3s_index(in.qs, in.qh, g, 2 * w)];
      const uint64_t hi = t.levels[detail::iq3s_index(in.qs, in.qh, g, 2 * w + 1)];
      words[w] = (lo | hi << 32) ^ t.flip[in.signs[4 * g + w]];
    }
    // Values j and j + 16 share byte j: low and high nibble.
    const uint64_t packed[2] = {words[0] | words[2] << 4, words[1] | words[3] << 4};
    std::memcpy(out.qs + 16 * g, packed, sizeof(packed));
  }
  return out;
}

// IQ3_XXS -> IQ3_XXS_WIDE: IQ3_XXS's value d (2s + 1) / 4 x sign x magnitude
// (magnitudes 4, 12, .., 52, 62) as IQ4_XS's d' (ls - 32) x level with the
// same fp16 d (its kernels take d / 4, exact), ls = 33 + 2s, and the level of
// kIQ3XXSWideLevels: 8 + i for the i-th magnitude, 7 - i = (8 + i) ^ 15 for
// its negative. Dequantizing gives the same floats (all products exact).
struct Iq3xxsTables {
  uint32_t levels[256];  // each grid entry's 4 positive levels as 4 bytes
};
const Iq3xxsTables& iq3xxs_tables() {
  static const Iq3xxsTables t = [] {
    Iq3xxsTables x{};
    for (int i = 0; i < 256; ++i) {
      for (int k = 0; k < 4; ++k) {
        const int magnitude = detail::grid_byte(detail::kIQ3XXSGrid[i], k);
        int level = 0;
        while (level < 8 && -kIQ3XXSWideLevels[7 - level] != magnitude) ++level;
        x.levels[i] |= static_cast<uint32_t>(8 + level) << (8 * k);
      }
    }
    return x;
  }();
  return t;
}
BlockIQ3_XXS_WIDE iq3_xxs_to_wide(const BlockIQ3_XXS& in) {
  static_assert(std::endian::native == std::endian::little, "value j of a group is byte j of its words");
  const Iq3xxsTables& t = iq3xxs_tables();
  const Iq3sTables& signs = iq3s_tables();  // the flips of a sign byte
  BlockIQ3_XXS_WIDE out{};
  out.d = in.d;
  for (int g = 0; g < kQK_K / 32; ++g) {
    uint32_t aux;
    std::memcpy(&aux, in.qs + 64 + 4 * g, sizeof(aux));
    const int ls = 33 + 2 * static_cast<int>(aux >> 28);
    out.scales_l[g / 2] |= static_cast<uint8_t>((ls & 0xf) << (4 * (g % 2)));
    out.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * g));
    uint64_t words[4];  // values 8w .. 8w + 7: grid entries 2w, 2w + 1 of the group
    for (int w = 0; w < 4; ++w) {
      const uint64_t lo = t.levels[in.qs[8 * g + 2 * w]];
      const uint64_t hi = t.levels[in.qs[8 * g + 2 * w + 1]];
      words[w] = (lo | hi << 32) ^ signs.flip[detail::even_parity_signs((aux >> (7 * w)) & 127)];
    }
    const uint64_t packed[2] = {words[0] | words[2] << 4, words[1] | words[3] << 4};
    std::memcpy(out.qs + 16 * g, packed, sizeof(packed));
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
  // reads every format as stored. NEON has IQ4_XS's kernel (so the widened
  // IQ3 formats') and none for either ternary format.
  const bool x86 = isa != Isa::kScalar && isa != Isa::kNeon;  // every x86 SIMD level
  if (x86 && t == DType::TQ1_0) return DType::TQ2_0;
  const bool iq4_xs_kernels = x86 || isa == Isa::kNeon;
  if (iq4_xs_kernels && t == DType::IQ3_S) return DType::IQ3_S_WIDE;
  if (iq4_xs_kernels && t == DType::IQ3_XXS) return DType::IQ3_XXS_WIDE;
  return std::nullopt;
}

void widen_rows(DType from, const std::byte* src, DType to, std::byte* dst, int64_t n_rows, int64_t k) {
  const int64_t blocks = n_rows * (k / kQK_K);
  if (from == DType::TQ1_0 && to == DType::TQ2_0) return widen_blocks<BlockTQ1_0, BlockTQ2_0, tq1_0_to_tq2_0>(src, dst, blocks);
  if (from == DType::IQ3_S && to == DType::IQ3_S_WIDE) {
    return widen_blocks<BlockIQ3_S, BlockIQ3_S_WIDE, iq3_s_to_wide>(src, dst, blocks);
  }
  if (from == DType::IQ3_XXS && to == DType::IQ3_XXS_WIDE) {
    return widen_blocks<BlockIQ3_XXS, BlockIQ3_XXS_WIDE, iq3_xxs_to_wide>(src, dst, blocks);
  }
  throw Error("widen_rows: no widening of " + std::string(dtype_name(from)) + " into " + std::string(dtype_name(to)));
}

}  // namespace tokamak::kernels
