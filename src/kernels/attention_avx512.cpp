// attention_chunk with AVX-512 (F, BW, VL, DQ): 16 lanes; head_dim a multiple of 16.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's avx512fintrin.h builds _mm512_undefined_* as `__m512 __Y = __Y;`,
// which -Wmaybe-uninitialized reports wherever such intrinsics are inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "kernels/attention.h"
#include "kernels/exp_cephes.h"
#include "kernels/isa.h"
#include "kernels/kv_format.h"

#if TOKAMAK_HAVE_X86_SIMD
#include <immintrin.h>

TOKAMAK_TARGET_REGION_AVX512
#include "kernels/attention_impl.h"

namespace tokamak::kernels {
namespace {

#include "kernels/attention_avx512_ops.h"

}  // namespace

void attention_chunk_avx512(const AttentionParams& dims, const KvView& kv, const QueryTile& tile, int64_t chunk,
                            float* partial) {
  detail::chunk_kernel<Avx512Ops>(dims, kv, tile, chunk, partial);
}

}  // namespace tokamak::kernels
TOKAMAK_TARGET_REGION_END
#endif
