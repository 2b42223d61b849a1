// The attention sub-step of one forward pass over the paged KV cache: stores
// the step's K/V rows, then runs the attention kernels. Planned once per step
// (which query tokens share a task, which long contexts are split across
// threads), run once per layer.
//
// Tasks: the batch's tokens of each sequence in tiles of up to kQueryTile,
// times the KV heads (all query heads of a KV head in one task). A tile whose
// keys span several chunks is split into one task per chunk when the step has
// too few tasks to keep the threads busy (flash-decoding); its chunk partials
// are then folded in chunk order. Either way every output is the same in-order
// fold (kernels/attention.h), so splitting never changes a bit, and a
// sequence's results do not depend on the rest of the batch.
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

  // Plans a step. q, out: [batch.size(), q_dim] rows of the batch's queries
  // (rotated) and of the attention output; they must stay put until the last run().
  void plan(const ModelConfig& c, const Batch& batch, const float* q, float* out, int n_threads);
  // Layer `layer`: stores k, v ([batch.size(), kv_dim], keys rotated) at their
  // sequences' positions, then computes every token's attention output.
  void run(const Batch& batch, kv::KvCache& kv, int32_t layer, const float* k, const float* v, ThreadPool& pool);

 private:
  struct Tile {
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
    int64_t chunk = -1;  // -1: all chunks, folded in the task
  };
  kernels::QueryTile query_tile(const Tile& t, int kv_head) const;

  kernels::Isa isa_;
  kernels::AttentionParams params_;
  std::vector<int32_t> order_;  // batch indices grouped by sequence
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
};

}  // namespace tokamak
