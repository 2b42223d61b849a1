// attention_chunk for q8 / q4 K and V with integer dot products
// (attention_avx2_int_impl.h) through VPDPWSSD, and VPDPBUSD for q8 V (AVX-VNNI: Alder Lake and later Intel
// client CPUs, Zen 5).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "kernels/attention.h"
#include "kernels/exp2_poly.h"
#include "kernels/exp_cephes.h"
#include "kernels/isa.h"
#include "kernels/kv_format.h"

#if TOKAMAK_HAVE_X86_SIMD
#include <immintrin.h>

#define TOKAMAK_ATTENTION_INT_VNNI 1
TOKAMAK_TARGET_REGION(TOKAMAK_ISA_AVX_VNNI)
#include "kernels/attention_impl.h"

namespace tokamak::kernels {
namespace {
#include "kernels/attention_avx2_int_impl.h"
}  // namespace

void attention_chunk_avx_vnni_int(const AttentionParams& p, const KvView& kv, const QueryTile& tile, int64_t chunk,
                                  float* partial) {
  int_chunk(p, kv, tile, chunk, partial);
}

}  // namespace tokamak::kernels
TOKAMAK_TARGET_REGION_END
#endif
