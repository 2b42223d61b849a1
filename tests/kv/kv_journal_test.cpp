// The KV journal on its own: a replica that replays a journaled cache's
// mutations (kv_cache.h: start_journal / replay) must end with the same
// block tables, refcounts, free list order and cached keys, so that tensor-
// and pipeline-parallel ranks address the same blocks. The expected ids are
// worked out by hand from BlockPool's rules (FIFO free list, LRU eviction).
#include <gtest/gtest.h>

#include "core/error.h"
#include "kv/kv_cache.h"

namespace tokamak::kv {
namespace {

KvLayout layout(int32_t recent = 0, kernels::KvType k = kernels::KvType::F32) {
  KvLayout l;
  l.n_layers = 1;
  l.n_kv_heads = 1;
  l.head_dim = 32;
  l.format.block_size = 4;
  l.format.k_type = k;
  l.format.v_type = kernels::KvType::F32;
  l.format.recent = recent;
  return l;
}

void expect_same_state(const KvCache& a, const KvCache& b, int32_t n_seqs) {
  for (int32_t s = 0; s < n_seqs; ++s) {
    EXPECT_EQ(a.table(s).blocks, b.table(s).blocks) << "sequence " << s;
    EXPECT_EQ(a.table(s).recent, b.table(s).recent) << "sequence " << s;
    EXPECT_EQ(a.length(s), b.length(s)) << "sequence " << s;
    EXPECT_EQ(a.table(s).recent_from, b.table(s).recent_from) << "sequence " << s;
  }
  for (int32_t blk = 0; blk < a.pool().n_blocks(); ++blk) {
    EXPECT_EQ(a.pool().refcount(blk), b.pool().refcount(blk)) << "block " << blk;
    EXPECT_EQ(a.pool().has_key(blk), b.pool().has_key(blk)) << "block " << blk;
  }
  EXPECT_EQ(a.pool().n_free(), b.pool().n_free());
  EXPECT_EQ(a.pool().n_evictable(), b.pool().n_evictable());
  b.check_invariants();
}

TEST(KvJournal, ReplayGivesTheSameBlocksThroughForkCopyOnWriteFreeAndEviction) {
  KvCache a(layout(), 6);
  a.start_journal();
  a.prepare_write(0, 0, 6);  // blocks 0, 1
  a.set_length(0, 6);
  EXPECT_TRUE(a.register_key(0, 111));  // block 0 full: cached
  a.fork(0, 1);                         // shares 0 and 1
  a.prepare_write(1, 6, 7);             // block 1 shared: copied into 2
  a.set_length(1, 7);
  EXPECT_EQ(a.table(1).blocks, (std::vector<int32_t>{0, 2}));
  a.free_sequence(0);  // 1 freed, 0 keeps sequence 1's reference
  a.free_sequence(1);  // 2 freed, then 0 evictable (cached)
  a.adopt(2, {a.pool().find_cached(111)}, 4);
  a.prepare_write(2, 4, 20);  // 4 more blocks: 3, 4, 5, 1 (the free list, least recently freed first)
  EXPECT_THROW(a.prepare_write(3, 0, 8), Error);  // 2 then nothing: the pool is out
  const std::vector<int64_t> journal = a.take_journal();
  EXPECT_TRUE(a.take_journal().empty());

  KvCache b(layout(), 6);
  b.prepare_write(7, 0, 4);  // whatever the replica held is reset by the journal's start
  b.replay(journal);
  expect_same_state(a, b, 4);
  EXPECT_EQ(b.table(2).blocks, (std::vector<int32_t>{0, 3, 4, 5, 1}));
  EXPECT_EQ(b.table(3).blocks, (std::vector<int32_t>{2}));  // allocated before the pool ran out
  EXPECT_EQ(b.table(7).blocks, std::vector<int32_t>{});
}

TEST(KvJournal, ReplayFollowsTheF16RingOfMixedPrecision) {
  KvCache a(layout(8, kernels::KvType::Q8), 48);
  a.start_journal();
  a.prepare_write(0, 0, 9);
  a.set_length(0, 9);
  a.fork(0, 1);
  a.prepare_write(1, 9, 10);  // the shared ring block is copied
  a.set_length(1, 5);         // a cut back: ring rows go stale
  KvCache b(layout(8, kernels::KvType::Q8), 48);
  b.replay(a.take_journal());
  expect_same_state(a, b, 2);
  // In steps: the rest of the journal continues from where the last replay ended.
  a.free_sequence(0);
  a.prepare_write(2, 0, 3);
  b.replay(a.take_journal());
  expect_same_state(a, b, 3);
}

TEST(KvJournal, AnEntryItDidNotWriteIsAnError) {
  KvCache b(layout(), 4);
  EXPECT_THROW(b.replay(std::vector<int64_t>{42, 1}), Error);
  EXPECT_THROW(b.replay(std::vector<int64_t>{2, 0, 0}), Error);  // prepare_write cut short
}

}  // namespace
}  // namespace tokamak::kv
