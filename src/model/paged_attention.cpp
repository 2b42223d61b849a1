#include "model/paged_attention.h"

#include <algorithm>
#include <atomic>
#include <numeric>
#include <string>

#include "core/error.h"

namespace tokamak {

void PagedAttention::plan_tiles(const ModelConfig& c, const Batch& batch, const float* q, float* out) {
  const int32_t n = static_cast<int32_t>(batch.size());
  const auto seq_of = [&](int32_t i) { return batch.seq_ids[static_cast<size_t>(order_[static_cast<size_t>(i)])]; };
  const auto pos_of = [&](int32_t i) { return batch.positions[static_cast<size_t>(order_[static_cast<size_t>(i)])]; };
  // The batch's tokens grouped by sequence, in position order within each
  // (std::sort allocates nothing; positions are checked distinct below).
  order_.resize(static_cast<size_t>(n));
  std::iota(order_.begin(), order_.end(), 0);
  std::sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) {
    const int32_t sa = batch.seq_ids[static_cast<size_t>(a)], sb = batch.seq_ids[static_cast<size_t>(b)];
    return sa != sb ? sa < sb : batch.positions[static_cast<size_t>(a)] < batch.positions[static_cast<size_t>(b)];
  });
  q_rows_.clear();
  out_rows_.clear();
  positions_.clear();
  runs_.clear();
  tiles_.clear();
  for (int32_t i = 0; i < n; ++i) {
    const int32_t t = order_[static_cast<size_t>(i)];
    q_rows_.push_back(q + static_cast<int64_t>(t) * c.q_dim());
    out_rows_.push_back(out + static_cast<int64_t>(t) * c.q_dim());
    positions_.push_back(pos_of(i));
    if (runs_.empty() || runs_.back().seq != seq_of(i)) {
      runs_.push_back({seq_of(i), i, 0, pos_of(i)});
    } else if (pos_of(i) != pos_of(i - 1) + 1) {
      throw Error("batch: sequence " + std::to_string(seq_of(i)) + " has positions " + std::to_string(pos_of(i - 1)) +
                  " and " + std::to_string(pos_of(i)) + " in one step (a step's positions of a sequence must be " +
                  "distinct and consecutive)");
    }
    ++runs_.back().n_tokens;
    // A new tile at a new sequence, a full tile, or (with a ring) another recent_begin.
    const bool same_tile = !tiles_.empty() && tiles_.back().seq == seq_of(i) && tiles_.back().n_tokens < kQueryTile &&
                           (!layout_.has_recent() || layout_.recent_begin(positions_[static_cast<size_t>(tiles_.back().first)]) ==
                                                         layout_.recent_begin(pos_of(i)));
    if (!same_tile) {
      Tile tile;
      tile.run = static_cast<int32_t>(runs_.size()) - 1;
      tile.seq = seq_of(i);
      tile.first = i;
      tiles_.push_back(tile);
    }
    ++tiles_.back().n_tokens;
  }
}

void PagedAttention::plan(const ModelConfig& c, const kv::KvLayout& layout, const Batch& batch, const float* q,
                          float* out, int n_threads) {
  params_ = {c.n_heads, c.n_kv_heads, c.head_dim, c.attn_logit_softcap, c.sliding_window};
  layout_ = layout;
  plan_tiles(c, batch, q, out);
  if (layout_.has_recent()) {
    const size_t rows = static_cast<size_t>(batch.size() * c.kv_dim());
    if (k_step_.size() < rows) k_step_.resize(rows);
    if (v_step_.size() < rows) v_step_.resize(rows);
  }
  // Split long contexts into chunk tasks only when the step is short of tasks.
  const int64_t unsplit_tasks = static_cast<int64_t>(tiles_.size()) * c.n_kv_heads;
  const bool split = unsplit_tasks < 4LL * n_threads;
  // Runs of chunks per (tile, KV head) when split: ~4 tasks a thread in all.
  const int64_t runs_per_head = (4LL * n_threads + unsplit_tasks - 1) / std::max<int64_t>(1, unsplit_tasks);
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
      const int64_t runs = std::min(chunks, runs_per_head);
      for (int h = 0; h < c.n_kv_heads; ++h) {
        for (int64_t r = 0; r < runs; ++r) {
          tasks_.push_back({ti, h, tile.first_chunk + chunks * r / runs, tile.first_chunk + chunks * (r + 1) / runs});
        }
      }
    } else {
      tile.partials = -1;
      for (int h = 0; h < c.n_kv_heads; ++h) tasks_.push_back({ti, h, -1});
    }
  }
  // Multiply-adds of the step (queries x keys x head_dim, QK and PV), so that
  // each thread gets at least ~4K: a task costs far more than its
  // multiply-adds (stories260K's 8-wide heads: ~0.5 us for ~4K at 128 keys),
  // and a fork-join of the pool ~140 ns while its workers spin.
  int64_t work = 0;
  for (const Tile& tile : tiles_) {
    const int64_t keys = std::min<int64_t>(tile.n_chunks * kernels::kKeyChunk,
                                           positions_[static_cast<size_t>(tile.first + tile.n_tokens - 1)] + 1);
    work += 2LL * tile.n_tokens * c.n_heads * c.head_dim * keys;
  }
  const int64_t per_task = std::max<int64_t>(1, work / std::max<int64_t>(1, static_cast<int64_t>(tasks_.size())));
  task_grain_ = std::max<int64_t>(1, (int64_t{1} << 12) / per_task);
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

