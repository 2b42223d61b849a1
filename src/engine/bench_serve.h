// A serving benchmark through the Engine (vLLM's benchmark_serving with its
// random dataset, offline): a seeded synthetic workload of N requests with
// random token-id prompts and exact output lengths (ignore_eos), at most C of
// them in flight, a new one added as soon as one finishes (closed loop).
//
// Each request's prompt is `shared_prefix` token ids common to all requests
// followed by its own random ids; prompt and output lengths are drawn
// uniformly from [len - spread, len + spread]. Everything is drawn from
// the seed alone, so two runs with one seed serve the same workload.
//
// Latency is measured on the driving thread around Engine::step(): a token
// counts as produced when the step that sampled it returns. TTFT runs from
// add_request() to the first token; inter-token latency is the gap between
// consecutive tokens of one request.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "engine/request.h"

namespace tokamak::engine {

// A length drawn uniformly from [mean - spread, mean + spread].
struct LengthRange {
  int32_t mean = 0;
  int32_t spread = 0;
  int32_t min() const { return mean - spread; }
  int32_t max() const { return mean + spread; }
};

struct ServeBenchOptions {
  int32_t requests = 64;
  int32_t concurrency = 16;
  LengthRange prompt_len{128, 0};  // tokens after the shared prefix
  LengthRange output_len{128, 0};
  int32_t shared_prefix = 0;       // leading token ids every prompt shares
  float temperature = 0.0f;        // 0: greedy; else seeded per request
  uint64_t seed = 1;
};

// Throws tokamak::Error naming the option and value when the options cannot
// make a workload (a spread reaching below 1, no requests, a request longer
// than max_model_len).
void validate(const ServeBenchOptions& options, int32_t max_model_len);

// The requests of the workload, in the order they are added: prompts as token
// ids in [0, n_vocab), max_tokens the drawn output length, ignore_eos.
std::vector<Request> make_serve_workload(const ServeBenchOptions& options, int32_t n_vocab);

struct LatencyPercentiles {
  double p50 = 0.0;
  double p90 = 0.0;
  double p99 = 0.0;
};
// p50, p90 and p99 of a sample in any order (core/percentile.h); zeros when empty.
LatencyPercentiles latency_percentiles(std::vector<double> samples);

struct ServeBenchResult {
  int32_t requests = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  double seconds = 0.0;              // first add_request() to the last token
  double output_tokens_per_s = 0.0;
  double total_tokens_per_s = 0.0;   // prompt and output tokens
  double requests_per_s = 0.0;
  LatencyPercentiles ttft_ms;
  LatencyPercentiles itl_ms;         // zero when no request made two tokens
  double peak_kv_usage = 0.0;        // the most blocks referenced at once, over the pool's blocks
  int64_t preemptions = 0;
  // Speculative decoding: tokens drafted and accepted, and accepted by
  // position in the draft (empty without speculation).
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_position;
  // Tokens whose KV came from the prefix cache at admission, over the tokens
  // admitted: the prompts, and after a preemption the recomputed sequence
  // (mostly a hit), so the rate stays within [0, 1]. Without preemption:
  // hit tokens over prompt tokens.
  double prefix_hit_rate = 0.0;
  int64_t steps = 0;
  // The share of step() time outside the forward passes (the target's and a
  // draft model's): scheduling, sampling, verifying, detokenizing, stop strings.
  double overhead_fraction = 0.0;
  // After each step, over the running sequences: block slots their tables
  // hold beyond their stored tokens, summed over steps, over the slots held
  // (the f16 ring of --kv-recent is left out: it is overhead by design).
  double kv_waste = 0.0;
};

// Runs the workload on `engine`, which must have no requests, after one short
// unmeasured warm-up request (the first forward pass faults the weights in).
// Figures from the engine's counters are deltas over the run (peak KV use
// excepted: the engine keeps only its all-time peak, so use a fresh Engine).
ServeBenchResult run_serve_bench(Engine& engine, const ServeBenchOptions& options);

}  // namespace tokamak::engine
