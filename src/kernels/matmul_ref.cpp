// The scalar matmul kernels: the reference every SIMD variant is tested
// against. Each output element is a plain loop: integer dot products per
// block (exact), then one float multiply-add per block, in block order.
#include <cstring>

#include "core/half.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quants.h"
#include "kernels/quants_impl.h"

namespace tokamak::kernels {
namespace {

using detail::load_block;

// ---- 32-element formats against Q8_0 activations ----

// One block as signed integers (the stored value minus its offset), with its
// scale and min: element e = d * q[e] + m.
struct Unpacked32 {
  int8_t q[32];
  float d;
  float m = 0.0f;
};

void unpack(const BlockQ4_0& b, Unpacked32& u) {
  for (int j = 0; j < 16; ++j) {
    u.q[j] = static_cast<int8_t>((b.qs[j] & 15) - 8);
    u.q[j + 16] = static_cast<int8_t>((b.qs[j] >> 4) - 8);
  }
  u.d = fp16_to_fp32(b.d);
}
void unpack(const BlockQ4_1& b, Unpacked32& u) {
  for (int j = 0; j < 16; ++j) {
    u.q[j] = static_cast<int8_t>(b.qs[j] & 15);
    u.q[j + 16] = static_cast<int8_t>(b.qs[j] >> 4);
  }
  u.d = fp16_to_fp32(b.d);
  u.m = fp16_to_fp32(b.m);
}
template <class Block>
void unpack5(const Block& b, Unpacked32& u, int offset) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, sizeof(qh));
  for (int j = 0; j < 16; ++j) {
    u.q[j] = static_cast<int8_t>(((b.qs[j] & 15) | ((qh >> j) & 1) << 4) - offset);
    u.q[j + 16] = static_cast<int8_t>(((b.qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - offset);
  }
  u.d = fp16_to_fp32(b.d);
}
void unpack(const BlockQ5_0& b, Unpacked32& u) { unpack5(b, u, 16); }
void unpack(const BlockQ5_1& b, Unpacked32& u) {
  unpack5(b, u, 0);
  u.m = fp16_to_fp32(b.m);
}
void unpack(const BlockQ8_0& b, Unpacked32& u) {
  std::memcpy(u.q, b.qs, 32);
  u.d = fp16_to_fp32(b.d);
}
void unpack(const BlockIQ4_NL& b, Unpacked32& u) {
  for (int j = 0; j < 16; ++j) {
    u.q[j] = kIQ4NLValues[b.qs[j] & 15];
    u.q[j + 16] = kIQ4NLValues[b.qs[j] >> 4];
  }
  u.d = fp16_to_fp32(b.d);
}

template <class Block, bool kHasMin>
float dot32(const std::byte* w, const std::byte* act, int64_t k) {
  const ActLayout l = act_layout(ActFormat::kQ8_0, k);
  const auto* xq = reinterpret_cast<const int8_t*>(act);
  const auto* xd = reinterpret_cast<const float*>(act + l.d_offset);
  const auto* xs = reinterpret_cast<const int16_t*>(act + l.sums_offset);
  float sum = 0.0f;
  for (int64_t b = 0; b < k / 32; ++b) {
    Unpacked32 u;
    unpack(load_block<Block>(w, b), u);
    int isum = 0;
    for (int j = 0; j < 32; ++j) isum += u.q[j] * xq[32 * b + j];
    sum += u.d * xd[b] * static_cast<float>(isum);
    if constexpr (kHasMin) sum += u.m * xd[b] * static_cast<float>(xs[b]);
  }
  return sum;
}

// ---- K-quants (and IQ4_XS) against Q8_K activations ----

// One super-block as signed integers with a scale (and min) per 16 elements:
// element e = d * sc[e / 16] * q[e] - dmin * m[e / 16].
struct UnpackedK {
  int8_t q[256];
  int16_t sc[16];
  int16_t m[16] = {};
  float d;
  float dmin = 0.0f;
};

void unpack(const BlockQ2_K& b, UnpackedK& u) {
  for (int e = 0; e < 256; ++e) u.q[e] = static_cast<int8_t>(detail::unpack_2bit(b.qs, e));
  for (int s = 0; s < 16; ++s) {
    u.sc[s] = b.scales[s] & 15;
    u.m[s] = b.scales[s] >> 4;
  }
  u.d = fp16_to_fp32(b.d);
  u.dmin = fp16_to_fp32(b.dmin);
}
void unpack(const BlockQ3_K& b, UnpackedK& u) {
  for (int e = 0; e < 256; ++e) {
    const bool high = (b.hmask[e % 32] >> (e / 32)) & 1;
    u.q[e] = static_cast<int8_t>(detail::unpack_2bit(b.qs, e) - (high ? 0 : 4));
  }
  for (int s = 0; s < 16; ++s) u.sc[s] = static_cast<int16_t>(detail::q3k_scale(b.scales, s));
  u.d = fp16_to_fp32(b.d);
}
template <class Block>
void unpack45(const Block& b, UnpackedK& u) {
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, m;
    detail::scale_min_k4(s, b.scales, &sc, &m);
    u.sc[2 * s] = u.sc[2 * s + 1] = sc;
    u.m[2 * s] = u.m[2 * s + 1] = m;
    for (int l = 0; l < 32; ++l) {
      const uint8_t byte = b.qs[32 * (s / 2) + l];
      u.q[32 * s + l] = static_cast<int8_t>(s % 2 == 0 ? byte & 15 : byte >> 4);
    }
  }
  u.d = fp16_to_fp32(b.d);
  u.dmin = fp16_to_fp32(b.dmin);
}
void unpack(const BlockQ4_K& b, UnpackedK& u) { unpack45(b, u); }
void unpack(const BlockQ5_K& b, UnpackedK& u) {
  unpack45(b, u);
  for (int e = 0; e < 256; ++e) u.q[e] = static_cast<int8_t>(u.q[e] + (((b.qh[e % 32] >> (e / 32)) & 1) << 4));
}
void unpack(const BlockQ6_K& b, UnpackedK& u) {
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, k = e % 128 / 32, l = e % 32;
    const uint8_t lo = b.ql[64 * h + l + 32 * (k % 2)];
    u.q[e] = static_cast<int8_t>(((k < 2 ? lo & 15 : lo >> 4) | ((b.qh[32 * h + l] >> (2 * k)) & 3) << 4) - 32);
  }
  for (int s = 0; s < 16; ++s) u.sc[s] = b.scales[s];
  u.d = fp16_to_fp32(b.d);
}
template <class Block>
void unpack_iq4_xs_layout(const Block& b, UnpackedK& u) {
  constexpr const int8_t* kLevels = kLevelsOf<Block>;
  for (int s = 0; s < 8; ++s) {
    const int ls = ((b.scales_l[s / 2] >> (4 * (s % 2))) & 15) | ((b.scales_h >> (2 * s)) & 3) << 4;
    u.sc[2 * s] = u.sc[2 * s + 1] = static_cast<int16_t>(ls - 32);
    for (int j = 0; j < 16; ++j) {
      u.q[32 * s + j] = kLevels[b.qs[16 * s + j] & 15];
      u.q[32 * s + j + 16] = kLevels[b.qs[16 * s + j] >> 4];
    }
  }
  u.d = fp16_to_fp32(b.d) * kDScaleOf<Block>;
}
void unpack(const BlockIQ4_XS& b, UnpackedK& u) { unpack_iq4_xs_layout(b, u); }
void unpack(const BlockIQ3_S_WIDE& b, UnpackedK& u) { unpack_iq4_xs_layout(b, u); }
void unpack(const BlockIQ3_XXS_WIDE& b, UnpackedK& u) { unpack_iq4_xs_layout(b, u); }

