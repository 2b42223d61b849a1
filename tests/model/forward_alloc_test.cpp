// No allocation in the token loop: once a Forward has run a batch of a given
// size, further decode steps (and the matmuls inside them) allocate nothing.
// Counts every operator new and aligned_alloc (AlignedBuffer's scratch) in
// this test binary.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "common/test_data.h"
#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "model/forward.h"
#include "model/model.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

// Every plain (non-aligned) form, so that each new and its delete agree.
// (GCC cannot tell that these deletes pair with the news below.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
namespace {
void* counted_malloc(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
}  // namespace
void* operator new(size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new(size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
// Scratch buffers (core/aligned_buffer.h) come from aligned_alloc, not new:
// this definition in the executable takes the C library's place for every caller.
extern "C" void* aligned_alloc(size_t alignment, size_t n) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  void* p = nullptr;
  return posix_memalign(&p, alignment, n == 0 ? alignment : n) == 0 ? p : nullptr;
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace tokamak {
namespace {

// The counter sees both kinds, so the zeros below mean no allocation at all.
TEST(NoAllocation, TheCounterSeesNewAndAlignedAlloc) {
  const int64_t start = g_allocations.load();
  std::vector<int> v(100);
  AlignedBuffer b;
  b.reserve(100);
  asm volatile("" : : "r"(v.data()), "r"(b.data()) : "memory");  // the allocations escape: not elided
  EXPECT_EQ(g_allocations.load(), start + 2);
}

TEST(NoAllocation, MatmulReusesItsScratch) {
  const Model model = Model::load(testing::test_data("fixtures/models/micro-llama-q4_k.gguf"));
  const LayerWeights& l = model.weights().layers[0];
  ThreadPool pool(2);
  kernels::Matmul mm;
  const int64_t d = model.config().n_embd;
  std::vector<float> x(static_cast<size_t>(4 * d), 0.5f), q(4 * 1024), k(4 * 1024), v(4 * 1024);
  const int64_t first = g_allocations.load();
  mm.run({{&l.wq, q.data()}, {&l.wk, k.data()}, {&l.wv, v.data()}}, x.data(), 4, pool);  // grows the scratch
  const int64_t before = g_allocations.load();
  EXPECT_GT(before, first);  // the counter sees the kernels' allocations, so "none" below means none
  for (int i = 0; i < 10; ++i) {
    mm.run({{&l.wq, q.data()}, {&l.wk, k.data()}, {&l.wv, v.data()}}, x.data(), 1 + i % 4, pool);
  }
  EXPECT_EQ(g_allocations.load(), before);
}

// Decode steps inside one KV block (no new block for the sequence's table),
// with f16 KV and with q8 KV plus an f16 ring (the step's f16 copy of K/V).
TEST(NoAllocation, DecodeStepsAfterTheFirst) {
  kv::KvFormat mixed;
  mixed.k_type = mixed.v_type = kernels::KvType::Q8;
  mixed.recent = 8;
  const std::pair<const char*, kv::KvFormat> cases[] = {{"micro-llama-q4_0.gguf", {}},
                                                        {"micro-llama-q6_k.gguf", {}},
                                                        {"micro-llama-f16.gguf", {}},
                                                        {"micro-llama-q4_0.gguf", mixed}};
  for (const auto& [name, format] : cases) {
    const Model model = Model::load(testing::test_data(std::string("fixtures/models/") + name));
    ThreadPool pool(2);
    const kv::KvLayout layout = kv_layout_for(model.config(), format);
    kv::KvCache kv(layout, 8 + layout.recent_blocks());
    Forward forward(model, pool);
    Batch batch;
    batch.add(1, 0, 0, true);
    const int64_t first = g_allocations.load();
    forward.run(batch, kv);
    const int64_t before = g_allocations.load();
    EXPECT_GT(before, first) << name;  // the first step's scratch is counted
    for (int32_t pos = 1; pos < 16; ++pos) {
      batch.clear();
      batch.add(100 + pos, pos, 0, true);
      forward.run(batch, kv);
    }
    EXPECT_EQ(g_allocations.load(), before) << name << " recent " << format.recent;
  }
}

}  // namespace
}  // namespace tokamak
