// Matrix products against stored weights.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace tokamak::kernels {

// y[t, r] = dot(w row r, x row t) for t < n_tokens, r < w.ne[1].
// w: [ne0 = n_in, ne1 = n_out] of any dequantizable type; x: [n_tokens, n_in];
// y: [n_tokens, n_out]. Rows are split across the pool's threads. Each output
// element is one dot_row_ref, so its value never depends on n_tokens or on
// the thread count (batch invariance).
void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

}  // namespace tokamak::kernels
