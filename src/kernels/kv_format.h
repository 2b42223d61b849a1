// Element formats of the KV cache, one "head row" at a time: one token's K (or
// V) for one KV head, head_dim values. Chosen separately for K and for V.
//
//   F32   4d bytes
//   F16   2d bytes (IEEE binary16)
//   BF16  2d bytes
//   Q8    d + 4 bytes: d int8 values, then one f32 scale for the row
//         (x = q * scale, scale = max|x| / 127)
//   Q4    d/2 + 2 * (d/g) bytes, groups of g = min(32, d) values: first the
//         nibbles of every group, then one f16 scale per group. In group k,
//         byte i holds value i (low nibble) and value i + g/2 (high nibble);
//         x = (nibble - 8) * scale, scale = (the value of largest magnitude) / -8.
//
// Rows are byte-aligned only: readers load through memcpy or unaligned SIMD loads.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tokamak::kernels {

enum class KvType : uint8_t { F32, F16, BF16, Q8, Q4 };

std::string_view kv_type_name(KvType t);  // "f32", "f16", "bf16", "q8", "q4"
std::optional<KvType> kv_type_from_name(std::string_view name);
inline bool kv_type_is_quantized(KvType t) { return t == KvType::Q8 || t == KvType::Q4; }

// Largest head_dim the attention kernels take (their tiles live on the stack).
constexpr int kMaxHeadDim = 256;

// Elements per Q4 scale group for a head of `head_dim` values.
inline int kv_q4_group(int head_dim) { return head_dim < 32 ? head_dim : 32; }

// Throws tokamak::Error naming the type and head_dim when the type cannot
// store heads of that size (head_dim outside [1, kMaxHeadDim]; Q4 needs an even
// head_dim that is a multiple of 32 when above 32).
void check_kv_head_dim(KvType t, int head_dim);

// Bytes of one head row (see the table above). head_dim must pass check_kv_head_dim.
int64_t kv_head_row_bytes(KvType t, int head_dim);

// dst (kv_head_row_bytes bytes) = src[0..head_dim) stored as t. Scales are
// rounded to their storage precision before the values are divided by them.
void quantize_kv_row(KvType t, const float* src, int head_dim, void* dst);

// dst[0..head_dim) = the row stored at src. Scalar reference for the SIMD
// loaders inside the attention kernels (they must agree bit for bit).
void dequantize_kv_row(KvType t, const void* src, int head_dim, float* dst);

}  // namespace tokamak::kernels
