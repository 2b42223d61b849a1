// Sequences' KV over one BlockPool: a BlockTable per sequence id, grown on
// demand block by block, shared by fork and copied on write, freed as a whole.
//
// A step of the forward pass: prepare_write() for each sequence it touches
// (allocation and copy-on-write happen here, before any K/V is computed),
// then layer by layer write_stored() the new rows, attend through view(),
// write_recent() them, then set_length() to commit.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/attention.h"
#include "kv/block_pool.h"

namespace tokamak::kv {

// The blocks of one sequence and how many positions hold KV.
struct BlockTable {
  std::vector<int32_t> blocks;  // position p lives in blocks[p / block_size]
  int64_t n_tokens = 0;
  // Mixed precision: the f16 ring (KvLayout::recent_blocks() blocks, or none
  // yet); position p at ring row p % recent_ring_rows(). Rows of positions
  // below recent_from are stale (the sequence was cut back past them, or
  // adopted them from cached blocks, which have no ring).
  std::vector<int32_t> recent;
  int64_t recent_from = 0;
  // The length the sequence has once the step being written commits.
  int64_t step_end = 0;
};

class KvCache {
 public:
  // Throws tokamak::Error like BlockPool's constructor.
  KvCache(const KvLayout& layout, int32_t n_blocks) : pool_(layout, n_blocks) {}

  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }
  const KvLayout& layout() const { return pool_.layout(); }

  // Makes the sequence's table cover positions [0, n_positions), allocating
  // blocks as needed. Throws tokamak::Error when the pool runs out (blocks
  // allocated by this call stay with the sequence).
  void reserve(int32_t seq, int64_t n_positions);
  // Readies positions [begin, end) for write(): reserves, replaces each shared
  // block they touch (and each shared ring block) by a private copy, and
  // records max(length, end) as the step's length. Throws like reserve().
  void prepare_write(int32_t seq, int64_t begin, int64_t end);
  // Stores one position's K and V of one layer ([n_kv_heads * head_dim] f32
  // each) in the layout's types. Throws tokamak::Error for a position
  // outside the table or in a shared block (not prepared).
  void write_stored(int32_t seq, int32_t layer, int64_t pos, const float* k, const float* v);
  // Stores them in f16 into the ring when the layout has one and the position
  // is among the ring's worth of newest positions of the step. Within a step,
  // call it for a layer only once the layer's attention is done: the step's
  // rows may take ring rows of earlier positions that its queries read.
  // Throws like write_stored().
  void write_recent(int32_t seq, int32_t layer, int64_t pos, const float* k, const float* v);
  // write_stored() then write_recent(): for filling a cache outside a forward pass.
  void write(int32_t seq, int32_t layer, int64_t pos, const float* k, const float* v);
  // Where a query at position `query` finds layer `layer` of the sequence:
  // keys from KvLayout::recent_begin(query) on in the ring (but none below
  // recent_from), older ones in the stored types. Positions the current step
  // writes are in the ring only after write_recent(): the caller reads them
  // through KvView::step. Valid until the sequence's table changes.
  kernels::KvView view(int32_t seq, int32_t layer, int64_t query) const;
  // Records that positions [0, n_tokens) hold KV. Cutting a sequence back
  // keeps its blocks; ring rows that the cut positions overwrote become stale
  // (attention reads those positions from the quantized blocks instead).
  void set_length(int32_t seq, int64_t n_tokens);
  // dst shares every block of src (refcounts + 1) and has its length; the
  // partly filled last block (and the ring) is copied when either writes it.
  // Throws tokamak::Error when dst holds blocks or the ids are equal.
  void fork(int32_t src, int32_t dst);
  // Releases all blocks of the sequence, the last first: cached blocks of it
  // enter the pool's LRU leaves before parents, so eviction takes leaves first.
  void free_sequence(int32_t seq);
  // An empty sequence takes a reference to each of `blocks` (full, computed
  // blocks of a cached prefix, in order) and holds n_tokens positions.
  // Throws tokamak::Error when seq holds blocks or n_tokens does not fit them.
  void adopt(int32_t seq, const std::vector<int32_t>& blocks, int64_t n_tokens);
  // Pool blocks prepare_write(seq, begin, end) would take: new blocks, copies
  // of shared blocks the range touches, and the f16 ring when it has none yet
  // (an upper bound: a shared block counts as a copy even if the other
  // sharers copy it first). No allocation.
  int32_t blocks_needed(int32_t seq, int64_t begin, int64_t end) const;
  // The table of `seq` (empty for a sequence never seen).
  const BlockTable& table(int32_t seq) const;
  int64_t length(int32_t seq) const { return table(seq).n_tokens; }

  // BlockPool::register_key() of a block, journaled (below).
  bool register_key(int32_t block, uint64_t key);

  // Replicas: a process holding other heads or layers of the same model
  // (tensor / pipeline parallel) keeps a pool of its own, with the same block
  // tables, by repeating this cache's mutations. Once the journal is started
  // (on a fresh cache), each mutating call (reserve, prepare_write,
  // set_length, fork, free_sequence, adopt, register_key) appends its
  // arguments to it, before it runs; replay() on a cache of the same block
  // count repeats them in order (from a fresh state: the journal begins with
  // a reset), so allocation, copy-on-write and eviction pick the same
  // blocks. A call that threw here throws there at the same point, and
  // replay() goes on past it. write() is not journaled: replicas write their
  // own K/V. Cost: a few int64 per call.
  void start_journal();
  bool journaling() const { return journaling_; }
  // The entries since the last take (the journal is left empty).
  std::vector<int64_t> take_journal();
  // Throws tokamak::Error for an entry this cache did not write.
  void replay(std::span<const int64_t> journal);

  // O(blocks + sequences) audit: the pool's invariants, and every block's
  // refcount equals the number of table entries naming it. Throws tokamak::Error.
  void check_invariants() const;

 private:
  BlockTable& mutable_table(int32_t seq);
  void reserve_blocks(int32_t seq, int64_t n_positions);
  void log(std::initializer_list<int64_t> entry);
  // Throws tokamak::Error when (layer, pos) is outside the sequence's table.
  void check_write(int32_t seq, int32_t layer, int64_t pos) const;
  // Replaces `block` by a private copy when it is shared.
  void make_private(int32_t& block);
  // O(table) invariants of one sequence, checked at the end of each mutation:
  // its length fits its blocks, its ring is whole or absent, and every block
  // it names is referenced. Throws tokamak::Error naming the sequence.
  void check_table(int32_t seq) const;

  BlockPool pool_;
  std::vector<BlockTable> tables_;  // indexed by sequence id
  bool journaling_ = false;
  std::vector<int64_t> journal_;  // entries: an Op, then its arguments (adopt: the count of blocks, then them)
};

}  // namespace tokamak::kv
