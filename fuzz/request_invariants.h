// What a parsed engine::Request promises whatever bytes it came from, shared
// by the fuzz targets of the parsers that make one (request_json for `tokamak
// batch` lines, openai_request for the server's bodies):
//   - exactly one prompt form, and a token-id prompt has ids >= 0;
//   - every number inside its declared range (n, max_tokens, temperature, top_p,
//     min_p, penalties, logprob count), stop strings non-empty;
//   - sampling::validate() accepts the sampling parameters for a vocabulary of
//     2^31 - 1 tokens (so the engine only adds its own checks: token ids
//     against the real vocabulary, lengths against max_model_len).
// A broken promise aborts, which libFuzzer reports as a crash.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/error.h"
#include "engine/request.h"
#include "sampling/sampler.h"

namespace tokamak::fuzz {

inline void require(bool ok) {
  if (!ok) std::abort();
}

inline void check_request(const engine::Request& r) {
  const engine::Prompt& p = r.prompt;
  const int forms = (!p.ids.empty() ? 1 : 0) + (!p.messages.is_null() ? 1 : 0);
  require(forms <= 1);  // a text prompt may be "", so text is the form when neither is set
  if (!p.messages.is_null()) require(p.messages.is_array() && !p.messages.empty() && p.text.empty());
  for (int32_t id : p.ids) require(id >= 0);
  const engine::GenerationParams& g = r.params;
  require(g.n >= 1 && g.n <= 128);
  require(g.max_tokens == -1 || g.max_tokens >= 1);
  for (const std::string& s : g.stop) require(!s.empty());
  for (int32_t id : g.stop_token_ids) require(id >= 0);
  const sampling::SamplingParams& s = g.sampling;
  require(s.temperature >= 0.0f && s.temperature <= 2.0f);
  require(s.top_p >= 0.0f && s.top_p <= 1.0f && s.min_p >= 0.0f && s.min_p <= 1.0f && s.top_k >= 0);
  require(s.presence_penalty >= -2.0f && s.presence_penalty <= 2.0f);
  require(s.frequency_penalty >= -2.0f && s.frequency_penalty <= 2.0f);
  require(s.repeat_penalty > 0.0f && s.repeat_penalty <= 10.0f);
  require(s.n_probs >= 0 && s.n_probs <= 20 && (s.n_probs == 0 || g.logprobs));
  require(s.seed == sampling::kRandomSeed || s.seed <= uint64_t{std::numeric_limits<int64_t>::max()});
  // Bias ids are checked against the real vocabulary by the engine.
  sampling::SamplingParams unbiased = s;
  for (const auto& [id, bias] : s.logit_bias) require(id >= 0 && bias >= -100.0f && bias <= 100.0f);
  unbiased.logit_bias.clear();
  try {
    sampling::validate(unbiased, std::numeric_limits<int32_t>::max());
  } catch (const Error&) {
    std::abort();  // accepted by the parser but not by the sampler
  }
}

}  // namespace tokamak::fuzz
