// The scheduler on its own (no model): exact schedules step by step (which
// tokens of which sequence), budget edges, preemption order, abort, fork, and
// the prefix cache with exact block ids. The test plays the engine's part:
// after each step it commits the plan and appends a "sampled" token to every
// sequence whose chunk wanted logits.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "core/error.h"
#include "engine/scheduler.h"

namespace tokamak::engine {
namespace {

kv::KvLayout tiny_layout() {
  kv::KvLayout l;
  l.n_layers = 1;
  l.n_kv_heads = 1;
  l.head_dim = 4;
  l.format.k_type = l.format.v_type = kernels::KvType::F32;
  l.format.block_size = 4;
  return l;
}

std::vector<int32_t> ids(int32_t first, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

struct Chunk {
  SeqId seq;
  int64_t begin, count;
  bool logits;
  bool operator==(const Chunk&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Chunk& c) {
  return os << "{seq " << c.seq << " [" << c.begin << ", +" << c.count << ")" << (c.logits ? " logits" : "") << "}";
}

class SchedulerTest : public ::testing::Test {
 protected:
  void make(int32_t n_blocks, SchedulerOptions options) {
    sched_.reset();
    kv_ = std::make_unique<kv::KvCache>(tiny_layout(), n_blocks);
    sched_ = std::make_unique<Scheduler>(*kv_, options);
  }

  // schedule(), then commit and sample as the engine would; returns the chunks.
  std::vector<Chunk> step() {
    last_ = sched_->schedule();
    std::vector<Chunk> out;
    for (const ScheduledChunk& c : last_.chunks) out.push_back({c.seq, c.begin, c.count, c.want_logits});
    // Stand in for the forward pass: commit the lengths prepare_write reserved.
    for (const ScheduledChunk& c : last_.chunks) kv_->set_length(c.seq, c.begin + c.count);
    sched_->commit(last_);
    for (const ScheduledChunk& c : last_.chunks) {
      if (c.want_logits) sched_->sequence(c.seq).tokens.push_back(1000 + c.seq);
    }
    sched_->check_invariants();
    return out;
  }

  std::unique_ptr<kv::KvCache> kv_;
  std::unique_ptr<Scheduler> sched_;
  ScheduledStep last_;
};

TEST_F(SchedulerTest, DecodesFirstThenPrefillChunksWithinTheBudget) {
  make(32, {4, 8, false, 0});
  const SeqId a = sched_->add(0, 0, ids(1, 5), 0, 0.0);
  const SeqId b = sched_->add(1, 0, ids(1, 10), 0, 1.0);
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 0, 5, true}, {b, 0, 3, false}}));
  // A decodes; B's prompt continues in the same step, up to the budget.
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 5, 1, true}, {b, 3, 7, true}}));
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 6, 1, true}, {b, 10, 1, true}}));
  const SeqId c = sched_->add(2, 0, ids(1, 20), 0, 2.0);
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 7, 1, true}, {b, 11, 1, true}, {c, 0, 6, false}}));
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 8, 1, true}, {b, 12, 1, true}, {c, 6, 6, false}}));
}

TEST_F(SchedulerTest, BudgetEdges) {
  // A budget of exactly the decodes leaves no room for a waiting prompt.
  make(32, {8, 2, false, 0});
  const SeqId a = sched_->add(0, 0, ids(1, 2), 0, 0.0);
  const SeqId b = sched_->add(1, 0, ids(1, 1), 0, 1.0);
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 0, 2, true}}));
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 2, 1, true}, {b, 0, 1, true}}));
  const SeqId c = sched_->add(2, 0, ids(1, 3), 0, 2.0);
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 3, 1, true}, {b, 1, 1, true}}));
  EXPECT_EQ(sched_->waiting(), std::vector<SeqId>{c});
  // max_num_seqs: a full running set holds new prompts back.
  make(32, {1, 100, false, 0});
  const SeqId x = sched_->add(0, 0, ids(1, 3), 0, 0.0);
  const SeqId y = sched_->add(1, 0, ids(1, 3), 0, 1.0);
  EXPECT_EQ(step(), (std::vector<Chunk>{{x, 0, 3, true}}));
  EXPECT_EQ(step(), (std::vector<Chunk>{{x, 3, 1, true}}));
  sched_->finish(x);
  EXPECT_EQ(step(), (std::vector<Chunk>{{y, 0, 3, true}}));
}

