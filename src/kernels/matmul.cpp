#include "kernels/matmul.h"

#include <algorithm>

#include "kernels/quants.h"

namespace tokamak::kernels {

void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  const int64_t n_in = w.ne[0];
  const int64_t n_out = w.ne[1];
  // Each thread gets at least ~64K multiply-adds: below that, waking a thread
  // costs more than it saves (a stories260K row is 64 wide).
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, n_in * n_tokens));
  pool.parallel_for(n_out, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const std::byte* row = w.row(r);
      for (int64_t t = 0; t < n_tokens; ++t) y[t * n_out + r] = dot_row_ref(w.type, row, x + t * n_in, n_in);
    }
  }, grain);
}

}  // namespace tokamak::kernels
