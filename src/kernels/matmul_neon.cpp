#include "kernels/matmul_kernels.h"
namespace tokamak::kernels {
GemmKernel gemm_kernel_neon(DType) { return {}; }
}  // namespace tokamak::kernels
