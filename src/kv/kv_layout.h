// How the KV cache stores a model's keys and values: element types (chosen
// separately for K and V), block size, the mixed-precision window, and the
// exact byte layout of one block that follows from them.
//
// A block holds `block_size` consecutive positions of one sequence for every
// layer: [layer][K page, V page], a page being [n_kv_heads][block_size] head
// rows of kv_head_row_bytes(type, head_dim) bytes (kernels/kv_format.h). So
//   bytes per token = n_layers * n_kv_heads * (K head row + V head row)
//                   = 2 * n_layers * n_kv_heads * head_dim * element size (+ scales)
// and a block is exactly block_size times that, with no padding.
//
// Mixed precision (recent > 0, K or V quantized): every position is stored in
// the quantized type as above, and the newest positions of each sequence are
// also kept in f16 in a per-sequence ring of pool blocks, reinterpreted as
// [layer][K page if K is quantized, V page if V is quantized] of
// recent_block_rows() f16 rows. A query at position q reads the keys from
// recent_begin(q) on in f16 and older ones from the quantized blocks, so a
// sequence's quality matches f16 where attention usually looks hardest while
// its memory stays that of the quantized type plus one small ring.
//
// The precision of a key depends only on its position and the query's, never
// on how the prompt was cut into steps or what else shares the step (batch
// invariance): recent_begin(q) is the multiple of kKeyTile at or below
// q + 1 - recent, so each query reads between `recent` and
// recent + kKeyTile - 1 keys in f16 (itself included), and one K/V tile
// never mixes precisions within a query.
#pragma once

#include <cstdint>

#include "kernels/attention.h"
#include "kernels/kv_format.h"

namespace tokamak::kv {

struct KvFormat {
  kernels::KvType k_type = kernels::KvType::F16;
  kernels::KvType v_type = kernels::KvType::F16;
  int32_t recent = 0;  // positions kept in f16 beside quantized storage (0: none)
  int32_t block_size = 16;
};

struct KvLayout {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  KvFormat format;

  // Throws tokamak::Error naming the field and value for a layout that cannot
  // be stored (non-positive sizes, a head_dim the type cannot hold, a window
  // without a quantized type, a block too small for one f16 ring row).
  void validate() const;

  int64_t k_head_row_bytes() const { return kernels::kv_head_row_bytes(format.k_type, head_dim); }
  int64_t v_head_row_bytes() const { return kernels::kv_head_row_bytes(format.v_type, head_dim); }
  int64_t bytes_per_token() const {
    return static_cast<int64_t>(n_layers) * n_kv_heads * (k_head_row_bytes() + v_head_row_bytes());
  }
  int64_t k_page_bytes() const { return static_cast<int64_t>(format.block_size) * n_kv_heads * k_head_row_bytes(); }
  int64_t v_page_bytes() const { return static_cast<int64_t>(format.block_size) * n_kv_heads * v_head_row_bytes(); }
  int64_t block_bytes() const { return static_cast<int64_t>(format.block_size) * bytes_per_token(); }
  int64_t k_page_offset(int32_t layer) const { return layer * (k_page_bytes() + v_page_bytes()); }
  int64_t v_page_offset(int32_t layer) const { return k_page_offset(layer) + k_page_bytes(); }

  // The f16 ring of mixed precision.
  bool k_recent() const { return format.recent > 0 && kernels::kv_type_is_quantized(format.k_type); }
  bool v_recent() const { return format.recent > 0 && kernels::kv_type_is_quantized(format.v_type); }
  bool has_recent() const { return k_recent() || v_recent(); }
  int64_t recent_head_row_bytes() const { return 2LL * head_dim; }
  int64_t recent_bytes_per_token() const {
    return static_cast<int64_t>(n_layers) * n_kv_heads * recent_head_row_bytes() * (k_recent() + v_recent());
  }
  // f16 rows one pool block holds as a ring block.
  int32_t recent_block_rows() const {
    return has_recent() ? static_cast<int32_t>(block_bytes() / recent_bytes_per_token()) : 0;
  }
  // The first key the query at `pos` reads in f16 (see the top); 0 when it
  // reads all of them so.
  int64_t recent_begin(int64_t pos) const {
    const int64_t from = pos + 1 - format.recent;
    return from <= 0 ? 0 : from / kernels::kKeyTile * kernels::kKeyTile;
  }
  // Keys a query reads in f16 at most, itself included: the ring keeps that
  // many positions before each step, so a step's first query finds every
  // earlier key it reads in f16 there.
  int64_t recent_window() const { return format.recent + kernels::kKeyTile - 1; }
  // Ring blocks per sequence, and the rows they hold (>= recent_window()).
  int32_t recent_blocks() const {
    return has_recent() ? static_cast<int32_t>((recent_window() + recent_block_rows() - 1) / recent_block_rows()) : 0;
  }
  int64_t recent_ring_rows() const { return static_cast<int64_t>(recent_blocks()) * recent_block_rows(); }
  int64_t recent_page_bytes() const {
    return static_cast<int64_t>(recent_block_rows()) * n_kv_heads * recent_head_row_bytes();
  }
  int64_t recent_k_page_offset(int32_t layer) const { return layer * recent_page_bytes() * (k_recent() + v_recent()); }
  int64_t recent_v_page_offset(int32_t layer) const {
    return recent_k_page_offset(layer) + (k_recent() ? recent_page_bytes() : 0);
  }
};

}  // namespace tokamak::kv
