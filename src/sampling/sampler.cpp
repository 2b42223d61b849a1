#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.h"
#include "sampling/param_check.h"
#include "sampling/samplers.h"

namespace tokamak::sampling {

void validate(const SamplingParams& p, int32_t n_vocab) {
  check_param(n_vocab > 0, "n_vocab", std::to_string(n_vocab), "must be > 0");
  check_finite("temperature", p.temperature);
  check_param(p.top_k >= 0, "top_k", std::to_string(p.top_k), "must be >= 0");
  check_unit_interval("top_p", p.top_p);
  check_unit_interval("min_p", p.min_p);
  check_unit_interval("typical_p", p.typical_p);
  check_penalties(p.repeat_last_n, p.repeat_penalty, p.frequency_penalty, p.presence_penalty);
  check_logit_bias(n_vocab, p.logit_bias);
  check_param(p.n_probs >= 0 && p.n_probs <= n_vocab, "n_probs", std::to_string(p.n_probs),
              "is outside [0, n_vocab = " + std::to_string(n_vocab) + "]");
  check_param(p.rng == SamplingParams::Rng::Default || p.rng == SamplingParams::Rng::Llama2c, "rng",
              std::to_string(static_cast<int>(p.rng)), "is not a known generator");
}

uint64_t resolve_seed(uint64_t seed) {
  if (seed != kRandomSeed) return seed;
  std::random_device rd;
  uint64_t s = kRandomSeed;
  while (s == kRandomSeed) s = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return s;
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (logits.empty()) throw Error("sampling: " + name() + ": empty logits row");
  scratch_.fill(logits);
  apply(scratch_);
  if (scratch_.selected < 0 || static_cast<size_t>(scratch_.selected) >= scratch_.size()) {
    const int64_t s = scratch_.selected;
    scratch_.selected = -1;
    throw Error("sampling: " + name() + " selected no token (selected = " + std::to_string(s) +
                "); end the chain with greedy, dist or llama2c");
  }
  const int32_t token = scratch_[scratch_.selected].id;
  accept(token);
  return token;
}

Logprobs Sampler::last_logprobs(int n_top) const {
  if (scratch_.selected < 0) throw Error("sampling: last_logprobs() before a successful sample()");
  return logprobs_of(scratch_, static_cast<size_t>(scratch_.selected), n_top);
}

Logprobs logprobs_of(const Candidates& c, size_t chosen, int n_top) {
  if (chosen >= c.size()) throw Error("sampling: logprobs of candidate " + std::to_string(chosen) + " of " + std::to_string(c.size()));
  // log p_i = logit_i - log(sum_j exp(logit_j)), max-subtracted, in double.
  float max_logit = -INFINITY;
  for (const TokenData& t : c) max_logit = std::max(max_logit, t.logit);
  double sum = 0.0;
  for (const TokenData& t : c) sum += std::exp(static_cast<double>(t.logit) - max_logit);
  const double log_z = max_logit + std::log(sum);
  const auto logprob = [&](const TokenData& t) { return static_cast<float>(t.logit - log_z); };

  Logprobs out;
  out.chosen = {c[chosen].id, logprob(c[chosen])};
  const size_t n = std::min(static_cast<size_t>(std::max(n_top, 0)), c.size());
  if (n == 0) return out;
  std::vector<uint32_t> order(c.size());  // [candidates] indices into c
  std::iota(order.begin(), order.end(), 0u);
  std::partial_sort(order.begin(), order.begin() + n, order.end(),
                    [&](uint32_t a, uint32_t b) { return logit_before(c[a], c[b]); });
  out.top.reserve(n);
  for (size_t i = 0; i < n; ++i) out.top.push_back({c[order[i]].id, logprob(c[order[i]])});
  return out;
}

SamplerChain::SamplerChain(const SamplerChain& other) : Sampler(other), n_vocab_(other.n_vocab_) {
  samplers_.reserve(other.samplers_.size());
  for (const auto& s : other.samplers_) samplers_.push_back(s->clone());
}

void SamplerChain::add(std::unique_ptr<Sampler> sampler) {
  if (!sampler) throw Error("sampling: chain: add(nullptr)");
  samplers_.push_back(std::move(sampler));
}

std::string SamplerChain::name() const {
  std::string s = "chain(";
  for (size_t i = 0; i < samplers_.size(); ++i) s += (i ? ", " : "") + samplers_[i]->name();
  return s + ")";
}

void SamplerChain::check_row(const Candidates& cur) const {
  if (n_vocab_ > 0 && cur.ids_are_indices && cur.size() != static_cast<size_t>(n_vocab_)) {
    throw Error("sampling: logits row has " + std::to_string(cur.size()) + " entries, expected n_vocab = " +
                std::to_string(n_vocab_));
  }
}

void SamplerChain::apply(Candidates& cur) {
  check_row(cur);
  for (auto& s : samplers_) s->apply(cur);
}

void SamplerChain::accept(int32_t token) {
  if (n_vocab_ > 0 && (token < 0 || token >= n_vocab_)) {
    throw Error("sampling: accept(token = " + std::to_string(token) + ") is outside [0, n_vocab = " +
                std::to_string(n_vocab_) + ")");
  }
  for (auto& s : samplers_) s->accept(token);
}

void SamplerChain::reset() {
  for (auto& s : samplers_) s->reset();
}

std::unique_ptr<Sampler> SamplerChain::clone() const { return std::make_unique<SamplerChain>(*this); }

void SamplerChain::distribution(std::span<const float> logits, Candidates& out) {
  if (selector() != Selector::Dist) throw Error("sampling: distribution() of " + name() + ", which does not end in dist");
  if (logits.empty()) throw Error("sampling: " + name() + ": empty logits row");
  out.fill(logits);
  check_row(out);
  for (size_t i = 0; i + 1 < samplers_.size(); ++i) samplers_[i]->apply(out);
  out.softmax();
}

std::unique_ptr<SamplerChain> make_sampler(const SamplingParams& p, int32_t n_vocab) {
  validate(p, n_vocab);
  auto chain = std::make_unique<SamplerChain>(n_vocab);
  // Bias first, as llama.cpp's common sampling chain has it: the repetition
  // penalty then sees the biased logit (its rule depends on the sign).
  if (!p.logit_bias.empty()) chain->add(make_logit_bias(n_vocab, p.logit_bias));
  const bool penalized = p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  if (penalized && p.repeat_last_n != 0) {
    chain->add(make_penalties(p.repeat_last_n, p.repeat_penalty, p.frequency_penalty, p.presence_penalty));
  }

  if (p.rng == SamplingParams::Rng::Llama2c) {
    // run.c takes a seed of 0 to mean "seed from the clock" (a zero xorshift state never moves).
    chain->add(make_llama2c(p.temperature, p.top_p, resolve_seed(p.seed == 0 ? kRandomSeed : p.seed)));
  } else if (p.temperature <= 0.0f) {
    chain->add(make_greedy());
  } else {
    if (p.top_k > 0) chain->add(make_top_k(p.top_k));
    if (p.typical_p < 1.0f) chain->add(make_typical(p.typical_p));
    if (p.top_p < 1.0f) chain->add(make_top_p(p.top_p));
    if (p.min_p > 0.0f) chain->add(make_min_p(p.min_p));
    if (p.temperature != 1.0f) chain->add(make_temperature(p.temperature));
    chain->add(make_dist(resolve_seed(p.seed)));
  }
  chain->set_n_probs(p.n_probs);
  return chain;
}

}  // namespace tokamak::sampling
