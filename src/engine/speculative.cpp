#include "engine/speculative.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace tokamak::engine {

void SpeculativeOptions::validate() const {
  if (ngram < 0 || ngram > 64) throw Error("--spec-ngram " + std::to_string(ngram) + " is outside [0, 64]");
  if (draft_model != nullptr && ngram > 0) {
    throw Error("--draft-model and --spec-ngram " + std::to_string(ngram) + " both propose tokens: choose one");
  }
  if (draft_max < 1 || draft_max > 32) throw Error("--draft-max " + std::to_string(draft_max) + " is outside [1, 32]");
  if (draft_min < 0) throw Error("--draft-min " + std::to_string(draft_min) + " is negative");
  if (draft_min > draft_max) {
    throw Error("--draft-min " + std::to_string(draft_min) + " is above --draft-max " + std::to_string(draft_max));
  }
  if (accept == nullptr) throw Error("speculative decoding without an acceptance rule");
}

namespace {

class NgramProposer final : public Proposer {
 public:
  explicit NgramProposer(int32_t n) : n_(n) {}

  void propose(std::span<const ProposalRequest> requests, std::vector<Proposal>& out) override {
    out.assign(requests.size(), Proposal{});
    for (size_t r = 0; r < requests.size(); ++r) {
      const std::span<const int32_t> t = requests[r].tokens;
      const size_t len = t.size(), n = static_cast<size_t>(n_);
      if (len <= n) continue;
      // The last earlier occurrence of the final n tokens (a match may overlap
      // them: a repeating run proposes its own continuation).
      const std::span<const int32_t> tail = t.subspan(len - n);
      for (size_t start = len - n; start-- > 0;) {
        if (!std::equal(tail.begin(), tail.end(), t.begin() + static_cast<std::ptrdiff_t>(start))) continue;
        const size_t from = start + n;
        const size_t count = std::min<size_t>(static_cast<size_t>(requests[r].max_tokens), len - from);
        out[r].tokens.assign(t.begin() + static_cast<std::ptrdiff_t>(from),
                             t.begin() + static_cast<std::ptrdiff_t>(from + count));
        break;
      }
    }
  }

 private:
  int32_t n_;
};

}  // namespace

std::unique_ptr<Proposer> make_ngram_proposer(int32_t n) { return std::make_unique<NgramProposer>(n); }

float SpeculationPolicy::updated_acceptance(float rate, int32_t drafted, int32_t accepted) {
  // Each drafted token is one observation (accepted or not) with weight 1/8.
  for (int32_t i = 0; i < drafted; ++i) rate += ((i < accepted ? 1.0f : 0.0f) - rate) * 0.125f;
  return rate;
}

void SpeculationPolicy::observe_forward(int64_t n_tokens, double seconds) {
  if (n_tokens <= 0 || !(seconds > 0.0)) return;
  constexpr double kDecay = 0.97;
  const double n = static_cast<double>(n_tokens);
  fit_.w = fit_.w * kDecay + 1.0;
  fit_.n = fit_.n * kDecay + n;
  fit_.nn = fit_.nn * kDecay + n * n;
  fit_.t = fit_.t * kDecay + seconds;
  fit_.nt = fit_.nt * kDecay + n * seconds;
}

std::pair<double, double> SpeculationPolicy::line() const {
  if (fit_.w <= 0.0) return {0.0, 0.0};
  const double mean_n = fit_.n / fit_.w, mean_t = fit_.t / fit_.w;
  const double var_n = fit_.nn / fit_.w - mean_n * mean_n;
  if (var_n < 0.25) return {mean_t, 0.0};  // one size seen: no slope yet
  const double b = std::max(0.0, (fit_.nt / fit_.w - mean_n * mean_t) / var_n);
  return {std::max(0.0, mean_t - b * mean_n), b};
}

std::vector<int32_t> SpeculationPolicy::choose(std::span<const float> acceptance, std::span<const int32_t> max_k,
                                               int64_t n_step_tokens, double draft_seconds_per_pass) const {
  // Throughput of a step in which every candidate drafts min(depth, its cap):
  // expected tokens (the step's own, plus a + ... + a^k per candidate)
  // over the modelled time a + b * tokens + depth draft passes. The best depth
  // wins; with no measurement yet the target's step counts as free to widen.
  if (!options_.adaptive_depth) return std::vector<int32_t>(max_k.begin(), max_k.end());
  auto [a, b] = line();
  // No slope yet (one step size seen): a step of a few tokens tries
  // drafting, which measures the slope; a bigger one, where drafts may cost
  // a token's compute each and the draft's catch-up of every prompt, waits.
  if (b <= 0.0 && n_step_tokens > 4) return std::vector<int32_t>(acceptance.size(), 0);
  if (a <= 0.0 && b <= 0.0) a = 1.0;
  int32_t best_depth = 0;
  double best = -1.0;
  for (int32_t depth = 0; depth <= options_.draft_max; ++depth) {
    double tokens = static_cast<double>(n_step_tokens), scored = tokens;
    for (size_t i = 0; i < acceptance.size(); ++i) {
      const int32_t k = std::min(depth, max_k[i]);
      double kept = 1.0;
      for (int32_t j = 0; j < k; ++j) kept *= acceptance[i], tokens += kept;
      scored += k;
    }
    const double seconds = a + b * scored + draft_seconds_per_pass * depth;
    const double throughput = tokens / seconds;
    if (throughput > best * 1.0001) best = throughput, best_depth = depth;  // ties: the shallower
  }
  // (the caller drops a sequence whose capped depth is below draft_min)
  std::vector<int32_t> k(acceptance.size(), 0);
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::min(best_depth, max_k[i]);
  return k;
}

}  // namespace tokamak::engine
