// The kernels over weights interleaved 8 rows at a time
// (matmul_avx2_interleaved_impl.h) with AVX-VNNI (vpdpbusd for the 32-element formats).
#include "kernels/isa.h"
#include "kernels/matmul_kernels.h"

#if TOKAMAK_HAVE_X86_SIMD
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>  // std::is_void_v
#include <vector>

#include "kernels/interleave.h"
#include "kernels/matmul_act.h"
#include "kernels/quants_blocks.h"  // kIQ4NLValues

#define TOKAMAK_MATMUL_INT_VNNI 1
TOKAMAK_TARGET_REGION(TOKAMAK_ISA_AVX_VNNI)

#include "kernels/interleaved_unpack.h"

namespace tokamak::kernels {
namespace {
#include "kernels/matmul_avx2_interleaved_impl.h"
}  // namespace

GemmKernel gemm_kernel_avx_vnni_interleaved(DType t) { return interleaved_kernel(t); }

}  // namespace tokamak::kernels

TOKAMAK_TARGET_REGION_END

#else  // no x86 SIMD in this build

namespace tokamak::kernels {
GemmKernel gemm_kernel_avx_vnni_interleaved(DType) { return {}; }
}  // namespace tokamak::kernels

#endif