TEST_F(SchedulerTest, PriorityThenArrivalOrdersAdmission) {
  make(32, {8, 100, false, 0});
  const SeqId late = sched_->add(0, 0, ids(1, 2), 0, 5.0);
  const SeqId early = sched_->add(1, 0, ids(1, 2), 0, 1.0);
  const SeqId urgent = sched_->add(2, 0, ids(1, 2), -1, 9.0);
  EXPECT_EQ(sched_->waiting(), (std::vector<SeqId>{urgent, early, late}));
  EXPECT_EQ(step(), (std::vector<Chunk>{{urgent, 0, 2, true}, {early, 0, 2, true}, {late, 0, 2, true}}));
}

TEST_F(SchedulerTest, PreemptsTheLastRunningAndRecomputesItLater) {
  // 6 blocks of 4: three 7-token prompts take two blocks each.
  make(6, {8, 100, false, 0});
  const SeqId a = sched_->add(0, 0, ids(1, 7), 0, 0.0);
  const SeqId b = sched_->add(1, 0, ids(1, 7), 0, 1.0);
  const SeqId c = sched_->add(2, 0, ids(1, 7), 0, 2.0);
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 0, 7, true}, {b, 0, 7, true}, {c, 0, 7, true}}));
  EXPECT_EQ(kv_->pool().n_free(), 0);
  // Position 7 still fits the second block of each.
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 7, 1, true}, {b, 7, 1, true}, {c, 7, 1, true}}));
  EXPECT_TRUE(last_.preempted.empty());
  // Position 8 needs a third block each: C, the latest arrival, gives its two up.
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 8, 1, true}, {b, 8, 1, true}}));
  EXPECT_EQ(last_.preempted, std::vector<SeqId>{c});
  EXPECT_EQ(sched_->preemptions(), 1);
  const Sequence& sc = sched_->sequence(c);
  EXPECT_EQ(sc.n_computed, 0);
  EXPECT_EQ(sc.tokens.size(), 9u);  // its prompt and its generated tokens, to recompute
  EXPECT_EQ(sched_->waiting(), std::vector<SeqId>{c});
  // It waits (three blocks needed, none free) until A ends, then recomputes all
  // nine tokens in one chunk and samples after the last.
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 9, 1, true}, {b, 9, 1, true}}));
  sched_->finish(a);
  EXPECT_EQ(step(), (std::vector<Chunk>{{b, 10, 1, true}, {c, 0, 9, true}}));
}

TEST_F(SchedulerTest, PreemptsAnAlreadyScheduledDecodeForAPrefillAheadOfIt) {
  // B decodes; A, more urgent, prefills in chunks. When A's chunk needs
  // blocks, B (last in order) is preempted although its decode was already
  // in the step: its chunk leaves the step and its blocks go to A.
  make(4, {8, 8, false, 0});
  const SeqId b = sched_->add(0, 0, ids(1, 3), 0, 0.0);
  EXPECT_EQ(step(), (std::vector<Chunk>{{b, 0, 3, true}}));
  const SeqId a = sched_->add(1, 0, ids(1, 14), -1, 1.0);
  EXPECT_EQ(step(), (std::vector<Chunk>{{b, 3, 1, true}, {a, 0, 7, false}}));
  EXPECT_EQ(sched_->running(), (std::vector<SeqId>{a, b}));
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 7, 7, true}}));
  EXPECT_EQ(last_.preempted, std::vector<SeqId>{b});
  EXPECT_EQ(last_.n_tokens, 7);
  EXPECT_EQ(kv_->pool().n_free(), 0);
}

TEST_F(SchedulerTest, AbortMidPrefillReturnsEveryBlock) {
  make(8, {8, 4, false, 0});
  const SeqId a = sched_->add(0, 0, ids(1, 14), 0, 0.0);
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 0, 4, false}}));
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 4, 4, false}}));
  EXPECT_EQ(kv_->pool().n_used(), 2);
  sched_->finish(a);
  EXPECT_TRUE(sched_->empty());
  EXPECT_EQ(kv_->pool().n_used(), 0);
  EXPECT_EQ(kv_->pool().n_free(), 8);
  sched_->check_invariants();
}

