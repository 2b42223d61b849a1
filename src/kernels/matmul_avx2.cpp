#include "kernels/matmul_kernels.h"
namespace tokamak::kernels {
GemmKernel gemm_kernel_avx2(DType) { return {}; }
}  // namespace tokamak::kernels
