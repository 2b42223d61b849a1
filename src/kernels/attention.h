// Causal multi-head attention of one query token over its sequence's K/V,
// read in place from the paged KV cache (f32 elements).
#pragma once

#include <cstdint>

namespace tokamak::kernels {

// One layer of one sequence's KV as it lies in the block pool. Position p is
// in block block_table[p / block_size] at row p % block_size; a row holds
// n_kv_heads * head_dim floats.
struct KvPages {
  const float* k_base = nullptr;  // K page of block 0 for this layer
  const float* v_base = nullptr;  // V page of block 0 for this layer
  int64_t block_stride = 0;       // floats from one block's page to the next block's
  int32_t block_size = 0;
  int32_t row_floats = 0;         // n_kv_heads * head_dim
  const int32_t* block_table = nullptr;

  const float* k_row(int64_t pos) const { return k_base + offset(pos); }
  const float* v_row(int64_t pos) const { return v_base + offset(pos); }
  int64_t offset(int64_t pos) const {
    return static_cast<int64_t>(block_table[pos / block_size]) * block_stride + (pos % block_size) * row_floats;
  }
};

// out[h] = softmax(s) V over keys [key_begin, key_end), s = q[h] . K^T / sqrt(head_dim)
// (with softcap > 0: s -> softcap * tanh(s / softcap)), for query heads h in
// [head_begin, head_end). Query head h reads KV head h / (n_heads / n_kv_heads)
// (GQA by index). q, out: [n_heads, head_dim]; scores: key_end floats of scratch.
// Reference form: scores are materialized, softmax, then the weighted V sum.
void attention_ref(const float* q, int n_heads, int n_kv_heads, int head_dim, const KvPages& kv, int64_t key_begin,
                   int64_t key_end, float softcap, int head_begin, int head_end, float* out, float* scores);

}  // namespace tokamak::kernels