// IQ3_XXS: db = d (0.5 + s) / 2 = (d / 4) (2s + 1), an integer scale.
void unpack(const BlockIQ3_XXS& b, UnpackedK& u) {
  for (int g = 0; g < 8; ++g) {
    uint32_t aux;
    std::memcpy(&aux, b.qs + 64 + 4 * g, sizeof(aux));
    u.sc[2 * g] = u.sc[2 * g + 1] = static_cast<int16_t>(2 * (aux >> 28) + 1);
    for (int l = 0; l < 4; ++l) {
      const uint8_t signs = detail::even_parity_signs((aux >> (7 * l)) & 127);
      for (int j = 0; j < 8; ++j) {
        const int v = detail::grid_byte(detail::kIQ3XXSGrid[b.qs[8 * g + 2 * l + j / 4]], j % 4);
        u.q[32 * g + 8 * l + j] = static_cast<int8_t>((signs >> j) & 1 ? -v : v);
      }
    }
  }
  u.d = fp16_to_fp32(b.d) * 0.25f;
}
void unpack(const BlockIQ3_S& b, UnpackedK& u) {
  for (int g = 0; g < 8; ++g) {
    u.sc[2 * g] = u.sc[2 * g + 1] = static_cast<int16_t>(1 + 2 * ((b.scales[g / 2] >> (4 * (g % 2))) & 15));
    for (int e = 0; e < 32; ++e) {
      const int v = detail::grid_byte(detail::kIQ3SGrid[detail::iq3s_index(b.qs, b.qh, g, e / 4)], e % 4);
      u.q[32 * g + e] = static_cast<int8_t>((b.signs[4 * g + e / 8] >> (e % 8)) & 1 ? -v : v);
    }
  }
  u.d = fp16_to_fp32(b.d);
}
// TQ1_0: x = d (digit - 1); element order as dequant_tq1_0's.
void unpack(const BlockTQ1_0& b, UnpackedK& u) {
  int e = 0;
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < 32; ++m) u.q[e++] = static_cast<int8_t>(detail::ternary_digit(b.qs[m], n) - 1);
  }
  for (int n = 0; n < 5; ++n) {
    for (int m = 32; m < 48; ++m) u.q[e++] = static_cast<int8_t>(detail::ternary_digit(b.qs[m], n) - 1);
  }
  for (int n = 0; n < 4; ++n) {
    for (int m = 0; m < 4; ++m) u.q[e++] = static_cast<int8_t>(detail::ternary_digit(b.qh[m], n) - 1);
  }
  for (int16_t& s : u.sc) s = 1;
  u.d = fp16_to_fp32(b.d);
}
// TQ2_0: x = d (q - 1), q laid out as Q2_K's.
void unpack(const BlockTQ2_0& b, UnpackedK& u) {
  for (int e = 0; e < 256; ++e) u.q[e] = static_cast<int8_t>(detail::unpack_2bit(b.qs, e) - 1);
  for (int16_t& s : u.sc) s = 1;
  u.d = fp16_to_fp32(b.d);
}

