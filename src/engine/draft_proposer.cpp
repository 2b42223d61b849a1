#include "engine/draft_proposer.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include "core/error.h"

namespace tokamak::engine {

void check_same_vocabulary(const Tokenizer& target, const Tokenizer& draft) {
  if (target.n_vocab() != draft.n_vocab()) {
    throw Error("the draft model's vocabulary has " + std::to_string(draft.n_vocab()) + " tokens, the target's " +
                std::to_string(target.n_vocab()) + ": speculation needs the same vocabulary");
  }
  for (int32_t id = 0; id < target.n_vocab(); ++id) {
    if (target.token_text(id) != draft.token_text(id)) {
      throw Error("the draft model's token " + std::to_string(id) + " is '" + draft.token_text(id) +
                  "', the target's '" + target.token_text(id) + "': speculation needs the same vocabulary");
    }
  }
}

DraftModelProposer::DraftModelProposer(const Model& draft, ThreadPool& pool, const kv::KvFormat& format,
                                       int32_t n_blocks, kernels::MatmulOptions matmul, bool reserve_memory)
    : model_(draft), kv_(kv_layout_for(draft.config(), format), n_blocks), forward_(draft, pool, matmul) {
  if (reserve_memory) kv_.pool().reserve_memory();
}

std::span<const float> DraftModelProposer::run_pass(bool one_token_each) {
  const auto start = std::chrono::steady_clock::now();
  const std::span<const float> logits = forward_.run(batch_, kv_);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The policy prices a drafting pass: catch-up passes (a prompt's worth,
  // the first time) would overstate it.
  if (one_token_each) pass_seconds_ = pass_seconds_ == 0.0 ? s : pass_seconds_ + (s - pass_seconds_) * 0.1;
  return logits;
}

void DraftModelProposer::adopt_cached_prefix(SeqId seq, std::span<const uint64_t> block_keys) {
  std::vector<int32_t> hits;
  for (const uint64_t key : block_keys) {
    const int32_t block = kv_.pool().find_cached(key);
    if (block < 0) break;
    hits.push_back(block);
  }
  if (!hits.empty()) kv_.adopt(seq, hits, static_cast<int64_t>(hits.size()) * kv_.layout().format.block_size);
}

void DraftModelProposer::register_blocks(SeqId seq, std::span<const uint64_t> block_keys) {
  const std::vector<int32_t>& blocks = kv_.table(seq).blocks;
  const size_t full = static_cast<size_t>(kv_.length(seq) / kv_.layout().format.block_size);
  for (size_t b = 0; b < std::min(full, block_keys.size()); ++b) kv_.register_key(blocks[b], block_keys[b]);
}

void DraftModelProposer::propose(std::span<const ProposalRequest> requests, std::vector<Proposal>& out) {
  out.resize(requests.size());
  for (Proposal& p : out) p.tokens.clear(), p.q.clear();
  // The sequences that draft this step, and their chains (a copy of the
  // completion's, which accepts the drafts as they are drawn: penalties see them).
  struct Drafting {
    size_t request;
    std::unique_ptr<sampling::SamplerChain> chain;
  };
  std::vector<Drafting> drafting;
  batch_.clear();
  for (size_t r = 0; r < requests.size(); ++r) {
    const ProposalRequest& q = requests[r];
    const int64_t len = static_cast<int64_t>(q.tokens.size());
    if (kv_.length(q.seq) >= len) release(q.seq);  // cannot happen after verified(); start over if it does
    if (kv_.length(q.seq) == 0) adopt_cached_prefix(q.seq, q.block_keys);
    const int64_t have = kv_.length(q.seq);
    // Room for the catch-up and the drafts fed back (the last draft is not).
    if (kv_.blocks_needed(q.seq, have, len + q.max_tokens - 1) > kv_.pool().n_allocatable()) continue;
    for (int64_t i = have; i < len; ++i) {
      batch_.add(q.tokens[static_cast<size_t>(i)], static_cast<int32_t>(i), q.seq, i + 1 == len);
    }
    drafting.push_back({r, q.chain->clone_chain()});
  }
  if (drafting.empty()) return;

  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
  for (int32_t depth = 0;; ++depth) {
    const std::span<const float> logits = run_pass(batch_.size() == static_cast<int64_t>(drafting.size()));
    size_t row = 0;
    for (Drafting& d : drafting) {
      const ProposalRequest& q = requests[d.request];
      Proposal& p = out[d.request];
      if (static_cast<int32_t>(p.tokens.size()) != depth || depth >= q.max_tokens) continue;
      if (depth == 0) register_blocks(q.seq, q.block_keys);  // the catch-up's tokens are all final
      const std::span<const float> logits_row = logits.subspan(row++ * n_vocab, n_vocab);
      if (d.chain->selector() == sampling::Selector::Greedy) {
        p.tokens.push_back(d.chain->sample(logits_row));  // sample() accepts it
      } else {
        sampling::Candidates& dist = p.q.emplace_back();
        d.chain->distribution(logits_row, dist);
        p.tokens.push_back(sampling::draw_token(dist, q.rng->uniform()));
        d.chain->accept(p.tokens.back());
      }
    }
    // Feed each new draft back for the next one, where more are wanted.
    batch_.clear();
    for (const Drafting& d : drafting) {
      const ProposalRequest& q = requests[d.request];
      const Proposal& p = out[d.request];
      if (static_cast<int32_t>(p.tokens.size()) != depth + 1 || depth + 1 >= q.max_tokens) continue;
      const int64_t pos = static_cast<int64_t>(q.tokens.size()) + depth;
      batch_.add(p.tokens.back(), static_cast<int32_t>(pos), q.seq, true);
    }
    if (batch_.size() == 0) break;
  }
}

void DraftModelProposer::verified(SeqId seq, int64_t n_final) {
  if (kv_.length(seq) > n_final) kv_.set_length(seq, n_final);
}

void DraftModelProposer::release(SeqId seq) { kv_.free_sequence(seq); }

}  // namespace tokamak::engine
