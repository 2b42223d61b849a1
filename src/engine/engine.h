// The continuous-batching engine (vLLM's LLMEngine): many requests over one
// Model, one KV cache and one thread pool. There is no prefill phase and no
// decode phase: each step() the Scheduler gives every running sequence its
// next tokens under a token budget (one for a decoding sequence, a chunk of a
// prompt for a prefilling one), one forward pass runs them all, and each
// sequence that reached its end samples a token.
//
//   add_request ─► waiting ─► Scheduler::schedule ─► Batch ─► Forward::run
//        ▲                      (preempts by recompute)           │
//        └── abort ◄── step() outputs ◄── detokenize, stops ◄── sample per sequence
//
// Threading: an Engine is driven by one thread (the engine thread); none of
// its methods may run concurrently, because the forward pass owns the thread
// pool for the length of a step (ThreadPool::run is not reentrant). A server
// hands requests to the engine thread through its own queue.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/speculative.h"
#include "kv/kv_cache.h"
#include "kv/kv_memory.h"
#include "model/forward.h"
#include "model/model.h"

namespace tokamak {
class Tokenizer;
class ChatTemplate;
}  // namespace tokamak

namespace tokamak::engine {

struct EngineOptions {
  kv::KvFormat kv_format;            // KV element types, --kv-recent and block_size
  kv::KvMemory kv_memory;            // bytes or a fraction of free RAM; zero: enough for max_num_seqs at max_model_len
  int32_t max_model_len = 0;         // longest sequence (prompt + output); 0: the model's, at most 4096
  int32_t max_num_seqs = 256;        // running sequences at once
  int32_t max_num_batched_tokens = 2048;  // tokens per step (decode tokens + prefill chunks)
  bool enable_prefix_caching = true;
  bool reserve_kv_memory = false;    // make the whole KV pool resident at construction (a server's choice)
  int threads = 0;                   // 0: all cores
  kernels::MatmulOptions matmul;
  SpeculativeOptions speculative;    // a draft model or prompt lookup; off by default
};

struct EngineStats {
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t prompt_tokens = 0;     // prompt tokens admitted
  int64_t computed_tokens = 0;   // tokens run through the forward pass (prefill, recompute, decode)
  int64_t generated_tokens = 0;
  int64_t prefix_lookups = 0;    // block lookups in the prefix cache
  int64_t prefix_hit_tokens = 0; // prompt tokens whose KV came from the cache
  int64_t prefix_evictions = 0;
  int32_t peak_used_blocks = 0;
  // Speculative decoding (vLLM's spec_decode counters): sequence-steps that
  // drafted, tokens drafted, drafts accepted, and accepted by position.
  int64_t spec_drafts = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_position;  // [draft_max]
  double draft_seconds = 0.0;    // proposing drafts (the draft model's forward passes)
  double forward_seconds = 0.0;  // inside Forward::run
  double step_seconds = 0.0;     // the whole of step(): scheduling, forward, sampling, detokenizing
};

// max_model_len as an Engine resolves it: `requested`, or for 0 the model's
// training context, at most 4096.
int32_t default_max_model_len(const Model& model, int32_t requested);

class Engine {
 public:
  // Keeps references to model and tokenizer (both outlive the Engine); the
  // chat template for message prompts comes from the model's file (ChatML when
  // it has none). Throws tokamak::Error for options that cannot work (naming
  // the option and value), before allocating the KV pool.
  Engine(const Model& model, const Tokenizer& tokenizer, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Tokenizes (or renders) the prompt, validates the parameters and queues the
  // request; returns its id. Throws tokamak::Error, with nothing queued, for
  // an empty prompt, a prompt longer than max_model_len or than the whole KV
  // pool can hold (naming both numbers), or invalid sampling parameters.
  int64_t add_request(const Request& request);
  // Ends a request wherever it is (waiting, mid-prefill, decoding): its blocks
  // return to the pool, and the next step() reports it finished with
  // FinishReason::Abort. False when the id is unknown or already finished.
  bool abort(int64_t request_id);
  bool has_unfinished() const;

  // One scheduling step and one forward pass. Returns an output for every
  // request that changed: new tokens, text, finished completions. Never throws
  // half-way through a step for lack of KV: the scheduler preempts first.
  std::vector<RequestOutput> step();

  // Runs the requests to completion (with any already queued); results in
  // the order of `requests`.
  std::vector<RequestResult> generate(const std::vector<Request>& requests);

  const EngineOptions& options() const { return options_; }
  const EngineStats& stats() const { return stats_; }
  const kv::KvCache& kv_cache() const { return kv_; }
  const Scheduler& scheduler() const { return scheduler_; }
  const Model& model() const { return model_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  int32_t max_model_len() const { return options_.max_model_len; }
  // The prompt's token ids as add_request() would run them.
  std::vector<int32_t> tokenize_prompt(const Prompt& prompt) const;

 private:
  struct RequestState;
  double now() const;
  RequestState* find_request(int64_t id);
  void erase_request(int64_t id);
  RequestOutput& output_for(const RequestState& r, std::vector<RequestOutput>& outputs);
  // Samples completion `index`'s next token from its logits row, streams its
  // text and finishes it at a stop condition.
  void sample(RequestState& r, int32_t index, std::span<const float> logits, RequestOutput& out);
  // Reports a token that is already the sequence's token `length - 1`:
  // streams its text and finishes the completion at a stop condition. True
  // when the completion finished.
  bool emit(RequestState& r, int32_t index, int32_t token, const sampling::Logprobs* logprobs, int64_t length,
            RequestOutput& out);

  // Speculation of one step: which decode chunks draft, and what.
  struct Drafts;
  // Drafts for the plan's decode chunks within its token budget and the free
  // KV; widens those chunks' KV to hold the drafts.
  void draft(const ScheduledStep& plan, Drafts& drafts);
  // Verifies chunk `c`'s drafts against its logits rows: the tokens kept
  // (accepted drafts, then the replacement or bonus token) go into the
  // sequence and `kept`, with their logprobs when asked; the KV is cut back.
  // Returns the number of drafts accepted.
  int32_t verify(RequestState& r, int32_t index, const ScheduledChunk& c, const Proposal& proposal,
                 std::span<const float> logits, std::vector<int32_t>& kept, std::vector<sampling::Logprobs>& kept_logprobs);
  void release_speculation(SeqId seq);
  void finish_completion(RequestState& r, int32_t index, StopReason why, RequestOutput& out);
  // n > 1: the prompt's sequence, just prefilled, forks into the other
  // completions (sharing its blocks), each with its own RNG stream.
  void fork_completions(RequestState& r);

  const Model& model_;
  const Tokenizer& tokenizer_;
  EngineOptions options_;
  std::unique_ptr<ChatTemplate> chat_template_;
  ThreadPool pool_;
  kv::KvCache kv_;
  Forward forward_;
  Scheduler scheduler_;
  std::unique_ptr<Proposer> proposer_;  // null: no speculation
  SpeculationPolicy policy_;
  std::unique_ptr<Drafts> drafts_;         // reused step to step
  sampling::Candidates p_scratch_;         // the target's distribution at a verified position
  std::vector<float> q_scratch_;           // accept_or_replace's dense q
  Batch batch_;
  EngineStats stats_;
  std::unordered_map<int64_t, std::unique_ptr<RequestState>> requests_;  // live requests by id
  std::vector<RequestOutput> pending_aborts_;           // reported by the next step()
  int64_t next_request_id_ = 0;
  std::chrono::steady_clock::time_point epoch_;
  // Set while a method that touches the scheduler or the forward pass runs:
  // a second thread entering meanwhile gets an Error instead of a race.
  std::atomic<bool> busy_{false};
};

}  // namespace tokamak::engine
