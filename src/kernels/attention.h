// Causal multi-head attention over the paged KV cache, FlashAttention style:
// keys are read where they lie, tile by tile (dequantized tile by tile when
// stored quantized), with an online softmax (running max m, running sum l)
// so that no score matrix is ever materialized.
//
// One kernel family serves decode (one query token per sequence) and prefill
// (many, causal): a QueryTile is some query tokens of one sequence together
// with all the query heads that share one KV head (GQA by index), so each K/V
// tile is loaded once for all of them.
//
// Reduction order (batch invariance). Keys are cut into chunks of kKeyChunk
// positions and chunks into tiles of kKeyTile, both aligned to absolute
// positions. A query's result is, bit for bit, the in-order fold of its chunk
// partials, whichever tile it shares and however chunks are spread over
// threads (flash-decoding): it depends only on the query, the keys and the ISA.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

#include "kernels/isa.h"
#include "kernels/kv_format.h"

namespace tokamak::kernels {

// One layer of one sequence's K and V in one storage format, as they lie in
// the block pool. Position p lives at row r = p (or p % ring_rows for a ring)
// of block block_table[r / block_size], row r % block_size. One head's rows
// of a block are adjacent (a chunk); the pool keeps each head's chunks of
// all blocks side by side (kv/kv_layout.h), so a block's chunk of a head is
// block_stride bytes from the next block's and head_stride from the next
// head's: a sequence whose blocks follow each other reads each head's rows
// as one stream, which the hardware prefetchers run ahead of.
struct KvPages {
  const uint8_t* k_base = nullptr;  // K rows of head 0 in block 0 (null: K not stored here)
  const uint8_t* v_base = nullptr;  // V rows of head 0 in block 0 (null: V not stored here)
  int64_t k_block_stride = 0;       // bytes from a block's K chunk of a head to the next block's
  int64_t v_block_stride = 0;
  int64_t k_head_stride = 0;        // bytes from one head's K chunk of a block to the next head's
  int64_t v_head_stride = 0;
  const int32_t* block_table = nullptr;
  int32_t block_size = 0;  // rows per block
  int64_t ring_rows = 0;   // 0: rows are positions; else a ring of this many rows
  KvType k_type = KvType::F32;
  KvType v_type = KvType::F32;
  int32_t k_row_bytes = 0;  // one head row (kv_head_row_bytes)
  int32_t v_row_bytes = 0;

  const uint8_t* k_row(int64_t pos, int head) const { return k_base + row_offset(pos, head, true); }
  const uint8_t* v_row(int64_t pos, int head) const { return v_base + row_offset(pos, head, false); }
  int64_t row_offset(int64_t pos, int head, bool keys) const {
    const int64_t r = ring_rows > 0 ? pos % ring_rows : pos;
    return row_offset_of_row(r, head, keys);
  }
  // The same for row r of the pages (a position after the ring's wrap), of K
  // (keys) or V.
  int64_t row_offset_of_row(int64_t r, int head, bool keys) const {
    return static_cast<int64_t>(block_table[block_of_row(r)]) * (keys ? k_block_stride : v_block_stride) +
           head * (keys ? k_head_stride : v_head_stride) + row_in_block(r) * (keys ? k_row_bytes : v_row_bytes);
  }
  // r / block_size and r % block_size, by a shift and a mask when block_size
  // is a power of two (the default 16): a 64-bit division takes ~15 cycles,
  // and a tile's walk (TilePrefetch) took several of them in a row.
  int64_t block_of_row(int64_t r) const {
    return (block_size & (block_size - 1)) == 0 ? r >> std::countr_zero(static_cast<uint32_t>(block_size))
                                                : r / block_size;
  }
  int64_t row_in_block(int64_t r) const {
    return (block_size & (block_size - 1)) == 0 ? r & (block_size - 1) : r % block_size;
  }
};

// Where each position's K and V are: K of position p comes from `main` when
// p < k_recent_begin, else from `step` when p >= step_begin, else from
// `recent`; V likewise with v_recent_begin. Mixed precision keeps the newest
// rows in an f16 ring (`recent`) beside the quantized blocks (`main`); the
// rows of the step being computed are read from the caller's f16 copy of
// them (`step`), as the ring takes them only after the step's attention.
struct KvView {
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  KvPages main;
  KvPages recent;
  KvPages step;
  int64_t k_recent_begin = kNone;
  int64_t v_recent_begin = kNone;
  int64_t step_begin = kNone;

