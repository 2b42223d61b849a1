// Weights repacked at load for the matmul kernels that stream them fastest
// (RowLayout::kInterleaved8). A decode GEMV that takes one row per register
// ends every 32-element block with a scalar scale, a broadcast and a
// horizontal sum per row; with 8 rows side by side, one 256-bit register
// holds 4 quants of each of 8 rows, a block's 8 row sums come out in the 8
// lanes of one register and its 8 scales load as one vector, so the work per
// block and row drops by ~3x (kernels/matmul_avx2_interleaved.cpp).
//
// Layout, for the 32-element formats with an fp16 scale and no other field
// (Q4_0, Q8_0): rows 8g..8g+7 form group g, which starts at byte 8g x
// row_bytes (where row 8g starts in the plain layout, so row offsets keep
// working for group-aligned rows). Block b of the group is 8 x block_bytes:
// the 8 rows' fp16 scales (row order), then the quant bytes in 32-byte lines,
// line c holding bytes 4c..4c+3 of each row's qs in row order. Q4_0 has 4
// lines (16 qs bytes a row), Q8_0 8. The last n_rows % 8 rows stay plain.
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
// One group of 8 interleaved rows -> 8 plain rows at dst (8 x row_bytes).
void deinterleave_group(DType t, const std::byte* group, std::byte* dst, int64_t k);

}  // namespace tokamak::kernels
