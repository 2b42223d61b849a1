// attention_chunk with AVX2 + FMA + F16C: 8 lanes; head_dim a multiple of 8.
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

TOKAMAK_TARGET_REGION_AVX2
#include "kernels/attention_impl.h"

namespace tokamak::kernels {
namespace {

#include "kernels/exp_avx2.h"
#include "kernels/attention_avx2_ops.h"

}  // namespace

void attention_chunk_avx2(const AttentionParams& dims, const KvView& kv, const QueryTile& tile, int64_t chunk,
                          float* partial) {
  detail::chunk_kernel<Avx2Ops>(dims, kv, tile, chunk, partial);
}

}  // namespace tokamak::kernels
TOKAMAK_TARGET_REGION_END
#endif
