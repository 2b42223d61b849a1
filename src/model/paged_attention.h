// The attention sub-step of one forward pass over the paged KV cache: stores
// the step's K/V rows, then runs the attention kernels. Planned once per step
// (which query tokens share a task, which long contexts are split across
// threads), run once per layer.
//
// Tasks: the batch's tokens of each sequence, in position order, in tiles of
// up to kQueryTile (with an f16 ring, of tokens that share
// KvLayout::recent_begin, so that one KvView serves the tile), times the KV heads (all query heads of a KV head in one task). A tile whose
// keys span several chunks is split into runs of consecutive chunks when the
// step has too few tasks to keep the threads busy (flash-decoding), about 4
// tasks a thread; each chunk of a run gets its own partial, and the partials
// are then folded in chunk order. (A task a chunk cost 1.45x the thread time
// of runs: 0.40 against 0.27-0.28 ms a layer, TinyLlama decode at 8K with q8
// KV on 2 threads.) Either way every output is the same in-order
// fold (kernels/attention.h), so splitting never changes a bit, and a
// sequence's results do not depend on the rest of the batch.
//
// Mixed precision: a query reads the keys from recent_begin(its position) on
// in f16. Those before the step come from the sequence's ring; the step's own
// come from an f16 copy of its K/V rows made here, and they enter the ring
// only after the layer's attention, so a long step never overwrites ring rows
// its first queries still read. A query's keys and their precision then
// depend on positions alone, not on how a prompt is cut into steps.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/isa.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/config.h"

namespace tokamak {

class PagedAttention {
 public:
  static constexpr int kQueryTile = 16;

  explicit PagedAttention(kernels::Isa isa = kernels::best_isa()) : isa_(isa) {}

  // Plans a step over KV stored as `layout` says. q, out: [batch.size(),
  // q_dim] rows of the batch's queries (rotated) and of the attention output;
  // they must stay put until the last run(). Throws tokamak::Error when a
  // sequence's positions in the batch are not distinct and consecutive.
  void plan(const ModelConfig& c, const kv::KvLayout& layout, const Batch& batch, const float* q, float* out,
            int n_threads);
  // Layer `layer`: stores k, v ([batch.size(), kv_dim], keys rotated) at their
  // sequences' positions, computes every token's attention output, then
  // stores the rows in the f16 rings.
  void run(const Batch& batch, kv::KvCache& kv, int32_t layer, const float* k, const float* v, ThreadPool& pool);

 private:
  // A sequence's tokens in the step: order_[first, first + n_tokens), at
  // positions [pos0, pos0 + n_tokens).
  struct SeqRun {
    int32_t seq = 0;
    int32_t first = 0;
    int32_t n_tokens = 0;
    int32_t pos0 = 0;
  };
  struct Tile {
    int32_t run = 0;  // into runs_
    int32_t seq = 0;
    int32_t first = 0;  // into q_rows_ / out_rows_ / positions_
    int32_t n_tokens = 0;
    int64_t first_chunk = 0;  // chunks [first_chunk, n_chunks) hold its keys
    int64_t n_chunks = 0;
    int64_t partials = -1;  // offset of its chunk partials in partials_; -1: not split
  };
  struct Task {
    int32_t tile = 0;
    int32_t kv_head = 0;
    int64_t chunk = -1;      // -1: all chunks, folded in the task
    int64_t chunk_end = -1;  // else chunks [chunk, chunk_end), each into its partial
  };
  kernels::QueryTile query_tile(const Tile& t, int kv_head) const;
  // Splits the batch into runs_ and tiles_; throws for positions that repeat or skip.
  void plan_tiles(const ModelConfig& c, const Batch& batch, const float* q, float* out);
  // k_step_ / v_step_ <- the step's K/V rows rounded to f16.
  void copy_step_rows(const float* k, const float* v);
  // Where the tile's queries find their keys in layer `layer`.
  kernels::KvView tile_view(const kv::KvCache& kv, const Tile& tile, int32_t layer) const;
  // Folds the chunk partials of split tiles into their outputs.
  void fold_split_tiles(ThreadPool& pool);
  // The step's rows into the f16 rings (after the layer's attention).
  void write_recent(const Batch& batch, kv::KvCache& kv, int32_t layer, const float* k, const float* v) const;

  static constexpr int32_t kOneBlock = 0;  // block table of the step's f16 rows: one block

  kernels::Isa isa_;
  kernels::AttentionParams params_;
  kv::KvLayout layout_;
  std::vector<int32_t> order_;  // batch indices grouped by sequence, in position order
  std::vector<SeqRun> runs_;
  std::vector<const float*> q_rows_;
  std::vector<float*> out_rows_;
  std::vector<int32_t> positions_;
  std::vector<Tile> tiles_;
  std::vector<Task> tasks_;
  int64_t task_grain_ = 1;  // tasks per thread at least, so small steps stay on one thread
  std::vector<int32_t> split_tiles_;  // tiles with chunk tasks, to fold after them
  std::vector<float> partials_;       // chunk partials of split tiles
  std::vector<float> scratch_;        // [threads, 2 * tile state] per-thread state
  int64_t scratch_stride_ = 0;
  std::vector<kernels::KvView> views_;  // per tile, for the current layer
  // With an f16 ring: the current layer's K and V rows of the step in f16,
  // per run its own [n_kv_heads][n_tokens] head rows starting at row
  // run.first * n_kv_heads, the position p at row p % n_tokens of each head.
  std::vector<uint16_t> k_step_;
  std::vector<uint16_t> v_step_;
};

}  // namespace tokamak