template <class Block, bool kHasMin>
float dot_k(const std::byte* w, const std::byte* act, int64_t k) {
  const ActLayout l = act_layout(ActFormat::kQ8_K, k);
  const auto* xq = reinterpret_cast<const int8_t*>(act);
  const auto* xd = reinterpret_cast<const float*>(act + l.d_offset);
  const auto* bsums = reinterpret_cast<const int16_t*>(act + l.sums_offset);
  float sum = 0.0f;
  for (int64_t b = 0; b < k / 256; ++b) {
    UnpackedK u;
    unpack(load_block<Block>(w, b), u);
    int isum = 0, msum = 0;
    for (int s = 0; s < 16; ++s) {
      int dot = 0;
      for (int e = 16 * s; e < 16 * s + 16; ++e) dot += u.q[e] * xq[256 * b + e];
      isum += u.sc[s] * dot;
      msum += u.m[s] * bsums[16 * b + s];
    }
    sum += u.d * xd[b] * static_cast<float>(isum);
    if constexpr (kHasMin) sum -= u.dmin * xd[b] * static_cast<float>(msum);
  }
  return sum;
}

// ---- float formats ----

template <float (*Load)(const std::byte*, int64_t)>
float dot_float(const std::byte* w, const std::byte* act, int64_t k) {
  const auto* x = reinterpret_cast<const float*>(act);
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) sum += Load(w, i) * x[i];
  return sum;
}
float load_f32(const std::byte* w, int64_t i) {
  float v;
  std::memcpy(&v, w + 4 * i, sizeof(v));
  return v;
}
float load_f16(const std::byte* w, int64_t i) {
  uint16_t h;
  std::memcpy(&h, w + 2 * i, sizeof(h));
  return fp16_to_fp32(h);
}
float load_bf16(const std::byte* w, int64_t i) {
  uint16_t h;
  std::memcpy(&h, w + 2 * i, sizeof(h));
  return bf16_to_fp32(h);
}

template <float (*Dot)(const std::byte*, const std::byte*, int64_t)>
void gemm(const GemmArgs& a) {
  for (int64_t r = 0; r < a.n_rows; ++r) {
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      a.y[t * a.ldy + r] = Dot(a.w + static_cast<size_t>(r) * a.w_stride, a.act + static_cast<size_t>(t) * a.act_stride, a.k);
    }
  }
}

}  // namespace

void gemm_f32_reference(const GemmArgs& a) {
  for (int64_t r = 0; r < a.n_rows; ++r) {
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      float& y = a.y[t * a.ldy + r];
      y = dot_row_ref(a.type, a.w + static_cast<size_t>(r) * a.w_stride,
                      reinterpret_cast<const float*>(a.act + static_cast<size_t>(t) * a.act_stride), a.k,
                      a.continue_sums ? y : 0.0f);
    }
  }
}

