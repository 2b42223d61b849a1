#include "model/paged_attention.h"

#include <algorithm>
#include <numeric>

namespace tokamak {

void PagedAttention::plan(const ModelConfig& c, const Batch& batch, const float* q, float* out, int n_threads) {
  params_ = {c.n_heads, c.n_kv_heads, c.head_dim, c.attn_logit_softcap, c.sliding_window};
  const int32_t n = static_cast<int32_t>(batch.size());
  // The batch's tokens grouped by sequence, in batch order within each.
  std::vector<int32_t>& order = order_;
  order.resize(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return batch.seq_ids[static_cast<size_t>(a)] < batch.seq_ids[static_cast<size_t>(b)];
  });
  q_rows_.clear();
  out_rows_.clear();
  positions_.clear();
  tiles_.clear();
  for (int32_t i = 0; i < n;) {
    const int32_t seq = batch.seq_ids[static_cast<size_t>(order[static_cast<size_t>(i)])];
    Tile tile;
    tile.seq = seq;
    tile.first = i;
    while (i < n && tile.n_tokens < kQueryTile &&
           batch.seq_ids[static_cast<size_t>(order[static_cast<size_t>(i)])] == seq) {
      const int32_t t = order[static_cast<size_t>(i)];
      q_rows_.push_back(q + static_cast<int64_t>(t) * c.q_dim());
      out_rows_.push_back(out + static_cast<int64_t>(t) * c.q_dim());
      positions_.push_back(batch.positions[static_cast<size_t>(t)]);
      ++tile.n_tokens;
      ++i;
    }
    tiles_.push_back(tile);
  }
  // Split long contexts into chunk tasks only when the step is short of tasks.
  const bool split = static_cast<int64_t>(tiles_.size()) * c.n_kv_heads < 4LL * n_threads;
  tasks_.clear();
  split_tiles_.clear();
  int64_t partial_floats = 0;
  for (int32_t ti = 0; ti < static_cast<int32_t>(tiles_.size()); ++ti) {
    Tile& tile = tiles_[static_cast<size_t>(ti)];
    tile.n_chunks = kernels::attention_chunks(query_tile(tile, 0));
    tile.first_chunk = kernels::attention_first_chunk(params_, query_tile(tile, 0));
    const int64_t chunks = tile.n_chunks - tile.first_chunk;
    if (split && chunks > 1) {
      tile.partials = partial_floats;
      partial_floats += chunks * c.n_kv_heads * kernels::attention_tile_state_floats(params_, tile.n_tokens);
      split_tiles_.push_back(ti);
      for (int h = 0; h < c.n_kv_heads; ++h) {
        for (int64_t ch = tile.first_chunk; ch < tile.n_chunks; ++ch) tasks_.push_back({ti, h, ch});
      }
    } else {
      tile.partials = -1;
      for (int h = 0; h < c.n_kv_heads; ++h) tasks_.push_back({ti, h, -1});
    }
  }
  // Multiply-adds of the step (queries x keys x head_dim, QK and PV), so that
  // each thread gets at least ~64K: below that a thread's wake-up costs more.
  int64_t work = 0;
  for (const Tile& tile : tiles_) {
    const int64_t keys = std::min<int64_t>(tile.n_chunks * kernels::kKeyChunk,
                                           positions_[static_cast<size_t>(tile.first + tile.n_tokens - 1)] + 1);
    work += 2LL * tile.n_tokens * c.n_heads * c.head_dim * keys;
  }
  const int64_t per_task = std::max<int64_t>(1, work / std::max<int64_t>(1, static_cast<int64_t>(tasks_.size())));
  task_grain_ = std::max<int64_t>(1, (int64_t{1} << 16) / per_task);
  if (static_cast<int64_t>(partials_.size()) < partial_floats) partials_.resize(static_cast<size_t>(partial_floats));
  scratch_stride_ = 2 * kernels::attention_tile_state_floats(params_, kQueryTile);
  const size_t scratch = static_cast<size_t>(scratch_stride_ * n_threads);
  if (scratch_.size() < scratch) scratch_.resize(scratch);
}

kernels::QueryTile PagedAttention::query_tile(const Tile& t, int kv_head) const {
  kernels::QueryTile q;
  q.q = q_rows_.data() + t.first;
  q.positions = positions_.data() + t.first;
  q.n_tokens = t.n_tokens;
  q.kv_head = kv_head;
  return q;
}

void PagedAttention::run(const Batch& batch, kv::KvCache& kv, int32_t layer, const float* k, const float* v,
                         ThreadPool& pool) {
  const int64_t kv_dim = static_cast<int64_t>(params_.n_kv_heads) * params_.head_dim;
  for (int64_t t = 0; t < batch.size(); ++t) {
    kv.write(batch.seq_ids[static_cast<size_t>(t)], layer, batch.positions[static_cast<size_t>(t)], k + t * kv_dim,
             v + t * kv_dim);
  }
  views_.clear();
  for (const Tile& tile : tiles_) views_.push_back(kv.view(tile.seq, layer));

  pool.parallel_for(static_cast<int64_t>(tasks_.size()), [&](int64_t begin, int64_t end, int thread) {
    float* scratch = scratch_.data() + thread * scratch_stride_;
    for (int64_t i = begin; i < end; ++i) {
      const Task& task = tasks_[static_cast<size_t>(i)];
      const Tile& tile = tiles_[static_cast<size_t>(task.tile)];
      const kernels::QueryTile qt = query_tile(tile, task.kv_head);
      const kernels::KvView& view = views_[static_cast<size_t>(task.tile)];
      if (task.chunk < 0) {
        kernels::attention(isa_, params_, view, qt, out_rows_.data() + tile.first, scratch);
      } else {
        const int64_t state = kernels::attention_tile_state_floats(params_, tile.n_tokens);
        const int64_t chunks = tile.n_chunks - tile.first_chunk;
        float* partial =
            partials_.data() + tile.partials + (task.kv_head * chunks + task.chunk - tile.first_chunk) * state;
        kernels::attention_chunk(isa_, params_, view, qt, task.chunk, partial);
      }
    }
  }, task_grain_);
  if (split_tiles_.empty()) return;
  // Fold the chunk partials of split tiles, in chunk order.
  const int64_t n_folds = static_cast<int64_t>(split_tiles_.size()) * params_.n_kv_heads;
  pool.parallel_for(n_folds, [&](int64_t begin, int64_t end, int thread) {
    float* running = scratch_.data() + thread * scratch_stride_;
    for (int64_t i = begin; i < end; ++i) {
      const Tile& tile = tiles_[static_cast<size_t>(split_tiles_[static_cast<size_t>(i / params_.n_kv_heads)])];
      const int kv_head = static_cast<int>(i % params_.n_kv_heads);
      const int64_t state = kernels::attention_tile_state_floats(params_, tile.n_tokens);
      const int64_t n_queries = static_cast<int64_t>(tile.n_tokens) * params_.group();
      kernels::attention_reset(params_, n_queries, running);
      const int64_t chunks = tile.n_chunks - tile.first_chunk;
      for (int64_t ch = 0; ch < chunks; ++ch) {
        const float* partial = partials_.data() + tile.partials + (kv_head * chunks + ch) * state;
        kernels::attention_fold(params_, n_queries, partial, running);
      }
      kernels::attention_finish(params_, query_tile(tile, kv_head), running, out_rows_.data() + tile.first);
    }
  });
}

}  // namespace tokamak
