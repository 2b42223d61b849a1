// The serving benchmark's pieces: percentiles against hand computations, the
// synthetic workload's shape and determinism, option checks, and one small
// run on stories260K whose counts are known in advance.
#include "engine/bench_serve.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/test_data.h"
#include "core/error.h"
#include "core/percentile.h"
#include "io/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::engine {
namespace {

TEST(ServeBench, PercentileInterpolatesBetweenRanks) {
  const std::vector<double> s = {1, 2, 3, 4};
  // rank = p/100 * (n - 1): p50 -> 1.5 -> 2.5; p90 -> 2.7 -> 3.7; p99 -> 2.97 -> 3.97.
  EXPECT_DOUBLE_EQ(percentile(s, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile(s, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile(s, 99), 3.97);
  EXPECT_DOUBLE_EQ(percentile(s, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(s, 100), 4);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_THROW(percentile({}, 50), Error);
  EXPECT_THROW(percentile(s, 101), Error);
}

ServeBenchOptions options(int32_t requests, LengthRange prompt, LengthRange output, int32_t prefix, uint64_t seed) {
  ServeBenchOptions o;
  o.requests = requests;
  o.prompt_len = prompt;
  o.output_len = output;
  o.shared_prefix = prefix;
  o.seed = seed;
  return o;
}

TEST(ServeBench, WorkloadHasTheAskedShape) {
  const ServeBenchOptions o = options(200, {20, 5}, {8, 3}, 12, 7);
  const std::vector<Request> w = make_serve_workload(o, 512);
  ASSERT_EQ(w.size(), 200u);
  std::set<size_t> prompt_lens;
  std::set<int32_t> output_lens;
  for (const Request& r : w) {
    const std::vector<int32_t>& ids = r.prompt.ids;
    ASSERT_GE(ids.size(), 12u + 15u);
    ASSERT_LE(ids.size(), 12u + 25u);
    prompt_lens.insert(ids.size());
    for (int32_t t : ids) ASSERT_TRUE(t >= 0 && t < 512) << t;
    EXPECT_TRUE(std::equal(ids.begin(), ids.begin() + 12, w[0].prompt.ids.begin())) << "shared prefix differs";
    EXPECT_GE(r.params.max_tokens, 5);
    EXPECT_LE(r.params.max_tokens, 11);
    output_lens.insert(r.params.max_tokens);
    EXPECT_TRUE(r.params.ignore_eos);
    EXPECT_EQ(r.params.n, 1);
    EXPECT_EQ(r.params.sampling.temperature, 0.0f);
    EXPECT_NE(r.params.sampling.seed, sampling::kRandomSeed);
  }
  // 200 uniform draws reach every one of the 11 prompt and 7 output lengths.
  EXPECT_EQ(prompt_lens.size(), 11u);
  EXPECT_EQ(output_lens.size(), 7u);
  // The private parts differ between requests.
  EXPECT_NE(std::vector<int32_t>(w[0].prompt.ids.begin() + 12, w[0].prompt.ids.end()),
            std::vector<int32_t>(w[1].prompt.ids.begin() + 12, w[1].prompt.ids.end()));
}

TEST(ServeBench, WorkloadDependsOnTheSeedOnly) {
  const auto ids_of = [](const std::vector<Request>& w) {
    std::vector<std::vector<int32_t>> out;
    for (const Request& r : w) out.push_back(r.prompt.ids);
    return out;
  };
  const std::vector<Request> a = make_serve_workload(options(16, {30, 10}, {8, 0}, 4, 1), 512);
  const std::vector<Request> b = make_serve_workload(options(16, {30, 10}, {8, 0}, 4, 1), 512);
  const std::vector<Request> c = make_serve_workload(options(16, {30, 10}, {8, 0}, 4, 2), 512);
  EXPECT_EQ(ids_of(a), ids_of(b));
  EXPECT_NE(ids_of(a), ids_of(c));
  // Output lengths are their own stream: changing them leaves the prompts alone.
  const std::vector<Request> d = make_serve_workload(options(16, {30, 10}, {50, 20}, 4, 1), 512);
  EXPECT_EQ(ids_of(a), ids_of(d));
}

TEST(ServeBench, OptionsThatCannotWorkAreRefused) {
  const auto error_of = [](const ServeBenchOptions& o, int32_t max_model_len) -> std::string {
    try {
      validate(o, max_model_len);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of(options(4, {100, 10}, {50, 5}, 300, 1), 465), "");
  EXPECT_EQ(error_of(options(4, {100, 10}, {50, 5}, 300, 1), 464),
            "bench-serve: the longest request (300 shared + 110 prompt + 55 output tokens = 465) exceeds "
            "max_model_len = 464");
  EXPECT_EQ(error_of(options(4, {10, 10}, {5, 0}, 0, 1), 512), "bench-serve: --prompt-len 10:10 reaches below 1");
  EXPECT_EQ(error_of(options(4, {0, 0}, {5, 0}, 8, 1), 512), "");  // the prefix alone is a prompt
  EXPECT_EQ(error_of(options(4, {10, 0}, {5, 6}, 0, 1), 512), "bench-serve: --output-len 5:6 reaches below 1");
  EXPECT_EQ(error_of(options(0, {10, 0}, {5, 0}, 0, 1), 512), "bench-serve: --requests 0 must be >= 1");
}

struct Stories {
  Model model = Model::load(testing::test_data("models/stories260K/stories260K.gguf"));
  Tokenizer tokenizer = Tokenizer::from_gguf(*model.gguf());
};

EngineOptions small_engine(bool prefix_caching) {
  EngineOptions o;
  o.threads = 2;
  o.max_model_len = 256;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 64;
  o.enable_prefix_caching = prefix_caching;
  return o;
}

// Counts fixed by the workload: every request makes exactly its max_tokens.
TEST(ServeBench, RunProducesTheWorkloadsTokens) {
  const Stories s;
  Engine engine(s.model, s.tokenizer, small_engine(false));
  ServeBenchOptions o = options(12, {20, 8}, {6, 2}, 0, 3);
  o.concurrency = 4;
  const ServeBenchResult r = run_serve_bench(engine, o);
  int64_t prompt = 0, output = 0;
  for (const Request& q : make_serve_workload(o, s.model.config().n_vocab)) {
    prompt += static_cast<int64_t>(q.prompt.ids.size());
    output += q.params.max_tokens;
  }
  EXPECT_EQ(r.requests, 12);
  EXPECT_EQ(r.prompt_tokens, prompt);
  EXPECT_EQ(r.output_tokens, output);
  EXPECT_GT(r.seconds, 0.0);
  EXPECT_NEAR(r.output_tokens_per_s * r.seconds, static_cast<double>(output), 1e-6 * output);
  EXPECT_NEAR(r.total_tokens_per_s * r.seconds, static_cast<double>(output + prompt), 1e-6 * (output + prompt));
  EXPECT_NEAR(r.requests_per_s * r.seconds, 12.0, 1e-9);
  EXPECT_GT(r.ttft_ms.p50, 0.0);
  EXPECT_LE(r.ttft_ms.p50, r.ttft_ms.p90);
  EXPECT_LE(r.ttft_ms.p90, r.ttft_ms.p99);
  EXPECT_GT(r.itl_ms.p50, 0.0);
  EXPECT_LE(r.itl_ms.p90, r.itl_ms.p99);
  EXPECT_GT(r.peak_kv_usage, 0.0);
  EXPECT_LE(r.peak_kv_usage, 1.0);
  EXPECT_EQ(r.prefix_hit_rate, 0.0);
  EXPECT_GT(r.steps, 0);
  EXPECT_GE(r.overhead_fraction, 0.0);
  EXPECT_LT(r.overhead_fraction, 1.0);
  // Each running sequence wastes less than a block of 16 slots, and holds at least one token.
  EXPECT_GE(r.kv_waste, 0.0);
  EXPECT_LT(r.kv_waste, 1.0);
  EXPECT_FALSE(engine.has_unfinished());
}

// 40 shared tokens (two full blocks of 16 and 8 more) before 20 private ones:
// every request after the first finds the two blocks cached, so the hit rate
// is 11 x 32 hit tokens over 12 x 60 prompt tokens.
TEST(ServeBench, SharedPrefixHitsTheCache) {
  const Stories s;
  Engine engine(s.model, s.tokenizer, small_engine(true));
  ServeBenchOptions o = options(12, {20, 0}, {4, 0}, 40, 5);
  o.concurrency = 1;  // each request starts after the one before it registered its blocks
  const ServeBenchResult r = run_serve_bench(engine, o);
  EXPECT_EQ(r.output_tokens, 48);
  EXPECT_DOUBLE_EQ(r.prefix_hit_rate, (11.0 * 32.0) / (12.0 * 60.0));
}

}  // namespace
}  // namespace tokamak::engine
