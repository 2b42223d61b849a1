// The Prometheus text of /metrics, parsed back: histogram buckets counted by
// hand (cumulative, upper bounds inclusive, +Inf = count), the gauges and
// counters as set, the success counter by finish reason, and every sample
// line in the exposition format (name{labels} value) with its # TYPE.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <sstream>
#include <string>

namespace tokamak::server {
namespace {

struct Exposition {
  std::map<std::string, double> samples;     // "name{labels}" -> value
  std::map<std::string, std::string> types;  // metric name -> "gauge" / "counter" / "histogram"
};

// Parses text format 0.0.4; a line that is neither a comment nor a sample fails the test.
Exposition parse(const std::string& text) {
  Exposition e;
  const std::regex sample_line(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-z_]+="[^"]*"\})?) (\S+)$)");
  const std::regex type_line(R"(^# TYPE (\S+) (gauge|counter|histogram)$)");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, type_line)) {
      e.types[m[1]] = m[2];
    } else if (std::regex_match(line, m, sample_line)) {
      const std::string v = m[3];
      EXPECT_TRUE(e.samples.emplace(m[1], v == "+Inf" ? INFINITY : std::stod(v)).second) << "repeated: " << line;
    } else {
      EXPECT_TRUE(line.starts_with("# HELP ")) << "not in the text format: " << line;
    }
  }
  return e;
}

TEST(Histogram, BucketsAreCumulativeWithInclusiveBounds) {
  Histogram h({0.1, 0.5, 1.0});
  for (const double v : {0.05, 0.1, 0.3, 2.0, 0.5}) h.observe(v);
  std::string out;
  h.render("x", out);
  const Exposition e = parse(out);
  // By hand: <= 0.1: {0.05, 0.1}; <= 0.5: + {0.3, 0.5}; <= 1: same; +Inf: + {2.0}.
  EXPECT_EQ(e.samples.at("x_bucket{le=\"0.1\"}"), 2);
  EXPECT_EQ(e.samples.at("x_bucket{le=\"0.5\"}"), 4);
  EXPECT_EQ(e.samples.at("x_bucket{le=\"1.0\"}"), 4);  // integral bounds print as vLLM's do
  EXPECT_EQ(e.samples.at("x_bucket{le=\"+Inf\"}"), 5);
  EXPECT_EQ(e.samples.at("x_count"), 5);
  EXPECT_NEAR(e.samples.at("x_sum"), 2.95, 1e-12);
  EXPECT_EQ(e.samples.size(), 6u);
}

TEST(Histogram, EmptyRendersZeros) {
  Histogram h({1.0});
  std::string out;
  h.render("y", out);
  EXPECT_EQ(out, "y_bucket{le=\"1.0\"} 0\ny_bucket{le=\"+Inf\"} 0\ny_sum 0.0\ny_count 0\n");
}

