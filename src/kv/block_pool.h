// The KV cache's memory: a pool of fixed-size blocks, each holding K and V of
// `block_size` consecutive positions of one sequence for all layers, in the
// byte layout of KvLayout (kv/kv_layout.h). Blocks are refcounted so that
// sequences can share them (fork, prefix sharing); a block with more than one
// reference is never written: writers copy it first (copy()).
//
// Block b's bytes: data() + b * block_bytes. The storage is allocated once, on
// huge pages (attention reads one head's rows of a block per layer: on 4 KiB
// pages nearly every such run is a TLB miss); untouched pages cost no RAM.
#pragma once

#include <cstdint>
#include <vector>

#include "core/huge_pages.h"
#include "kv/kv_layout.h"

namespace tokamak::kv {

class BlockPool {
 public:
  // Throws tokamak::Error for an invalid layout, a non-positive block count or
  // an allocation that fails.
  BlockPool(const KvLayout& layout, int32_t n_blocks);

  const KvLayout& layout() const { return layout_; }
  int32_t n_blocks() const { return static_cast<int32_t>(refcounts_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t n_used() const { return n_used_; }
  int64_t block_bytes() const { return block_bytes_; }
  int64_t capacity_bytes() const { return block_bytes_ * n_blocks(); }
  int32_t refcount(int32_t block) const;

  // A free block with refcount 1: the most recently freed one, or the lowest
  // id never used. Throws tokamak::Error when the pool is exhausted.
  int32_t allocate();
  void retain(int32_t block);
  // Drops one reference; the block returns to the free list at zero.
  void release(int32_t block);
  // A new block (refcount 1) holding a copy of all of `block`'s bytes; `block`
  // keeps its references. Cost: one block_bytes memcpy.
  int32_t copy(int32_t block);

  uint8_t* block_data(int32_t block) { return bytes() + static_cast<int64_t>(block) * block_bytes_; }
  const uint8_t* data() const { return bytes(); }

  // O(n_blocks) audit: every block is either referenced (refcount > 0, not on
  // the free list) or free (refcount 0, on the free list once), and the counts
  // add up. Throws tokamak::Error naming the first broken invariant.
  void check_invariants() const;

 private:
  uint8_t* bytes() const { return reinterpret_cast<uint8_t*>(storage_.data()); }
  void check_id(int32_t block, const char* op) const;
  // O(1) invariants, checked after every mutation.
  void check_counts() const;

  KvLayout layout_;
  int64_t block_bytes_ = 0;
  HugePageBuffer storage_;
  std::vector<int32_t> refcounts_;
  std::vector<int32_t> free_list_;  // popped from the back: lowest ids are handed out first
  int32_t n_used_ = 0;
};

}  // namespace tokamak::kv
