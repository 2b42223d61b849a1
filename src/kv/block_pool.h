// The KV cache's memory: a pool of fixed-size blocks, each holding K and V
// for `block_size` consecutive token positions of one sequence, for all layers.
// Sequences find their blocks through a BlockTable; blocks are refcounted so
// that later features (prefix sharing, fork) can share them.
//
// Storage of block b (f32 elements), for each layer l:
//   K page: [block_size, n_kv_heads * head_dim] at ((b * n_layers + l) * 2 + 0) * page_floats
//   V page: same shape, right after the K page.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention.h"

namespace tokamak::kv {

struct KvLayout {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;

  int64_t row_floats() const { return static_cast<int64_t>(n_kv_heads) * head_dim; }
  int64_t page_floats() const { return row_floats() * block_size; }
  // K and V of every layer for one token.
  int64_t bytes_per_token() const { return 2LL * n_layers * row_floats() * static_cast<int64_t>(sizeof(float)); }
};

class BlockPool {
 public:
  // Throws tokamak::Error for a non-positive size or an allocation that fails.
  BlockPool(const KvLayout& layout, int32_t n_blocks);

  const KvLayout& layout() const { return layout_; }
  int32_t n_blocks() const { return static_cast<int32_t>(refcounts_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t refcount(int32_t block) const;

  // A free block with refcount 1. Throws tokamak::Error when the pool is exhausted.
  int32_t allocate();
  void retain(int32_t block);
  // Drops one reference; the block returns to the free list at zero.
  void release(int32_t block);

  float* k_page(int32_t block, int32_t layer) { return storage_.data() + page_offset(block, layer); }
  float* v_page(int32_t block, int32_t layer) { return k_page(block, layer) + layout_.page_floats(); }
  // A kernel's view of one layer, addressed through `block_table`.
  kernels::KvPages layer_pages(int32_t layer, const int32_t* block_table) const;

 private:
  int64_t page_offset(int32_t block, int32_t layer) const {
    return ((static_cast<int64_t>(block) * layout_.n_layers + layer) * 2) * layout_.page_floats();
  }
  void check_id(int32_t block, const char* op) const;

  KvLayout layout_;
  std::vector<float> storage_;
  std::vector<int32_t> refcounts_;
  std::vector<int32_t> free_list_;  // popped from the back: lowest ids are handed out first
};

// The blocks of one sequence, in position order, and how many positions hold KV.
struct BlockTable {
  std::vector<int32_t> blocks;
  int64_t n_tokens = 0;
};

}  // namespace tokamak::kv