TEST_F(SchedulerTest, ForkSharesThePromptAndCopiesTheLastBlockOnWrite) {
  make(16, {8, 64, false, 0});
  const SeqId a = sched_->add(0, 0, ids(1, 6), 0, 0.0);
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 0, 6, true}}));  // blocks 0, 1
  const SeqId b = sched_->fork(a, 1);
  const SeqId c = sched_->fork(a, 2);
  EXPECT_EQ(sched_->running(), (std::vector<SeqId>{a, b, c}));
  EXPECT_EQ(kv_->pool().refcount(0), 3);
  EXPECT_EQ(kv_->pool().refcount(1), 3);
  // Each fork has the parent's tokens; give each its own sampled token.
  sched_->sequence(b).tokens.back() = 2000;
  sched_->sequence(c).tokens.back() = 3000;
  EXPECT_EQ(sched_->blocks_needed(b, 6, 7), 1);  // a private copy of block 1
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 6, 1, true}, {b, 6, 1, true}, {c, 6, 1, true}}));
  EXPECT_EQ(kv_->table(a).blocks, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(kv_->table(b).blocks, (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(kv_->table(c).blocks, (std::vector<int32_t>{0, 1}));  // the last sharer keeps the original
  EXPECT_EQ(kv_->pool().refcount(0), 3);
  for (SeqId s : {a, b, c}) sched_->finish(s);
  EXPECT_EQ(kv_->pool().n_used(), 0);
}

TEST_F(SchedulerTest, PrefixCacheAdoptsCachedBlocksAndEvictsLeastRecentlyUsedLeavesFirst) {
  make(8, {8, 64, true, 42});
  // A: 9 tokens -> blocks 0, 1 full (registered), block 2 partial.
  const SeqId a = sched_->add(0, 0, ids(1, 9), 0, 0.0);
  EXPECT_EQ(step(), (std::vector<Chunk>{{a, 0, 9, true}}));
  EXPECT_TRUE(kv_->pool().has_key(0));
  EXPECT_TRUE(kv_->pool().has_key(1));
  EXPECT_FALSE(kv_->pool().has_key(2));
  sched_->finish(a);
  // Released leaf first: block 2 (no key) is free, 1 then 0 cached in the LRU.
  EXPECT_EQ(kv_->pool().n_used(), 0);
  EXPECT_EQ(kv_->pool().n_evictable(), 2);
  // Three requests share the cached 8-token prefix at once.
  std::vector<int32_t> p = ids(1, 8);
  p.push_back(77);
  p.push_back(78);
  const SeqId b = sched_->add(1, 0, p, 0, 1.0);
  const SeqId c = sched_->add(2, 0, p, 0, 2.0);
  const SeqId d = sched_->add(3, 0, ids(1, 9), 0, 3.0);  // the whole of A's prompt again
  EXPECT_EQ(step(), (std::vector<Chunk>{{b, 8, 2, true}, {c, 8, 2, true}, {d, 8, 1, true}}));
  EXPECT_EQ(kv_->pool().refcount(0), 3);
  EXPECT_EQ(kv_->pool().refcount(1), 3);
  EXPECT_EQ(kv_->table(b).blocks, (std::vector<int32_t>{0, 1, 3}));  // 3..: the free list in order
  EXPECT_EQ(kv_->table(c).blocks, (std::vector<int32_t>{0, 1, 4}));
  EXPECT_EQ(kv_->table(d).blocks, (std::vector<int32_t>{0, 1, 5}));
  EXPECT_EQ(sched_->prefix_stats().hit_tokens, 24);
  for (SeqId s : {b, c, d}) sched_->finish(s);
  EXPECT_EQ(kv_->pool().n_used(), 0);
  // Free list now: 6, 7, 2, 3, 4, 5 (least recently freed first); LRU: 1, 0.
  // A 29-token prompt with nothing cached takes 8 blocks: every free block,
  // then the LRU's leaf (1), then its parent (0).
  const SeqId e = sched_->add(4, 0, ids(100, 29), 0, 4.0);
  EXPECT_EQ(step(), (std::vector<Chunk>{{e, 0, 29, true}}));
  EXPECT_EQ(kv_->table(e).blocks, (std::vector<int32_t>{6, 7, 2, 3, 4, 5, 1, 0}));
  EXPECT_EQ(kv_->pool().evictions(), 2);
  sched_->finish(e);
  EXPECT_EQ(kv_->pool().n_used(), 0);
  sched_->check_invariants();
}

}  // namespace
}  // namespace tokamak::engine
