// Micro-benchmarks of the matmul kernels on TinyLlama-1.1B shapes.
//
// GEMV (1 token, decode) reads each weight byte once, so it is reported as
// GB/s of weights next to the machine's streaming read bandwidth (BM_ReadBandwidth,
// the same memory, 2 threads). The weights live in anonymous memory on huge
// pages and rotate through enough copies (>= 512 MiB) that they come from
// DRAM, not from the 32 MiB L3, as a real decode's weights do; GemvX8Hot
// reads one copy of ~512 KiB from L2, the rate the kernel's instructions
// allow (what `tokamak bench` calls the compute roofline).
// GEMM (many tokens, prefill) is compute bound and reported as GFLOP/s
// (2 * rows * k * tokens per call).
//
//   build/rel/matmul_bench --benchmark_filter=Gemv --benchmark_repetitions=5 --benchmark_report_aggregates_only
// TOKAMAK_BENCH_ISA=avx2 (any name isa_name gives) measures that path instead
// of the widest this CPU runs.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_isa.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/huge_pages.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/interleave.h"
#include "kernels/matmul.h"
#include "kernels/quants.h"

namespace tokamak {
namespace {

constexpr size_t kRotationBytes = size_t{512} << 20;

// A weight matrix [rows, k] of type t: random quants with sane scales (the
// speed of the kernels does not depend on the values), repeated in copies
// that fill rotation_bytes (0: one copy, read again each call).
struct Weights {
  DType type;
  RowLayout layout;
  int64_t k, rows;
  size_t bytes;  // of one copy
  int copies;
  HugePageBuffer buf;

