// Decode attention over the paged KV cache at several context lengths, for a
// TinyLlama-shaped layer (32 query heads over 4 KV heads of 64), per KV type,
// for stories260K's (8 query heads over 4 KV heads of 8: BM_SmallHeads), and
// for 1, 2, 3, 4, 6, 7 and 8 query heads to a KV head (BM_Groups).
// One iteration = one decode token through one layer, on one thread, with the
// widest ISA this CPU runs. Counters: keys/s, the KV bytes read per second,
// and multiply-adds per second (heads x head_dim x 2 a key: the scores and
// the weighted values), to hold against BM_MultiplyAddPeak: the rate at which
// this CPU runs the AVX2 integer kernel's product instruction (VPMADDWD, 16
// multiply-adds, with the VPADDD that sums it) on one thread and on one
// thread a core. Their ratio bounds long-context decode on the AVX2 path.
// BM_MultiplyAddPeakVnni does the same for the AVX-512 VNNI kernel's VPDPBUSD.
//
//   cmake -B build/bench -DTOKAMAK_BENCH=ON -DCMAKE_BUILD_TYPE=Release && ninja -C build/bench attention_bench
//   build/bench/attention_bench --benchmark_filter=Decode
// TOKAMAK_BENCH_ISA=avx2 (any name isa_name gives) measures that path instead.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "bench_isa.h"
#include "kernels/attention.h"
#include "kv/kv_cache.h"

#if TOKAMAK_HAVE_X86_SIMD
#include <immintrin.h>
#endif

