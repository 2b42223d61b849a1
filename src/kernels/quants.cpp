// Dispatch of dequantize_row / quantize_row to the per-type kernels
// (quants_legacy.cpp, quants_k.cpp, quants_iq.cpp), the plain float types,
// and the reference dot product.
#include "kernels/quants.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "core/half.h"
#include "kernels/quants_impl.h"

namespace tokamak::kernels {
namespace {

using DequantFn = void (*)(const void* src, float* dst, int64_t nb);
using QuantFn = void (*)(const float* src, void* dst, int64_t nb);

struct Kernels {
  DequantFn dequant = nullptr;  // nullptr: unsupported
  QuantFn quant = nullptr;
};

void dequant_f32(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); }
void quant_f32(const float* src, void* dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); }

void dequant_f16(const void* src, float* dst, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, bytes + 2 * i, sizeof(h));
    dst[i] = fp16_to_fp32(h);
  }
}
void quant_f16(const float* src, void* dst, int64_t n) {
  auto* bytes = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = fp32_to_fp16(src[i]);
    std::memcpy(bytes + 2 * i, &h, sizeof(h));
  }
}

void dequant_bf16(const void* src, float* dst, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, bytes + 2 * i, sizeof(h));
    dst[i] = bf16_to_fp32(h);
  }
}
void quant_bf16(const float* src, void* dst, int64_t n) {
  auto* bytes = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = fp32_to_bf16(src[i]);
    std::memcpy(bytes + 2 * i, &h, sizeof(h));
  }
}

// The plain types have block size 1, so "blocks" are elements for them too.
Kernels kernels_of(DType t) {
  using namespace detail;
  switch (t) {
    case DType::F32: return {dequant_f32, quant_f32};
    case DType::F16: return {dequant_f16, quant_f16};
    case DType::BF16: return {dequant_bf16, quant_bf16};
    case DType::Q4_0: return {dequant_q4_0, quant_q4_0};
    case DType::Q4_1: return {dequant_q4_1, quant_q4_1};
    case DType::Q5_0: return {dequant_q5_0, quant_q5_0};
    case DType::Q5_1: return {dequant_q5_1, quant_q5_1};
    case DType::Q8_0: return {dequant_q8_0, quant_q8_0};
    case DType::Q2_K: return {dequant_q2_k, quant_q2_k};
    case DType::Q3_K: return {dequant_q3_k, quant_q3_k};
    case DType::Q4_K: return {dequant_q4_k, quant_q4_k};
    case DType::Q5_K: return {dequant_q5_k, quant_q5_k};
    case DType::Q6_K: return {dequant_q6_k, quant_q6_k};
    case DType::Q8_K: return {dequant_q8_k, quant_q8_k};
    case DType::IQ4_NL: return {dequant_iq4_nl, nullptr};
    case DType::IQ4_XS: return {dequant_iq4_xs, nullptr};
    case DType::IQ3_S_WIDE: return {dequant_iq3_s_wide, nullptr};
    case DType::IQ3_XXS_WIDE: return {dequant_iq3_xxs_wide, nullptr};
    case DType::IQ3_XXS: return {dequant_iq3_xxs, nullptr};
    case DType::IQ3_S: return {dequant_iq3_s, nullptr};
    case DType::TQ1_0: return {dequant_tq1_0, nullptr};
    case DType::TQ2_0: return {dequant_tq2_0, nullptr};
    default: return {};
  }
}

// n as a count of whole blocks of t; throws when it is not one.
int64_t block_count(DType t, int64_t n, const char* what) {
  const int64_t bs = dtype_traits(t).block_size;
  if (n < 0 || n % bs != 0) {
    throw Error(std::string(what) + ": " + std::to_string(n) + " elements is not a multiple of the " +
                std::string(dtype_name(t)) + " block size " + std::to_string(bs));
  }
  return n / bs;
}

}  // namespace

bool can_dequantize(DType t) { return kernels_of(t).dequant != nullptr; }
bool can_quantize(DType t) { return kernels_of(t).quant != nullptr; }

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const DequantFn f = kernels_of(t).dequant;
  if (f == nullptr) throw Error("dequantize: unsupported tensor type " + std::string(dtype_name(t)));
  f(src, dst, block_count(t, n, "dequantize"));
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  const QuantFn f = kernels_of(t).quant;
  if (f == nullptr) throw Error("quantize: unsupported tensor type " + std::string(dtype_name(t)));
  f(src, dst, block_count(t, n, "quantize"));
}

float dot_row_ref(DType t, const void* row, const float* x, int64_t n, float init) {
  const DequantFn f = kernels_of(t).dequant;
  if (f == nullptr) throw Error("dot_row_ref: unsupported tensor type " + std::string(dtype_name(t)));
  const int64_t nb = block_count(t, n, "dot_row_ref");
  // Dequantize a chunk of whole blocks at a time into a stack buffer.
  const DTypeTraits& tr = dtype_traits(t);
  constexpr int64_t kChunk = 256;
  const int64_t blocks_per_chunk = tr.block_size >= kChunk ? 1 : kChunk / tr.block_size;
  float buf[kChunk];
  float sum = init;
  const auto* bytes = static_cast<const uint8_t*>(row);
  for (int64_t b = 0; b < nb; b += blocks_per_chunk) {
    const int64_t nblk = nb - b < blocks_per_chunk ? nb - b : blocks_per_chunk;
    f(bytes + b * static_cast<int64_t>(tr.block_bytes), buf, nblk);
    const float* xs = x + b * tr.block_size;
    for (int64_t j = 0; j < nblk * tr.block_size; ++j) sum += buf[j] * xs[j];
  }
  return sum;
}

}  // namespace tokamak::kernels
