// Scalar reference (de)quantization for GGML block formats, bit-exact with
// ggml's to_float. These are the references the SIMD kernels are tested against.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tokamak::kernels {

// True when dequantize_row supports the type.
bool can_dequantize(DType t);

// dst[0..n) = the n elements stored at src in type t. n must be a multiple of
// the type's block size. Throws tokamak::Error for an unsupported type.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// Dot product of one stored row (type t, n elements) with n floats, accumulated
// in f32 in a fixed order (block by block, element by element) so that the
// result never depends on the caller.
float dot_row_ref(DType t, const void* row, const float* x, int64_t n);

}  // namespace tokamak::kernels
