// Draft-model speculation: a second, smaller (or more quantized) Model with
// the target's vocabulary proposes each decoding sequence's next tokens. It
// keeps its own KV cache in its own block pool, keyed by the target's
// sequence ids, and catches up lazily: each step first runs the tokens a
// sequence gained since its last proposal (the whole prompt the first time;
// full blocks of it come from its own prefix cache when an earlier sequence
// computed them), then one batched pass per further drafted token.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "engine/speculative.h"
#include "kv/kv_cache.h"
#include "model/forward.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::engine {

// Throws tokamak::Error unless the draft's vocabulary is the target's: the same
// size and the same text for every token id (the first difference named).
void check_same_vocabulary(const Tokenizer& target, const Tokenizer& draft);

class DraftModelProposer final : public Proposer {
 public:
  // n_blocks of format.block_size tokens in the draft's pool (the engine gives
  // it the target's count, so the draft holds whatever the target holds).
  // reserve_memory: the pool is made resident now (EngineOptions::reserve_kv_memory).
  // Throws tokamak::Error for a format with an f16 window (--kv-recent), which
  // cannot be cut back to the accepted tokens.
  DraftModelProposer(const Model& draft, ThreadPool& pool, const kv::KvFormat& format, int32_t n_blocks,
                     kernels::MatmulOptions matmul, bool prefix_caching, bool reserve_memory);

  void propose(std::span<const ProposalRequest> requests, std::vector<Proposal>& out) override;
  void verified(SeqId seq, int64_t n_final) override;
  void release(SeqId seq) override;
  double seconds_per_pass() const override { return pass_seconds_; }
  const kv::KvCache& kv_cache() const { return kv_; }

 private:
  // An empty sequence adopts the cached blocks of its tokens' full blocks
  // (all but the last token, whose logits the first draft needs).
  void adopt_cached_prefix(SeqId seq, std::span<const int32_t> tokens);
  // Registers the full blocks among the sequence's first n_final tokens.
  void register_blocks(SeqId seq, std::span<const int32_t> tokens, int64_t n_final);
  // One forward of the draft over batch_; one_token_each: a pure drafting pass (timed for the policy).
  std::span<const float> run_pass(bool one_token_each);

  const Model& model_;
  kv::KvCache kv_;
  Forward forward_;
  Batch batch_;
  bool prefix_caching_;
  uint64_t salt_;
  double pass_seconds_ = 0.0;  // exponential average of one drafting pass
};

}  // namespace tokamak::engine
