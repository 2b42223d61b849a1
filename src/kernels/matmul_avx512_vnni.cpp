// The AVX-512 VNNI matmul kernels: matmul_avx512.h compiled for AVX-512
// with VNNI. Integer dots are one vpdpbusd / vpdpwssd per 64 bytes.
#include "kernels/isa.h"
#include "kernels/matmul_kernels.h"

#if TOKAMAK_HAVE_X86_SIMD
// Every header the kernels use is included before the target switch, so no
// inline function shared with other files gets compiled for AVX-512 here.
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/quants_blocks.h"

TOKAMAK_TARGET_REGION(TOKAMAK_ISA_AVX512_VNNI)

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

TOKAMAK_TARGET_REGION_END

#else  // no x86 SIMD in this build

namespace tokamak::kernels {
GemmKernel gemm_kernel_avx512_vnni(DType) { return {}; }
}  // namespace tokamak::kernels

#endif
