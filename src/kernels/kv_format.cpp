#include "kernels/kv_format.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/half.h"

namespace tokamak::kernels {

std::string_view kv_type_name(KvType t) {
  switch (t) {
    case KvType::F32: return "f32";
    case KvType::F16: return "f16";
    case KvType::BF16: return "bf16";
    case KvType::Q8: return "q8";
    case KvType::Q4: return "q4";
  }
  return "?";
}

std::optional<KvType> kv_type_from_name(std::string_view name) {
  for (KvType t : {KvType::F32, KvType::F16, KvType::BF16, KvType::Q8, KvType::Q4}) {
    if (name == kv_type_name(t)) return t;
  }
  return std::nullopt;
}

void check_kv_head_dim(KvType t, int head_dim) {
  const bool q4_ok = head_dim % 2 == 0 && (head_dim <= 32 || head_dim % 32 == 0);
  if (head_dim < 1 || head_dim > kMaxHeadDim || (t == KvType::Q4 && !q4_ok)) {
    throw Error("KV type " + std::string(kv_type_name(t)) + " cannot store heads of " + std::to_string(head_dim) +
                " values (head_dim must be in [1, " + std::to_string(kMaxHeadDim) + "]" +
                (t == KvType::Q4 ? ", even, and a multiple of 32 above 32)" : ")"));
  }
}

int64_t kv_head_row_bytes(KvType t, int d) {
  switch (t) {
    case KvType::F32: return 4LL * d;
    case KvType::F16:
    case KvType::BF16: return 2LL * d;
    case KvType::Q8: return d + 4LL;
    case KvType::Q4: return d / 2 + 2LL * (d / kv_q4_group(d));
  }
  return 0;
}

namespace {

void quantize_q8(const float* x, int d, uint8_t* dst) {
  float amax = 0.0f;
  for (int i = 0; i < d; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = amax / 127.0f;
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (int i = 0; i < d; ++i) {
    const float q = std::nearbyint(x[i] * inv);
    dst[i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f)));
  }
  std::memcpy(dst + d, &scale, sizeof(scale));
}

void quantize_q4(const float* x, int d, uint8_t* dst) {
  const int g = kv_q4_group(d);
  uint8_t* scales = dst + d / 2;
  for (int k = 0; k < d / g; ++k) {
    const float* xg = x + k * g;
    float mx = 0.0f;  // signed value of largest magnitude: it maps to -8 exactly
    for (int i = 0; i < g; ++i) {
      if (std::fabs(xg[i]) > std::fabs(mx)) mx = xg[i];
    }
    const uint16_t scale_h = fp32_to_fp16(mx / -8.0f);
    const float scale = fp16_to_fp32(scale_h);
    const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    uint8_t* q = dst + k * (g / 2);
    for (int i = 0; i < g / 2; ++i) {
      const float lo = std::clamp(std::nearbyint(xg[i] * inv) + 8.0f, 0.0f, 15.0f);
      const float hi = std::clamp(std::nearbyint(xg[i + g / 2] * inv) + 8.0f, 0.0f, 15.0f);
      q[i] = static_cast<uint8_t>(static_cast<int>(lo) | static_cast<int>(hi) << 4);
    }
    std::memcpy(scales + 2 * k, &scale_h, sizeof(scale_h));
  }
}

}  // namespace

void quantize_kv_row(KvType t, const float* src, int d, void* dst) {
  auto* out = static_cast<uint8_t*>(dst);
  switch (t) {
    case KvType::F32: std::memcpy(out, src, sizeof(float) * static_cast<size_t>(d)); return;
    case KvType::F16:
      for (int i = 0; i < d; ++i) {
        const uint16_t h = fp32_to_fp16(src[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case KvType::BF16:
      for (int i = 0; i < d; ++i) {
        const uint16_t h = fp32_to_bf16(src[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case KvType::Q8: quantize_q8(src, d, out); return;
    case KvType::Q4: quantize_q4(src, d, out); return;
  }
}

void dequantize_kv_row(KvType t, const void* src, int d, float* dst) {
  const auto* in = static_cast<const uint8_t*>(src);
  switch (t) {
    case KvType::F32: std::memcpy(dst, in, sizeof(float) * static_cast<size_t>(d)); return;
    case KvType::F16:
    case KvType::BF16:
      for (int i = 0; i < d; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        dst[i] = t == KvType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
      }
      return;
    case KvType::Q8: {
      float scale;
      std::memcpy(&scale, in + d, sizeof(scale));
      for (int i = 0; i < d; ++i) dst[i] = static_cast<float>(static_cast<int8_t>(in[i])) * scale;
      return;
    }
    case KvType::Q4: {
      const int g = kv_q4_group(d);
      for (int k = 0; k < d / g; ++k) {
        uint16_t scale_h;
        std::memcpy(&scale_h, in + d / 2 + 2 * k, 2);
        const float scale = fp16_to_fp32(scale_h);
        const uint8_t* q = in + k * (g / 2);
        for (int i = 0; i < g / 2; ++i) {
          dst[k * g + i] = static_cast<float>((q[i] & 0xf) - 8) * scale;
          dst[k * g + i + g / 2] = static_cast<float>((q[i] >> 4) - 8) * scale;
        }
      }
      return;
    }
  }
}

}  // namespace tokamak::kernels
