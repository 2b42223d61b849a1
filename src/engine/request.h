// What a caller hands the Engine (a Request) and what comes back from each
// step (RequestOutput): the vocabulary of vLLM's LLMEngine, in tokamak's types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sampling/sampler.h"

namespace tokamak::engine {

// Why generation stopped, in detail (a command line's summary).
enum class StopReason { EndOfGeneration, MaxTokens, ContextFull, StopString, Cancelled };
std::string_view stop_reason_name(StopReason r);  // "end of generation", "max tokens", ...

// Why a completion ended, as the OpenAI API names it: "stop" (end of
// generation, a stop token or a stop string) or "length" (max_tokens, or the
// sequence reached max_model_len), plus "abort" for abort() and "error".
enum class FinishReason { None, Stop, Length, Abort };
std::string_view finish_reason_name(FinishReason r);  // "stop", "length", "abort"; "" for None

// How a request generates, beyond the sampler chain.
struct GenerationParams {
  sampling::SamplingParams sampling;  // the chain, seed and logprob count (sampling.n_probs)
  int32_t n = 1;                      // completions sharing one prefill, each its own RNG stream
  int32_t max_tokens = -1;            // per completion; -1: until max_model_len
  std::vector<std::string> stop;      // strings that end a completion (not included in its text)
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;            // EOS / end-of-turn tokens do not end the completion
  bool logprobs = false;              // report the chosen token's logprob (and sampling.n_probs best)
  bool stop_at_bos = false;           // llama2.c checkpoints end at BOS, as run.c does
  // The OpenAI API's rule (vLLM's too): a prompt plus max_tokens beyond
  // max_model_len is refused at add_request. Off: the completion ends
  // ("length") when the sequence reaches max_model_len.
  bool max_tokens_must_fit = false;
};

// The prompt in one of three forms; exactly one is used, in this order:
// token ids, chat messages (rendered with the model's chat template, special
// tokens parsed), or text (BOS prepended when the vocabulary wants it).
struct Prompt {
  std::vector<int32_t> ids;
  nlohmann::ordered_json messages;  // [{"role": ..., "content": ...}], or null
  std::string text;

  static Prompt from_text(std::string text) {
    Prompt p;
    p.text = std::move(text);
    return p;
  }
  static Prompt from_ids(std::vector<int32_t> ids) {
    Prompt p;
    p.ids = std::move(ids);
    return p;
  }
  static Prompt from_messages(nlohmann::ordered_json messages) {
    Prompt p;
    p.messages = std::move(messages);
    return p;
  }
};

struct Request {
  Prompt prompt;
  GenerationParams params;
  // Lower runs first (vLLM's convention); FCFS by arrival within a priority.
  int32_t priority = 0;
  // Seconds on any monotonic clock the caller keeps; nullopt: the Engine's
  // clock at add_request(). Orders FCFS and preemption (latest arrival goes first).
  std::optional<double> arrival_time;
};

// One completion's progress in one step.
struct CompletionDelta {
  int32_t index = 0;                  // which of the request's n completions
  std::vector<int32_t> token_ids;     // sampled this step (0 or 1 tokens)
  std::string text;                   // text that became final this step (stop strings held back)
  std::vector<sampling::Logprobs> logprobs;  // one per token id, when the request asked
  FinishReason finish = FinishReason::None;
  StopReason stop = StopReason::MaxTokens;  // the detail, when finish is set
};

struct RequestOutput {
  int64_t request_id = 0;
  int64_t prompt_tokens = 0;
  int32_t last_prompt_token = -1;            // the first generated token's predecessor (decode_piece's prev)
  std::vector<CompletionDelta> completions;  // the completions that changed this step
  bool finished = false;                     // every completion has finished
};

// A finished request, as generate() returns it.
struct CompletionResult {
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<sampling::Logprobs> logprobs;
  FinishReason finish = FinishReason::None;
  StopReason stop = StopReason::MaxTokens;
};
struct RequestResult {
  int64_t request_id = 0;
  int64_t prompt_tokens = 0;
  std::vector<CompletionResult> completions;  // n of them, by index
};

// Adds one step's output to a result whose completions are sized n already.
void accumulate(RequestResult& result, const RequestOutput& output);

}  // namespace tokamak::engine
