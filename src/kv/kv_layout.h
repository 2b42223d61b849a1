// How the KV cache stores a model's keys and values: element types (chosen
// separately for K and V), block size, the mixed-precision window, and the
// exact byte layout of the pool that follows from them.
//
// A block holds `block_size` consecutive positions of one sequence for every
// layer: for each layer and KV head, a chunk of K (block_size head rows of
// kv_head_row_bytes(type, head_dim) bytes, kernels/kv_format.h) and one of V.
// So
//   bytes per token = n_layers * n_kv_heads * (K head row + V head row)
//                   = 2 * n_layers * n_kv_heads * head_dim * element size (+ scales)
// and a block is exactly block_size times that, with no padding.
//
// The pool is planar: [layer][K: head][block] chunks, then [V: head][block],
// then the next layer. A head's chunks of consecutive blocks are adjacent, so
// a sequence whose blocks were allocated in order (a fresh pool hands them
// out so) lies, per layer and head, as one run of rows that decode attention
// streams and the hardware prefetchers follow. With each block's bytes
// together instead ([layer][K page, V page] within the block), a head's run
// ended every block_size rows, and a decode step at an 8K context (TinyLlama
// Q4_0, q8 KV, 2 threads, Zen 5) ran faster the larger the blocks: 64 +3%,
// 256 +6%, 4096 +8% against 16. Planar, at 16: +5% (tiles read as one run,
// attention_impl.h's for_each_run). A block's bytes are thus
// n_layers * n_kv_heads * 2 chunks spread over the pool (BlockPool::chunk).
//
// Mixed precision (recent > 0, K or V quantized): every position is stored in
// the quantized type as above, and the newest positions of each sequence are
// also kept in f16 in a per-sequence ring of pool blocks, each chunk of the
// ring block (of the quantized K or V) reinterpreted as recent_block_rows()
// f16 rows of its layer and head. A query at position q reads the keys from
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

#include <algorithm>
#include <cstdint>
#include <limits>

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
  int64_t block_bytes() const { return static_cast<int64_t>(format.block_size) * bytes_per_token(); }
  // One head's rows of one block: a chunk of K, of V.
  int64_t k_chunk_bytes() const { return static_cast<int64_t>(format.block_size) * k_head_row_bytes(); }
  int64_t v_chunk_bytes() const { return static_cast<int64_t>(format.block_size) * v_head_row_bytes(); }
  // Where a pool of n_blocks keeps block 0's chunk of a layer and head, K or
  // V (keys); block b's is b chunks on.
  int64_t plane_offset(int32_t layer, int32_t head, bool keys, int32_t n_blocks) const {
    const int64_t layer_chunks = static_cast<int64_t>(layer) * n_kv_heads * (k_chunk_bytes() + v_chunk_bytes());
    const int64_t in_layer = keys ? head * k_chunk_bytes() : n_kv_heads * k_chunk_bytes() + head * v_chunk_bytes();
    return static_cast<int64_t>(n_blocks) * (layer_chunks + in_layer);
  }

  // The f16 ring of mixed precision.
  bool k_recent() const { return format.recent > 0 && kernels::kv_type_is_quantized(format.k_type); }
  bool v_recent() const { return format.recent > 0 && kernels::kv_type_is_quantized(format.v_type); }
  bool has_recent() const { return k_recent() || v_recent(); }
  int64_t recent_head_row_bytes() const { return 2LL * head_dim; }
  // f16 rows one pool block holds as a ring block: as many as each chunk of
  // a quantized K (V) takes.
  int32_t recent_block_rows() const {
    if (!has_recent()) return 0;
    const int64_t k_rows = k_recent() ? k_chunk_bytes() / recent_head_row_bytes() : std::numeric_limits<int64_t>::max();
    const int64_t v_rows = v_recent() ? v_chunk_bytes() / recent_head_row_bytes() : std::numeric_limits<int64_t>::max();
    return static_cast<int32_t>(std::min(k_rows, v_rows));
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
};

}  // namespace tokamak::kv
