// The AVX-512 (F/BW/VL/DQ, no VNNI) matmul kernels: matmul_avx512.h compiled
// for that target. Integer dots go through int16 pair sums (vpmaddubsw).
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

TOKAMAK_TARGET_REGION_AVX512

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

TOKAMAK_TARGET_REGION_END

#else  // no x86 SIMD in this build

namespace tokamak::kernels {
GemmKernel gemm_kernel_avx512(DType) { return {}; }
}  // namespace tokamak::kernels

#endif