void PagedAttention::copy_step_rows(const float* k, const float* v) {
  const int d = params_.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(params_.n_kv_heads) * d;
  for (const SeqRun& r : runs_) {
    for (int32_t i = 0; i < r.n_tokens; ++i) {
      const int64_t t = order_[static_cast<size_t>(r.first + i)];
      const int64_t row = (r.pos0 + i) % r.n_tokens;
      for (int h = 0; h < params_.n_kv_heads; ++h) {
        const int64_t at = (static_cast<int64_t>(r.first) * params_.n_kv_heads + h * r.n_tokens + row) * d;
        if (layout_.k_recent()) {
          kernels::quantize_kv_row(kernels::KvType::F16, k + t * kv_dim + h * d, d,
                                   reinterpret_cast<uint8_t*>(k_step_.data() + at));
        }
        if (layout_.v_recent()) {
          kernels::quantize_kv_row(kernels::KvType::F16, v + t * kv_dim + h * d, d,
                                   reinterpret_cast<uint8_t*>(v_step_.data() + at));
        }
      }
    }
  }
}

kernels::KvView PagedAttention::tile_view(const kv::KvCache& kv, const Tile& tile, int32_t layer) const {
  kernels::KvView view = kv.view(tile.seq, layer, positions_[static_cast<size_t>(tile.first)]);
  if (!layout_.has_recent()) return view;
  const SeqRun& r = runs_[static_cast<size_t>(tile.run)];
  const int64_t first_row = static_cast<int64_t>(r.first) * params_.n_kv_heads * params_.head_dim;
  kernels::KvPages& s = view.step;
  s.k_base = reinterpret_cast<const uint8_t*>(k_step_.data() + first_row);
  s.v_base = reinterpret_cast<const uint8_t*>(v_step_.data() + first_row);
  s.block_table = &kOneBlock;
  s.block_size = r.n_tokens;
  s.ring_rows = r.n_tokens;
  s.k_type = s.v_type = kernels::KvType::F16;
  s.k_row_bytes = s.v_row_bytes = static_cast<int32_t>(layout_.recent_head_row_bytes());
  s.k_head_stride = s.v_head_stride = r.n_tokens * layout_.recent_head_row_bytes();  // [head][row]: copy_step_rows
  view.step_begin = r.pos0;
  return view;
}

void PagedAttention::run(const Batch& batch, kv::KvCache& kv, int32_t layer, const float* k, const float* v,
                         ThreadPool& pool) {
  const int64_t kv_dim = static_cast<int64_t>(params_.n_kv_heads) * params_.head_dim;
  for (int64_t t = 0; t < batch.size(); ++t) {
    kv.write_stored(batch.seq_ids[static_cast<size_t>(t)], layer, batch.positions[static_cast<size_t>(t)],
                    k + t * kv_dim, v + t * kv_dim);
  }
  if (layout_.has_recent()) copy_step_rows(k, v);
  views_.clear();
  for (const Tile& tile : tiles_) views_.push_back(tile_view(kv, tile, layer));

  // Threads claim tasks one at a time, the last first: a causal prefill's
  // later tiles see more keys, and a static split of the list gave the second
  // thread ~3x the first's work (F16 pp512 on 2 threads). Which thread runs a
  // task never changes its values.
  const int64_t n_tasks = static_cast<int64_t>(tasks_.size());
  std::atomic<int64_t> claimed{0};
  // As many threads as the step has task_grain_'s worth of tasks for.
  const int64_t n_ranges = std::min<int64_t>(pool.size(), (n_tasks + task_grain_ - 1) / task_grain_);
  pool.parallel_for(n_ranges, [&](int64_t, int64_t, int thread) {
    float* scratch = scratch_.data() + thread * scratch_stride_;
    for (int64_t c = claimed.fetch_add(1, std::memory_order_relaxed); c < n_tasks;
         c = claimed.fetch_add(1, std::memory_order_relaxed)) {
      const Task& task = tasks_[static_cast<size_t>(n_tasks - 1 - c)];
      const Tile& tile = tiles_[static_cast<size_t>(task.tile)];
      const kernels::QueryTile qt = query_tile(tile, task.kv_head);
      const kernels::KvView& view = views_[static_cast<size_t>(task.tile)];
      if (task.chunk < 0) {
        kernels::attention(isa_, params_, view, qt, out_rows_.data() + tile.first, scratch);
      } else {
        const int64_t state = kernels::attention_tile_state_floats(params_, tile.n_tokens);
        const int64_t chunks = tile.n_chunks - tile.first_chunk;
        for (int64_t ch = task.chunk; ch < task.chunk_end; ++ch) {
          float* partial = partials_.data() + tile.partials + (task.kv_head * chunks + ch - tile.first_chunk) * state;
          kernels::attention_chunk(isa_, params_, view, qt, ch, partial);
        }
      }
    }
  });
  fold_split_tiles(pool);
  write_recent(batch, kv, layer, k, v);
}

void PagedAttention::fold_split_tiles(ThreadPool& pool) {
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

void PagedAttention::write_recent(const Batch& batch, kv::KvCache& kv, int32_t layer, const float* k,
                                  const float* v) const {
  if (!layout_.has_recent()) return;
  const int64_t kv_dim = static_cast<int64_t>(params_.n_kv_heads) * params_.head_dim;
  for (int64_t t = 0; t < batch.size(); ++t) {
    kv.write_recent(batch.seq_ids[static_cast<size_t>(t)], layer, batch.positions[static_cast<size_t>(t)],
                    k + t * kv_dim, v + t * kv_dim);
  }
}

}  // namespace tokamak
