// Scalar reference (de)quantization for GGML block formats.
//
// dequantize_row is bit-exact with ggml's to_float for every type it accepts.
// quantize_row reproduces ggml's reference quantizers (quantize_row_*_ref, the
// ones llama-quantize uses without an importance matrix) operation for
// operation, so its bytes equal ggml's. That holds only when the compiler does
// not contract a*b+c into fused multiply-adds in these files (the default for
// ISO C++ with GCC, and for x86-64 without -mfma).
//
// These are the references that SIMD kernels are tested against; they favour
// plainness over speed. Block layouts are in kernels/quants_blocks.h.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tokamak::kernels {

// True when dequantize_row supports the type: F32, F16, BF16, Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, Q8_K, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, TQ1_0, TQ2_0.
bool can_dequantize(DType t);

// True when quantize_row supports the type: F32, F16, BF16, Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q2_K..Q6_K and Q8_K (the activation format of K-quant dot products).
bool can_quantize(DType t);

// dst[0..n) = the n elements stored at src in type t. n must be a non-negative
// multiple of the type's block size. src needs no alignment. Throws
// tokamak::Error (naming the type) for an unsupported type or a bad n.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// Stores src[0..n) (finite values) at dst in type t: row_bytes(t, n) bytes.
// Same rules for n, alignment and errors as dequantize_row. Every block is quantized on its own,
// so a row may be quantized in pieces of whole blocks with the same result.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

// Dot product of one stored row (type t, n elements) with n floats, accumulated
// in f32 in a fixed order (element by element, from 0 to n-1) so that the
// result never depends on the caller. Supports every type dequantize_row does.
float dot_row_ref(DType t, const void* row, const float* x, int64_t n, float init = 0.0f);

}  // namespace tokamak::kernels
