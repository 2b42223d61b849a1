#include "kernels/interleave.h"

#include <array>
#include <cstring>
#include <string>
#include <utility>  // std::pair
#include <vector>

#include "core/error.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quants_impl.h"

namespace tokamak::kernels {
namespace {

// A format with another's byte layout (its values read with other levels)
// interleaves as that one does.
DType layout_of(DType t) { return t == DType::IQ3_S_WIDE || t == DType::IQ3_XXS_WIDE ? DType::IQ4_XS : t; }

// Where a 32-element format's fields sit in a plain block and in a group's
// block image (kernels/interleave.h): an fp16 min (Q4_1, Q5_1), 4 bytes of
// fifth bits (Q5_0, Q5_1), qs bytes. Offsets of 0 mean "no such field".
struct Block32Fields {
  size_t plain_m, plain_qh, plain_qs, qs_bytes;
  size_t inter_m, inter_qh, inter_qs;
};
Block32Fields block32_fields(DType t) {
  switch (t) {
    case DType::Q4_1: return {2, 0, 4, 16, 16, 0, 32};
    case DType::Q5_0: return {0, 2, 6, 16, 0, 16, 48};
    case DType::Q5_1: return {2, 4, 8, 16, 16, 32, 64};
    case DType::Q8_0: return {0, 0, 2, 32, 0, 0, 16};
    default: return {0, 0, 2, 16, 0, 0, 16};  // Q4_0, IQ4_NL
  }
}

// The pieces of one block of a group that are plain copies (32-element
// formats but their fifth bits; Q2_K; Q3_K and IQ4_XS but their scales;
// Q6_K): piece(plain offset, interleaved offset, bytes), plain offsets from
// the block's start in row 0 (rows row_bytes apart), interleaved ones from
// the start of the block's interleaved image.
template <class Piece>
void for_each_piece(DType t, size_t row_bytes, const Piece& piece) {
  for (size_t r = 0; r < kInterleaveRows; ++r) {
    const size_t row = r * row_bytes;
    if (t == DType::Q2_K) {
      piece(row + 80, 2 * r, size_t{2});
      piece(row + 82, 16 + 2 * r, size_t{2});
      for (size_t s = 0; s < 16; ++s) piece(row + s, 32 + 8 * s + r, size_t{1});
      for (size_t m = 0; m < 16; ++m) piece(row + 16 + 4 * m, 160 + 32 * m + 4 * r, size_t{4});
      continue;
    }
    if (t == DType::Q3_K) {  // the scales' bits: scales_to_image
      piece(row + 108, 2 * r, size_t{2});
      for (size_t m = 0; m < 16; ++m) piece(row + 32 + 4 * m, 112 + 32 * m + 4 * r, size_t{4});
      for (size_t n = 0; n < 8; ++n) piece(row + 4 * n, 624 + 32 * n + 4 * r, size_t{4});
      continue;
    }
    if (t == DType::IQ4_XS) {  // the scales' bits: scales_to_image
      piece(row, 2 * r, size_t{2});
      for (size_t c = 0; c < 32; ++c) piece(row + 8 + 4 * c, 64 + 32 * c + 4 * r, size_t{4});
      continue;
    }
    if (t == DType::Q6_K) {
      piece(row + 208, 2 * r, size_t{2});
      for (size_t s = 0; s < 16; ++s) piece(row + 192 + s, 16 + 8 * s + r, size_t{1});
      for (size_t m = 0; m < 8; ++m) {
        for (size_t g = 0; g < 4; ++g) piece(row + 32 * g + 4 * m, 144 + 256 * g + 32 * m + 4 * r, size_t{4});
        for (size_t h = 0; h < 2; ++h) piece(row + 128 + 32 * h + 4 * m, 1168 + 256 * h + 32 * m + 4 * r, size_t{4});
      }
      continue;
    }
    const Block32Fields f = block32_fields(t);
    piece(row, 2 * r, size_t{2});
    if (f.plain_m != 0) piece(row + f.plain_m, f.inter_m + 2 * r, size_t{2});
    for (size_t c = 0; c < f.qs_bytes / 4; ++c) piece(row + f.plain_qs + 4 * c, f.inter_qs + 32 * c + 4 * r, size_t{4});
  }
}

// Q5_0 / Q5_1 fifth bits: bit e of a row's qh (element e) <-> bit 2c + h of
// byte j of the row's 4 bytes in the image's fifth-bit line, e = 16h + 4c + j
// (line c's low nibbles are elements 4c + j, its high ones 16 + 4c + j).
constexpr int line_bit_of_element(int e) { return 8 * (e % 4) + 2 * (e % 16 / 4) + e / 16; }
constexpr int element_of_line_bit(int p) { return 16 * (p % 8 % 2) + 4 * (p % 8 / 2) + p / 8; }

// A fixed permutation of 32 bits as 4 tables of 256: table[b][v] holds the
// bits of byte b = v where they go (a bit loop per row made loading a Q5_0
// TinyLlama ~1 s slower).
using BitTables = std::array<std::array<uint32_t, 256>, 4>;
template <class Destination>
constexpr BitTables bit_tables(Destination destination) {
  BitTables t{};
  for (int b = 0; b < 4; ++b)
    for (int v = 0; v < 256; ++v)
      for (int i = 0; i < 8; ++i)
        if (v >> i & 1) t[static_cast<size_t>(b)][static_cast<size_t>(v)] |= 1u << destination(8 * b + i);
  return t;
}
constexpr BitTables kQhToLine = bit_tables(line_bit_of_element);
constexpr BitTables kLineToQh = bit_tables(element_of_line_bit);

uint32_t permute_bits(uint32_t v, const BitTables& t) {
  return t[0][v & 0xFF] | t[1][v >> 8 & 0xFF] | t[2][v >> 16 & 0xFF] | t[3][v >> 24];
}

// Q3_K's 16 and IQ4_XS's 8 six-bit scales (unsigned, 0..63) of 8 rows in
// the image (interleave.h): n scales, low nibbles from byte lo, scale s of row
// r at byte lo + 8(s % (n / 2)) + r (bits 0-3 for s < n / 2, else 4-7), high
// 2 bits from byte hi, at bits 2(s / (n / 4)) of byte hi + 8(s % (n / 4)) + r.
struct SixBitScales {
  int n;
  size_t lo, hi;
};
SixBitScales six_bit_scales(DType t) { return t == DType::Q3_K ? SixBitScales{16, 16, 80} : SixBitScales{8, 16, 48}; }

// Scale s of a plain block (row) and its inverse; set_plain_scale ORs into
// bytes the caller cleared (plain_scale_bytes).
int plain_scale(DType t, const uint8_t* row, int s) {
  if (t == DType::Q3_K) return detail::q3k_scale(row + 96, s) + 32;
  return (row[4 + s / 2] >> (4 * (s % 2)) & 0xF) | (row[2 + s / 4] >> (2 * (s % 4)) & 3) << 4;  // IQ4_XS
}
void set_plain_scale(DType t, uint8_t* row, int s, int v) {
  if (t == DType::Q3_K) {  // detail::q3k_scale's packing
    row[96 + s % 8] |= static_cast<uint8_t>((v & 0xF) << (s < 8 ? 0 : 4));
    row[104 + s % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (s / 4)));
    return;
  }
  row[4 + s / 2] |= static_cast<uint8_t>((v & 0xF) << (4 * (s % 2)));  // IQ4_XS: scales_l, then scales_h (little endian)
  row[2 + s / 4] |= static_cast<uint8_t>((v >> 4) << (2 * (s % 4)));
}
// The plain bytes the scales occupy: {offset, count}.
std::pair<size_t, size_t> plain_scale_bytes(DType t) { return t == DType::Q3_K ? std::pair<size_t, size_t>{96, 12} : std::pair<size_t, size_t>{2, 6}; }

void scales_to_image(DType t, const std::byte* plain, size_t row_bytes, std::byte* inter) {
  const SixBitScales f = six_bit_scales(t);
  auto* img = reinterpret_cast<uint8_t*>(inter);
  std::memset(img + f.lo, 0, static_cast<size_t>(f.n) * 6);  // 8 rows x n x 6 bits: the lo and hi bytes
  for (size_t r = 0; r < kInterleaveRows; ++r) {
    const auto* row = reinterpret_cast<const uint8_t*>(plain + r * row_bytes);
    for (int s = 0; s < f.n; ++s) {
      const int v = plain_scale(t, row, s), half = f.n / 2, quarter = f.n / 4;
      img[f.lo + static_cast<size_t>(8 * (s % half)) + r] |= static_cast<uint8_t>((v & 0xF) << (s < half ? 0 : 4));
      img[f.hi + static_cast<size_t>(8 * (s % quarter)) + r] |= static_cast<uint8_t>((v >> 4) << (2 * (s / quarter)));
    }
  }
}
void scales_from_image(DType t, const std::byte* inter, std::byte* plain, size_t row_bytes) {
  const SixBitScales f = six_bit_scales(t);
  const auto* img = reinterpret_cast<const uint8_t*>(inter);
  const auto [offset, count] = plain_scale_bytes(t);
  for (size_t r = 0; r < kInterleaveRows; ++r) {
    auto* row = reinterpret_cast<uint8_t*>(plain + r * row_bytes);
    std::memset(row + offset, 0, count);
    for (int s = 0; s < f.n; ++s) {
      const int half = f.n / 2, quarter = f.n / 4;
      const int v = (img[f.lo + static_cast<size_t>(8 * (s % half)) + r] >> (s < half ? 0 : 4) & 0xF) |
                    (img[f.hi + static_cast<size_t>(8 * (s % quarter)) + r] >> (2 * (s / quarter)) & 3) << 4;
      set_plain_scale(t, row, s, v);
    }
  }
}

// One block of 8 plain rows (row_bytes apart) <-> its interleaved image.
void interleave_block(DType t, const std::byte* plain, size_t row_bytes, std::byte* inter) {
  for_each_piece(t, row_bytes, [&](size_t p, size_t i, size_t n) { std::memcpy(inter + i, plain + p, n); });
  if (t == DType::Q3_K || t == DType::IQ4_XS) scales_to_image(t, plain, row_bytes, inter);
  const Block32Fields f = block32_fields(t);
  if (dtype_traits(t).block_size != 32 || f.plain_qh == 0) return;
  for (size_t r = 0; r < kInterleaveRows; ++r) {
    uint32_t qh;
    std::memcpy(&qh, plain + r * row_bytes + f.plain_qh, 4);
    const uint32_t line = permute_bits(qh, kQhToLine);
    std::memcpy(inter + f.inter_qh + 4 * r, &line, 4);
  }
}
void deinterleave_block(DType t, const std::byte* inter, std::byte* plain, size_t row_bytes) {
  for_each_piece(t, row_bytes, [&](size_t p, size_t i, size_t n) { std::memcpy(plain + p, inter + i, n); });
  if (t == DType::Q3_K || t == DType::IQ4_XS) scales_from_image(t, inter, plain, row_bytes);
  const Block32Fields f = block32_fields(t);
  if (dtype_traits(t).block_size != 32 || f.plain_qh == 0) return;
  for (size_t r = 0; r < kInterleaveRows; ++r) {
    uint32_t line;
    std::memcpy(&line, inter + f.inter_qh + 4 * r, 4);
    const uint32_t qh = permute_bits(line, kLineToQh);
    std::memcpy(plain + r * row_bytes + f.plain_qh, &qh, 4);
  }
}

// Q4_K and Q5_K share the image's first 1,152 bytes (d, dmin, scales and
// mins, qs lines); Q5_K's qh lines follow. Plain rows: qs at 16 (Q4_K) or,
// after 32 bytes of qh, at 48 (Q5_K).
constexpr size_t kQ4KBytes = 144, kQ5KBytes = 176;
size_t k4_block_bytes(DType t) { return t == DType::Q5_K ? kQ5KBytes : kQ4KBytes; }

// One Q4_K or Q5_K super-block of 8 plain rows (row_bytes apart) <-> its interleaved image.
void interleave_k4(DType t, const std::byte* plain, size_t row_bytes, std::byte* inter) {
  const size_t qs = t == DType::Q5_K ? 48 : 16;
  uint8_t sc[8][8], mn[8][8];  // [sub-block][row]
  std::memset(inter + 32, 0, 96);
  auto* lo = reinterpret_cast<uint8_t*>(inter + 32);
  auto* hi = reinterpret_cast<uint8_t*>(inter + 96);
  for (size_t r = 0; r < 8; ++r) {
    const std::byte* b = plain + r * row_bytes;
    std::memcpy(inter + 2 * r, b, 2);
    std::memcpy(inter + 16 + 2 * r, b + 2, 2);
    for (int s = 0; s < 8; ++s) detail::scale_min_k4(s, reinterpret_cast<const uint8_t*>(b + 4), &sc[s][r], &mn[s][r]);
    for (size_t j = 0; j < 4; ++j) {
      for (size_t c = 0; c < 8; ++c) std::memcpy(inter + 128 + 256 * j + 32 * c + 4 * r, b + qs + 32 * j + 4 * c, 4);
    }
    if (t == DType::Q5_K) {
      for (size_t m = 0; m < 8; ++m) std::memcpy(inter + 1152 + 32 * m + 4 * r, b + 16 + 4 * m, 4);
    }
  }
  for (int i = 0; i < 64; ++i) {
    const uint8_t s = sc[i / 8][i % 8], m = mn[i / 8][i % 8];
    lo[i] = static_cast<uint8_t>((s & 0xF) | (m & 0xF) << 4);
    hi[i % 32] |= static_cast<uint8_t>(((s >> 4) | (m >> 4) << 2) << (i < 32 ? 0 : 4));
  }
}

void deinterleave_k4(DType t, const std::byte* inter, std::byte* plain, size_t row_bytes) {
  const size_t qs = t == DType::Q5_K ? 48 : 16;
  const auto* lo = reinterpret_cast<const uint8_t*>(inter + 32);
  const auto* hi = reinterpret_cast<const uint8_t*>(inter + 96);
  for (size_t r = 0; r < 8; ++r) {
    std::byte* b = plain + r * row_bytes;
    std::memcpy(b, inter + 2 * r, 2);
    std::memcpy(b + 2, inter + 16 + 2 * r, 2);
    uint8_t sc[8], mn[8];
    for (size_t s = 0; s < 8; ++s) {
      const size_t i = 8 * s + r;
      const uint8_t h = static_cast<uint8_t>(hi[i % 32] >> (i < 32 ? 0 : 4));
      sc[s] = static_cast<uint8_t>((lo[i] & 0xF) | (h & 3) << 4);
      mn[s] = static_cast<uint8_t>((lo[i] >> 4) | (h >> 2 & 3) << 4);
    }
    detail::pack_scale_min_k4(sc, mn, reinterpret_cast<uint8_t*>(b + 4));
    for (size_t j = 0; j < 4; ++j) {
      for (size_t c = 0; c < 8; ++c) std::memcpy(b + qs + 32 * j + 4 * c, inter + 128 + 256 * j + 32 * c + 4 * r, 4);
    }
    if (t == DType::Q5_K) {
      for (size_t m = 0; m < 8; ++m) std::memcpy(b + 16 + 4 * m, inter + 1152 + 32 * m + 4 * r, 4);
    }
  }
}

// F16 and BF16: element i of the group's 8 rows is 16 bytes at 16i (row order).
bool is_16bit_float(DType t) { return t == DType::F16 || t == DType::BF16; }

// 8 elements of the 8 rows at a time through a small tile, reading 16 bytes
// of each row at once, not 2 bytes per row and element (with a copy of each
// tensor, that made loading a 1.1B-parameter F16 model take 6-13 s instead
// of ~1.7).
void interleave_16bit(const std::byte* src, std::byte* dst, size_t row_bytes, int64_t k) {
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    uint16_t in[8][8], out[8][8];  // [row][element], [element][row]
    for (size_t r = 0; r < kInterleaveRows; ++r) std::memcpy(in[r], src + r * row_bytes + 2 * i, sizeof(in[r]));
    for (size_t e = 0; e < 8; ++e)
      for (size_t r = 0; r < 8; ++r) out[e][r] = in[r][e];
    std::memcpy(dst + 16 * i, out, sizeof(out));
  }
  for (; i < k; ++i) {
    for (size_t r = 0; r < kInterleaveRows; ++r) std::memcpy(dst + 16 * i + 2 * r, src + r * row_bytes + 2 * i, 2);
  }
}
void deinterleave_16bit(const std::byte* src, std::byte* dst, size_t row_bytes, int64_t k) {
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    uint16_t in[8][8], out[8][8];  // [element][row], [row][element]
    std::memcpy(in, src + 16 * i, sizeof(in));
    for (size_t r = 0; r < 8; ++r)
      for (size_t e = 0; e < 8; ++e) out[r][e] = in[e][r];
    for (size_t r = 0; r < kInterleaveRows; ++r) std::memcpy(dst + r * row_bytes + 2 * i, out[r], sizeof(out[r]));
  }
  for (; i < k; ++i) {
    for (size_t r = 0; r < kInterleaveRows; ++r) std::memcpy(dst + r * row_bytes + 2 * i, src + 16 * i + 2 * r, 2);
  }
}

}  // namespace