GemmKernel gemm_kernel_scalar(DType t) {
  using F = ActFormat;
  switch (t) {
    case DType::F32: return {gemm<dot_float<load_f32>>, F::kF32};
    case DType::F16: return {gemm<dot_float<load_f16>>, F::kF32RoundF16};
    case DType::BF16: return {gemm<dot_float<load_bf16>>, F::kF32RoundBF16};
    case DType::Q4_0: return {gemm<dot32<BlockQ4_0, false>>, F::kQ8_0};
    case DType::Q4_1: return {gemm<dot32<BlockQ4_1, true>>, F::kQ8_0};
    case DType::Q5_0: return {gemm<dot32<BlockQ5_0, false>>, F::kQ8_0};
    case DType::Q5_1: return {gemm<dot32<BlockQ5_1, true>>, F::kQ8_0};
    case DType::Q8_0: return {gemm<dot32<BlockQ8_0, false>>, F::kQ8_0};
    case DType::IQ4_NL: return {gemm<dot32<BlockIQ4_NL, false>>, F::kQ8_0};
    case DType::Q2_K: return {gemm<dot_k<BlockQ2_K, true>>, F::kQ8_K};
    case DType::Q3_K: return {gemm<dot_k<BlockQ3_K, false>>, F::kQ8_K};
    case DType::Q4_K: return {gemm<dot_k<BlockQ4_K, true>>, F::kQ8_K};
    case DType::Q5_K: return {gemm<dot_k<BlockQ5_K, true>>, F::kQ8_K};
    case DType::Q6_K: return {gemm<dot_k<BlockQ6_K, false>>, F::kQ8_K};
    case DType::IQ4_XS: return {gemm<dot_k<BlockIQ4_XS, false>>, F::kQ8_K};
    case DType::IQ3_S_WIDE: return {gemm<dot_k<BlockIQ3_S_WIDE, false>>, F::kQ8_K};
    case DType::IQ3_XXS_WIDE: return {gemm<dot_k<BlockIQ3_XXS_WIDE, false>>, F::kQ8_K};
    case DType::IQ3_XXS: return {gemm<dot_k<BlockIQ3_XXS, false>>, F::kQ8_K};
    case DType::IQ3_S: return {gemm<dot_k<BlockIQ3_S, false>>, F::kQ8_K};
    case DType::TQ1_0: return {gemm<dot_k<BlockTQ1_0, false>>, F::kQ8_K};
    case DType::TQ2_0: return {gemm<dot_k<BlockTQ2_0, false>>, F::kQ8_K};
    case DType::Q8_K: return {gemm_f32_reference, F::kF32};
    default: return {};
  }
}

GemmKernel gemm_kernel(DType t, Isa isa) {
  // Each case tries its own table, then falls through to the next lower variant.
  GemmKernel k;
  switch (isa) {
    case Isa::kNeon:
      if ((k = gemm_kernel_neon(t)).fn != nullptr) return k;
      break;
    case Isa::kAvx512Bf16:
      if ((k = gemm_kernel_avx512_bf16(t)).fn != nullptr) return k;
      [[fallthrough]];
    case Isa::kAvx512Vnni:
      if ((k = gemm_kernel_avx512_vnni(t)).fn != nullptr) return k;
      [[fallthrough]];
    case Isa::kAvx512:
      if ((k = gemm_kernel_avx512(t)).fn != nullptr) return k;
      [[fallthrough]];
    case Isa::kAvxVnni:  // the AVX2 kernels over plain rows; its own are interleaved
    case Isa::kAvx2:
      if ((k = gemm_kernel_avx2(t)).fn != nullptr) return k;
      break;
    case Isa::kScalar: break;
  }
  return gemm_kernel_scalar(t);
}

GemmKernel gemm_kernel_interleaved(DType t, Isa isa) {
  switch (isa) {
    case Isa::kAvx2: return gemm_kernel_avx2_interleaved(t);
    case Isa::kAvxVnni: return gemm_kernel_avx_vnni_interleaved(t);
    case Isa::kAvx512Vnni:
    case Isa::kAvx512Bf16:
      if (GemmKernel k = gemm_kernel_avx512_vnni_interleaved(t); k.fn != nullptr) return k;
      // BF16 stays plain here (its AVX-512 BF16 kernel reads plain rows).
      return {};
    // Without VNNI the AVX2 kernels over interleaved rows beat the plain
    // AVX-512 ones on the quantized types (Xeon, --isa avx512 vs avx2, pp128:
    // Q4_0 29.5 vs 53.1 t/s, Q4_K_M 29.9 vs 43.9, Q8_0 28.2 vs 36.4, one noisy
    // run); F16 and BF16 keep the plain AVX-512 kernels (F16 pp512 74.9 native
    // against 63.7 on the AVX2 path).
    case Isa::kAvx512:
      if (t == DType::F16 || t == DType::BF16) return {};
      return gemm_kernel_avx2_interleaved(t);
    default: return {};
  }
}

}  // namespace tokamak::kernels
