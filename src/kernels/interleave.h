// Weights repacked at load for the matmul kernels that stream them fastest
// (RowLayout::kInterleaved8). A decode GEMV that takes one row per register
// ends every 32-element block with a scalar scale, a broadcast and a
// horizontal sum per row; with 8 rows side by side, one 256-bit register
// holds 4 quants of each of 8 rows, a block's 8 row sums come out in the 8
// lanes of one register and its 8 scales load as one vector, so the work per
// block and row drops by ~3x (kernels/matmul_avx2_interleaved_impl.h). With
// AVX-512 VNNI two groups fill a 512-bit register, one row per 32-bit lane
// (kernels/matmul_avx512_vnni_interleaved.cpp), on the same layout.
//
// Layout, for the 32-element formats with an fp16 scale and no other field
// (Q4_0, Q8_0, IQ4_NL): rows 8g..8g+7 form group g, which starts at byte 8g x
// row_bytes (where row 8g starts in the plain layout, so row offsets keep
// working for group-aligned rows). Block b of the group is 8 x block_bytes:
// the 8 rows' fp16 scales (row order), then the quant bytes in 32-byte lines,
// line c holding bytes 4c..4c+3 of each row's qs in row order. Q4_0 and
// IQ4_NL have 4 lines (16 qs bytes a row), Q8_0 8. The last n_rows % 8 rows
// stay plain.
//
// Q4_1, Q5_0, Q5_1: the same with their other fields between the scales and
// the 4 lines of nibbles: the 8 rows' fp16 mins at 16 (Q4_1, Q5_1), then
// (Q5_0, Q5_1) one 32-byte line of fifth bits, row r's 4 bytes at 4r with
// the fifth bit of element 16h + 4c + j at bit 2c + h of byte j: shifting
// the line by 4 - (2c + h) puts the bits that nibble line c's low (h = 0)
// or high (h = 1) nibbles lack at bit 4 of each byte. Lines start at 32
// (Q4_1), 48 (Q5_0), 64 (Q5_1).
//
// Q4_K, per 256-element super-block of a group (8 x 144 bytes): d[8] and
// dmin[8] (fp16, row order); 64 bytes with, at 8s + r, the low nibbles of
// sub-block s's scale (bits 0-3) and min (4-7) of row r; 32 bytes of their
// high 2 bits, for i = 8s + r at byte i % 32: scale in bits 0-1 and min in
// 2-3 when i < 32, in 4-5 and 6-7 otherwise; then for each pair of
// sub-blocks (2j, 2j + 1) 8 lines, line c holding bytes 4c..4c+3 of each
// row's qs[32j .. 32j + 31] (low nibbles: sub-block 2j, high: 2j + 1).
//
// Q5_K, per super-block (8 x 176 bytes): Q4_K's image (its qs lines from
// the plain qs at byte 48), then qh in 8 lines, line m at 1152 + 32m holding
// qh[4m .. 4m + 3] of each row.
//
// Q2_K, per super-block (8 x 84 bytes): d[8] and dmin[8] (fp16); the 16
// scale bytes of each row at 32 + 8s + r; qs in 16 lines, line m at 160 +
// 32m holding qs[4m .. 4m + 3] of each row.
//
// Q3_K, per super-block (8 x 110 bytes): d[8] (fp16); the 16 six-bit scales
// (unsigned, 0..63) of each row: low nibbles at 16 + 8s + r, scale s in bits
// 0-3 and s + 8 in 4-7 (s < 8), high 2 bits of scale s at bits 2(s / 4) of
// byte 80 + 8(s % 4) + r; qs in 16 lines at 112 + 32m (as Q2_K's); hmask in
// 8 lines, line n at 624 + 32n holding hmask[4n .. 4n + 3] of each row.
//
// IQ4_XS (and the widened IQ3 formats on its layout), per super-block (8 x
// 136 bytes): d[8] (fp16); the 8 six-bit scales (unsigned, 0..63) of each
// row: low nibbles at 16 + 8(s % 4) + r,
// scale s in bits 0-3 (s < 4) or 4-7, high 2 bits of scale s at bits 2(s / 2)
// of byte 48 + 8(s % 2) + r; qs in 32 lines, line c at 64 + 32c holding
// qs[4c .. 4c + 3] of each row.
//
// F16 and BF16: element i of the group's 8 rows is 16 bytes at 16i, in row
// order, so one vcvtph2ps gives the 8 rows' weights for one activation.
//
// Q6_K, per super-block (8 x 210 bytes): d[8] (fp16); the 16 int8 scales of
// each row at 16 + 8s + r; ql in 32 lines, line 8g + m at 144 + 32(8g + m)
// holding ql[32g + 4m .. +3] of each row; qh in 16 lines, line 8h + m at 1168 +
// 32(8h + m) holding qh[32h + 4m .. +3] of each row.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/isa.h"

namespace tokamak::kernels {

inline constexpr int kInterleaveRows = 8;

// Whether type t has the interleaved layout at all.
bool can_interleave(DType t);
// Whether isa has kernels that read t interleaved: then loading repacks its
// matmul weights (other variants read them too, slower, see matmul.cpp).
bool prefers_interleaved(DType t, Isa isa);

// Plain rows [n_rows, k] at src -> the interleaved layout at dst (same size;
// src and dst must not overlap).
void interleave_rows(DType t, const std::byte* src, std::byte* dst, int64_t n_rows, int64_t k);
// The same in place: a group's image takes exactly its 8 plain rows' bytes,
// so each group goes through a copy of itself (one group of scratch, in cache,
// instead of a copy of the tensor: half the memory traffic).
void interleave_rows_in_place(DType t, std::byte* rows, int64_t n_rows, int64_t k);
// One group of 8 interleaved rows -> 8 plain rows at dst (8 x row_bytes).
void deinterleave_group(DType t, const std::byte* group, std::byte* dst, int64_t k);

}  // namespace tokamak::kernels
