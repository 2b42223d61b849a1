// Draft-model speculation: a second, smaller (or more quantized) Model with
// the target's vocabulary proposes each decoding sequence's next tokens. It
// keeps its own KV cache in its own block pool, keyed by the target's
// sequence ids, and catches up lazily: each step first runs the tokens a
// sequence gained since its last proposal (the whole prompt the first time;
// full blocks of it come from its pool's prefix cache, under the scheduler's
// keys, when an earlier sequence computed them), then one batched pass per
// further drafted token.
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
  // The format has no f16 window (the Engine refuses --kv-recent with speculation).
  DraftModelProposer(const Model& draft, ThreadPool& pool, const kv::KvFormat& format, int32_t n_blocks,
                     kernels::MatmulOptions matmul, bool reserve_memory);

  void propose(std::span<const ProposalRequest> requests, std::vector<Proposal>& out) override;
  void verified(SeqId seq, int64_t n_final) override;
  void release(SeqId seq) override;
  double seconds_per_pass() const override { return pass_seconds_; }

 private:
  // An empty sequence adopts the longest run of cached blocks under its keys
  // (they cover computed tokens only, so its last token is always run).
  void adopt_cached_prefix(SeqId seq, std::span<const uint64_t> block_keys);
  // Registers the sequence's full blocks that have keys (all hold final tokens).
  void register_blocks(SeqId seq, std::span<const uint64_t> block_keys);
  // One forward of the draft over batch_; one_token_each: a pure drafting pass (timed for the policy).
  std::span<const float> run_pass(bool one_token_each);

  const Model& model_;
  kv::KvCache kv_;
  Forward forward_;
  Batch batch_;
  double pass_seconds_ = 0.0;  // exponential average of one drafting pass
};

}  // namespace tokamak::engine
