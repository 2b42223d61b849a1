// The AVX-512 VNNI matmul kernels: matmul_avx512.h compiled for AVX-512
// with VNNI. Integer dots are one vpdpbusd / vpdpwssd per 64 bytes.
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
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"))), apply_to = function)
#else
#pragma GCC push_options
// GCC 12's _mm512_cast*256*512 read an "undefined" register on purpose (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
#endif

#include "kernels/matmul_avx512.h"

namespace tokamak::kernels {
namespace {
struct DotVnni {
  static constexpr bool kVnni = true;
  static __m512i dot4(__m512i acc, __m512i u, __m512i s) {
    return _mm512_dpbusd_epi32(acc, u, s);
  }
  static __m512i dot2w(__m512i acc, __m512i a, __m512i b) { return _mm512_dpwssd_epi32(acc, a, b); }
};
}  // namespace

GemmKernel gemm_kernel_avx512_vnni(DType t) { return avx512_kernel<DotVnni>(t); }

}  // namespace tokamak::kernels

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else  // not x86-64

namespace tokamak::kernels {
GemmKernel gemm_kernel_avx512_vnni(DType) { return {}; }
}  // namespace tokamak::kernels

#endif
