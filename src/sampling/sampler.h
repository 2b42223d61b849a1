// The sampler interface and chain (llama.cpp's shape): a sampler transforms the
// candidates of one position, accepts the chosen token, resets and clones; a
// chain of samplers is itself a sampler. make_sampler() builds a request's chain
// from its SamplingParams.
//
//   logits row [n_vocab] -> Candidates -> bias, penalties, top-k, typical, top-p,
//   min-p, temperature -> dist (or greedy, or llama2.c's procedure) -> token id
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sampling/candidates.h"

namespace tokamak::sampling {

// The seed value that means "draw a fresh random seed" (resolve_seed()).
inline constexpr uint64_t kRandomSeed = 0xFFFFFFFFFFFFFFFFull;

struct SamplingParams {
  float temperature = 0.8f;  // <= 0: greedy
  int top_k = 40;            // 0: off
  float top_p = 0.95f;       // 1: off
  float min_p = 0.05f;       // 0: off
  float typical_p = 1.0f;    // 1: off
  float repeat_penalty = 1.0f;    // llama-style: positive logits / it, negative * it; 1: off
  int repeat_last_n = 64;         // window of the three penalties; 0: off, -1: the whole history
  float frequency_penalty = 0.0f;  // OpenAI: logit -= count * it
  float presence_penalty = 0.0f;   // OpenAI: logit -= (count > 0) * it
  std::vector<std::pair<int32_t, float>> logit_bias;  // token -> added to its logit; -inf bans it
  uint64_t seed = kRandomSeed;  // with Rng::Llama2c, 0 is random too (as in run.c)
  int n_probs = 0;  // how many top logprobs last_logprobs() reports
  // Llama2c: llama2.c's xorshift RNG and its exact procedure (temperature, softmax,
  // sample_mult or sample_topp); top_k, min_p and typical_p are not used.
  enum class Rng { Default, Llama2c } rng = Rng::Default;
};

// Throws Error naming the field and value of the first invalid parameter
// (e.g. "sampling: top_p = 1.5 is outside [0, 1]").
void validate(const SamplingParams& params, int32_t n_vocab);

// The seed itself, or a fresh one from std::random_device for kRandomSeed.
// A caller that wants to report the seed it used resolves it first.
uint64_t resolve_seed(uint64_t seed);

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

// Log-probabilities over the distribution the final selection step saw: the
// candidates left after the chain, at the chain's temperature (for greedy: the
// penalized, biased logits at temperature 1; for llama2.c top-p: the nucleus).
struct Logprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // highest first, min(n, candidates) entries
};

// What a chain's last sampler does with the candidates: the speculative
// decoder verifies greedy chains by exact match and dist chains by rejection
// sampling against the distribution the chain leaves before its draw.
enum class Selector { None, Greedy, Dist, Llama2c };

class Sampler {
 public:
  Sampler() = default;
  Sampler(const Sampler& other) : n_probs_(other.n_probs_) {}  // the scratch is not copied
  Sampler& operator=(const Sampler&) = delete;
  virtual ~Sampler() = default;

  virtual std::string name() const = 0;
  // Transforms the candidates of one position; a selecting sampler sets cur.selected.
  virtual void apply(Candidates& cur) = 0;
  // Records a token of the sequence (prompt or generated) for penalties.
  virtual void accept(int32_t token) {}
  // Back to the state after construction: history cleared, RNG reseeded.
  virtual void reset() {}
  // An independent copy with the same state (history and RNG position).
  virtual std::unique_ptr<Sampler> clone() const = 0;
  // Whether (and how) this sampler selects a token; None for the others.
  virtual Selector selector() const { return Selector::None; }

  // Samples one position: loads `logits` [n_vocab] into candidates, applies,
  // accepts the chosen token and returns it. Throws Error if nothing was selected.
  int32_t sample(std::span<const float> logits);

  // For the last sample(): the chosen token's logprob and the n_top best.
  // Computed on demand from the candidates the last sample() left (no cost
  // unless asked). Throws Error before the first sample().
  Logprobs last_logprobs(int n_top) const;
  Logprobs last_logprobs() const { return last_logprobs(n_probs_); }
  void set_n_probs(int n) { n_probs_ = n; }
  int n_probs() const { return n_probs_; }

 private:
  Candidates scratch_;  // the last sample()'s candidates, kept for last_logprobs()
  int n_probs_ = 0;
};

// Applies its samplers in order; accept/reset reach every one of them.
class SamplerChain final : public Sampler {
 public:
  // n_vocab > 0: apply() and accept() check token ids and row sizes against it.
  explicit SamplerChain(int32_t n_vocab = 0) : n_vocab_(n_vocab) {}
  SamplerChain(const SamplerChain& other);

  void add(std::unique_ptr<Sampler> sampler);
  size_t size() const { return samplers_.size(); }
  const Sampler& at(size_t i) const { return *samplers_.at(i); }

  std::string name() const override;  // e.g. "chain(top-k(40), dist)"
  void apply(Candidates& cur) override;
  void accept(int32_t token) override;
  void reset() override;
  std::unique_ptr<Sampler> clone() const override;
  std::unique_ptr<SamplerChain> clone_chain() const { return std::make_unique<SamplerChain>(*this); }
  Selector selector() const override { return samplers_.empty() ? Selector::None : samplers_.back()->selector(); }

  // The distribution the chain draws from at one position: `out` holds the
  // candidates every sampler but the final dist left, with p = their softmax
  // (logits at the chain's temperature). Nothing is accepted or drawn. Throws
  // Error unless selector() is Dist.
  void distribution(std::span<const float> logits, Candidates& out);

 private:
  // Throws Error when a full row's size is not n_vocab.
  void check_row(const Candidates& cur) const;
  int32_t n_vocab_;
  std::vector<std::unique_ptr<Sampler>> samplers_;
};

// Validates params and builds the request's chain in llama.cpp's common order
// (logit bias, penalties, top-k, typical, top-p, min-p, temperature, dist),
// greedy (after bias and penalties) when temperature <= 0, or bias, penalties
// and llama2.c's procedure for Rng::Llama2c. Neutral stages are left out.
// The seed is resolved here when it is kRandomSeed.
std::unique_ptr<SamplerChain> make_sampler(const SamplingParams& params, int32_t n_vocab);

// The logprobs of candidate `chosen` and the n_top best, over the softmax of
// the candidates' logits (what Sampler::last_logprobs reports).
Logprobs logprobs_of(const Candidates& candidates, size_t chosen, int n_top);

}  // namespace tokamak::sampling
