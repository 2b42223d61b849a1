// The forward pass: one batched path for prefill and decode alike.
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

// Scratch buffers and the thread pool for running a Model. Buffers grow to the
// largest batch seen and are then reused, so a decode loop allocates nothing.
class Forward {
 public:
  // `matmul` picks the kernels: by default activations in the weights' partner
  // formats on the best SIMD variant (llama.cpp's arithmetic); precision kF32
  // gives the all-f32 scalar reference. Attention uses the same variant.
  Forward(const Model& model, ThreadPool& pool, kernels::MatmulOptions matmul = {})
      : model_(model), pool_(pool), matmul_(matmul), attention_(matmul.isa) {}

  // Runs the batch, appending each token's K/V to its sequence in `kv`.
  // Returns the logits [n_out, n_vocab] of the entries that asked for them, in
  // batch order; valid until the next call. A sequence's positions in the
  // batch are distinct and consecutive, and must not leave a gap after its
  // cached length. Throws tokamak::Error on bad token ids, positions or
  // sequence ids, and when the KV cache is full.
  std::span<const float> run(const Batch& batch, kv::KvCache& kv);

 private:
  // Checks the batch and finds each sequence's range of positions to write.
  void validate(const Batch& batch, const kv::KvCache& kv);
  // prepare_write() of those ranges.
  void reserve(kv::KvCache& kv);
  void attention_layer(const Batch& batch, kv::KvCache& kv, int32_t layer);
  void grow(int64_t n_tokens, int64_t n_out);

  const Model& model_;
  ThreadPool& pool_;
  kernels::Matmul matmul_;  // owns the scratch of converted activations
  // Activations, row-major, one row per batch token.
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
};

}  // namespace tokamak