  const KvPages& pages(int64_t pos, bool keys) const {
    if (pos < (keys ? k_recent_begin : v_recent_begin)) return main;
    return pos >= step_begin ? step : recent;
  }
  // Positions from `pos` on that lie in the same pages (kNone: all).
  int64_t same_pages(int64_t pos, bool keys) const {
    const int64_t split = keys ? k_recent_begin : v_recent_begin;
    if (pos < split) return split - pos;
    return pos < step_begin ? step_begin - pos : kNone;
  }
};

struct AttentionParams {
  int n_heads = 0;
  int n_kv_heads = 0;    // divides n_heads
  int head_dim = 0;      // <= kMaxHeadDim
  float softcap = 0.0f;  // > 0: scores s -> softcap * tanh(s / softcap) (gemma-2)
  int32_t window = 0;    // > 0: a query at p attends keys [p + 1 - window, p] only (sliding window)
  int group() const { return n_heads / n_kv_heads; }
  // The first key a query at `pos` attends.
  int64_t first_key(int64_t pos) const { return window > 0 && pos + 1 > window ? pos + 1 - window : 0; }
};

// The queries of one task: n_tokens query tokens of one sequence, each with
// the `group` query heads [kv_head * group, (kv_head + 1) * group).
// Query j = token (j / group), head kv_head * group + j % group.
struct QueryTile {
  const float* const* q = nullptr;     // [n_tokens] -> query row [n_heads * head_dim], rotated
  const int32_t* positions = nullptr;  // [n_tokens]: token i attends keys [0, positions[i]]
  int n_tokens = 0;
  int kv_head = 0;
};

constexpr int64_t kKeyTile = 32;    // keys per online-softmax step
constexpr int64_t kKeyChunk = 512;  // keys per partial: the unit of flash-decoding splits

// Floats of online-softmax state per query, laid out [m, l, acc[head_dim]]:
// m the running max of scores, l the sum of exp(score - m), acc the sum of
// exp(score - m) * v. A state buffer holds n_tokens * group of them, query order.
inline int64_t attention_state_floats(const AttentionParams& d) { return d.head_dim + 2; }
inline int64_t attention_tile_state_floats(const AttentionParams& d, int n_tokens) {
  return attention_state_floats(d) * n_tokens * d.group();
}
// Sets n_queries states to the empty state (m = -inf, l = 0, acc = 0).
void attention_reset(const AttentionParams& dims, int64_t n_queries, float* state);
// Chunks a tile's keys span: ceil((max position + 1) / kKeyChunk).
int64_t attention_chunks(const QueryTile& tile);
// The first chunk with a key any query of the tile attends (> 0 only with a
// sliding window); earlier chunks give empty partials.
int64_t attention_first_chunk(const AttentionParams& params, const QueryTile& tile);

// Whether attention_chunk on `isa` computes K and V stored as q8 or q4 by
// integer dot products. AVX-512 VNNI (head_dim a multiple of 64) rounds the
// query to ~15 bits and the softmax weights to 8, an error of ~1e-3 of max|v|
// on top of the stored values' (kernels/attention_avx512_vnni.cpp); AVX2
// (head_dim a multiple of 32, and at least kAvx2IntegerMinGroup query heads
// to a KV head) rounds both to 16 bits, ~1e-5
// (kernels/attention_avx2_int_impl.h, also the AVX-VNNI path, but that
// AVX-VNNI rounds the weights of q8 V to 8 bits: ~1e-3). Otherwise attention
// dequantizes K/V tiles to f32, erring only by f32 rounding.
constexpr int kAvx2IntegerMinGroup = 3;
bool attention_integer_dots(Isa isa, const AttentionParams& dims, KvType k, KvType v);

// partial = the online softmax of every query of `tile` over the keys of chunk
// `chunk` (positions [chunk * kKeyChunk, (chunk + 1) * kKeyChunk), causal, and
// within the sliding window). A query with no key in the chunk gets the empty
// state (m = -inf, l = 0, acc = 0).
// Uses `isa`, or a narrower one when head_dim is not a multiple of its width.
void attention_chunk(Isa isa, const AttentionParams& dims, const KvView& kv, const QueryTile& tile, int64_t chunk,
                     float* partial);
// running = running (+) partial for n_queries states: the merge of two online
// softmaxes, rescaled to their common max. Folding into the empty state copies.
void attention_fold(const AttentionParams& dims, int64_t n_queries, const float* partial, float* running);
// out[i] + h * head_dim = acc / l of every query (token i, head h) of the tile.
void attention_finish(const AttentionParams& dims, const QueryTile& tile, const float* running, float* const* out);

// The whole attention of a tile: chunks in order, folded, finished. scratch:
// 2 * attention_tile_state_floats floats.
void attention(Isa isa, const AttentionParams& dims, const KvView& kv, const QueryTile& tile, float* const* out,
               float* scratch);

// Scalar reference: out[h] = softmax(q[h] . K[first..pos]^T / sqrt(head_dim)) V
// (first = params.first_key(pos), scores soft-capped when params.softcap > 0)
// for every query head h of one query token at position pos, with the scores
// materialized and the softmax and weighted sum taken in double. K/V are read
// through dequantize_kv_row. q, out: [n_heads, head_dim].
void attention_ref(const AttentionParams& dims, const KvView& kv, const float* q, int64_t pos, float* out);

}  // namespace tokamak::kernels
