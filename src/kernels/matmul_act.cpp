#include "kernels/matmul_act.h"

#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/quants_impl.h"

namespace tokamak::kernels {
namespace {

void quantize_q8_0(const float* x, std::byte* dst, int64_t k, const ActLayout& l) {
  auto* qs = reinterpret_cast<int8_t*>(dst);
  auto* d = reinterpret_cast<float*>(dst + l.d_offset);
  auto* sums = reinterpret_cast<int16_t*>(dst + l.sums_offset);
  for (int64_t b = 0; b < k / 32; ++b, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    d[b] = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = detail::nearest_int(x[j] * id);
      qs[32 * b + j] = static_cast<int8_t>(q);
      sum += q;
    }
    sums[b] = static_cast<int16_t>(sum);
  }
}

void quantize_q8_k(const float* x, std::byte* dst, int64_t k, const ActLayout& l) {
  auto* qs = reinterpret_cast<int8_t*>(dst);
  auto* d = reinterpret_cast<float*>(dst + l.d_offset);
  auto* bsums = reinterpret_cast<int16_t*>(dst + l.sums_offset);
  for (int64_t b = 0; b < k / 256; ++b) {
    BlockQ8_K blk;
    detail::quant_q8_k(x + 256 * b, &blk, 1);
    std::memcpy(qs + 256 * b, blk.qs, sizeof(blk.qs));
    std::memcpy(bsums + 16 * b, blk.bsums, sizeof(blk.bsums));
    d[b] = blk.d;
  }
}

}  // namespace

void quantize_act_row(ActFormat f, const float* x, std::byte* dst, int64_t k) {
  const ActLayout l = act_layout(f, k);
  std::memset(dst, 0, l.row_bytes);  // the padding the kernels may read
  switch (f) {
    case ActFormat::kF32: std::memcpy(dst, x, static_cast<size_t>(k) * sizeof(float)); break;
    case ActFormat::kF32RoundF16: {
      auto* out = reinterpret_cast<float*>(dst);
      for (int64_t i = 0; i < k; ++i) out[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
      break;
    }
    case ActFormat::kF32RoundBF16: {
      auto* out = reinterpret_cast<float*>(dst);
      for (int64_t i = 0; i < k; ++i) out[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
      break;
    }
    case ActFormat::kBF16: {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < k; ++i) out[i] = fp32_to_bf16(x[i]);
      break;
    }
    case ActFormat::kQ8_0: quantize_q8_0(x, dst, k, l); break;
    case ActFormat::kQ8_K: quantize_q8_k(x, dst, k, l); break;
  }
}

}  // namespace tokamak::kernels
