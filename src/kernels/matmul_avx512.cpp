// The AVX-512 (F/BW/VL/DQ, no VNNI) matmul kernels: matmul_avx512.h compiled
// for that target. Integer dots go through int16 pair sums (vpmaddubsw).
#include "kernels/matmul_kernels.h"

#if defined(__x86_64__)
// Every header the kernels use is included before the target switch, so no
// inline function shared with other files gets compiled for AVX-512 here.
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/quants_blocks.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512dq"))), apply_to = function)
#else
#pragma GCC push_options
// GCC 12's _mm512_cast*256*512 read an "undefined" register on purpose (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512dq")
#endif

#include "kernels/matmul_avx512.h"

namespace tokamak::kernels {
namespace {
struct DotBw {
  static constexpr bool kVnni = false;
  static __m512i dot4(__m512i acc, __m512i u, __m512i s) {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
  }
  static __m512i dot2w(__m512i acc, __m512i a, __m512i b) { return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b)); }
};
}  // namespace

GemmKernel gemm_kernel_avx512(DType t) { return avx512_kernel<DotBw>(t); }

}  // namespace tokamak::kernels

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else  // not x86-64

namespace tokamak::kernels {
GemmKernel gemm_kernel_avx512(DType) { return {}; }
}  // namespace tokamak::kernels

#endif