TEST(Metrics, GaugesCountersAndFinishReasons) {
  Metrics m;
  EngineGauges g;
  g.running = 3;
  g.waiting = 7;
  g.kv_usage = 0.25;
  g.prefix_queries = 1000;
  g.prefix_hits = 640;
  g.preemptions = 2;
  g.prompt_tokens = 12345;
  g.generation_tokens = 678;
  g.spec_drafts = 5;
  g.spec_draft_tokens = 20;
  g.spec_accepted_tokens = 11;
  g.spec_accepted_per_position = {5, 4, 2, 0};
  m.set_engine(g);
  m.finish_request(engine::FinishReason::Stop, 0.2);
  m.finish_request(engine::FinishReason::Length, 0.6);
  m.finish_request(engine::FinishReason::Length, 3.0);
  m.finish_request(engine::FinishReason::Abort, 1.0);
  m.observe_ttft(0.003);
  m.observe_ttft(0.05);
  m.observe_itl(0.02);

  const Exposition e = parse(m.render());
  const std::string p = "tokamak:";
  EXPECT_EQ(e.samples.at(p + "num_requests_running"), 3);
  EXPECT_EQ(e.samples.at(p + "num_requests_waiting"), 7);
  EXPECT_EQ(e.samples.at(p + "kv_cache_usage_perc"), 0.25);
  EXPECT_EQ(e.samples.at(p + "prefix_cache_queries_total"), 1000);
  EXPECT_EQ(e.samples.at(p + "prefix_cache_hits_total"), 640);
  EXPECT_EQ(e.samples.at(p + "num_preemptions_total"), 2);
  EXPECT_EQ(e.samples.at(p + "prompt_tokens_total"), 12345);
  EXPECT_EQ(e.samples.at(p + "generation_tokens_total"), 678);
  EXPECT_EQ(e.samples.at(p + "spec_decode_num_drafts_total"), 5);
  EXPECT_EQ(e.samples.at(p + "spec_decode_num_draft_tokens_total"), 20);
  EXPECT_EQ(e.samples.at(p + "spec_decode_num_accepted_tokens_total"), 11);
  EXPECT_EQ(e.samples.at(p + "spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"}"), 5);
  EXPECT_EQ(e.samples.at(p + "spec_decode_num_accepted_tokens_per_pos_total{position=\"2\"}"), 2);
  EXPECT_EQ(e.samples.at(p + "spec_decode_num_accepted_tokens_per_pos_total{position=\"3\"}"), 0);
  EXPECT_EQ(e.samples.count(p + "spec_decode_num_accepted_tokens_per_pos_total{position=\"4\"}"), 0u);
  EXPECT_EQ(e.samples.at(p + "request_success_total{finished_reason=\"stop\"}"), 1);
  EXPECT_EQ(e.samples.at(p + "request_success_total{finished_reason=\"length\"}"), 2);
  EXPECT_EQ(e.samples.at(p + "request_success_total{finished_reason=\"abort\"}"), 1);
  for (const char* gauge : {"num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"}) {
    EXPECT_EQ(e.types.at(p + gauge), "gauge") << gauge;
  }
  for (const char* counter : {"prefix_cache_queries_total", "prefix_cache_hits_total", "num_preemptions_total",
                              "prompt_tokens_total", "generation_tokens_total", "request_success_total",
                              "spec_decode_num_drafts_total", "spec_decode_num_draft_tokens_total",
                              "spec_decode_num_accepted_tokens_total", "spec_decode_num_accepted_tokens_per_pos_total"}) {
    EXPECT_EQ(e.types.at(p + counter), "counter") << counter;
  }
  // vLLM's bounds: e2e 0.3 | 0.5 | 0.8 | 1 | 1.5 | 2 | 2.5 | 5 ...; ttft 0.001 | 0.005 | 0.01 | 0.02 | 0.04 | 0.06 ...
  const std::string e2e = p + "e2e_request_latency_seconds";
  EXPECT_EQ(e.types.at(e2e), "histogram");
  EXPECT_EQ(e.samples.at(e2e + "_bucket{le=\"0.3\"}"), 1);
  EXPECT_EQ(e.samples.at(e2e + "_bucket{le=\"0.5\"}"), 1);
  EXPECT_EQ(e.samples.at(e2e + "_bucket{le=\"0.8\"}"), 2);
  EXPECT_EQ(e.samples.at(e2e + "_bucket{le=\"1.0\"}"), 3);
  EXPECT_EQ(e.samples.at(e2e + "_bucket{le=\"2.5\"}"), 3);
  EXPECT_EQ(e.samples.at(e2e + "_bucket{le=\"5.0\"}"), 4);
  EXPECT_EQ(e.samples.at(e2e + "_bucket{le=\"+Inf\"}"), 4);
  EXPECT_EQ(e.samples.at(e2e + "_count"), 4);
  EXPECT_NEAR(e.samples.at(e2e + "_sum"), 4.8, 1e-12);
  const std::string ttft = p + "time_to_first_token_seconds";
  EXPECT_EQ(e.samples.at(ttft + "_bucket{le=\"0.001\"}"), 0);
  EXPECT_EQ(e.samples.at(ttft + "_bucket{le=\"0.005\"}"), 1);
  EXPECT_EQ(e.samples.at(ttft + "_bucket{le=\"0.04\"}"), 1);
  EXPECT_EQ(e.samples.at(ttft + "_bucket{le=\"0.06\"}"), 2);
  EXPECT_EQ(e.samples.at(ttft + "_count"), 2);
  const std::string itl = p + "inter_token_latency_seconds";
  EXPECT_EQ(e.samples.at(itl + "_bucket{le=\"0.01\"}"), 0);
  EXPECT_EQ(e.samples.at(itl + "_bucket{le=\"0.025\"}"), 1);
  EXPECT_EQ(e.samples.at(itl + "_count"), 1);
  // Every histogram ends its buckets with +Inf at its count.
  for (const std::string& h : {e2e, ttft, itl}) {
    int buckets = 0;
    for (const auto& [name, value] : e.samples) buckets += name.starts_with(h + "_bucket{") ? 1 : 0;
    EXPECT_GT(buckets, 10) << h;
    EXPECT_EQ(e.samples.at(h + "_bucket{le=\"+Inf\"}"), e.samples.at(h + "_count")) << h;
  }
}

}  // namespace
}  // namespace tokamak::server
