// The measuring parts of tokamak bench: statistics, FLOP counts, the roofline
// and its percentage (by hand), the weight ranges a decode step reads (from
// the file's own tensor table), and timed forward passes on a real model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/reference_model.h"
#include "common/test_data.h"
#include "core/error.h"
#include "tools/bench.h"
#include "io/gguf.h"

namespace tokamak::tools {
namespace {

using testing::test_data;

TEST(Bench, StatsOf) {
  const TimingStats odd = stats_of({3.0, 1.0, 2.0});
  EXPECT_EQ(odd.median, 2.0);
  EXPECT_EQ(odd.min, 1.0);
  EXPECT_EQ(odd.max, 3.0);
  EXPECT_EQ(stats_of({4.0, 1.0, 2.0, 10.0}).median, 3.0);
  EXPECT_EQ(stats_of({5.0}).median, 5.0);
  EXPECT_THROW(stats_of({}), Error);
}

// What a decode step reads whole, from the file itself: every tensor but
// token_embd (read one row per token), or all of them when the output is tied
// to token_embd. Each weight range must be one of these tensors' bytes.
void expect_ranges_are_the_file_tensors(const std::filesystem::path& path) {
  SCOPED_TRACE(path.string());
  const io::GgufFile file = io::GgufFile::open(path);
  const bool tied = file.find_tensor("output.weight") == nullptr;
  std::vector<std::span<const std::byte>> expected;
  size_t expected_bytes = 0;
  for (const io::GgufTensorInfo& t : file.tensors()) {
    if (t.name == "token_embd.weight" && !tied) continue;
    expected.emplace_back(file.view(t).data, t.n_bytes);
    expected_bytes += t.n_bytes;
  }
  const Model model = Model::load(path, MapMode::kAuto, kKeepLayout);
  EXPECT_EQ(model.weight_bytes(), expected_bytes);
  std::vector<std::span<const std::byte>> ranges = weight_ranges(model);
  ASSERT_EQ(ranges.size(), expected.size());
  // Matched by content, since the model maps the file separately.
  for (const std::span<const std::byte> e : expected) {
    auto same = [&](std::span<const std::byte> r) {
      return r.size() == e.size() && std::memcmp(r.data(), e.data(), e.size()) == 0;
    };
    const auto it = std::find_if(ranges.begin(), ranges.end(), same);
    ASSERT_NE(it, ranges.end()) << "no weight range holds a tensor of " << e.size() << " bytes";
    ranges.erase(it);
  }
}

TEST(Bench, WeightRangesAreTheFileTensorsADecodeStepReads) {
  expect_ranges_are_the_file_tensors(test_data("fixtures/models/micro-llama-q8_0.gguf"));
  expect_ranges_are_the_file_tensors(test_data("fixtures/models/stories260K-q4_0.gguf"));  // mixed types
  // Tied output, q/k/v biases and rope frequency factors are read each step too.
  testing::RandomModelSpec spec;
  spec.architecture = "qwen2";
  spec.qkv_bias = true;
  spec.tied_output = true;
  spec.rope_freqs = true;
  const std::filesystem::path path = ::testing::TempDir() + "/bench_weights_qwen2.gguf";
  testing::write_random_model(spec, path);
  expect_ranges_are_the_file_tensors(path);
}

// micro-llama (fixtures/models/README): n_embd 256, n_ff 768, 4 layers, q_dim
// 256, kv_dim 64, 512 tokens. A layer has 256 * (256 + 64 + 64 + 256) +
// 3 * 256 * 768 = 753,664 matrix weights, the output 256 * 512 = 131,072;
// attention costs 4 * q_dim = 1024 flops per key and layer.
TEST(Bench, FlopsByHand) {
  const Model model = Model::load(test_data("fixtures/models/micro-llama-q8_0.gguf"));
  const ModelConfig& c = model.config();
  // One token, one key: 2 * (4 * 753,664 + 131,072) + 1024 * 1 * 4.
  EXPECT_EQ(forward_flops(c, 1, 0, 1), 6'295'552.0);
  // 3 tokens after 5 cached see 6 + 7 + 8 = 21 keys; logits for one row:
  // 2 * (3 * 4 * 753,664 + 131,072) + 1024 * 21 * 4.
  EXPECT_EQ(forward_flops(c, 3, 5, 1), 18'436'096.0);
  // Logits for all 3 rows add 2 * 2 * 131,072.
  EXPECT_EQ(forward_flops(c, 3, 5, 3), 18'960'384.0);
}

// The same micro-llama: 4 x 753,664 + 131,072 = 3,145,728 matrix weights, all
// Q8_0; at 1e9 multiply-adds per second a pass takes 3.145728 ms.
TEST(Bench, ComputeRooflineByHand) {
  const Model model = Model::load(test_data("fixtures/models/micro-llama-q8_0.gguf"));
  EXPECT_DOUBLE_EQ(compute_roofline_tokens_per_s(model, {{DType::Q8_0, 1e9}}), 1e9 / 3'145'728.0);
  EXPECT_THROW(compute_roofline_tokens_per_s(model, {{DType::Q4_0, 1e9}}), Error);
  // Measured rates: one per type, positive.
  ThreadPool pool(1);
  const std::vector<KernelRate> rates = measure_kernel_rates(model, pool, {}, 1);
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_EQ(rates[0].type, DType::Q8_0);
  EXPECT_GT(rates[0].macs_per_s, 0.0);
}

// The micro-llama above: 8 query heads and 2 KV heads of 32, 4 layers. A
// query at position 9 attends 10 keys: 2 * 32 multiply-adds per key and query
// head, 4 * 8 * 64 * 10 = 20,480. An f16 row is 64 bytes, a q8 one 32 + a
// 4-byte scale: the f16 cache reads 4 layers * 2 heads * 10 keys * (64 + 64)
// = 10,240 bytes; q8 at position 39 reads 40 keys * (36 + 36) = 2,880 bytes a
// head and layer (23,040), or with the 8 newest in f16 (recent_begin(39) =
// 32): 32 * 72 + 8 * 128 = 3,328 (26,624). A 16-key sliding window leaves 16
// keys at position 39: 32,768 multiply-adds; with the ring, 8 * 72 + 8 * 128
// = 1,600 bytes (12,800).
TEST(Bench, AttentionCostsByHand) {
  const Model model = Model::load(test_data("fixtures/models/micro-llama-q8_0.gguf"));
  ModelConfig c = model.config();
  EXPECT_EQ(attention_keys(c, 9), 10);
  EXPECT_DOUBLE_EQ(attention_macs(c, 9), 20'480.0);
  EXPECT_DOUBLE_EQ(kv_bytes_read(c, kv_layout_for(c), 9), 10'240.0);
  kv::KvFormat q8;
  q8.k_type = q8.v_type = kernels::KvType::Q8;
  EXPECT_DOUBLE_EQ(kv_bytes_read(c, kv_layout_for(c, q8), 39), 23'040.0);
  q8.recent = 8;
  EXPECT_DOUBLE_EQ(kv_bytes_read(c, kv_layout_for(c, q8), 39), 26'624.0);
  c.sliding_window = 16;
  EXPECT_EQ(attention_keys(c, 39), 16);
  EXPECT_DOUBLE_EQ(attention_macs(c, 39), 32'768.0);
  EXPECT_DOUBLE_EQ(kv_bytes_read(c, kv_layout_for(c, q8), 39), 12'800.0);
}

// 100 tokens/s of weight products (10 ms a step) and 5e8 multiply-adds of
// attention at 1e11 a second (5 ms): 1 / 15 ms = 66.7 tokens/s. Without a
// measured rate, or without attention, the weights' roofline stands.
TEST(Bench, ComputeRooflineWithAttentionByHand) {
  EXPECT_DOUBLE_EQ(with_attention(100.0, 5e8, 1e11), 1.0 / 0.015);
  EXPECT_DOUBLE_EQ(with_attention(100.0, 5e8, 0.0), 100.0);
  EXPECT_DOUBLE_EQ(with_attention(100.0, 0.0, 1e11), 100.0);
  const Model model = Model::load(test_data("fixtures/models/micro-llama-q8_0.gguf"));
  ThreadPool pool(1);
  kv::KvFormat q8;
  q8.k_type = q8.v_type = kernels::KvType::Q8;
  EXPECT_GT(measure_attention_rate(model, pool, {}, kernels::best_isa()), 0.0);
  EXPECT_GT(measure_attention_rate(model, pool, q8, kernels::best_isa()), 0.0);
}

// 2 GB of weights read at 40 GB/s: a decode step can run at most 20 times a
// second; a pp512 batch shares one read, so 512 * 20 = 10,240 tokens/s.
TEST(Bench, RooflineByHand) {
  EXPECT_DOUBLE_EQ(roofline_tokens_per_s(40e9, 2'000'000'000, 1), 20.0);
  EXPECT_DOUBLE_EQ(roofline_tokens_per_s(40e9, 2'000'000'000, 512), 10'240.0);
  EXPECT_DOUBLE_EQ(roofline_tokens_per_s(25e9, 500'000'000, 1), 50.0);
}

// tg10 over 2 GB of weights, three repetitions:
//   1.0 s -> 10 tokens/s at 25 GB/s (roofline 12.5):   80%
//   0.8 s -> 12.5 tokens/s at 62.5 GB/s (roofline 31.25): 40%
//   2.0 s ->  5 tokens/s at 40 GB/s (roofline 20):     25%
// Medians: 10 tokens/s, 1.0 s, 40 GB/s, roofline 20 tokens/s, and 40% (the
// median of the fractions, not 10 / 20 = 50%: each speed meets its own bandwidth).
TEST(Bench, SummaryByHand) {
  BenchResult r;
  r.weight_bytes = 2'000'000'000;
  summarize(r, {{1.0, 25e9}, {0.8, 62.5e9}, {2.0, 40e9}}, 10, 1);
  EXPECT_DOUBLE_EQ(r.tokens_per_s.median, 10.0);
  EXPECT_DOUBLE_EQ(r.tokens_per_s.min, 5.0);
  EXPECT_DOUBLE_EQ(r.tokens_per_s.max, 12.5);
  EXPECT_DOUBLE_EQ(r.seconds.median, 1.0);
  EXPECT_DOUBLE_EQ(r.bandwidth_gbs, 40.0);
  EXPECT_DOUBLE_EQ(r.roofline_tokens_per_s, 20.0);
  EXPECT_DOUBLE_EQ(r.roofline_fraction, 0.40);
  // The same with 0.5 GB of KV rows a step, 2.5 GB in all: rooflines 10, 25
  // and 16 tokens/s, fractions 100%, 50% and 31.25%; the median bandwidth's
  // roofline 16, the median fraction 50%.
  BenchResult kv = r;
  kv.kv_bytes = 500'000'000;
  summarize(kv, {{1.0, 25e9}, {0.8, 62.5e9}, {2.0, 40e9}}, 10, 1);
  EXPECT_DOUBLE_EQ(kv.roofline_tokens_per_s, 16.0);
  EXPECT_DOUBLE_EQ(kv.roofline_fraction, 0.5);

  // pp512 in 0.5 s (1,024 tokens/s) at 40 GB/s: roofline 10,240, 10%.
  BenchResult p;
  p.weight_bytes = 2'000'000'000;
  summarize(p, {{0.5, 40e9}}, 512, 512);
  EXPECT_DOUBLE_EQ(p.tokens_per_s.median, 1024.0);
  EXPECT_DOUBLE_EQ(p.roofline_tokens_per_s, 10'240.0);
  EXPECT_DOUBLE_EQ(p.roofline_fraction, 0.10);
  EXPECT_THROW(summarize(p, {}, 512, 512), Error);
}

TEST(Bench, TimesPrefillAndDecodeThroughForward) {
  const Model model = Model::load(test_data("fixtures/models/micro-llama-q4_0.gguf"));
  ThreadPool pool(1);
  ForwardTimer timer(model, pool, 20, 0);
  EXPECT_GT(timer.prefill(20), 0.0);
  EXPECT_GT(timer.decode(5), 0.0);
  EXPECT_GT(timer.prefill(1), 0.0);  // the cache is reset between runs
  EXPECT_THROW(timer.prefill(21), Error);
  EXPECT_THROW(timer.decode(0), Error);

  BenchOptions o;
  o.n_prompt = 16;
  o.n_gen = 4;
  o.repetitions = 2;
  o.bandwidth_passes = 1;
  const std::vector<BenchResult> results = run_bench(model, pool, o);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].test, "pp16");
  EXPECT_EQ(results[1].test, "tg4");
  // Prefill's roofline is the weights'; tg4's steps attend 1..4 keys of the
  // f16 cache: 2.5 * 4 layers * 2 heads * (64 + 64) bytes on average.
  EXPECT_EQ(results[0].kv_bytes, 0.0);
  EXPECT_DOUBLE_EQ(results[1].kv_bytes, 2'560.0);
  for (const BenchResult& r : results) {
    EXPECT_GT(r.tokens_per_s.min, 0.0);
    EXPECT_LE(r.tokens_per_s.min, r.tokens_per_s.median);
    EXPECT_LE(r.tokens_per_s.median, r.tokens_per_s.max);
    EXPECT_EQ(r.weight_bytes, model.weight_bytes());
    EXPECT_GT(r.bandwidth_gbs, 0.0);
    EXPECT_GT(r.roofline_tokens_per_s, 0.0);
    EXPECT_GT(r.roofline_fraction, 0.0);
  }
  o.n_prompt = 0;
  o.n_gen = 0;
  EXPECT_THROW(run_bench(model, pool, o), Error);
}

// Decode after a context filled with random K/V, in any KV format: one
// decode result per context length, each carrying its length.
TEST(Bench, DecodesAfterFilledContexts) {
  const Model model = Model::load(test_data("fixtures/models/micro-llama-q4_0.gguf"));
  ThreadPool pool(1);
  kv::KvFormat q8;
  q8.k_type = q8.v_type = kernels::KvType::Q8;
  q8.recent = 8;
  ForwardTimer timer(model, pool, 40, 0, q8);
  EXPECT_GT(timer.decode(3, 37), 0.0);
  EXPECT_THROW(timer.decode(3, 38), Error);
  EXPECT_THROW(timer.decode(3, -1), Error);

  BenchOptions o;
  o.n_prompt = 0;
  o.n_gen = 2;
  o.contexts = {0, 40};
  o.repetitions = 1;
  o.bandwidth_passes = 1;
  o.kv_format = q8;
  const std::vector<BenchResult> results = run_bench(model, pool, o);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].ctx, 0);
  EXPECT_EQ(results[1].ctx, 40);
  EXPECT_EQ(results[1].test, "tg2");
  EXPECT_GT(results[1].gflops * results[1].seconds.median, results[0].gflops * results[0].seconds.median);
  // Forty more keys a step: more KV bytes and more attention in the rooflines.
  EXPECT_GT(results[1].kv_bytes, results[0].kv_bytes);
  EXPECT_LT(results[1].compute_roofline_tokens_per_s, results[0].compute_roofline_tokens_per_s);
  o.contexts = {-1};
  EXPECT_THROW(run_bench(model, pool, o), Error);
}

}  // namespace
}  // namespace tokamak::tools
