#include "kv/block_pool.h"

#include <cassert>
#include <string>

#include "core/error.h"

namespace tokamak::kv {

BlockPool::BlockPool(const KvLayout& layout, int32_t n_blocks) : layout_(layout) {
  if (n_blocks <= 0) throw Error("KV cache: block count must be positive, got " + std::to_string(n_blocks));
  if (layout.block_size <= 0) throw Error("KV cache: block size must be positive, got " + std::to_string(layout.block_size));
  if (layout.n_layers <= 0 || layout.n_kv_heads <= 0 || layout.head_dim <= 0) {
    throw Error("KV cache: invalid layout (layers " + std::to_string(layout.n_layers) + ", kv heads " +
                std::to_string(layout.n_kv_heads) + ", head dim " + std::to_string(layout.head_dim) + ")");
  }
  const int64_t floats = static_cast<int64_t>(n_blocks) * layout.n_layers * 2 * layout.page_floats();
  storage_.assign(static_cast<size_t>(floats), 0.0f);
  refcounts_.assign(static_cast<size_t>(n_blocks), 0);
  free_list_.reserve(static_cast<size_t>(n_blocks));
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

void BlockPool::check_id(int32_t block, const char* op) const {
  if (block < 0 || block >= n_blocks()) {
    throw Error(std::string("KV cache: ") + op + " of block id " + std::to_string(block) + " outside [0, " +
                std::to_string(n_blocks()) + ")");
  }
}

int32_t BlockPool::refcount(int32_t block) const {
  check_id(block, "refcount");
  return refcounts_[static_cast<size_t>(block)];
}

int32_t BlockPool::allocate() {
  if (free_list_.empty()) {
    throw Error("KV cache is full: all " + std::to_string(n_blocks()) + " blocks of " +
                std::to_string(layout_.block_size) + " tokens are in use (raise -c/--ctx-size)");
  }
  const int32_t b = free_list_.back();
  free_list_.pop_back();
  assert(refcounts_[static_cast<size_t>(b)] == 0);
  refcounts_[static_cast<size_t>(b)] = 1;
  return b;
}

void BlockPool::retain(int32_t block) {
  check_id(block, "retain");
  if (refcounts_[static_cast<size_t>(block)] <= 0) {
    throw Error("KV cache: retain of free block " + std::to_string(block));
  }
  ++refcounts_[static_cast<size_t>(block)];
}

void BlockPool::release(int32_t block) {
  check_id(block, "release");
  int32_t& rc = refcounts_[static_cast<size_t>(block)];
  if (rc <= 0) throw Error("KV cache: release of free block " + std::to_string(block));
  if (--rc == 0) free_list_.push_back(block);
  assert(free_list_.size() <= refcounts_.size());
}

kernels::KvPages BlockPool::layer_pages(int32_t layer, const int32_t* block_table) const {
  kernels::KvPages p;
  p.k_base = storage_.data() + page_offset(0, layer);
  p.v_base = p.k_base + layout_.page_floats();
  p.block_stride = static_cast<int64_t>(layout_.n_layers) * 2 * layout_.page_floats();
  p.block_size = layout_.block_size;
  p.row_floats = static_cast<int32_t>(layout_.row_floats());
  p.block_table = block_table;
  return p;
}

}  // namespace tokamak::kv
