// The server's Prometheus metrics (GET /metrics, text format 0.0.4), named
// after vLLM's with the prefix "tokamak:" so dashboards built for vLLM carry
// over by renaming. The engine thread records; HTTP threads render. One
// mutex guards everything: a record is a few additions, a render a few
// hundred lines.
//
//   gauges      num_requests_running, num_requests_waiting, kv_cache_usage_perc (0..1)
//   counters    prefix_cache_queries_total / prefix_cache_hits_total (tokens), num_preemptions_total,
//               prompt_tokens_total, generation_tokens_total, request_success_total{finished_reason}
//   histograms  time_to_first_token_seconds, inter_token_latency_seconds, e2e_request_latency_seconds
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/request.h"

namespace tokamak::server {

// A cumulative histogram over fixed upper bounds (seconds), plus +Inf.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // The Prometheus lines of `name`: _bucket{le=...}, _sum, _count.
  void render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bound, not cumulative; the last is +Inf
  double sum_ = 0.0;
  int64_t count_ = 0;
};

// What the engine thread reads off the Engine after each step.
struct EngineGauges {
  int64_t running = 0;        // requests with sequences in the running queue
  int64_t waiting = 0;        // requests queued, in the engine or before it
  double kv_usage = 0.0;      // blocks referenced over blocks in the pool
  int64_t prefix_queries = 0; // prompt tokens looked up in the prefix cache
  int64_t prefix_hits = 0;    // of those, tokens found
  int64_t preemptions = 0;
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  // Speculative decoding (vLLM's spec_decode_* counters).
  int64_t spec_drafts = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_position;
};

class Metrics {
 public:
  Metrics();
  void set_engine(const EngineGauges& gauges);
  void observe_ttft(double seconds);
  void observe_itl(double seconds);
  void finish_request(engine::FinishReason reason, double e2e_seconds);
  std::string render() const;
  EngineGauges engine() const;

 private:
  mutable std::mutex mutex_;
  EngineGauges gauges_;
  std::array<int64_t, 3> success_{};  // stop, length, abort
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
};

}  // namespace tokamak::server
