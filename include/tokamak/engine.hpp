// The continuous-batching engine of tokamak's public C++ API (vLLM's
// LLMEngine): many requests over one Model; each step() runs one forward pass
// over every running request and returns what changed (streamed deltas).
//
//   tokamak::api::Engine engine(model, {.kv_memory = "256M"});
//   tokamak::api::SamplingParams params{.temperature = 0, .max_tokens = 32};
//   for (const auto& r : engine.generate({"Once upon a time"}, params)) puts(r.completions[0].text.c_str());
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokamak/model.hpp"

namespace tokamak::api {

struct EngineOptions {
  // KV cache memory: "4G", "512M", "1073741824" or a share of free RAM "80%";
  // empty: max_num_seqs sequences of max_model_len tokens, within half of free RAM.
  std::string kv_memory;
  int32_t max_model_len = 0;            // longest sequence, prompt and output; 0: the model's, at most 4096
  int32_t max_num_seqs = 256;           // sequences running at once
  int32_t max_num_batched_tokens = 2048;  // tokens per step: decodes plus prompt chunks
  int32_t block_size = 16;              // tokens per KV block
  bool enable_prefix_caching = true;    // reuse the KV of prompt prefixes seen before
  std::string kv_cache_dtype = "f16";   // f32, f16, bf16, q8 or q4
  int threads = 0;                      // 0: all cores
  // Speculative decoding (vLLM's speculative_config): a draft model with this
  // model's vocabulary (a GGUF file), or prompt lookup (the tokens that
  // followed the last earlier match of the context's final prompt_lookup
  // tokens); at most num_speculative_tokens drafted per step. Greedy output is
  // unchanged; sampled output keeps its distribution.
  std::string speculative_model;        // empty: no draft model
  int32_t prompt_lookup = 0;            // 0: off
  int32_t num_speculative_tokens = 5;
};

// vLLM's SamplingParams, with its defaults (temperature 1, no truncation).
struct SamplingParams {
  float temperature = 1.0f;       // 0: greedy
  float top_p = 1.0f;             // 1: off
  int32_t top_k = 0;              // 0 or -1: off
  float min_p = 0.0f;             // 0: off
  float repetition_penalty = 1.0f;  // 1: off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t max_tokens = 16;        // per completion; -1: until max_model_len
  std::optional<uint64_t> seed;   // none: a fresh random seed per request
  int32_t n = 1;                  // completions of one prompt (sharing its prefill)
  std::vector<std::string> stop;  // strings that end a completion (not included in its text)
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t logprobs = -1;          // -1: none; k >= 0: each token's logprob and the k most likely
};

struct Logprob {
  int32_t token = -1;
  float logprob = 0.0f;
};
struct TokenLogprobs {
  Logprob chosen;
  std::vector<Logprob> top;  // most likely first
};

// One completion's progress in one step.
struct CompletionDelta {
  int32_t index = 0;               // which of the request's n completions
  std::vector<int32_t> token_ids;  // sampled this step
  std::string text;                // text that became final this step
  std::vector<TokenLogprobs> logprobs;  // one per token id, when asked
  std::string finish_reason;       // "" while running; then "stop", "length" or "abort"
};

struct RequestOutput {
  int64_t request_id = 0;
  int64_t prompt_tokens = 0;
  std::vector<CompletionDelta> completions;  // those that changed this step
  bool finished = false;                     // every completion has finished
};

// A finished completion: its deltas joined.
struct Completion {
  int32_t index = 0;
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  std::string finish_reason;
};
struct RequestResult {
  int64_t request_id = 0;
  int64_t prompt_tokens = 0;
  std::vector<Completion> completions;  // n of them, by index
};

// Adds one step's output to `result` (its completions grow to the indices seen). Thread safe (no shared state).
TOKAMAK_API void accumulate(RequestResult& result, const RequestOutput& output);

class TOKAMAK_API Engine {
 public:
  // Shares `model` (kept alive by the Engine). Throws Error naming the option and value that cannot work.
  Engine(const Model& model, const EngineOptions& options = {});
  ~Engine();
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  // One thread drives an Engine: none of the methods below may run concurrently on one Engine
  // (a second thread gets an Error rather than a race).

  // Queues a prompt; returns its request id. Throws Error (nothing queued) for an empty or too long
  // prompt or invalid parameters, naming the field and value.
  int64_t add_request(std::string_view prompt, const SamplingParams& params);
  int64_t add_request(std::span<const int32_t> prompt_ids, const SamplingParams& params);
  // A conversation, rendered with the model's chat template.
  int64_t add_chat_request(const std::vector<ChatMessage>& messages, const SamplingParams& params);
  // Ends a request; the next step() reports it finished ("abort"). False for an unknown or finished id.
  bool abort(int64_t request_id);
  bool has_unfinished() const;
  // One scheduling step and one forward pass: an output for every request that changed.
  std::vector<RequestOutput> step();
  // Runs the prompts (and anything already queued) to completion; results in the order of `prompts`.
  std::vector<RequestResult> generate(const std::vector<std::string>& prompts, const SamplingParams& params);

  int32_t max_model_len() const;
  const Model& model() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tokamak::api
