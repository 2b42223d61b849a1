#include "kv/block_pool.h"

#include <cstring>
#include <string>

#include "core/error.h"

namespace tokamak::kv {
BlockPool::BlockPool(const KvLayout& layout, int32_t n_blocks) : layout_(layout) {
  layout.validate();
  if (n_blocks <= 0) throw Error("KV cache: block count must be positive, got " + std::to_string(n_blocks));
  block_bytes_ = layout.block_bytes();
  const int64_t bytes = block_bytes_ * n_blocks;
  storage_ = HugePageBuffer(static_cast<size_t>(bytes), "KV cache of " + std::to_string(n_blocks) + " blocks");
  refcounts_.assign(static_cast<size_t>(n_blocks), 0);
  free_list_.reserve(static_cast<size_t>(n_blocks));
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_list_.push_back(b);
  check_counts();
}

void BlockPool::check_id(int32_t block, const char* op) const {
  if (block < 0 || block >= n_blocks()) {
    throw Error(std::string("KV cache: ") + op + " of block id " + std::to_string(block) + " outside [0, " +
                std::to_string(n_blocks()) + ")");
  }
}

void BlockPool::check_counts() const {
  if (n_used_ < 0 || n_used_ + n_free() != n_blocks()) {
    throw Error("KV cache invariant broken: " + std::to_string(n_used_) + " used + " + std::to_string(n_free()) +
                " free blocks != " + std::to_string(n_blocks()));
  }
}

int32_t BlockPool::refcount(int32_t block) const {
  check_id(block, "refcount");
  return refcounts_[static_cast<size_t>(block)];
}

int32_t BlockPool::allocate() {
  if (free_list_.empty()) {
    throw Error("KV cache is full: all " + std::to_string(n_blocks()) + " blocks of " +
                std::to_string(layout_.format.block_size) + " tokens are in use (the --kv-memory budget is smaller than the context: raise it, or lower -c)");
  }
  const int32_t b = free_list_.back();
  int32_t& rc = refcounts_[static_cast<size_t>(b)];
  if (rc != 0)
    throw Error("KV cache invariant broken: free block " + std::to_string(b) + " has refcount " + std::to_string(rc));
  free_list_.pop_back();
  rc = 1;
  ++n_used_;
  check_counts();
  return b;
}

void BlockPool::retain(int32_t block) {
  check_id(block, "retain");
  int32_t& rc = refcounts_[static_cast<size_t>(block)];
  if (rc <= 0) throw Error("KV cache: retain of free block " + std::to_string(block));
  ++rc;
}

void BlockPool::release(int32_t block) {
  check_id(block, "release");
  int32_t& rc = refcounts_[static_cast<size_t>(block)];
  if (rc <= 0) throw Error("KV cache: release of free block " + std::to_string(block));
  if (--rc == 0) {
    free_list_.push_back(block);
    --n_used_;
  }
  check_counts();
}

int32_t BlockPool::copy(int32_t block) {
  check_id(block, "copy");
  if (refcounts_[static_cast<size_t>(block)] <= 0) throw Error("KV cache: copy of free block " + std::to_string(block));
  const int32_t b = allocate();
  std::memcpy(block_data(b), block_data(block), static_cast<size_t>(block_bytes_));
  return b;
}

void BlockPool::check_invariants() const {
  check_counts();
  std::vector<uint8_t> on_free_list(refcounts_.size(), 0);
  for (int32_t b : free_list_) {
    check_id(b, "free list entry");
    if (on_free_list[static_cast<size_t>(b)]++) {
      throw Error("KV cache invariant broken: block " + std::to_string(b) + " is on the free list twice");
    }
  }
  int32_t used = 0;
  for (int32_t b = 0; b < n_blocks(); ++b) {
    const int32_t rc = refcounts_[static_cast<size_t>(b)];
    const bool free = on_free_list[static_cast<size_t>(b)] != 0;
    if (rc < 0 || (rc == 0) != free) {
      throw Error("KV cache invariant broken: block " + std::to_string(b) + " has refcount " + std::to_string(rc) +
                  (free ? " but is on the free list" : " but is not on the free list"));
    }
    used += rc > 0;
  }
  if (used != n_used_)
    throw Error("KV cache invariant broken: " + std::to_string(used) + " blocks referenced, " +
                std::to_string(n_used_) + " counted");
}

}  // namespace tokamak::kv
