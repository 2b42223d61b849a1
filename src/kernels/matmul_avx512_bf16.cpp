// The AVX-512 BF16 kernel for BF16 weights: vdpbf16ps multiplies 32 bf16
// pairs into 16 f32 sums per instruction, twice the rate of converting to
// f32 and using FMA. Activations are bf16 (ActFormat::kBF16), as in llama.cpp.
// The other types use the VNNI kernels (gemm_kernel falls back to them).
#include "kernels/matmul_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/quants_blocks.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512bf16"))), apply_to = function)
#else
#pragma GCC push_options
// GCC 12's _mm512_cast*256*512 read an "undefined" register on purpose (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512bf16")
#endif

#include "kernels/matmul_avx512.h"

namespace tokamak::kernels {
namespace {

inline __m512bh load_bf16(const uint8_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
inline __m512bh load_bf16(const uint8_t* p, __mmask32 m) { return (__m512bh)_mm512_maskz_loadu_epi16(m, p); }

// Lane i of an accumulator sums elements 32j + 2i and 32j + 2i + 1 over j.
template <int R, int T>
void tile_bf16(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t k, float* y, int64_t ldy) {
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    __m512bh wv[R];
    for (int r = 0; r < R; ++r) wv[r] = load_bf16(w + static_cast<size_t>(r) * ws + 2 * i);
    for (int t = 0; t < T; ++t) {
      const __m512bh xv = load_bf16(x + static_cast<size_t>(t) * xs + 2 * i);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv);
    }
  }
  if (i < k) {
    const auto m = static_cast<__mmask32>((uint64_t{1} << (k - i)) - 1);
    __m512bh wv[R];
    for (int r = 0; r < R; ++r) wv[r] = load_bf16(w + static_cast<size_t>(r) * ws + 2 * i, m);
    for (int t = 0; t < T; ++t) {
      const __m512bh xv = load_bf16(x + static_cast<size_t>(t) * xs + 2 * i, m);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

struct TileBf16 {
  const GemmArgs& a;
  template <int R, int T>
  void run(int64_t r, int64_t t) const {
    tile_bf16<R, T>(reinterpret_cast<const uint8_t*>(a.w) + static_cast<size_t>(r) * a.w_stride, a.w_stride,
                    reinterpret_cast<const uint8_t*>(a.act) + static_cast<size_t>(t) * a.act_stride, a.act_stride, a.k,
                    a.y + t * a.ldy + r, a.ldy);
  }
};

void gemm_bf16(const GemmArgs& a) {
  const TileBf16 tile{a};
  if (a.n_tokens == 1) {
    for_each_tile<4, 1>(a, tile);
  } else {
    for_each_tile<4, 6>(a, tile);
  }
}

}  // namespace

GemmKernel gemm_kernel_avx512_bf16(DType t) {
  return t == DType::BF16 ? GemmKernel{gemm_bf16, ActFormat::kBF16} : GemmKernel{};
}

}  // namespace tokamak::kernels

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else  // not x86-64

namespace tokamak::kernels {
GemmKernel gemm_kernel_avx512_bf16(DType) { return {}; }
}  // namespace tokamak::kernels

#endif
