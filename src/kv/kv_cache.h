// Sequences' KV over one BlockPool: a BlockTable per sequence id, grown on
// demand block by block, and freed as a whole.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/block_pool.h"

namespace tokamak::kv {

class KvCache {
 public:
  KvCache(const KvLayout& layout, int32_t n_blocks) : pool_(layout, n_blocks) {}

  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }

  // Makes the sequence's table cover positions [0, n_positions), allocating
  // blocks as needed. Throws tokamak::Error when the pool runs out (blocks
  // allocated by this call stay with the sequence).
  void reserve(int32_t seq, int64_t n_positions);
  // Records that positions [0, n_tokens) now hold KV.
  void set_length(int32_t seq, int64_t n_tokens);
  // Releases all blocks of the sequence.
  void free_sequence(int32_t seq);
  // The table of `seq` (empty for a sequence never seen).
  const BlockTable& table(int32_t seq) const;
  int64_t length(int32_t seq) const { return table(seq).n_tokens; }

 private:
  BlockTable& mutable_table(int32_t seq);

  BlockPool pool_;
  std::vector<BlockTable> tables_;  // indexed by sequence id
};

}  // namespace tokamak::kv
