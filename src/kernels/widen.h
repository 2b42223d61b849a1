// Weight formats widened at load into one that holds the same values exactly
// and decodes with fewer instructions, at a cost in memory: the kernels of
// the compact formats below are compute bound, so decode (which streams every
// weight once per token) runs well under the memory's speed on them, and a
// few more bytes per weight cost less time than the instructions they save.
//
//   TQ1_0 -> TQ2_0 (1.69 -> 2.06 bits a weight, +22%): five base-3 digits
//     per byte take ~12 instructions per 32 values to read out (AVX2 has no
//     byte multiply), TQ2_0's 2-bit lines 3; the same trits and d.
//   IQ3_S -> IQ3_S_WIDE (3.44 -> 4.25 bits, +24%): a codebook of 512 entries
//     of 4 magnitudes, looked up one entry at a time (~30 instructions per 32
//     values), and sign bits, against IQ4_XS's layout (a 16-entry table in a
//     register: 2 instructions) with IQ3_S's 16 signed levels -15, -13, .., 15.
//   IQ3_XXS -> IQ3_XXS_WIDE (3.06 -> 4.25 bits, +39%): the same for IQ3_XXS's
//     codebook of 256 entries, its levels +-4, 12, .., 52, 62, and d / 4.
//
// Model::load applies widened_type/widen_rows to the matmul weights (the
// layer matrices and an untied LM head) for the variants with a fast kernel
// for the wider format (the x86 ones; NEON for IQ3_S), when the new bytes fit
// in half the memory available (model.cpp), and gives back the compact bytes
// of its own copy of the file. `tokamak bench` reports the bytes a step then
// reads and names the type "iq3_s (as iq3_s_wide)".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/dtype.h"
#include "kernels/isa.h"

namespace tokamak::kernels {

// The format weights of type t are widened into when the matmul kernels of
// `isa` run, or nullopt to keep t.
std::optional<DType> widened_type(DType t, Isa isa);

// Rows [n_rows, k] of `from` at src -> the same rows in `to` at dst
// (row_bytes(to, k) each), value for value: dequantizing either gives the
// same floats. `to` must be widened_type(from, some isa).
void widen_rows(DType from, const std::byte* src, DType to, std::byte* dst, int64_t n_rows, int64_t k);

}  // namespace tokamak::kernels
