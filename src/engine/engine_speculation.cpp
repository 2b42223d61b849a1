// Speculative decoding inside Engine::step(): choosing which decode chunks
// draft and how many tokens (draft), and keeping what the target's logits
// confirm (verify). See engine/speculative.h for the parts and the policy.
#include <algorithm>
#include <chrono>

#include "engine/engine.h"
#include "engine/engine_state.h"
#include "sampling/speculative.h"

namespace tokamak::engine {

void Engine::release_speculation(SeqId seq) {
  if (proposer_) proposer_->release(seq);
}

void Engine::draft(const ScheduledStep& plan, Drafts& drafts) {
  drafts.of_chunk.assign(plan.chunks.size(), -1);
  drafts.requests.clear();
  int64_t budget = options_.max_num_batched_tokens - plan.n_tokens;
  if (budget <= 0) return;
  // Candidates: decode chunks (one token, sampled after) of completions whose
  // chain speculation can verify, with room for at least one draft.
  std::vector<size_t> chunk_of;
  std::vector<float> acceptance;
  std::vector<int32_t> cap;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    if (c.count != 1 || !c.want_logits) continue;
    const Sequence& s = scheduler_.sequence(c.seq);
    const RequestState& r = *find_request(s.request_id);
    if (r.params.n > 1 && !r.forked) continue;  // this row samples every completion's first token
    const Completion& comp = *r.completions[static_cast<size_t>(s.index)];
    const sampling::Selector selector = comp.sampler->selector();
    if (selector != sampling::Selector::Greedy && selector != sampling::Selector::Dist) continue;
    // Kept tokens are the accepted drafts plus one: within max_tokens and max_model_len.
    int64_t k = options_.speculative.draft_max;
    if (r.params.max_tokens > 0) k = std::min<int64_t>(k, r.params.max_tokens - comp.n_generated - 1);
    k = std::min<int64_t>(k, options_.max_model_len - static_cast<int64_t>(s.tokens.size()) - 1);
    if (k < 1) continue;
    chunk_of.push_back(i);
    acceptance.push_back(comp.acceptance);
    cap.push_back(static_cast<int32_t>(k));
  }
  if (chunk_of.empty()) return;
  const std::vector<int32_t> ks = policy_.choose(acceptance, cap, plan.n_tokens, proposer_->seconds_per_pass());
  int32_t blocks_left = kv_.pool().n_allocatable();
  std::vector<size_t> drafting;  // chunk index of each request
  for (size_t j = 0; j < chunk_of.size(); ++j) {
    const ScheduledChunk& c = plan.chunks[chunk_of[j]];
    int64_t k = std::min<int64_t>(ks[j], budget);
    // Drafts never preempt: a sequence short of blocks for them drafts fewer.
    int32_t blocks = k > 0 ? kv_.blocks_needed(c.seq, c.begin, c.begin + 1 + k) : 0;
    while (k > 0 && blocks > blocks_left) blocks = --k > 0 ? kv_.blocks_needed(c.seq, c.begin, c.begin + 1 + k) : 0;
    if (k < std::max(options_.speculative.draft_min, 1)) continue;
    blocks_left -= blocks;
    budget -= k;
    Sequence& s = scheduler_.sequence(c.seq);
    Completion& comp = *find_request(s.request_id)->completions[static_cast<size_t>(s.index)];
    drafts.requests.push_back(
        {c.seq, s.tokens, s.block_keys, static_cast<int32_t>(k), comp.sampler.get(), &comp.spec_rng});
    drafting.push_back(chunk_of[j]);
  }
  if (drafts.requests.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  proposer_->propose(drafts.requests, drafts.proposals);
  stats_.draft_seconds += seconds_since(start);
  for (size_t j = 0; j < drafts.requests.size(); ++j) {
    const size_t n = drafts.proposals[j].tokens.size();
    if (n == 0) continue;
    const ScheduledChunk& c = plan.chunks[drafting[j]];
    kv_.prepare_write(c.seq, c.begin, c.begin + 1 + static_cast<int64_t>(n));
    drafts.of_chunk[drafting[j]] = static_cast<int32_t>(j);
  }
}

int32_t Engine::verify(RequestState& r, int32_t index, const ScheduledChunk& c, const Proposal& proposal,
                       std::span<const float> logits, std::vector<int32_t>& kept,
                       std::vector<sampling::Logprobs>& kept_logprobs) {
  Completion& comp = *r.completions[static_cast<size_t>(index)];
  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
  const int32_t k = static_cast<int32_t>(proposal.tokens.size());
  // A copy of the chain walks the positions: it accepts each kept token
  // before the next position is judged (penalties see the drafts).
  const std::unique_ptr<sampling::SamplerChain> chain = comp.sampler->clone_chain();
  const bool greedy = chain->selector() == sampling::Selector::Greedy;
  kept.clear();
  kept_logprobs.clear();
  int32_t accepted = 0;
  for (int32_t j = 0; j <= k; ++j) {
    const std::span<const float> row = logits.subspan(static_cast<size_t>(j) * n_vocab, n_vocab);
    int32_t token;
    bool took_draft;
    if (greedy) {  // exact match: the target's own choice, kept while it is the draft's
      token = chain->sample(row);
      took_draft = j < k && token == proposal.tokens[static_cast<size_t>(j)];
      if (r.params.logprobs) kept_logprobs.push_back(chain->last_logprobs(comp.sampler->n_probs()));
    } else {
      chain->distribution(row, p_scratch_);
      if (j < k) {
        const sampling::DraftedToken drafted{proposal.tokens[static_cast<size_t>(j)],
                                             proposal.q.empty() ? nullptr : &proposal.q[static_cast<size_t>(j)]};
        const sampling::Verdict v = options_.speculative.accept(p_scratch_, drafted, comp.spec_rng, q_scratch_);
        token = v.token;
        took_draft = v.accepted;
      } else {  // every draft kept: a bonus token from p
        token = sampling::draw_token(p_scratch_, comp.spec_rng.uniform());
        took_draft = false;
      }
      chain->accept(token);
      if (r.params.logprobs) {
        const auto it = std::find_if(p_scratch_.begin(), p_scratch_.end(), [&](const sampling::TokenData& t) { return t.id == token; });
        kept_logprobs.push_back(sampling::logprobs_of(p_scratch_, static_cast<size_t>(it - p_scratch_.begin()),
                                                      comp.sampler->n_probs()));
      }
    }
    kept.push_back(token);
    if (!took_draft) break;
    ++accepted;
  }
  for (int32_t t : kept) comp.sampler->accept(t);
  Sequence& s = scheduler_.sequence(c.seq);
  s.tokens.insert(s.tokens.end(), kept.begin(), kept.end());
  // The KV holds the last token and k drafts: keep the accepted ones.
  kv_.set_length(c.seq, c.begin + 1 + accepted);
  proposer_->verified(c.seq, c.begin + 1 + accepted);
  comp.acceptance = SpeculationPolicy::updated_acceptance(comp.acceptance, k, accepted);
  ++stats_.spec_drafts;
  stats_.spec_draft_tokens += k;
  stats_.spec_accepted_tokens += accepted;
  for (int32_t j = 0; j < accepted; ++j) ++stats_.spec_accepted_per_position[static_cast<size_t>(j)];
  return accepted;
}

}  // namespace tokamak::engine
