// One sequence on one model: its KV cache, its forward context and how many
// positions it holds. `tokamak run` is one Session; `tokamak chat` keeps one
// across turns so that only each new turn is prefilled.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "engine/request.h"
#include "kv/kv_cache.h"
#include "model/forward.h"
#include "model/model.h"

namespace tokamak {
class Tokenizer;
namespace sampling {
class Sampler;
}
}  // namespace tokamak

namespace tokamak::engine {

class Session {
 public:
  // Reserves KV blocks stored as `kv_format` says: for n_ctx positions
  // (rounded up to whole blocks), or as many as fit in kv_memory_bytes when > 0.
  Session(const Model& model, ThreadPool& pool, int32_t n_ctx, const kv::KvFormat& kv_format = {},
          int64_t kv_memory_bytes = 0);

  // Appends tokens, runs every token not yet in the KV cache (a deferred one
  // first) as one batch, and returns the logits after the last [n_vocab]
  // (valid until the next call). Throws tokamak::Error when the sequence would
  // exceed n_ctx or `tokens` is empty with nothing deferred (nothing changes then).
  std::span<const float> append(std::span<const int32_t> tokens);
  // Appends a token whose K/V is computed only by the next append(): the last
  // token of an answer, which the next turn starts after.
  void defer(int32_t token);
  // Keeps the first n tokens and forgets the rest: their K/V positions are
  // written over by the next append() (the blocks stay with the sequence).
  // A chat whose template re-renders an earlier turn differently cuts back to
  // where the texts agree. With a mixed-precision KV cache, kept positions
  // whose f16 rows the cut ones overwrote are read from the quantized blocks
  // from then on (KvCache::set_length). Throws tokamak::Error unless 0 <= n <= size().
  void truncate(int64_t n);

  int64_t n_past() const { return n_past_; }  // positions in the KV cache
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }  // with deferred tokens
  int32_t n_ctx() const { return n_ctx_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const Model& model() const { return model_; }

 private:
  const Model& model_;
  int32_t n_ctx_;
  kv::KvCache kv_;
  Forward forward_;
  Batch batch_;
  std::vector<int32_t> tokens_;  // every token of the sequence, in order
  int64_t n_past_ = 0;           // tokens_[0, n_past_) have K/V in the cache
};


struct GenerateOptions {
  int32_t n_predict = -1;          // tokens to generate; -1: until a stop condition
  bool stop_at_bos = false;        // llama2.c checkpoints also end at BOS
  // Stop strings, matched in the generated text across token boundaries (see
  // StopStringMatcher): the first to complete ends generation, and the streamed
  // text is everything before it (no byte of it is ever streamed). Not empty strings.
  std::vector<std::string> stop;
  // More tokens that end generation like EOS (e.g. a chat template's
  // end-of-turn token when the vocabulary does not mark it as EOT).
  std::vector<int32_t> stop_tokens;
  // Read before each token is sampled: true ends generation (StopReason::Cancelled)
  // with every token so far in the KV cache. Another thread (a Ctrl-C watcher) sets it.
  const std::atomic<bool>* cancel = nullptr;
  // Called with each sampled token right after sample(), before its text is
  // streamed: the place to read the sampler's last_logprobs().
  std::function<void(int32_t token)> on_token;
};

struct GenerateResult {
  int64_t n_prompt = 0;       // tokens prefilled by this call
  int64_t n_generated = 0;    // tokens sampled
  int64_t n_decoded = 0;      // forward calls of one generated token each
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
  StopReason stop = StopReason::MaxTokens;
};

// Prefills `prompt` after what the session holds, then samples and decodes
// until a stop condition, streaming whole UTF-8 text through `on_text`.
// The last sampled token is deferred in the session, so a following turn
// continues after it without a forward pass spent on it now (after a stop
// string, that token is kept although the text after the stop is dropped).
// Throws Error for an empty stop string before anything runs.
GenerateResult generate(Session& session, const Tokenizer& tokenizer, sampling::Sampler& sampler,
                        std::span<const int32_t> prompt, const GenerateOptions& options,
                        const std::function<void(std::string_view)>& on_text);

}  // namespace tokamak::engine