  Weights(DType t, int64_t k_, int64_t rows_, RowLayout layout_ = RowLayout::kPlain, size_t rotation_bytes = kRotationBytes)
      : type(t), layout(layout_), k(k_), rows(rows_) {
    bytes = row_bytes(t, k) * static_cast<size_t>(rows);
    copies = static_cast<int>(std::max<size_t>(1, rotation_bytes / bytes));
    buf = HugePageBuffer(bytes * static_cast<size_t>(copies), "benchmark weights");
    std::memset(buf.data(), 0, buf.size());  // touched: untouched pages would all read the one zero page
    // One copy quantized from Gaussian values, then duplicated.
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> row(static_cast<size_t>(k));
    const size_t rb = row_bytes(t, k);
    for (int64_t r = 0; r < rows; ++r) {
      if (r < 64 || !kernels::can_quantize(t)) {
        for (float& v : row) v = normal(rng);
      }
      if (kernels::can_quantize(t) && r < 64) {
        kernels::quantize_row(t, row.data(), buf.data() + static_cast<size_t>(r) * rb, k);
      } else if (kernels::can_quantize(t)) {
        std::memcpy(buf.data() + static_cast<size_t>(r) * rb, buf.data() + static_cast<size_t>(r % 64) * rb, rb);
      }
    }
    if (layout == RowLayout::kInterleaved8) {
      std::vector<std::byte> plain(buf.data(), buf.data() + bytes);
      kernels::interleave_rows(t, plain.data(), buf.data(), rows, k);
    }
    for (int c = 1; c < copies; ++c) std::memcpy(buf.data() + bytes * static_cast<size_t>(c), buf.data(), bytes);
  }
  TensorView view(int copy) const {
    TensorView v;
    v.type = type;
    v.layout = layout;
    v.n_dims = 2;
    v.ne = {k, rows, 1, 1};
    v.data = buf.data() + bytes * static_cast<size_t>(copy % copies);
    return v;
  }
};

const DType kTypes[] = {DType::F32,    DType::F16,   DType::BF16,  DType::Q8_0,  DType::Q4_0,   DType::Q4_1,
                        DType::Q5_0,   DType::Q5_1,  DType::Q2_K,  DType::Q3_K,  DType::Q4_K,   DType::Q5_K,
                        DType::Q6_K,   DType::IQ4_NL, DType::IQ4_XS, DType::IQ3_XXS, DType::IQ3_S, DType::TQ1_0,
                        DType::TQ2_0};

void run_matmul(benchmark::State& state, DType t, int64_t k, int64_t rows, int64_t tokens, int threads, kernels::Isa isa,
                RowLayout layout = RowLayout::kPlain, size_t rotation_bytes = kRotationBytes) {
  const Weights w(t, k, rows, layout, rotation_bytes);
  std::vector<float> x(static_cast<size_t>(k * tokens));
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  std::vector<float> y(static_cast<size_t>(rows * tokens));
  ThreadPool pool(threads);
  kernels::Matmul mm({isa, kernels::MatmulPrecision::kQuantized});
  int copy = 0;
  for (auto _ : state) {
    const TensorView v = w.view(copy++);
    mm.run(v, x.data(), tokens, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.bytes));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(k * rows * tokens) * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// Streaming read of 1 GiB on huge pages: the bandwidth a GEMV can reach.
void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  static const HugePageBuffer buf = [] {
    HugePageBuffer b(size_t{1} << 30, "bandwidth buffer");
    std::memset(b.data(), 1, b.size());  // touched: untouched pages would all read the one zero page
    return b;
  }();
  ThreadPool pool(threads);
  const int64_t n = static_cast<int64_t>(buf.size() / sizeof(uint64_t));
  const auto* p = reinterpret_cast<const uint64_t*>(buf.data());
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  for (auto _ : state) {
    pool.parallel_for(n / 64, [&](int64_t b, int64_t e, int t) {
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int64_t i = b * 64; i < e * 64; i += 8) {
        s0 += p[i] ^ p[i + 1];
        s1 += p[i + 2] ^ p[i + 3];
        s2 += p[i + 4] ^ p[i + 5];
        s3 += p[i + 6] ^ p[i + 7];
      }
      sums[static_cast<size_t>(t)] += s0 + s1 + s2 + s3;
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(buf.size()));
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

struct Shape {
  const char* name;
  int64_t k, rows;
};
// TinyLlama-1.1B: n_embd 2048, n_ff 5632, 4 KV heads of 64, vocab 32000.
const Shape kShapes[] = {{"attn_q", 2048, 2048}, {"ffn_up", 2048, 5632}, {"ffn_down", 5632, 2048}};

int register_all() {
  const kernels::Isa best = bench_isa();
  for (DType t : kTypes) {
    for (const Shape& s : kShapes) {
      for (int threads : {1, 2}) {
        const std::string name = std::string("Gemv/") + std::string(dtype_name(t)) + "/" + s.name + "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { run_matmul(st, t, s.k, s.rows, 1, threads, best); })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
    for (int tokens : {64, 512}) {
      const std::string name = std::string("Gemm/") + std::string(dtype_name(t)) + "/ffn_up/tokens:" + std::to_string(tokens) + "/threads:2";
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { run_matmul(st, t, 2048, 5632, tokens, 2, best); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
    // The other shapes of a prefill, at its batch size.
    for (const Shape& s : kShapes) {
      if (std::string_view(s.name) == "ffn_up") continue;
      const std::string name = std::string("Gemm/") + std::string(dtype_name(t)) + "/" + s.name + "/tokens:512/threads:2";
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { run_matmul(st, t, s.k, s.rows, 512, 2, best); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  // The interleaved layout (kernels/interleave.h), where the best variant has kernels for it.
  for (DType t : kTypes) {
    if (!kernels::prefers_interleaved(t, best)) continue;
    for (const Shape& s : kShapes) {
      for (int threads : {1, 2}) {
        const std::string name = std::string("GemvX8/") + std::string(dtype_name(t)) + "/" + s.name + "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
          run_matmul(st, t, s.k, s.rows, 1, threads, best, RowLayout::kInterleaved8);
        })->UseRealTime()->Unit(benchmark::kMicrosecond);
      }
    }
    // One copy of ~512 KiB, read again each call: in L2, so the kernel's
    // instructions bound it, not memory (bench's compute roofline).
    const int64_t hot_rows = std::max<int64_t>(16, static_cast<int64_t>((size_t{512} << 10) / row_bytes(t, 2048)) / 16 * 16);
    const std::string hot = std::string("GemvX8Hot/") + std::string(dtype_name(t)) + "/k:2048/threads:1";
    benchmark::RegisterBenchmark(hot.c_str(), [=](benchmark::State& st) {
      run_matmul(st, t, 2048, hot_rows, 1, 1, best, RowLayout::kInterleaved8, 0);
    })->UseRealTime()->Unit(benchmark::kMicrosecond);
    for (int tokens : {64, 512}) {
      const std::string name = std::string("GemmX8/") + std::string(dtype_name(t)) + "/ffn_up/tokens:" + std::to_string(tokens) + "/threads:2";
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
        run_matmul(st, t, 2048, 5632, tokens, 2, best, RowLayout::kInterleaved8);
      })->UseRealTime()->Unit(benchmark::kMillisecond);
    }
  }
  // The scalar reference, for scale.
  for (DType t : {DType::Q4_0, DType::Q4_K}) {
    const std::string name = std::string("GemvScalar/") + std::string(dtype_name(t)) + "/ffn_up/threads:1";
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { run_matmul(st, t, 2048, 5632, 1, 1, kernels::Isa::kScalar); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  return 0;
}
const int kRegistered = register_all();

}  // namespace
}  // namespace tokamak
