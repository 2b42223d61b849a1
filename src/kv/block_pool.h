// The KV cache's memory: a pool of fixed-size blocks, each holding K and V of
// `block_size` consecutive positions of one sequence for all layers, in the
// byte layout of KvLayout (kv/kv_layout.h). Blocks are refcounted so that
// sequences can share them (fork, prefix sharing); a block with more than one
// reference is never written: writers copy it first (copy()).
//
// Prefix caching: a full block whose K/V is computed can be registered under a
// key (kv/prefix_key.h). When its last reference goes, a registered block is
// not freed but kept, evictable, in LRU order; find_cached() + acquire() give it
// to a new sequence without recomputing it. allocate() takes a never-registered
// free block first (FIFO: least recently freed), and only when none is left
// evicts the least recently used registered block (its key is forgotten).
//
// Block b's bytes: its chunk of each layer, head, K and V (chunk()), where
// KvLayout's planar layout puts them. The storage is allocated once, on huge
// pages (attention streams one head's rows of a layer: on 4 KiB pages it
// would miss the TLB every few blocks); untouched pages cost no RAM, but a
// block's chunks lie in every plane, so the first blocks written make a
// page of each plane resident (a pool whose planes are under 2 MiB, as
// `run` sizes it for a 4K context, is then resident whole, as llama.cpp's
// cache is from the start).
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
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
  // Touches every page of the storage now, so that all of it is resident
  // from the start (a server fails at start-up, not hours later, when the
  // RAM is short; its resident memory then stays flat as the cache fills).
  void reserve_memory();
  int32_t n_blocks() const { return static_cast<int32_t>(refcounts_.size()); }
  // Blocks with no reference: plain free ones and evictable cached ones.
  int32_t n_free() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t n_evictable() const { return n_evictable_; }
  int32_t n_allocatable() const { return n_free() + n_evictable(); }
  int32_t n_used() const { return n_used_; }
  int64_t block_bytes() const { return block_bytes_; }
  int64_t capacity_bytes() const { return block_bytes_ * n_blocks(); }
  int32_t refcount(int32_t block) const;

  // A block with refcount 1 and no key: the least recently freed plain block
  // (ids in order at first), else the least recently used evictable one.
  // Throws tokamak::Error when every block is referenced.
  int32_t allocate();
  // One more reference to a referenced block, or to an evictable cached one
  // (which leaves the LRU).
  void retain(int32_t block);
  // Drops one reference; at zero a registered block becomes evictable (most
  // recently used end of the LRU), any other returns to the free list.
  void release(int32_t block);

  // Registers a referenced block under `key`. False (nothing changes) when the
  // key names another block already or the block has a key.
  bool register_key(int32_t block, uint64_t key);
  // The block registered under `key`, or -1. It may be evictable: retain() it.
  int32_t find_cached(uint64_t key) const;
  bool has_key(int32_t block) const { return keyed_[static_cast<size_t>(block)] != 0; }
  int64_t evictions() const { return evictions_; }
  // A new block (refcount 1) holding a copy of all of `block`'s bytes; `block`
  // keeps its references. Cost: block_bytes copied, a chunk at a time.
  int32_t copy(int32_t block);

  // Block `block`'s rows of one layer and KV head, K (keys) or V:
  // layout().k_chunk_bytes() (v_chunk_bytes()) bytes.
  uint8_t* chunk(int32_t block, int32_t layer, int32_t head, bool keys) {
    return bytes() + layout_.plane_offset(layer, head, keys, n_blocks()) +
           static_cast<int64_t>(block) * (keys ? layout_.k_chunk_bytes() : layout_.v_chunk_bytes());
  }
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
  // Evictable blocks: an intrusive list over block ids, least recently used first.
  void lru_push_back(int32_t block);
  void lru_unlink(int32_t block);

  std::vector<int32_t> refcounts_;
  std::deque<int32_t> free_list_;  // plain free blocks, least recently freed first
  int32_t n_used_ = 0;
  std::vector<uint64_t> keys_;     // [n_blocks] the block's key when keyed_
  std::vector<uint8_t> keyed_;     // [n_blocks]
  std::unordered_map<uint64_t, int32_t> cached_;  // key -> block
  std::vector<int32_t> lru_prev_, lru_next_;      // [n_blocks]; -1 ends
  int32_t lru_head_ = -1, lru_tail_ = -1;         // least / most recently used
  int32_t n_evictable_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace tokamak::kv
