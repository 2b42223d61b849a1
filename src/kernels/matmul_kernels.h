// Internal to the matmul (matmul.cpp and the per-ISA matmul_*.cpp files):
// the kernel behind each (weight type, instruction set) pair.
//
// A kernel computes a rectangle of the product: rows [0, n_rows) of the weight
// against activation rows [0, n_tokens), already converted to its ActFormat.
// Batch invariance: every variant computes each output element with the same
// sequence of float operations whatever n_rows and n_tokens are (its tiles
// only interleave independent elements), so an element never depends on the
// rest of the batch or on how rows are split between threads. Integer parts
// (the dot products of 8-bit quants) are exact in any order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/isa.h"
#include "kernels/matmul_act.h"

namespace tokamak::kernels {

// Builds, from one token's activations in a kernel's format (at act), the
// operands its one-token path reads (at out: 64-byte aligned, at most
// decode_operand_bytes(k) bytes). Matmul::run builds them once per call of a
// one-token product, for all threads and row chunks, and hands them over in
// GemmArgs::decode_operands.
using DecodeOperandsFn = void (*)(const std::byte* act, int64_t k, std::byte* out);
inline constexpr size_t decode_operand_bytes(int64_t k) { return 2 * static_cast<size_t>((k + 511) / 512 * 512); }

struct GemmArgs {
  DType type = DType::F32;         // of the weight
  const std::byte* w = nullptr;    // weight row 0 (packed GGML blocks, any alignment)
  size_t w_stride = 0;             // bytes from one weight row to the next
  int64_t n_rows = 0;
  int64_t k = 0;                   // elements per row
  const std::byte* act = nullptr;  // activation row 0 in the kernel's format
  size_t act_stride = 0;           // bytes from one activation row to the next
  int64_t n_tokens = 0;
  float* y = nullptr;              // y[t * ldy + r]
  int64_t ldy = 0;
  bool continue_sums = false;      // gemm_f32_reference only: each sum starts from y's value
  const std::byte* decode_operands = nullptr;  // one token, a kernel with decode_operands: what it built
};

using GemmFn = void (*)(const GemmArgs& args);

// Whether a K-quant decoder (a Dec struct of the per-ISA kernels) declares
// kUnitScales: a format without sub-block scales (TQ2_0), whose quants meet
// the activations without a scale multiply.
template <class Dec>
constexpr bool unit_scales() {
  if constexpr (requires { Dec::kUnitScales; }) {
    return Dec::kUnitScales;
  } else {
    return false;
  }
}

struct GemmKernel {
  GemmFn fn = nullptr;  // nullptr: this variant has no kernel for the type
  ActFormat act = ActFormat::kF32;
  // fn reads RowLayout::kInterleaved8 weights: GemmArgs::w is the start of a
  // group, w_stride still the plain row size, and rows after the tensor's last
  // full group are plain.
  bool interleaved = false;
  // Set: one-token calls get GemmArgs::decode_operands built by it. For one
  // ActFormat every kernel's builder builds the same layout.
  DecodeOperandsFn decode_operands = nullptr;
};

// Per-variant tables. The scalar one covers every dequantizable type (Q8_K,
// an activation format no model stores weights in, goes through dot_row_ref
// on f32 activations); the others may leave a type out, and gemm_kernel then
// falls back to the next lower variant.
GemmKernel gemm_kernel_scalar(DType t);
GemmKernel gemm_kernel_avx2(DType t);
GemmKernel gemm_kernel_avx512(DType t);
GemmKernel gemm_kernel_avx512_vnni(DType t);
GemmKernel gemm_kernel_avx512_bf16(DType t);
GemmKernel gemm_kernel_neon(DType t);
// Kernels over interleaved weights (kernels/interleave.h). The AVX-512 VNNI
// kernels hand the rows after the last pair of groups to the
// AVX2 ones; plain AVX-512 uses the AVX2 table for the quantized types
// (gemm_kernel_interleaved).
GemmKernel gemm_kernel_avx2_interleaved(DType t);
GemmKernel gemm_kernel_avx_vnni_interleaved(DType t);  // the AVX2 ones, VPDPBUSD for the 32-element formats
GemmKernel gemm_kernel_avx512_vnni_interleaved(DType t);
// Its K-quant part (matmul_avx512_vnni_kquants.cpp), which it falls through to.
GemmKernel gemm_kernel_avx512_vnni_kquants(DType t);

// Covers rows x tokens of `a` with R x T register tiles, then the edges with
// R x 1, 1 x T and 1 x 1 tiles: tile.template run<R, T>(row, token).
template <int R, int T, class Tile>
inline void for_each_tile(const GemmArgs& a, const Tile& tile) {
  int64_t r = 0;
  for (; r + R <= a.n_rows; r += R) {
    int64_t t = 0;
    for (; t + T <= a.n_tokens; t += T) tile.template run<R, T>(r, t);
    for (; t < a.n_tokens; ++t) tile.template run<R, 1>(r, t);
  }
  for (; r < a.n_rows; ++r) {
    int64_t t = 0;
    for (; t + T <= a.n_tokens; t += T) tile.template run<1, T>(r, t);
    for (; t < a.n_tokens; ++t) tile.template run<1, 1>(r, t);
  }
}

// Any dequantizable type against kF32 activations: each element is one
// dot_row_ref (scalar, f32 accumulation in element order). The all-f32 path.
void gemm_f32_reference(const GemmArgs& args);

// The kernel of `isa` for weight type t, or of the most capable lower variant
// that has one. fn is nullptr only for types nothing can dequantize.
GemmKernel gemm_kernel(DType t, Isa isa);
// The kernel of `isa` that reads t interleaved; fn is nullptr where there is
// none (the driver then hands a plain kernel de-interleaved copies).
GemmKernel gemm_kernel_interleaved(DType t, Isa isa);

}  // namespace tokamak::kernels
