#include "kv/block_pool.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"

namespace tokamak::kv {
void BlockPool::reserve_memory() { std::memset(bytes(), 0, static_cast<size_t>(capacity_bytes())); }

BlockPool::BlockPool(const KvLayout& layout, int32_t n_blocks) : layout_(layout) {
  layout.validate();
  if (n_blocks <= 0) throw Error("KV cache: block count must be positive, got " + std::to_string(n_blocks));
  block_bytes_ = layout.block_bytes();
  const int64_t bytes = block_bytes_ * n_blocks;
  storage_ = HugePageBuffer(static_cast<size_t>(bytes), "KV cache of " + std::to_string(n_blocks) + " blocks");
  const auto n = static_cast<size_t>(n_blocks);
  refcounts_.assign(n, 0);
  for (int32_t b = 0; b < n_blocks; ++b) free_list_.push_back(b);
  keys_.assign(n, 0);
  keyed_.assign(n, 0);
  lru_prev_.assign(n, -1);
  lru_next_.assign(n, -1);
  check_counts();
}

void BlockPool::check_id(int32_t block, const char* op) const {
  if (block < 0 || block >= n_blocks()) {
    throw Error(std::string("KV cache: ") + op + " of block id " + std::to_string(block) + " outside [0, " +
                std::to_string(n_blocks()) + ")");
  }
}

void BlockPool::check_counts() const {
  if (n_used_ < 0 || n_evictable_ < 0 || n_used_ + n_free() + n_evictable_ != n_blocks()) {
    throw Error("KV cache invariant broken: " + std::to_string(n_used_) + " used + " + std::to_string(n_free()) +
                " free + " + std::to_string(n_evictable_) + " evictable blocks != " + std::to_string(n_blocks()));
  }
}

void BlockPool::lru_push_back(int32_t b) {
  lru_prev_[static_cast<size_t>(b)] = lru_tail_;
  lru_next_[static_cast<size_t>(b)] = -1;
  if (lru_tail_ >= 0) lru_next_[static_cast<size_t>(lru_tail_)] = b;
  else lru_head_ = b;
  lru_tail_ = b;
  ++n_evictable_;
}

void BlockPool::lru_unlink(int32_t b) {
  const int32_t prev = lru_prev_[static_cast<size_t>(b)], next = lru_next_[static_cast<size_t>(b)];
  if (prev >= 0) lru_next_[static_cast<size_t>(prev)] = next;
  else lru_head_ = next;
  if (next >= 0) lru_prev_[static_cast<size_t>(next)] = prev;
  else lru_tail_ = prev;
  lru_prev_[static_cast<size_t>(b)] = lru_next_[static_cast<size_t>(b)] = -1;
  --n_evictable_;
}

int32_t BlockPool::refcount(int32_t block) const {
  check_id(block, "refcount");
  return refcounts_[static_cast<size_t>(block)];
}

int32_t BlockPool::allocate() {
  int32_t b = -1;
  if (!free_list_.empty()) {
    b = free_list_.front();
    free_list_.pop_front();
  } else if (lru_head_ >= 0) {
    b = lru_head_;  // evict: the least recently used cached block
    lru_unlink(b);
    cached_.erase(keys_[static_cast<size_t>(b)]);
    keyed_[static_cast<size_t>(b)] = 0;
    ++evictions_;
  } else {
    throw Error("KV cache is full: all " + std::to_string(n_blocks()) + " blocks of " +
                std::to_string(layout_.format.block_size) + " tokens are in use (raise --kv-memory)");
  }
  int32_t& rc = refcounts_[static_cast<size_t>(b)];
  if (rc != 0)
    throw Error("KV cache invariant broken: free block " + std::to_string(b) + " has refcount " + std::to_string(rc));
  rc = 1;
  ++n_used_;
  check_counts();
  return b;
}

void BlockPool::retain(int32_t block) {
  check_id(block, "retain");
  int32_t& rc = refcounts_[static_cast<size_t>(block)];
  if (rc == 0 && keyed_[static_cast<size_t>(block)]) {  // a cache hit on an evictable block
    lru_unlink(block);
    ++n_used_;
  } else if (rc <= 0) {
    throw Error("KV cache: retain of free block " + std::to_string(block));
  }
  ++rc;
  check_counts();
}

void BlockPool::release(int32_t block) {
  check_id(block, "release");
  int32_t& rc = refcounts_[static_cast<size_t>(block)];
  if (rc <= 0) throw Error("KV cache: release of free block " + std::to_string(block));
  if (--rc == 0) {
    if (keyed_[static_cast<size_t>(block)]) lru_push_back(block);
    else free_list_.push_back(block);
    --n_used_;
  }
  check_counts();
}

bool BlockPool::register_key(int32_t block, uint64_t key) {
  check_id(block, "register_key");
  if (refcounts_[static_cast<size_t>(block)] <= 0) throw Error("KV cache: register_key of free block " + std::to_string(block));
  if (keyed_[static_cast<size_t>(block)] || cached_.count(key) != 0) return false;
  cached_.emplace(key, block);
  keys_[static_cast<size_t>(block)] = key;
  keyed_[static_cast<size_t>(block)] = 1;
  return true;
}

int32_t BlockPool::find_cached(uint64_t key) const {
  const auto it = cached_.find(key);
  return it == cached_.end() ? -1 : it->second;
}

int32_t BlockPool::copy(int32_t block) {
  check_id(block, "copy");
  if (refcounts_[static_cast<size_t>(block)] <= 0) throw Error("KV cache: copy of free block " + std::to_string(block));
  const int32_t b = allocate();
  for (int32_t layer = 0; layer < layout_.n_layers; ++layer) {
    for (int32_t head = 0; head < layout_.n_kv_heads; ++head) {
      for (bool keys : {true, false}) {
        const int64_t n = keys ? layout_.k_chunk_bytes() : layout_.v_chunk_bytes();
        std::memcpy(chunk(b, layer, head, keys), chunk(block, layer, head, keys), static_cast<size_t>(n));
      }
    }
  }
  return b;
}

void BlockPool::check_invariants() const {
  check_counts();
  // 1: on the free list, 2: in the LRU of evictable blocks.
  std::vector<uint8_t> unreferenced(refcounts_.size(), 0);
  for (int32_t b : free_list_) {
    check_id(b, "free list entry");
    if (unreferenced[static_cast<size_t>(b)]++) {
      throw Error("KV cache invariant broken: block " + std::to_string(b) + " is on the free list twice");
    }
    if (keyed_[static_cast<size_t>(b)]) throw Error("KV cache invariant broken: free block " + std::to_string(b) + " has a key");
  }
  int32_t lru_length = 0;
  for (int32_t b = lru_head_, prev = -1; b >= 0; prev = b, b = lru_next_[static_cast<size_t>(b)]) {
    check_id(b, "LRU entry");
    if (unreferenced[static_cast<size_t>(b)] != 0 || lru_prev_[static_cast<size_t>(b)] != prev ||
        ++lru_length > n_blocks()) {
      throw Error("KV cache invariant broken: the LRU list is malformed at block " + std::to_string(b));
    }
    if (!keyed_[static_cast<size_t>(b)]) throw Error("KV cache invariant broken: evictable block " + std::to_string(b) + " has no key");
    unreferenced[static_cast<size_t>(b)] = 2;
  }
  if (lru_length != n_evictable_) {
    throw Error("KV cache invariant broken: " + std::to_string(lru_length) + " blocks in the LRU, " +
                std::to_string(n_evictable_) + " counted");
  }
  int32_t used = 0;
  for (int32_t b = 0; b < n_blocks(); ++b) {
    const int32_t rc = refcounts_[static_cast<size_t>(b)];
    const bool free = unreferenced[static_cast<size_t>(b)] != 0;
    if (rc < 0 || (rc == 0) != free) {
      throw Error("KV cache invariant broken: block " + std::to_string(b) + " has refcount " + std::to_string(rc) +
                  (free ? " but is on the free list" : " but is not on the free list"));
    }
    if (keyed_[static_cast<size_t>(b)] && find_cached(keys_[static_cast<size_t>(b)]) != b) {
      throw Error("KV cache invariant broken: block " + std::to_string(b) + "'s key does not lead back to it");
    }
    used += rc > 0;
  }
  if (cached_.size() != static_cast<size_t>(std::count(keyed_.begin(), keyed_.end(), 1))) {
    throw Error("KV cache invariant broken: " + std::to_string(cached_.size()) + " keys for " +
                std::to_string(std::count(keyed_.begin(), keyed_.end(), 1)) + " keyed blocks");
  }
  if (used != n_used_)
    throw Error("KV cache invariant broken: " + std::to_string(used) + " blocks referenced, " +
                std::to_string(n_used_) + " counted");
}

}  // namespace tokamak::kv