bool can_interleave(DType t) {
  switch (layout_of(t)) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::IQ4_NL:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS: return true;
    default: return is_16bit_float(t);
  }
}

bool prefers_interleaved(DType t, Isa isa) { return can_interleave(t) && gemm_kernel_interleaved(t, isa).fn != nullptr; }

void interleave_rows(DType t, const std::byte* src, std::byte* dst, int64_t n_rows, int64_t k) {
  t = layout_of(t);
  const size_t rb = row_bytes(t, k);
  const int64_t groups = n_rows / kInterleaveRows;
  const size_t done = static_cast<size_t>(groups) * kInterleaveRows * rb;
  std::memcpy(dst + done, src + done, static_cast<size_t>(n_rows) * rb - done);
  if (is_16bit_float(t)) {
    for (int64_t g = 0; g < groups; ++g) {
      const size_t base = static_cast<size_t>(g) * kInterleaveRows * rb;
      interleave_16bit(src + base, dst + base, rb, k);
    }
    return;
  }
  if (t == DType::Q4_K || t == DType::Q5_K) {
    const size_t bb = k4_block_bytes(t);
    for (int64_t g = 0; g < groups; ++g) {
      const size_t base = static_cast<size_t>(g) * kInterleaveRows * rb;
      for (int64_t b = 0; b < k / 256; ++b) {
        interleave_k4(t, src + base + static_cast<size_t>(b) * bb, rb, dst + base + static_cast<size_t>(b) * 8 * bb);
      }
    }
    return;
  }
  const size_t block_bytes = dtype_traits(t).block_bytes;
  const int64_t nb = k / dtype_traits(t).block_size;
  for (int64_t g = 0; g < groups; ++g) {
    const size_t base = static_cast<size_t>(g) * kInterleaveRows * rb;
    for (int64_t b = 0; b < nb; ++b) {
      interleave_block(t, src + base + static_cast<size_t>(b) * block_bytes, rb,
                       dst + base + static_cast<size_t>(b) * kInterleaveRows * block_bytes);
    }
  }
}