namespace tokamak {
namespace {

using kernels::KvType;

struct Shape {
  int heads, kv_heads, head_dim;
};
constexpr Shape kTinyLlama{32, 4, 64};
constexpr Shape kStories260K{8, 4, 8};

struct Setup {
  std::unique_ptr<kv::KvCache> cache;
  std::vector<float> q;
  std::vector<float> out;
  std::vector<float> scratch;
  kv::KvLayout layout;
};

Setup make_setup(KvType k, KvType v, int recent, int64_t ctx, int n_layers = 1, Shape shape = kTinyLlama) {
  Setup s;
  s.layout.n_layers = n_layers;
  s.layout.n_kv_heads = shape.kv_heads;
  s.layout.head_dim = shape.head_dim;
  s.layout.format = {k, v, recent, 16};
  s.cache = std::make_unique<kv::KvCache>(s.layout, static_cast<int32_t>(ctx / 16 + 8 + s.layout.recent_blocks()));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> kr(static_cast<size_t>(shape.kv_heads * shape.head_dim));
  std::vector<float> vr(kr.size());
  s.cache->prepare_write(0, 0, ctx);
  for (int layer = 0; layer < n_layers; ++layer) {
    for (int64_t p = 0; p < ctx; ++p) {
      for (size_t i = 0; i < kr.size(); ++i) {
        kr[i] = normal(rng);
        vr[i] = normal(rng);
      }
      s.cache->write(0, layer, p, kr.data(), vr.data());
    }
  }
  s.cache->set_length(0, ctx);
  s.q.resize(static_cast<size_t>(shape.heads * shape.head_dim));
  for (float& x : s.q) x = normal(rng);
  s.out.resize(s.q.size());
  s.scratch.resize(static_cast<size_t>(2 * kernels::attention_tile_state_floats({shape.heads, shape.kv_heads, shape.head_dim}, 1)));
  return s;
}

// One decode token through one layer of `shape`.
void run_decode(benchmark::State& state, KvType k, KvType v, int recent, Shape shape) {
  const int64_t ctx = state.range(0);
  Setup s = make_setup(k, v, recent, ctx, 1, shape);
  const kernels::AttentionParams dims{shape.heads, shape.kv_heads, shape.head_dim};
  const int32_t pos = static_cast<int32_t>(ctx - 1);
  const kernels::KvView view = s.cache->view(0, 0, pos);
  const float* q = s.q.data();
  float* out = s.out.data();
  const kernels::Isa isa = bench_isa();
  for (auto _ : state) {
    for (int h = 0; h < shape.kv_heads; ++h) {
      const kernels::QueryTile tile{&q, &pos, 1, h};
      kernels::attention(isa, dims, view, tile, &out, s.scratch.data());
    }
    benchmark::DoNotOptimize(out[0]);
  }
  state.counters["keys/s"] =
      benchmark::Counter(static_cast<double>(ctx), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["KV B/s"] =
      benchmark::Counter(static_cast<double>(ctx * s.layout.bytes_per_token()),
                         benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1024);
  state.counters["MAC/s"] = benchmark::Counter(static_cast<double>(ctx) * shape.heads * shape.head_dim * 2,
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(kernels::isa_name(isa)));
}

void BM_DecodeAttention(benchmark::State& state, KvType k, KvType v, int recent) {
  run_decode(state, k, v, recent, kTinyLlama);
}
// Heads of 8 (stories260K, f16 KV as `run` keeps it): per-tile and per-query
// overheads, not arithmetic, set the pace.
void BM_SmallHeads(benchmark::State& state, KvType k, KvType v) { run_decode(state, k, v, 0, kStories260K); }
// 32 query heads of 64 (30 for groups of 3 and 6, 28 for 7) with range(1) of them to a KV
// head: multi-head attention (1), pairs, ... TinyLlama's 8. The AVX2 integer
// kernel puts a token's heads of a KV head across its 8 lanes, so the group
// decides whether it or f32 arithmetic is faster (attention.cpp).
void BM_Groups(benchmark::State& state, KvType k, KvType v) {
  const int group = static_cast<int>(state.range(1));
  const int heads = 32 / group * group;
  run_decode(state, k, v, 0, Shape{heads, heads / group, 64});
}
BENCHMARK_CAPTURE(BM_Groups, q8, KvType::Q8, KvType::Q8)
    ->ArgsProduct({{2048}, {1, 2, 3, 4, 6, 7, 8}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Groups, q4, KvType::Q4, KvType::Q4)
    ->ArgsProduct({{2048}, {1, 2, 3, 4, 6, 7, 8}})
    ->Unit(benchmark::kMicrosecond);

// The same over TinyLlama's 22 layers in turn, one layer an iteration: the
// cache (98 MB of q8 at 8K) no longer fits in the last-level cache, as in a
// real decode step.
void BM_DecodeAttentionFromDram(benchmark::State& state, KvType k, KvType v) {
  constexpr int kLayers = 22;
  const int64_t ctx = state.range(0);
  Setup s = make_setup(k, v, 0, ctx, kLayers);
  const kernels::AttentionParams dims{kTinyLlama.heads, kTinyLlama.kv_heads, kTinyLlama.head_dim};
  const float* q = s.q.data();
  float* out = s.out.data();
  const int32_t pos = static_cast<int32_t>(ctx - 1);
  const kernels::Isa isa = bench_isa();
  int layer = 0;
  for (auto _ : state) {
    const kernels::KvView view = s.cache->view(0, layer, pos);
    for (int h = 0; h < kTinyLlama.kv_heads; ++h) {
      const kernels::QueryTile tile{&q, &pos, 1, h};
      kernels::attention(isa, dims, view, tile, &out, s.scratch.data());
    }
    benchmark::DoNotOptimize(out[0]);
    layer = (layer + 1) % kLayers;
  }
  state.counters["keys/s"] =
      benchmark::Counter(static_cast<double>(ctx), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(kernels::isa_name(isa)));
}
BENCHMARK_CAPTURE(BM_DecodeAttentionFromDram, f16, KvType::F16, KvType::F16)->Arg(8192)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeAttentionFromDram, q8, KvType::Q8, KvType::Q8)->Arg(8192)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeAttentionFromDram, q4, KvType::Q4, KvType::Q4)->Arg(8192)->Unit(benchmark::kMicrosecond);

#if TOKAMAK_HAVE_X86_SIMD
// 12 independent VPMADDWD + VPADDD chains (more than the instruction's
// latency x throughput), per thread: the product loops' peak. The operands
// pass through an empty asm each round so that nothing is hoisted.
typedef int32_t MaddSums __attribute__((vector_size(32)));
TOKAMAK_TARGET_AVX2 void multiply_add_rounds(benchmark::State& state) {
  constexpr int kChains = 12;
  constexpr int64_t kRounds = 1 << 16;
  __m256i a[kChains];
  for (int u = 0; u < kChains; ++u) a[u] = _mm256_set1_epi16(static_cast<int16_t>(u + 1));
  __m256i b = _mm256_set1_epi16(3);
  MaddSums acc[kChains] = {};
  for (auto _ : state) {
    for (int64_t r = 0; r < kRounds; ++r) {
#pragma GCC unroll 12
      for (int u = 0; u < kChains; ++u) acc[u] += MaddSums(_mm256_madd_epi16(a[u], b));
      asm volatile("" : "+x"(b));
    }
  }
  int32_t sum = 0;
  for (const MaddSums& x : acc) sum += x[0];
  benchmark::DoNotOptimize(sum);
  // Each thread's count over the wall time, summed over the threads.
  const double madds = static_cast<double>(state.iterations()) * kRounds * kChains;
  state.counters["vpmaddwd/s"] = benchmark::Counter(madds, benchmark::Counter::kIsRate);
  state.counters["MAC/s"] = benchmark::Counter(madds * 16, benchmark::Counter::kIsRate);
}
void BM_MultiplyAddPeak(benchmark::State& state) {
  if (!kernels::isa_supported(kernels::Isa::kAvx2)) {
    state.SkipWithError("this CPU has no AVX2");
    return;
  }
  multiply_add_rounds(state);
}
BENCHMARK(BM_MultiplyAddPeak)
    ->Threads(1)
    ->Threads(static_cast<int>(std::max(2u, std::thread::hardware_concurrency())))
    ->UseRealTime();

// The same for the AVX-512 VNNI kernel's product, VPDPBUSD on 512 bits (64
// u8 x s8 multiply-adds summed into 16 int32 lanes, one instruction): 12
// independent chains. Its rate against the kernel's MAC/s says how far the
// native long-context decode is from its instruction's bound.
typedef int32_t DpbusdSums __attribute__((vector_size(64)));
__attribute__((target(TOKAMAK_ISA_AVX512_VNNI))) void dpbusd_rounds(benchmark::State& state) {
  constexpr int kChains = 12;
  constexpr int64_t kRounds = 1 << 16;
  __m512i a[kChains];
  for (int u = 0; u < kChains; ++u) a[u] = _mm512_set1_epi32(u);
  __m512i b = _mm512_set1_epi8(3);
  const __m512i c = _mm512_set1_epi8(5);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRounds; ++r) {
#pragma GCC unroll 12
      for (int u = 0; u < kChains; ++u) a[u] = _mm512_dpbusd_epi32(a[u], b, c);
      asm volatile("" : "+v"(b));
    }
  }
  int32_t sum = 0;
  for (const __m512i& x : a) sum += DpbusdSums(x)[0];
  benchmark::DoNotOptimize(sum);
  const double ops = static_cast<double>(state.iterations()) * kRounds * kChains;
  state.counters["vpdpbusd/s"] = benchmark::Counter(ops, benchmark::Counter::kIsRate);
  state.counters["MAC/s"] = benchmark::Counter(ops * 64, benchmark::Counter::kIsRate);
}
void BM_MultiplyAddPeakVnni(benchmark::State& state) {
  if (!kernels::isa_supported(kernels::Isa::kAvx512Vnni)) {
    state.SkipWithError("this CPU has no AVX-512 VNNI");
    return;
  }
  dpbusd_rounds(state);
}
BENCHMARK(BM_MultiplyAddPeakVnni)
    ->Threads(1)
    ->Threads(static_cast<int>(std::max(2u, std::thread::hardware_concurrency())))
    ->UseRealTime();
#endif

#define TOKAMAK_DECODE_BENCH(name, k, v, recent)            \
  BENCHMARK_CAPTURE(BM_DecodeAttention, name, k, v, recent) \
      ->Arg(128)                                            \
      ->Arg(1024)                                           \
      ->Arg(8192)                                           \
      ->Unit(benchmark::kMicrosecond)

TOKAMAK_DECODE_BENCH(f32, KvType::F32, KvType::F32, 0);
TOKAMAK_DECODE_BENCH(f16, KvType::F16, KvType::F16, 0);
TOKAMAK_DECODE_BENCH(q8, KvType::Q8, KvType::Q8, 0);
TOKAMAK_DECODE_BENCH(q4, KvType::Q4, KvType::Q4, 0);
TOKAMAK_DECODE_BENCH(q4_recent64, KvType::Q4, KvType::Q4, 64);
BENCHMARK_CAPTURE(BM_SmallHeads, f16, KvType::F16, KvType::F16)->Arg(128)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SmallHeads, f32, KvType::F32, KvType::F32)->Arg(128)->Arg(256)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tokamak
