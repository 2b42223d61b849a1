// The scheduler of continuous batching (vLLM v1's shape: "no prefill phase and
// no decode phase: each step is a token budget"). It owns the sequences'
// scheduling state and their KV slots, and each step chooses which tokens of
// which sequences run:
//
//   1. running sequences that decode (one uncomputed token each), in order;
//   2. running sequences part-way through a prompt (or a recompute), a chunk each;
//   3. waiting sequences, admitted in order while max_num_seqs allows, a chunk each,
//
// all within max_num_batched_tokens. Order is (priority, arrival, admission
// number): lower priority values first, FCFS within a priority.
//
// Blocks are allocated here, when a chunk is scheduled (KvCache::prepare_write),
// so a step never runs out of KV half-way. When the pool cannot supply a running
// sequence's blocks (new blocks, copy-on-write copies), the last running sequence
// in order (lowest priority, latest arrival) is preempted by recompute: its
// blocks are freed, its tokens (prompt and generated) become the prompt it
// recomputes when it is admitted again, and it goes back to the waiting queue,
// ahead of later arrivals of its priority.
//
// Prefix caching: a full block's key is a hash of its parent's key, its tokens
// and a salt (kv/prefix_key.h). On admission a sequence adopts the longest chain
// of cached blocks of its tokens (all but the last token, whose logits are
// needed); after each step its newly full blocks are registered.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kv/kv_cache.h"

namespace tokamak::engine {

using SeqId = int32_t;  // a KV cache slot, recycled when its sequence ends

enum class SeqStatus { Waiting, Running, Finished };

struct Sequence {
  SeqId id = -1;
  int64_t request_id = -1;
  int32_t index = 0;       // which completion of its request
  int32_t priority = 0;
  double arrival = 0.0;
  int64_t admission = 0;   // tie-break: the order sequences entered the scheduler
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int64_t n_prompt = 0;
  int64_t n_computed = 0;       // tokens [0, n_computed) have K/V in the cache
  SeqStatus status = SeqStatus::Waiting;
  int32_t n_preemptions = 0;
  std::vector<uint64_t> block_keys;  // prefix-cache keys of blocks [0, block_keys.size())

  int64_t uncomputed() const { return static_cast<int64_t>(tokens.size()) - n_computed; }
};

struct SchedulerOptions {
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  bool enable_prefix_caching = true;
  uint64_t prefix_salt = 0;  // model and KV format (kv/prefix_key.h)
};

// One sequence's tokens in a step: tokens [begin, begin + count) of seq.
struct ScheduledChunk {
  SeqId seq = -1;
  int64_t begin = 0;
  int64_t count = 0;
  bool want_logits = false;  // the chunk ends at the sequence's last token: sample after it
};

struct ScheduledStep {
  std::vector<ScheduledChunk> chunks;   // decodes first, then prefill chunks, each in order
  std::vector<SeqId> preempted;         // preempted during this schedule (now waiting)
  std::vector<SeqId> cannot_fit;        // running alone, still short of blocks: to be finished ("length")
  int64_t n_tokens = 0;
};

struct PrefixCacheStats {
  int64_t lookups = 0;      // blocks looked up
  int64_t hit_tokens = 0;   // tokens adopted from cached blocks by admitted sequences
  int64_t query_tokens = 0; // tokens of the sequences admitted (prompts, and recomputes after preemption)
  int64_t queries = 0;      // admissions that looked up
};

class Scheduler {
 public:
  // Keeps a reference to kv (it outlives the scheduler).
  Scheduler(kv::KvCache& kv, const SchedulerOptions& options);

  // A new waiting sequence holding `prompt`; returns its id (the lowest free slot).
  SeqId add(int64_t request_id, int32_t index, std::vector<int32_t> prompt, int32_t priority, double arrival);
  // A running copy of `src` (tokens, computed KV shared through KvCache::fork)
  // as completion `index`, ordered right after src. Returns its id.
  SeqId fork(SeqId src, int32_t index);
  // Frees the sequence's blocks and slot, wherever it is.
  void finish(SeqId seq);

  // Chooses this step's chunks, preempting and allocating as described above.
  // Deterministic: the result depends only on the sequences' states and the pool's.
  ScheduledStep schedule();
  // After the forward pass ran `step`: advances n_computed and registers full blocks.
  void commit(const ScheduledStep& step);

  Sequence& sequence(SeqId seq);
  const Sequence& sequence(SeqId seq) const;
  const std::vector<SeqId>& running() const { return running_; }
  const std::vector<SeqId>& waiting() const { return waiting_; }
  bool empty() const { return running_.empty() && waiting_.empty(); }
  const PrefixCacheStats& prefix_stats() const { return prefix_stats_; }
  int64_t preemptions() const { return preemptions_; }
  const SchedulerOptions& options() const { return options_; }

  // Blocks the chunk [begin, end) of `seq` still needs from the pool.
  int32_t blocks_needed(SeqId seq, int64_t begin, int64_t end) const;
  // Audits queues, statuses and the KV cache. Throws tokamak::Error.
  void check_invariants() const;

 private:
  bool before(SeqId a, SeqId b) const;  // scheduling order
  SeqId free_slot();                    // the lowest id without a sequence (slots_ grows by one if none)
  void insert_ordered(std::vector<SeqId>& queue, SeqId seq);
  void remove(std::vector<SeqId>& queue, SeqId seq);
  // Frees the KV of the last running sequence in order, drops its chunk from
  // the step if it had one, and requeues it; returns it.
  SeqId preempt_last(ScheduledStep& step);
  // Keys of the sequence's full blocks among tokens [0, n_tokens).
  void extend_keys(Sequence& s, int64_t n_tokens);
  // Adopts cached blocks for a sequence with nothing computed.
  void adopt_cached_prefix(Sequence& s);
    // Schedules the next chunk of seq within the step's budget, preempting
  // others for a running seq. False when nothing was scheduled.
  bool schedule_chunk(ScheduledStep& step, SeqId seq, bool running);

  kv::KvCache& kv_;
  SchedulerOptions options_;
  std::vector<std::unique_ptr<Sequence>> slots_;  // indexed by SeqId; null when free
  std::vector<SeqId> running_;  // in scheduling order
  std::vector<SeqId> waiting_;  // in scheduling order
  int64_t next_admission_ = 0;
  int64_t preemptions_ = 0;
  PrefixCacheStats prefix_stats_;
};

}  // namespace tokamak::engine
