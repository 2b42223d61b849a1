// tokamak bench-serve, through the executable on stories260K: the --json
// object's keys, counts the workload fixes in advance (every request makes
// exactly its output length), and the figures' consistency with each other.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_data.h"

namespace tokamak {
namespace {

using Json = nlohmann::json;
using testing::run_command;
using testing::test_data;
using testing::tokamak_bin;

testing::CommandResult bench_serve(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {tokamak_bin(), "bench-serve", "-m", test_data("models/stories260K/stories260K.gguf"),
                                   "-t", "2"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run_command(argv);
}

void expect_percentiles(const Json& p, const char* name) {
  ASSERT_TRUE(p.is_object()) << name;
  EXPECT_EQ(p.size(), 3u) << name;
  EXPECT_GT(p["p50"].get<double>(), 0.0) << name;
  EXPECT_LE(p["p50"].get<double>(), p["p90"].get<double>()) << name;
  EXPECT_LE(p["p90"].get<double>(), p["p99"].get<double>()) << name;
}

TEST(BenchServe, JsonHasTheKeysAndTheWorkloadsCounts) {
  const auto r = bench_serve({"--requests", "10", "--concurrency", "3", "--prompt-len", "16", "--output-len", "8",
                              "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  for (const char* key : {"output_tokens_per_s", "total_tokens_per_s", "requests_per_s", "ttft_ms", "itl_ms",
                          "peak_kv_usage", "preemptions", "prefix_hit_rate", "overhead_fraction", "kv_waste"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["requests"], 10);
  EXPECT_EQ(j["output_tokens"], 10 * 8);
  EXPECT_EQ(j["prompt_tokens"], 10 * 16);
  const double seconds = j["seconds"].get<double>();
  ASSERT_GT(seconds, 0.0);
  EXPECT_NEAR(j["output_tokens_per_s"].get<double>(), 80.0 / seconds, 1e-6 * 80.0 / seconds);
  EXPECT_NEAR(j["total_tokens_per_s"].get<double>(), 240.0 / seconds, 1e-6 * 240.0 / seconds);
  EXPECT_NEAR(j["requests_per_s"].get<double>(), 10.0 / seconds, 1e-6 * 10.0 / seconds);
  expect_percentiles(j["ttft_ms"], "ttft_ms");
  expect_percentiles(j["itl_ms"], "itl_ms");
  EXPECT_GT(j["peak_kv_usage"].get<double>(), 0.0);
  EXPECT_LE(j["peak_kv_usage"].get<double>(), 1.0);
  EXPECT_EQ(j["preemptions"], 0);
  EXPECT_EQ(j["prefix_hit_rate"], 0.0);  // random prompts share nothing
  EXPECT_GE(j["kv_waste"].get<double>(), 0.0);
  EXPECT_LT(j["kv_waste"].get<double>(), 1.0);
}

// A pool of 8 blocks of 16 for 6 requests of 4 blocks each at once: the
// scheduler must preempt, and every request still makes all its tokens.
TEST(BenchServe, SmallPoolPreemptsAndStillFinishesEverything) {
  const auto r = bench_serve({"--requests", "6", "--concurrency", "6", "--prompt-len", "20", "--output-len", "40",
                              "--max-model-len", "64", "--kv-memory", "81920", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["kv_blocks"], 8);  // stories260K: 5 layers x K and V x 32 values x 2 bytes x 16 positions = 10240 B
  EXPECT_GT(j["preemptions"].get<int>(), 0);
  EXPECT_EQ(j["output_tokens"], 6 * 40);
  EXPECT_DOUBLE_EQ(j["peak_kv_usage"].get<double>(), 1.0);
  EXPECT_LE(j["prefix_hit_rate"].get<double>(), 1.0);  // recomputes count in the denominator too
}

TEST(BenchServe, SharedPrefixIsReusedAndSeedsRepeat) {
  const std::vector<std::string> args = {"--requests", "8", "--concurrency", "1", "--prompt-len", "8:4",
                                         "--output-len", "4:2", "--shared-prefix", "64", "--seed", "9", "--json"};
  const auto a = bench_serve(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const Json j = Json::parse(a.out);
  // Requests 2..8 find the 4 full blocks of the prefix: at least 7 x 64 of
  // at most 8 x (64 + 12) prompt tokens.
  EXPECT_GE(j["prefix_hit_rate"].get<double>(), 7.0 * 64.0 / (8.0 * 76.0));
  EXPECT_LT(j["prefix_hit_rate"].get<double>(), 1.0);
  const auto b = bench_serve(args);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const Json k = Json::parse(b.out);
  EXPECT_EQ(j["prompt_tokens"], k["prompt_tokens"]);
  EXPECT_EQ(j["output_tokens"], k["output_tokens"]);
  EXPECT_EQ(j["prefix_hit_rate"], k["prefix_hit_rate"]);
}

TEST(BenchServe, TableAndErrors) {
  const auto table = bench_serve({"--requests", "2", "--prompt-len", "4", "--output-len", "2"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (const char* row : {"requests/s", "output tokens/s", "total tokens/s", "TTFT ms", "inter-token latency ms",
                          "peak KV use", "preemptions", "prefix-cache hit rate", "outside the forward pass",
                          "KV waste"}) {
    EXPECT_NE(table.out.find(row), std::string::npos) << row << "\n" << table.out;
  }
  const auto spread = bench_serve({"--prompt-len", "10:20"});
  EXPECT_EQ(spread.exit_code, 1);
  EXPECT_NE(spread.err.find("--prompt-len 10:20 reaches below 1"), std::string::npos) << spread.err;
  const auto bad = bench_serve({"--output-len", "8:x"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("option --output-len: '8:x'"), std::string::npos) << bad.err;
  const auto too_long = bench_serve({"--prompt-len", "300", "--output-len", "300", "--max-model-len", "512"});
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_NE(too_long.err.find("exceeds max_model_len = 512"), std::string::npos) << too_long.err;
}

}  // namespace
}  // namespace tokamak