void interleave_rows_in_place(DType t, std::byte* rows, int64_t n_rows, int64_t k) {
  t = layout_of(t);
  const size_t group_bytes = kInterleaveRows * row_bytes(t, k);
  std::vector<std::byte> plain(group_bytes);
  for (int64_t g = 0; g < n_rows / kInterleaveRows; ++g) {
    std::byte* group = rows + static_cast<size_t>(g) * group_bytes;
    std::memcpy(plain.data(), group, group_bytes);
    interleave_rows(t, plain.data(), group, kInterleaveRows, k);
  }
}

void deinterleave_group(DType t, const std::byte* group, std::byte* dst, int64_t k) {
  t = layout_of(t);
  const size_t rb = row_bytes(t, k);
  if (is_16bit_float(t)) {
    deinterleave_16bit(group, dst, rb, k);
    return;
  }
  if (t == DType::Q4_K || t == DType::Q5_K) {
    const size_t bb = k4_block_bytes(t);
    for (int64_t b = 0; b < k / 256; ++b) {
      deinterleave_k4(t, group + static_cast<size_t>(b) * 8 * bb, dst + static_cast<size_t>(b) * bb, rb);
    }
    return;
  }
  const size_t block_bytes = dtype_traits(t).block_bytes;
  for (int64_t b = 0; b < k / dtype_traits(t).block_size; ++b) {
    deinterleave_block(t, group + static_cast<size_t>(b) * kInterleaveRows * block_bytes, dst + static_cast<size_t>(b) * block_bytes, rb);
  }
}

}  // namespace tokamak::kernels
