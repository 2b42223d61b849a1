// bench-serve against a live server: the seeded workload of
// engine/bench_serve.h (the same requests as the offline run, by seed) sent
// to any OpenAI-compatible server's POST /v1/completions as token-id prompts,
// streamed, at most `concurrency` in flight (closed loop: a client thread
// sends its next request when its last one ended).
//
// Latency as vLLM's benchmark_serving measures it, at the client: TTFT from
// sending the request to its first chunk with text, inter-token latency the
// gaps between chunks; output tokens from the usage chunk. Preemptions and
// prefix-cache hits come from the server's /metrics when it is tokamak's
// (deltas over the run); a server without them reports 0.
#pragma once

#include <cstdint>
#include <string>

#include "engine/bench_serve.h"

namespace tokamak::server {

struct HttpBenchTarget {
  std::string url;      // "http://127.0.0.1:8080"
  std::string api_key;  // sent as a bearer token when not empty
  std::string model;    // the "model" field; empty: left out
};

// Throws tokamak::Error naming the URL when the server cannot be reached, and
// the request and the server's answer when a request fails (a benchmark with
// failed requests has no meaning).
engine::ServeBenchResult run_http_serve_bench(const HttpBenchTarget& target, const engine::ServeBenchOptions& options,
                                              int32_t n_vocab, int32_t max_model_len);

}  // namespace tokamak::server
