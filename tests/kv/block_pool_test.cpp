// The KV cache's state machine on its own: exact block ids, refcounts,
// copy-on-write, fork, free, byte accounting and the memory budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "kv/kv_cache.h"
#include "kv/kv_memory.h"

namespace tokamak::kv {
namespace {

using kernels::KvType;

KvLayout small_layout(int32_t block_size = 4, KvType k = KvType::F32, KvType v = KvType::F32, int32_t recent = 0) {
  KvLayout l;
  l.n_layers = 2;
  l.n_kv_heads = 2;
  l.head_dim = 4;
  l.format.block_size = block_size;
  l.format.k_type = k;
  l.format.v_type = v;
  l.format.recent = recent;
  return l;
}

// Rows of a distinct value per (position, layer, K/V, element), so a row read
// back names where it came from.
std::vector<float> row_values(const KvLayout& l, int64_t pos, int32_t layer, bool keys, int salt = 0) {
  std::vector<float> r(static_cast<size_t>(l.n_kv_heads * l.head_dim));
  for (size_t i = 0; i < r.size(); ++i) {
    r[i] = static_cast<float>(pos * 1000 + layer * 100 + (keys ? 0 : 50) + static_cast<int64_t>(i) + salt);
  }
  return r;
}

void write_positions(KvCache& kv, int32_t seq, int64_t begin, int64_t end, int salt = 0) {
  const KvLayout& l = kv.layout();
  kv.prepare_write(seq, begin, end);
  for (int32_t layer = 0; layer < l.n_layers; ++layer) {
    for (int64_t p = begin; p < end; ++p) {
      kv.write(seq, layer, p, row_values(l, p, layer, true, salt).data(), row_values(l, p, layer, false, salt).data());
    }
  }
  kv.set_length(seq, std::max(kv.length(seq), end));
}

// K row of kv head `head` at `pos` as attention sees it from a query at `query`.
std::vector<float> read_k(const KvCache& kv, int32_t seq, int32_t layer, int64_t pos, int head, int64_t query) {
  const kernels::KvView view = kv.view(seq, layer, query);
  const kernels::KvPages& pages = view.pages(pos, true);
  std::vector<float> out(static_cast<size_t>(kv.layout().head_dim));
  kernels::dequantize_kv_row(pages.k_type, pages.k_row(pos, head), kv.layout().head_dim, out.data());
  return out;
}
std::vector<float> read_k(const KvCache& kv, int32_t seq, int32_t layer, int64_t pos, int head) {
  return read_k(kv, seq, layer, pos, head, pos);
}

std::vector<float> expected_k(const KvLayout& l, int64_t pos, int32_t layer, int head, int salt = 0) {
  const std::vector<float> row = row_values(l, pos, layer, true, salt);
  return {row.begin() + head * l.head_dim, row.begin() + (head + 1) * l.head_dim};
}

std::vector<float> f16_rounded(std::vector<float> x) {
  for (float& v : x) v = fp16_to_fp32(fp32_to_fp16(v));
  return x;
}

TEST(BlockPool, HandsOutIdsInOrderThenTheLeastRecentlyFreed) {
  BlockPool pool(small_layout(), 3);
  EXPECT_EQ(pool.n_free(), 3);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(pool.refcount(1), 1);
  EXPECT_EQ(pool.n_used(), 2);
  pool.release(0);
  EXPECT_EQ(pool.refcount(0), 0);
  EXPECT_EQ(pool.allocate(), 2);  // never used before the recycled 0
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_THROW(pool.allocate(), Error);
  pool.release(1);
  pool.release(2);
  pool.release(0);
  EXPECT_EQ(pool.allocate(), 1);  // FIFO: the least recently freed first
  EXPECT_EQ(pool.allocate(), 2);
  pool.check_invariants();
}

TEST(BlockPool, KeyedBlocksStayCachedUntilEvictedLeastRecentlyUsedFirst) {
  BlockPool pool(small_layout(), 4);
  for (int32_t b = 0; b < 4; ++b) EXPECT_EQ(pool.allocate(), b);
  EXPECT_TRUE(pool.register_key(1, 11));
  EXPECT_TRUE(pool.register_key(2, 22));
  EXPECT_FALSE(pool.register_key(3, 11));  // the key is taken
  EXPECT_FALSE(pool.register_key(1, 33));  // the block has a key
  pool.release(2);  // cached: 2
  pool.release(1);  // cached: 2, 1 (1 most recently used)
  pool.release(3);  // no key: free
  EXPECT_EQ(pool.n_free(), 1);
  EXPECT_EQ(pool.n_evictable(), 2);
  EXPECT_EQ(pool.n_allocatable(), 3);
  EXPECT_EQ(pool.find_cached(11), 1);
  EXPECT_EQ(pool.find_cached(22), 2);
  // A hit revives a cached block; releasing it again makes it most recent.
  pool.retain(2);
  EXPECT_EQ(pool.refcount(2), 1);
  EXPECT_EQ(pool.n_evictable(), 1);
  pool.release(2);  // LRU: 1, 2
  pool.check_invariants();
  EXPECT_EQ(pool.allocate(), 3);  // the plain free block before any eviction
  EXPECT_EQ(pool.evictions(), 0);
  EXPECT_EQ(pool.allocate(), 1);  // least recently used
  EXPECT_EQ(pool.find_cached(11), -1);
  EXPECT_FALSE(pool.has_key(1));
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.evictions(), 2);
  EXPECT_THROW(pool.allocate(), Error);
  pool.check_invariants();
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
  EXPECT_THROW(pool.copy(b), Error);
  pool.check_invariants();
}

// Each chunk of a block: (layer, head, K/V), with its size.
template <class Fn>
void for_each_chunk(const KvLayout& l, Fn&& fn) {
  for (int32_t layer = 0; layer < l.n_layers; ++layer) {
    for (int32_t head = 0; head < l.n_kv_heads; ++head) {
      for (bool keys : {true, false}) fn(layer, head, keys, keys ? l.k_chunk_bytes() : l.v_chunk_bytes());
    }
  }
}

TEST(BlockPool, CopyDuplicatesEveryByteOfTheBlock) {
  BlockPool pool(small_layout(4, KvType::Q8, KvType::F16), 3);
  const KvLayout& l = pool.layout();
  const int32_t a = pool.allocate();
  const int32_t other = pool.allocate();
  int64_t filled = 0;
  for_each_chunk(l, [&](int32_t layer, int32_t head, bool keys, int64_t n) {
    for (int64_t i = 0; i < n; ++i) pool.chunk(a, layer, head, keys)[i] = static_cast<uint8_t>(filled++ * 7 + 3);
    std::memset(pool.chunk(other, layer, head, keys), 0xEE, static_cast<size_t>(n));
  });
  EXPECT_EQ(filled, pool.block_bytes());  // the chunks are the whole block
  const int32_t b = pool.copy(a);
  EXPECT_EQ(b, 2);
  EXPECT_EQ(pool.refcount(a), 1);
  EXPECT_EQ(pool.refcount(b), 1);
  for_each_chunk(l, [&](int32_t layer, int32_t head, bool keys, int64_t n) {
    EXPECT_EQ(std::memcmp(pool.chunk(a, layer, head, keys), pool.chunk(b, layer, head, keys), static_cast<size_t>(n)), 0);
    // The copy wrote no byte of another block.
    const uint8_t* o = pool.chunk(other, layer, head, keys);
    EXPECT_TRUE(std::all_of(o, o + n, [](uint8_t x) { return x == 0xEE; }));
  });
}

// The planar layout: a head's chunks of consecutive blocks are adjacent, and
// the chunks of all blocks tile the pool exactly, each byte in one chunk.
TEST(BlockPool, ChunksTileThePoolWithEachHeadsBlocksAdjacent) {
  const int32_t n_blocks = 5;
  for (const auto& [k, v] : {std::pair{KvType::F32, KvType::F32}, {KvType::Q8, KvType::Q4}, {KvType::Q4, KvType::F16}}) {
    BlockPool pool(small_layout(4, k, v), n_blocks);
    const KvLayout& l = pool.layout();
    std::vector<int> owners(static_cast<size_t>(pool.capacity_bytes()), 0);
    for (int32_t b = 0; b < n_blocks; ++b) {
      for_each_chunk(l, [&](int32_t layer, int32_t head, bool keys, int64_t n) {
        const int64_t at = pool.chunk(b, layer, head, keys) - pool.data();
        ASSERT_GE(at, 0);
        ASSERT_LE(at + n, pool.capacity_bytes());
        for (int64_t i = at; i < at + n; ++i) ++owners[static_cast<size_t>(i)];
        if (b > 0) {
          EXPECT_EQ(pool.chunk(b, layer, head, keys), pool.chunk(b - 1, layer, head, keys) + n);
        }
      });
    }
    EXPECT_TRUE(std::all_of(owners.begin(), owners.end(), [](int c) { return c == 1; }))
        << kernels::kv_type_name(k) << "/" << kernels::kv_type_name(v);
  }
}

TEST(KvLayout, BytesPerTokenAreExact) {
  KvLayout l;
  l.n_layers = 3;
  l.n_kv_heads = 4;
  l.head_dim = 64;
  const struct {
    KvType k, v;
    int64_t bytes;
  } cases[] = {
      {KvType::F32, KvType::F32, 2 * 3 * 4 * 64 * 4},
      {KvType::F16, KvType::F16, 2 * 3 * 4 * 64 * 2},
      {KvType::BF16, KvType::BF16, 2 * 3 * 4 * 64 * 2},
      {KvType::Q8, KvType::Q8, 2 * 3 * 4 * (64 + 4)},      // int8 + f32 scale per token and head
      {KvType::Q4, KvType::Q4, 2 * 3 * 4 * (32 + 2 * 2)},  // nibbles + f16 scale per 32
      {KvType::Q8, KvType::Q4, 3 * 4 * ((64 + 4) + (32 + 4))},
  };
  for (const auto& c : cases) {
    l.format.k_type = c.k;
    l.format.v_type = c.v;
    l.format.block_size = 16;
    l.validate();
    EXPECT_EQ(l.bytes_per_token(), c.bytes) << kernels::kv_type_name(c.k) << "/" << kernels::kv_type_name(c.v);
    EXPECT_EQ(l.block_bytes(), 16 * c.bytes);
    // A block is its layers' and heads' K and V chunks.
    EXPECT_EQ(3 * 4 * (l.k_chunk_bytes() + l.v_chunk_bytes()), l.block_bytes());
  }
}

TEST(KvLayout, RejectsWhatItCannotStore) {
  KvLayout l = small_layout();
  l.head_dim = 0;
  EXPECT_THROW(l.validate(), Error);
  l = small_layout(4, KvType::Q4, KvType::F16);
  l.head_dim = 48;  // q4 groups of 32 do not tile 48
  EXPECT_THROW(l.validate(), Error);
  l.head_dim = 3;  // odd: nibbles come in pairs
  EXPECT_THROW(l.validate(), Error);
  EXPECT_THROW(small_layout(4, KvType::F16, KvType::F16, 8).validate(), Error);  // window needs a quantized type
  EXPECT_THROW(small_layout(1, KvType::Q4, KvType::Q4, 8).validate(), Error);    // one q4 row < one f16 row
  EXPECT_THROW(small_layout(0).validate(), Error);
  EXPECT_THROW(BlockPool(small_layout(), 0), Error);
  small_layout(4, KvType::Q8, KvType::Q4, 8).validate();
}

TEST(KvMemory, ParsesSizesAndPercentages) {
  EXPECT_EQ(parse_kv_memory("1073741824").bytes, 1073741824);
  EXPECT_EQ(parse_kv_memory("512M").bytes, 512LL << 20);
  EXPECT_EQ(parse_kv_memory("4G").bytes, 4LL << 30);
  EXPECT_EQ(parse_kv_memory("4GiB").bytes, 4LL << 30);
  EXPECT_EQ(parse_kv_memory("1.5k").bytes, 1536);
  EXPECT_DOUBLE_EQ(parse_kv_memory("80%").fraction, 0.8);
  for (const char* bad : {"", "G", "-1G", "4X", "0", "0%", "120%", "1.2.3M", "%", "4 G"}) {
    EXPECT_THROW(parse_kv_memory(bad), Error) << bad;
  }
  EXPECT_GT(available_memory_bytes(), 0);
  EXPECT_GT(resolve_kv_memory(parse_kv_memory("1%")), 0);
}

TEST(KvMemory, BudgetIsWholeBlocks) {
  const KvLayout l = small_layout(4);  // 4 * 2 * 2 * 2 * 4 * 4 bytes = 512 per block
  EXPECT_EQ(l.block_bytes(), 512);
  EXPECT_EQ(blocks_for_bytes(l, 512), 1);
  EXPECT_EQ(blocks_for_bytes(l, 512 * 10 + 511), 10);
  EXPECT_THROW(blocks_for_bytes(l, 511), Error);
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
  kv.check_invariants();
}

TEST(KvCache, WrittenRowsReadBackThroughTheViewInEveryType) {
  for (KvType t : {KvType::F32, KvType::F16, KvType::BF16, KvType::Q8, KvType::Q4}) {
    KvCache kv(small_layout(4, t, t), 8);
    write_positions(kv, 3, 0, 10);
    for (int32_t layer = 0; layer < 2; ++layer) {
      for (int64_t p = 0; p < 10; ++p) {
        for (int h = 0; h < 2; ++h) {
          std::vector<float> stored(16), want(4);
          kernels::quantize_kv_row(t, expected_k(kv.layout(), p, layer, h).data(), 4, stored.data());
          kernels::dequantize_kv_row(t, stored.data(), 4, want.data());
          EXPECT_EQ(read_k(kv, 3, layer, p, h), want) << kernels::kv_type_name(t) << " pos " << p;
        }
      }
    }
  }
}

TEST(KvCache, ForkSharesBlocksAndCopiesThePartlyFilledLastBlockOnWrite) {
  KvCache kv(small_layout(4), 8);
  write_positions(kv, 0, 0, 6);  // blocks 0 (full) and 1 (2 of 4 rows)
  kv.fork(0, 1);
  EXPECT_EQ(kv.table(1).blocks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(kv.length(1), 6);
  EXPECT_EQ(kv.pool().refcount(0), 2);
  EXPECT_EQ(kv.pool().refcount(1), 2);
  kv.check_invariants();
  // The child appends: its last block is copied to the lowest free id; the full block stays shared.
  write_positions(kv, 1, 6, 7, /*salt=*/7);
  EXPECT_EQ(kv.table(1).blocks, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(kv.table(0).blocks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(kv.pool().refcount(0), 2);
  EXPECT_EQ(kv.pool().refcount(1), 1);
  EXPECT_EQ(kv.pool().refcount(2), 1);
  EXPECT_EQ(read_k(kv, 1, 1, 5, 1), expected_k(kv.layout(), 5, 1, 1));  // copied rows
  EXPECT_EQ(read_k(kv, 1, 1, 6, 1), expected_k(kv.layout(), 6, 1, 1, 7));
  // The parent appends into its own block 1, now private: no copy.
  write_positions(kv, 0, 6, 7);
  EXPECT_EQ(kv.table(0).blocks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(read_k(kv, 0, 0, 6, 0), expected_k(kv.layout(), 6, 0, 0));
  EXPECT_EQ(read_k(kv, 1, 0, 6, 0), expected_k(kv.layout(), 6, 0, 0, 7));
  // Rewriting a shared full block copies it too.
  write_positions(kv, 1, 2, 3, /*salt=*/9);
  EXPECT_EQ(kv.table(1).blocks, (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(kv.pool().refcount(0), 1);
  EXPECT_EQ(read_k(kv, 0, 0, 2, 0), expected_k(kv.layout(), 2, 0, 0));
  kv.check_invariants();
  kv.free_sequence(0);
  EXPECT_EQ(kv.pool().refcount(0), 0);
  EXPECT_EQ(kv.pool().refcount(1), 0);
  kv.free_sequence(1);
  EXPECT_EQ(kv.pool().n_free(), 8);
  kv.check_invariants();
}

TEST(KvCache, RejectsBadForksAndUnpreparedWrites) {
  KvCache kv(small_layout(4), 4);
  write_positions(kv, 0, 0, 2);
  EXPECT_THROW(kv.fork(0, 0), Error);
  write_positions(kv, 1, 0, 1);
  EXPECT_THROW(kv.fork(0, 1), Error);
  kv.fork(0, 2);
  const std::vector<float> row(8, 1.0f);
  EXPECT_THROW(kv.write(2, 0, 1, row.data(), row.data()), Error);  // shared block, not prepared
  EXPECT_THROW(kv.write(0, 0, 4, row.data(), row.data()), Error);  // outside the table
  EXPECT_THROW(kv.write(0, 2, 0, row.data(), row.data()), Error);  // no layer 2
  EXPECT_THROW(kv.prepare_write(0, 3, 2), Error);
  kv.check_invariants();
}

// The rule of mixed precision: a query at q reads keys from
// floor((q + 1 - recent) / 32) * 32 on in f16, at least `recent` of them and
// whole key tiles of 32; the ring keeps as many rows as one query reads.
TEST(KvLayout, RecentBeginIsTileAlignedAndDependsOnThePositionOnly) {
  const KvLayout five = small_layout(4, KvType::Q8, KvType::Q8, 5);
  for (int64_t q : {0, 4, 5, 35}) EXPECT_EQ(five.recent_begin(q), 0) << q;
  EXPECT_EQ(five.recent_begin(36), 32);
  EXPECT_EQ(five.recent_begin(67), 32);
  EXPECT_EQ(five.recent_begin(68), 64);
  const KvLayout wide = small_layout(4, KvType::Q4, KvType::F16, 128);
  EXPECT_EQ(wide.recent_begin(158), 0);
  EXPECT_EQ(wide.recent_begin(159), 32);
  EXPECT_EQ(wide.recent_begin(1000), 864);  // 1001 - 128 = 873 -> 864: 137 keys in f16
  EXPECT_EQ(wide.recent_window(), 128 + 31);
}

TEST(KvCache, MixedPrecisionKeepsTheNewestPositionsInF16) {
  // q8 blocks of 4; a ring block holds as many f16 rows as a q8 chunk (4
  // rows of a head) has bytes for; the ring holds recent + 31 = 36 of them.
  const KvLayout layout = small_layout(4, KvType::Q8, KvType::Q8, 5);
  EXPECT_EQ(layout.recent_block_rows(), 4 * (4 + 4) / (2 * 4));  // = 4
  EXPECT_EQ(layout.recent_blocks(), 9);
  EXPECT_EQ(layout.recent_ring_rows(), 36);
  KvCache kv(layout, 128);
  write_positions(kv, 0, 0, 3);
  EXPECT_EQ(kv.table(0).blocks, (std::vector<int32_t>{0}));
  EXPECT_EQ(kv.table(0).recent, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // Decoding one position a step: the newest query reads its f16 keys from the ring.
  for (int64_t n = 3; n < 110; ++n) {
    const int64_t begin = layout.recent_begin(n - 1);
    const kernels::KvView view = kv.view(0, 1, n - 1);
    EXPECT_EQ(view.k_recent_begin, begin);
    EXPECT_EQ(view.v_recent_begin, begin);
    for (int64_t p = 0; p < n; ++p) {
      const std::vector<float> want = f16_rounded(expected_k(layout, p, 1, 1));
      const std::vector<float> got = read_k(kv, 0, 1, p, 1, n - 1);
      if (p >= begin) {
        EXPECT_EQ(got, want) << "pos " << p << " of " << n;
      } else {
        for (int i = 0; i < 4; ++i)
          EXPECT_NEAR(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)], want[3] / 127.0f * 0.51f);
      }
    }
    write_positions(kv, 0, n, n + 1);
  }
  // A prefill longer than the ring writes only its newest rows there: 64..99.
  write_positions(kv, 1, 0, 100);
  EXPECT_EQ(kv.view(1, 0, 99).k_recent_begin, 64);
  for (int64_t p = 64; p < 100; ++p) EXPECT_EQ(read_k(kv, 1, 0, p, 0, 99), f16_rounded(expected_k(layout, p, 0, 0)));
  // Cutting back within what the ring holds keeps reading it.
  kv.set_length(1, 90);
  EXPECT_EQ(kv.table(1).recent_from, 64);
  write_positions(kv, 1, 90, 92, /*salt=*/3);
  EXPECT_EQ(kv.view(1, 0, 91).k_recent_begin, 64);
  EXPECT_EQ(read_k(kv, 1, 0, 89, 0, 91), f16_rounded(expected_k(layout, 89, 0, 0)));
  EXPECT_EQ(read_k(kv, 1, 0, 91, 0, 91), f16_rounded(expected_k(layout, 91, 0, 0, 3)));
  // Fork shares the ring; the first write copies only the ring block it touches.
  kv.fork(1, 2);
  EXPECT_EQ(kv.table(2).recent, kv.table(1).recent);
  write_positions(kv, 2, 92, 93);
  EXPECT_NE(kv.table(2).recent, kv.table(1).recent);
  int shared = 0;
  for (size_t i = 0; i < 9; ++i) shared += kv.table(2).recent[i] == kv.table(1).recent[i];
  EXPECT_EQ(shared, 8);
  kv.check_invariants();
  for (int32_t s = 0; s < 3; ++s) kv.free_sequence(s);
  EXPECT_EQ(kv.pool().n_free(), 128);
}

TEST(KvCache, CuttingBackReadsFromTheRingEveryRowThatIsStillCurrent) {
  const KvLayout layout = small_layout(4, KvType::Q8, KvType::Q8, 5);  // ring of 36 rows
  KvCache kv(layout, 64);
  write_positions(kv, 0, 0, 100);  // the ring holds positions 64..99
  kv.set_length(0, 80);            // 64..79 keep their rows
  EXPECT_EQ(kv.table(0).recent_from, 64);
  write_positions(kv, 0, 80, 82, /*salt=*/1);
  EXPECT_EQ(kv.view(0, 0, 81).k_recent_begin, 64);
  EXPECT_EQ(read_k(kv, 0, 1, 64, 1, 81), f16_rounded(expected_k(layout, 64, 1, 1)));
  EXPECT_EQ(read_k(kv, 0, 1, 81, 1, 81), f16_rounded(expected_k(layout, 81, 1, 1, 1)));
  // Positions 32..39 lost their rows to 68..75 long ago: a query at 42, which
  // reads from 32 on in f16, reads them from q8. Positions 40.. are written
  // again after the cut, so the ring has them current.
  kv.set_length(0, 40);
  EXPECT_EQ(kv.table(0).recent_from, 40);
  write_positions(kv, 0, 40, 43, /*salt=*/2);
  EXPECT_EQ(kv.view(0, 0, 42).k_recent_begin, 40);
  for (int64_t p = 40; p < 43; ++p) EXPECT_EQ(read_k(kv, 0, 1, p, 1, 42), f16_rounded(expected_k(layout, p, 1, 1, 2)));
  write_positions(kv, 0, 43, 80, /*salt=*/2);
  EXPECT_EQ(kv.view(0, 0, 79).k_recent_begin, 64);
  for (int64_t p = 64; p < 80; ++p) EXPECT_EQ(read_k(kv, 0, 1, p, 1, 79), f16_rounded(expected_k(layout, p, 1, 1, 2)));
  kv.check_invariants();
}

TEST(KvCache, RandomOperationsKeepInvariantsAndEndWithEveryBlockFree) {
  for (const KvLayout& layout : {small_layout(4), small_layout(4, KvType::Q4, KvType::Q8, 6)}) {
    KvCache kv(layout, 64);
    std::mt19937 rng(7);
    constexpr int32_t kSeqs = 8;
    // A shadow of what each sequence holds: the salt each position was last
    // written with. With f32 storage every row read back must be that row
    // exactly (a copy-on-write from the wrong block, a fork that shares the
    // wrong table, a cut that loses rows would all show).
    const bool exact = layout.format.k_type == KvType::F32 && layout.format.recent == 0;
    std::vector<std::vector<int>> salts(kSeqs);
    for (int step = 0; step < 3000; ++step) {
      const int32_t seq = static_cast<int32_t>(rng() % kSeqs);
      const int op = static_cast<int>(rng() % 10);
      try {
        if (op == 0) {
          kv.free_sequence(seq);
          salts[static_cast<size_t>(seq)].clear();
        } else if (op == 1) {
          const int32_t dst = static_cast<int32_t>(rng() % kSeqs);
          if (dst != seq && kv.table(dst).blocks.empty() && kv.table(dst).recent.empty()) {
            kv.fork(seq, dst);
            salts[static_cast<size_t>(dst)] = salts[static_cast<size_t>(seq)];
          }
        } else if (op == 2) {
          kv.set_length(seq, kv.length(seq) / 2);
          salts[static_cast<size_t>(seq)].resize(static_cast<size_t>(kv.length(seq)));
        } else {
          const int64_t len = kv.length(seq);
          const int64_t end = len + static_cast<int64_t>(rng() % 9);
          write_positions(kv, seq, len, end, step);
          salts[static_cast<size_t>(seq)].resize(static_cast<size_t>(end), step);
        }
      } catch (const Error&) {  // pool full: drop the sequence
        kv.free_sequence(seq);
        salts[static_cast<size_t>(seq)].clear();
      }
      kv.check_invariants();
      if (!exact) continue;
      for (int32_t s = 0; s < kSeqs; ++s) {
        ASSERT_EQ(kv.length(s), static_cast<int64_t>(salts[static_cast<size_t>(s)].size())) << "step " << step;
        for (int64_t p = 0; p < kv.length(s); ++p) {
          const int salt = salts[static_cast<size_t>(s)][static_cast<size_t>(p)];
          ASSERT_EQ(read_k(kv, s, 1, p, 1), expected_k(layout, p, 1, 1, salt)) << "step " << step << " seq " << s;
        }
      }
    }
    for (int32_t s = 0; s < kSeqs; ++s) kv.free_sequence(s);
    EXPECT_EQ(kv.pool().n_free(), 64);
    kv.check_invariants();
  }
}

TEST(KvCache, WasteIsUnderTwoPercentForManyRandomSequences) {
  KvLayout layout;
  layout.n_layers = 22;
  layout.n_kv_heads = 4;
  layout.head_dim = 64;
  layout.format.block_size = 16;
  KvCache kv(layout, blocks_for_bytes(layout, 64 * 2000 * layout.bytes_per_token() + 64 * layout.block_bytes()));
  std::mt19937 rng(11);
  int64_t used = 0;
  for (int32_t s = 0; s < 64; ++s) {
    const int64_t len = 1 + static_cast<int64_t>(rng() % 2000);
    kv.reserve(s, len);
    kv.set_length(s, len);
    used += len * layout.bytes_per_token();
  }
  const int64_t allocated = static_cast<int64_t>(kv.pool().n_used()) * layout.block_bytes();
  const double waste = static_cast<double>(allocated - used) / static_cast<double>(allocated);
  std::printf("KV waste, 64 sequences of 1..2000 tokens, block size 16: %.3f%%\n", 100.0 * waste);
  EXPECT_LT(waste, 0.02);
}

}  // namespace
}  // namespace tokamak::kv
