#include "tools/tensor_convert.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/quants.h"

namespace tokamak {

void convert_rows(ThreadPool& pool, DType type, int64_t ne0, int64_t n_rows, std::span<std::byte> out,
                  const RowSource& source) {
  const DTypeTraits& tr = dtype_traits(type);
  if (!kernels::can_quantize(type)) throw Error("cannot convert rows to type " + std::string(tr.name));
  if (ne0 <= 0 || ne0 % tr.block_size != 0 || n_rows < 0) {
    throw Error("cannot convert rows of " + std::to_string(ne0) + " elements to " + std::string(tr.name) +
                " (block size " + std::to_string(tr.block_size) + ")");
  }
  const size_t stride = row_bytes(type, ne0);
  if (out.size() != stride * static_cast<size_t>(n_rows)) {
    throw Error("convert_rows: output of " + std::to_string(out.size()) + " bytes for " + std::to_string(n_rows) +
                " rows of " + std::to_string(stride));
  }
  std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()), std::vector<float>(static_cast<size_t>(ne0)));
  pool.parallel_for(n_rows, [&](int64_t begin, int64_t end, int thread) {
    float* buf = scratch[static_cast<size_t>(thread)].data();
    for (int64_t r = begin; r < end; ++r) {
      kernels::quantize_row(type, source(r, buf), out.data() + static_cast<size_t>(r) * stride, ne0);
    }
  });
}

}  // namespace tokamak
