#include "kernels/quants.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "core/half.h"

namespace tokamak::kernels {
namespace {

constexpr int kQK = 32;

// ggml's block layouts for the 32-element formats.
struct BlockQ8_0 {
  uint16_t d;         // fp16 scale
  int8_t qs[kQK];     // x = d * q
};
struct BlockQ4_0 {
  uint16_t d;             // fp16 scale
  uint8_t qs[kQK / 2];    // low nibbles: elements 0..15, high nibbles: 16..31; x = d * (q - 8)
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18);

void dequant_q8_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < kQK; ++j) dst[b * kQK + j] = static_cast<float>(blocks[b].qs[j]) * d;
  }
}

void dequant_q4_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4_0*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[b * kQK + j] = static_cast<float>((blocks[b].qs[j] & 0x0f) - 8) * d;
      dst[b * kQK + j + kQK / 2] = static_cast<float>((blocks[b].qs[j] >> 4) - 8) * d;
    }
  }
}

}  // namespace

bool can_dequantize(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
      return true;
    default:
      return false;
  }
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
      return;
    }
    case DType::BF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
      return;
    }
    case DType::Q8_0:
      dequant_q8_0(src, dst, n);
      return;
    case DType::Q4_0:
      dequant_q4_0(src, dst, n);
      return;
    default:
      throw Error("dequantize: unsupported tensor type " + std::string(dtype_name(t)));
  }
}

float dot_row_ref(DType t, const void* row, const float* x, int64_t n) {
  if (t == DType::F32) {
    const auto* w = static_cast<const float*>(row);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += w[i] * x[i];
    return sum;
  }
  const DTypeTraits& tr = dtype_traits(t);
  // Dequantize a chunk of whole blocks at a time into a stack buffer.
  constexpr int64_t kChunk = 256;
  const int64_t step = tr.block_size > kChunk ? tr.block_size : kChunk - kChunk % tr.block_size;
  float buf[kChunk];
  float sum = 0.0f;
  const auto* bytes = static_cast<const uint8_t*>(row);
  for (int64_t i = 0; i < n; i += step) {
    const int64_t len = n - i < step ? n - i : step;
    dequantize_row(t, bytes + row_bytes(t, i), buf, len);
    for (int64_t j = 0; j < len; ++j) sum += buf[j] * x[i + j];
  }
  return sum;
}

}  // namespace tokamak::kernels
