// The forward pass: one batched path for prefill and decode alike, in one
// process or split across several (model/forward_dist.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/model.h"
#include "model/paged_attention.h"

namespace tokamak {

// The KV layout a model needs, stored as `format` says.
kv::KvLayout kv_layout_for(const ModelConfig& config, const kv::KvFormat& format = {});
// The layout of the KV this process holds of `model`: its shard's heads and
// layers (the whole model's unless it is split across processes).
kv::KvLayout kv_layout_for(const Model& model, const kv::KvFormat& format = {});

// Scratch buffers and the thread pool for running a Model. Buffers grow to the
// largest batch seen and are then reused, so a decode loop allocates nothing.
//
// A model split across processes (Model::parallel()): run() on world rank 0
// sends each step (the batch and the KV journal) to every rank, runs its own
// part, and gathers the logits rows; the other ranks run serve_steps(). The
// KV cache passed to run() must then journal from its start
// (KvCache::start_journal()), so that every rank's pool keeps its block tables.
class Forward {
 public:
  // `matmul` picks the kernels: by default activations in the weights' partner
  // formats on the best SIMD variant (llama.cpp's arithmetic); precision kF32
  // gives the all-f32 scalar reference. Attention uses the same variant.
  Forward(const Model& model, ThreadPool& pool, kernels::MatmulOptions matmul = {})
      : model_(model), pool_(pool), matmul_options_(matmul), matmul_(matmul), attention_(matmul.isa) {}

  // Runs the batch, appending each token's K/V to its sequence in `kv`.
  // Returns the logits [n_out, n_vocab] of the entries that asked for them, in
  // batch order; valid until the next call. A sequence's positions in the
  // batch are distinct and consecutive, and must not leave a gap after its
  // cached length. Throws tokamak::Error on bad token ids, positions or
  // sequence ids, and when the KV cache is full (before any rank is told).
  std::span<const float> run(const Batch& batch, kv::KvCache& kv);

  // The loop of a rank other than 0 of a split model: runs each step rank 0
  // sends, over a KV pool of its own that replays rank 0's journal, until
  // rank 0 calls stop_steps(). A failure ends every rank (Communicator::abort).
  static void serve_steps(const Model& model, ThreadPool& pool);
  // Rank 0: ends the other ranks' serve_steps().
  static void stop_steps(const Model& model);

 private:
  // One micro-batch of a step: whole sequences, so a pipeline's stages can
  // each work on a different one. Without a pipeline the step is one.
  struct Micro {
    Batch own;                   // its entries, in batch order (unused when the step is one micro-batch)
    const Batch* batch = nullptr;
    int64_t row0 = 0;            // its rows of x_: [row0, row0 + batch->size())
    int64_t out0 = 0;            // its logits rows in local order: [out0, out0 + n_out)
    int64_t n_out = 0;
    std::vector<int32_t> out_rows;  // the batch-order logits row of each of them
  };

  // Checks the batch and finds each sequence's range of positions to write.
  void validate(const Batch& batch, const kv::KvCache& kv);
  // prepare_write() of those ranges.
  void reserve(kv::KvCache& kv);
  void commit(kv::KvCache& kv);
  void grow(int64_t n_tokens, int64_t n_out);

  // x [n, n_embd] <- the embedding rows of the batch's tokens.
  void embed(const Batch& batch, float* x);
  // Every layer this process holds, over x [n, n_embd] in place; the
  // attention plan for `batch` must be made.
  void layers(const Batch& batch, kv::KvCache& kv, float* x);
  // logits [n_out, local vocabulary] of the batch's rows that want them.
  void head(const Batch& batch, const float* x, int64_t n_out, float* logits);
  // An all-reduce over the tensor-parallel ranks when there are several.
  void sum_across_ranks(float* data, int64_t n);
  // y = x · wᵀ for a weight whose input columns are split across the tensor
  // ranks (wo, ffn_down), summed across them: an all-reduce in rank order, or
  // on the f32 reference path one sequential sum that the ranks continue in
  // turn (Matmul::run_continuing), so that --matmul f32 gives one process's bits.
  void project_across_ranks(const TensorView& w, const float* x, int64_t n, float* y);

  // Distributed (forward_dist.cpp): the step to every rank, this rank's
  // stage over every micro-batch, the logits rows to rank 0.
  void broadcast_step(const Batch& batch, kv::KvCache& kv);
  void split_micro(const Batch& batch);
  void run_stage(kv::KvCache& kv);
  void gather_logits(const Batch& batch);

  const Model& model_;
  ThreadPool& pool_;
  kernels::MatmulOptions matmul_options_;
  kernels::Matmul matmul_;  // owns the scratch of converted activations
  // Activations, row-major, one row per batch token; sizes use the shard's
  // (local) heads and FFN width.
  std::vector<float> x_;       // [n, n_embd] residual stream
  std::vector<float> xb_;      // [n, n_embd] normed input of a sub-block
  std::vector<float> q_;       // [n, q_dim]
  std::vector<float> k_;       // [n, kv_dim]
  std::vector<float> v_;       // [n, kv_dim]
  std::vector<float> att_;     // [n, q_dim] attention output
  std::vector<float> proj_;    // [n, n_embd] output of wo / ffn_down
  std::vector<float> gate_;    // [n, n_ff]
  std::vector<float> up_;      // [n, n_ff]
  std::vector<float> out_in_;  // [n_out, n_embd] final-normed rows that want logits
  std::vector<float> logits_;  // [n_out, n_vocab]
  std::vector<float> rope_cos_sin_;  // [rope_dim] cos/sin of one position's angles
  PagedAttention attention_;
  std::vector<int64_t> new_lengths_;  // per sequence id touched by the batch
  std::vector<int64_t> first_writes_;  // per sequence id: lowest position the batch writes
  // Split across processes only.
  std::vector<Micro> micro_;
  std::vector<float> shard_logits_;  // [n_out, this rank's vocabulary rows], micro-batch order
  std::vector<float> recv_logits_;   // rank 0: one micro-batch's rows of another rank
  std::vector<float> reduce_scratch_;  // [tp, n * n_embd]
  std::vector<int64_t> message_;       // the step's batch and KV journal
};

}  // namespace tokamak
