// The measuring parts of tokamak bench: statistics, FLOP counts, the weight
// ranges a decode step reads, and timed forward passes on a real model.
#include <gtest/gtest.h>

#include "common/test_data.h"
#include "core/error.h"
#include "engine/bench.h"

namespace tokamak::engine {
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

// The weight ranges cover exactly weight_bytes(), and the FLOP count is two
// per matrix element per token plus attention's 4 * q_dim per key and layer.
TEST(Bench, WeightRangesAndFlopsFollowTheModel) {
  const Model model = Model::load(test_data("fixtures/models/micro-llama-q8_0.gguf"));
  size_t bytes = 0;
  for (std::span<const std::byte> r : weight_ranges(model)) bytes += r.size();
  EXPECT_EQ(bytes, model.weight_bytes());
  EXPECT_EQ(weight_ranges(model).size(), 4u * 9u + 2u);

  const ModelWeights& w = model.weights();
  double matrix_elements = 0.0;
  for (const LayerWeights& l : w.layers) {
    for (const TensorView* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) {
      matrix_elements += static_cast<double>(t->n_elements());
    }
  }
  const ModelConfig& c = model.config();
  const double output = static_cast<double>(w.output.n_elements());
  EXPECT_DOUBLE_EQ(forward_flops(c, 1, 0, 1), 2.0 * (matrix_elements + output) + 4.0 * c.q_dim() * 1 * c.n_layers);
  // 3 tokens after 5 cached: keys 6 + 7 + 8 = 21; logits for one row.
  EXPECT_DOUBLE_EQ(forward_flops(c, 3, 5, 1),
                   2.0 * (3 * matrix_elements + output) + 4.0 * c.q_dim() * 21 * c.n_layers);
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
  for (const BenchResult& r : results) {
    EXPECT_GT(r.tokens_per_s.min, 0.0);
    EXPECT_LE(r.tokens_per_s.min, r.tokens_per_s.median);
    EXPECT_LE(r.tokens_per_s.median, r.tokens_per_s.max);
    EXPECT_EQ(r.weight_bytes, model.weight_bytes());
    EXPECT_GT(r.bandwidth_gbs, 0.0);
    // The roofline of each repetition is its bandwidth over the weight bytes
    // (times the tokens sharing a pass); the reported values are medians.
    const double per_pass = static_cast<double>(model.weight_bytes()) / (r.bandwidth_gbs * 1e9);
    EXPECT_NEAR(r.roofline_tokens_per_s * per_pass, r.n_prompt > 0 ? r.n_prompt : 1.0, 1e-9 * r.roofline_tokens_per_s * per_pass);
    EXPECT_GT(r.roofline_fraction, 0.0);
  }
  // With one repetition the medians are that repetition's values.
  o.repetitions = 1;
  for (const BenchResult& r : run_bench(model, pool, o)) {
    EXPECT_NEAR(r.roofline_fraction * r.roofline_tokens_per_s, r.tokens_per_s.median, 1e-6 * r.tokens_per_s.median);
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
  o.contexts = {-1};
  EXPECT_THROW(run_bench(model, pool, o), Error);
}

}  // namespace
}  // namespace tokamak::engine
