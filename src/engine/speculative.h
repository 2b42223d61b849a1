// Speculative decoding's parts that the Engine drives: the options, the
// proposers (a draft model, or prompt lookup) and the policy that picks how
// many tokens each decoding sequence drafts in a step.
//
//   per step:  policy picks k per sequence ─► proposer drafts k tokens (and q)
//              ─► the target scores last token + k drafts in the step's one
//              forward ─► accept_or_replace per position ─► KV cut back to the
//              accepted tokens in both caches ─► acceptance feeds the policy
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "sampling/speculative.h"

namespace tokamak {
class Model;
}

namespace tokamak::engine {

using SeqId = int32_t;

struct SpeculativeOptions {
  // A draft model with the target's vocabulary (check_same_vocabulary); it
  // outlives the Engine. Null: no draft model.
  const Model* draft_model = nullptr;
  // Prompt lookup without a draft model: propose the tokens that followed the
  // last earlier occurrence of the context's final `ngram` tokens. 0: off.
  int32_t ngram = 0;
  int32_t draft_max = 5;  // drafted tokens per sequence and step, at most
  int32_t draft_min = 1;  // a sequence the policy gives fewer drafts than this drafts none
  // Off: every decoding sequence drafts draft_max tokens each step (less only
  // where max_tokens, the context, the step's budget or the KV pool say so).
  bool adaptive_depth = true;
  sampling::AcceptRule accept = &sampling::accept_or_replace;

  bool enabled() const { return draft_model != nullptr || ngram > 0; }
  // Throws tokamak::Error naming the option and value of a bad one.
  void validate() const;
};

// What a proposer is asked for one sequence.
struct ProposalRequest {
  SeqId seq = -1;
  std::span<const int32_t> tokens;  // the sequence; its last token is not in the target's KV yet
  // The scheduler's prefix-cache keys of the sequence's full computed blocks
  // (empty without prefix caching): a draft model's pool caches by the same keys.
  std::span<const uint64_t> block_keys;
  int32_t max_tokens = 0;           // drafts wanted, at most (>= 1)
  // The completion's chain, ending in greedy or dist; a draft model samples through a copy.
  const sampling::SamplerChain* chain = nullptr;
  sampling::RequestRng* rng = nullptr;            // the completion's speculation stream
};

struct Proposal {
  std::vector<int32_t> tokens;
  // The draft's distribution for each token (a draft model under a dist
  // chain); empty: each token is a point mass (greedy chains, prompt lookup).
  std::vector<sampling::Candidates> q;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // One proposal per request, in order; a proposal may be shorter than asked
  // (prompt lookup without a match: empty).
  virtual void propose(std::span<const ProposalRequest> requests, std::vector<Proposal>& out) = 0;
  // After verification: the sequence's first n_final tokens are final (drafts
  // past them were rejected).
  virtual void verified(SeqId seq, int64_t n_final) {}
  // The sequence ended or was preempted: its state goes.
  virtual void release(SeqId seq) {}
  // Seconds one drafting pass takes (0 for prompt lookup): the policy's cost.
  virtual double seconds_per_pass() const { return 0.0; }
};

// Prompt lookup over the sequence's own tokens. O(sequence length) per request.
std::unique_ptr<Proposer> make_ngram_proposer(int32_t n);

// How many tokens each decoding sequence drafts in a step. Speculation pays
// while the target's step is bound by reading the weights: scoring k more
// tokens then costs little, and each is kept with the sequence's acceptance
// rate. Once the step is compute bound every extra token costs a token's
// compute, which a draft kept with probability < 1 does not repay. The policy
// models the step's time as a + b * tokens (fitted to this machine's forward
// passes) plus the draft's passes, and picks the depth with the most expected
// tokens per second: deep at batch 1, none at a batch that fills the cores.
class SpeculationPolicy {
 public:
  explicit SpeculationPolicy(const SpeculativeOptions& options) : options_(options) {}

  // k for each candidate: acceptance[i] is its recent acceptance rate, max_k[i]
  // its cap (budget, max_tokens, context); n_step_tokens the step's tokens
  // before drafting (decodes and prompt chunks, each worth one).
  std::vector<int32_t> choose(std::span<const float> acceptance, std::span<const int32_t> max_k,
                              int64_t n_step_tokens, double draft_seconds_per_pass) const;
  // A forward pass of the target over n_tokens tokens took `seconds`.
  void observe_forward(int64_t n_tokens, double seconds);

  // The acceptance rate a completion starts from, and its update (an
  // exponential average over about the last 8 drafted tokens). A completion
  // that stops drafting keeps its rate: trying again after a pause would first
  // cost the draft a catch-up over every token since (a draft prefill), a tax
  // that a low rate does not repay. A smaller batch can still make it draft.
  static constexpr float kInitialAcceptance = 0.7f;
  static float updated_acceptance(float rate, int32_t drafted, int32_t accepted);

 private:
  // The line's fit: exponentially weighted sums of 1, n, n^2, t and n t over
  // the observed passes (weight 0.97 per newer pass: about the last 30).
  struct Fit {
    double w = 0, n = 0, nn = 0, t = 0, nt = 0;
  };
  // The step's modelled time a + b * n_tokens, (a, b) a least-squares line
  // through the recent forward passes (their sizes vary: decodes, drafts,
  // prompt chunks); b = 0 and a = the mean time while the sizes barely vary.
  std::pair<double, double> line() const;

  SpeculativeOptions options_;
  Fit fit_;
};

}  // namespace tokamak::engine
