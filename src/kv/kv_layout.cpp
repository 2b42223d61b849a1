#include "kv/kv_layout.h"

#include <string>

#include "core/error.h"

namespace tokamak::kv {

void KvLayout::validate() const {
  if (n_layers <= 0 || n_kv_heads <= 0 || head_dim <= 0) {
    throw Error("KV cache: invalid layout (layers " + std::to_string(n_layers) + ", kv heads " +
                std::to_string(n_kv_heads) + ", head dim " + std::to_string(head_dim) + ")");
  }
  if (format.block_size <= 0 || format.block_size > 4096) {
    throw Error("KV cache: block size must be in [1, 4096], got " + std::to_string(format.block_size));
  }
  kernels::check_kv_head_dim(format.k_type, head_dim);
  kernels::check_kv_head_dim(format.v_type, head_dim);
  if (format.recent < 0) throw Error("KV cache: recent window must be >= 0, got " + std::to_string(format.recent));
  if (format.recent > 0 && !has_recent()) {
    throw Error("KV cache: a recent f16 window (" + std::to_string(format.recent) +
                " positions) needs a quantized K or V type (q8 or q4), not " +
                std::string(kernels::kv_type_name(format.k_type)) + "/" +
                std::string(kernels::kv_type_name(format.v_type)));
  }
  if (has_recent() && recent_block_rows() < 1) {
    throw Error("KV cache: block size " + std::to_string(format.block_size) +
                " is too small to hold one f16 row of the recent window; use a larger block size");
  }
}

}  // namespace tokamak::kv
