#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "kv/kv_cache.h"

namespace tokamak::kv {
namespace {

KvLayout small_layout(int32_t block_size = 4) {
  KvLayout l;
  l.n_layers = 2;
  l.n_kv_heads = 2;
  l.head_dim = 3;
  l.block_size = block_size;
  return l;
}

TEST(BlockPool, HandsOutLowestIdsFirstAndRecyclesFreedOnes) {
  BlockPool pool(small_layout(), 3);
  EXPECT_EQ(pool.n_free(), 3);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(pool.refcount(1), 1);
  pool.release(0);
  EXPECT_EQ(pool.refcount(0), 0);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_THROW(pool.allocate(), Error);
}

TEST(BlockPool, RefcountsKeepSharedBlocksAlive) {
  BlockPool pool(small_layout(), 2);
  const int32_t b = pool.allocate();
  pool.retain(b);
  EXPECT_EQ(pool.refcount(b), 2);
  pool.release(b);
  EXPECT_EQ(pool.n_free(), 1);
  pool.release(b);
  EXPECT_EQ(pool.n_free(), 2);
  EXPECT_THROW(pool.release(b), Error);
  EXPECT_THROW(pool.retain(b), Error);
  EXPECT_THROW(pool.retain(7), Error);
}

TEST(BlockPool, PagesOfDifferentBlocksAndLayersDoNotOverlap) {
  const KvLayout layout = small_layout();
  BlockPool pool(layout, 3);
  const int64_t page = layout.page_floats();
  EXPECT_EQ(pool.v_page(0, 0) - pool.k_page(0, 0), page);
  EXPECT_EQ(pool.k_page(0, 1) - pool.k_page(0, 0), 2 * page);
  EXPECT_EQ(pool.k_page(1, 0) - pool.k_page(0, 0), 2 * layout.n_layers * page);
  // The kernel view addresses the same memory through the block table.
  const int32_t table[] = {2, 0};
  const kernels::KvPages view = pool.layer_pages(1, table);
  EXPECT_EQ(view.k_row(0), pool.k_page(2, 1));
  EXPECT_EQ(view.v_row(5), pool.v_page(0, 1) + 1 * layout.row_floats());
}

TEST(KvCache, GrowsBlockByBlockAndFreesWholeSequences) {
  KvCache kv(small_layout(4), 4);
  kv.reserve(0, 1);
  kv.reserve(1, 5);
  kv.reserve(0, 4);
  EXPECT_EQ(kv.table(0).blocks, (std::vector<int32_t>{0}));
  EXPECT_EQ(kv.table(1).blocks, (std::vector<int32_t>{1, 2}));
  kv.reserve(0, 5);
  EXPECT_EQ(kv.table(0).blocks, (std::vector<int32_t>{0, 3}));
  EXPECT_THROW(kv.reserve(1, 9), Error);
  EXPECT_THROW(kv.set_length(0, 9), Error);
  kv.set_length(0, 5);
  EXPECT_EQ(kv.length(0), 5);
  kv.free_sequence(1);
  EXPECT_EQ(kv.pool().n_free(), 2);
  EXPECT_TRUE(kv.table(1).blocks.empty());
}

TEST(KvCache, RandomReserveAndFreeEndsWithEveryBlockFree) {
  KvCache kv(small_layout(4), 64);
  std::mt19937 rng(7);
  std::vector<int64_t> lengths(8, 0);
  for (int step = 0; step < 2000; ++step) {
    const int32_t seq = static_cast<int32_t>(rng() % lengths.size());
    if (rng() % 4 == 0) {
      kv.free_sequence(seq);
      lengths[static_cast<size_t>(seq)] = 0;
      continue;
    }
    const int64_t want = lengths[static_cast<size_t>(seq)] + static_cast<int64_t>(rng() % 9);
    try {
      kv.reserve(seq, want);
      lengths[static_cast<size_t>(seq)] = want;
    } catch (const Error&) {
      kv.free_sequence(seq);
      lengths[static_cast<size_t>(seq)] = 0;
    }
    int64_t used = 0;
    for (size_t s = 0; s < lengths.size(); ++s) used += static_cast<int64_t>(kv.table(static_cast<int32_t>(s)).blocks.size());
    ASSERT_EQ(used + kv.pool().n_free(), kv.pool().n_blocks());
  }
  for (size_t s = 0; s < lengths.size(); ++s) kv.free_sequence(static_cast<int32_t>(s));
  EXPECT_EQ(kv.pool().n_free(), 64);
}

}  // namespace
}  // namespace tokamak::kv
