#include "engine/scheduler.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "kv/prefix_key.h"

namespace tokamak::engine {

Scheduler::Scheduler(kv::KvCache& kv, const SchedulerOptions& options) : kv_(kv), options_(options) {
  if (options.max_num_seqs < 1) {
    throw Error("max_num_seqs must be at least 1, got " + std::to_string(options.max_num_seqs));
  }
  if (options.max_num_batched_tokens < 1) {
    throw Error("max_num_batched_tokens must be at least 1, got " + std::to_string(options.max_num_batched_tokens));
  }
}

Sequence& Scheduler::sequence(SeqId seq) {
  if (seq < 0 || static_cast<size_t>(seq) >= slots_.size() || !slots_[static_cast<size_t>(seq)]) {
    throw Error("scheduler: no sequence " + std::to_string(seq));
  }
  return *slots_[static_cast<size_t>(seq)];
}

const Sequence& Scheduler::sequence(SeqId seq) const { return const_cast<Scheduler*>(this)->sequence(seq); }

bool Scheduler::before(SeqId a, SeqId b) const {
  const Sequence& x = sequence(a);
  const Sequence& y = sequence(b);
  if (x.priority != y.priority) return x.priority < y.priority;
  if (x.arrival != y.arrival) return x.arrival < y.arrival;
  return x.admission < y.admission;
}

void Scheduler::insert_ordered(std::vector<SeqId>& queue, SeqId seq) {
  const auto at = std::upper_bound(queue.begin(), queue.end(), seq, [&](SeqId a, SeqId b) { return before(a, b); });
  queue.insert(at, seq);
}

void Scheduler::remove(std::vector<SeqId>& queue, SeqId seq) {
  const auto it = std::find(queue.begin(), queue.end(), seq);
  if (it != queue.end()) queue.erase(it);
}

SeqId Scheduler::free_slot() {
  // The lowest free slot: ids stay small and dense (the KV cache and the
  // forward pass index per-sequence state by id).
  SeqId id = 0;
  while (static_cast<size_t>(id) < slots_.size() && slots_[static_cast<size_t>(id)]) ++id;
  if (static_cast<size_t>(id) == slots_.size()) slots_.emplace_back();
  return id;
}

SeqId Scheduler::add(int64_t request_id, int32_t index, std::vector<int32_t> prompt, int32_t priority,
                     double arrival) {
  if (prompt.empty()) throw Error("scheduler: empty prompt for request " + std::to_string(request_id));
  const SeqId id = free_slot();
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->request_id = request_id;
  s->index = index;
  s->priority = priority;
  s->arrival = arrival;
  s->admission = next_admission_++;
  s->n_prompt = static_cast<int64_t>(prompt.size());
  s->tokens = std::move(prompt);
  slots_[static_cast<size_t>(id)] = std::move(s);
  insert_ordered(waiting_, id);
  return id;
}

SeqId Scheduler::fork(SeqId src, int32_t index) {
  const Sequence& parent = sequence(src);
  if (parent.status != SeqStatus::Running) throw Error("scheduler: fork of sequence " + std::to_string(src) + ", which is not running");
  const SeqId id = free_slot();
  auto s = std::make_unique<Sequence>(parent);
  s->id = id;
  s->index = index;
  s->n_preemptions = 0;
  slots_[static_cast<size_t>(id)] = std::move(s);
  kv_.fork(src, id);
  // After its parent and earlier forks: it has their priority, arrival and
  // admission number, and ties go last.
  insert_ordered(running_, id);
  return id;
}

void Scheduler::finish(SeqId seq) {
  Sequence& s = sequence(seq);
  remove(running_, seq);
  remove(waiting_, seq);
  kv_.free_sequence(seq);
  s.status = SeqStatus::Finished;
  slots_[static_cast<size_t>(seq)].reset();
}

int32_t Scheduler::blocks_needed(SeqId seq, int64_t begin, int64_t end) const {
  return kv_.blocks_needed(seq, begin, end);
}

void Scheduler::extend_keys(Sequence& s, int64_t n_tokens) {
  const int64_t bs = kv_.layout().format.block_size;
  const int64_t full = std::min<int64_t>(n_tokens, static_cast<int64_t>(s.tokens.size())) / bs;
  while (static_cast<int64_t>(s.block_keys.size()) < full) {
    const int64_t b = static_cast<int64_t>(s.block_keys.size());
    const uint64_t parent = b == 0 ? 0 : s.block_keys.back();
    s.block_keys.push_back(kv::prefix_block_key(
        parent, std::span<const int32_t>(s.tokens.data() + b * bs, static_cast<size_t>(bs)), options_.prefix_salt));
  }
}

void Scheduler::adopt_cached_prefix(Sequence& s) {
  if (!options_.enable_prefix_caching || s.n_computed != 0) return;
  const int64_t bs = kv_.layout().format.block_size;
  // The last token is always computed: its logits are what the step samples from.
  const int64_t max_blocks = (static_cast<int64_t>(s.tokens.size()) - 1) / bs;
  extend_keys(s, max_blocks * bs);
  std::vector<int32_t> hits;
  ++prefix_stats_.queries;
  for (int64_t b = 0; b < max_blocks; ++b) {
    ++prefix_stats_.lookups;
    const int32_t block = kv_.pool().find_cached(s.block_keys[static_cast<size_t>(b)]);
    if (block < 0) break;
    hits.push_back(block);
  }
  if (hits.empty()) return;
  kv_.adopt(s.id, hits, static_cast<int64_t>(hits.size()) * bs);
  s.n_computed = static_cast<int64_t>(hits.size()) * bs;
}

SeqId Scheduler::preempt_last(ScheduledStep& step) {
  const SeqId victim = running_.back();
  // A victim scheduled earlier in this step (a decode, when a prefill chunk
  // needs its blocks) leaves the step too.
  for (auto it = step.chunks.begin(); it != step.chunks.end(); ++it) {
    if (it->seq == victim) {
      step.n_tokens -= it->count;
      step.chunks.erase(it);
      break;
    }
  }
  Sequence& v = sequence(victim);
  kv_.free_sequence(victim);
  v.n_computed = 0;
  v.status = SeqStatus::Waiting;
  ++v.n_preemptions;
  ++preemptions_;
  remove(running_, victim);
  insert_ordered(waiting_, victim);
  step.preempted.push_back(victim);
  return victim;
}

bool Scheduler::schedule_chunk(ScheduledStep& step, SeqId seq, bool running) {
  Sequence& s = sequence(seq);
  const int64_t count = std::min<int64_t>(s.uncomputed(), options_.max_num_batched_tokens - step.n_tokens);
  if (count <= 0) return false;
  const int64_t begin = s.n_computed, end = begin + count;
  while (kv_.blocks_needed(seq, begin, end) > kv_.pool().n_allocatable()) {
    if (!running) return false;  // waiting sequences wait for blocks; they never preempt
    if (running_.size() == 1) {
      // Alone and still short: the pool cannot hold this sequence at all.
      step.cannot_fit.push_back(seq);
      return false;
    }
    if (preempt_last(step) == seq) return false;
  }
  kv_.prepare_write(seq, begin, end);
  step.chunks.push_back({seq, begin, count, end == static_cast<int64_t>(s.tokens.size())});
  step.n_tokens += count;
  return true;
}

ScheduledStep Scheduler::schedule() {
  ScheduledStep step;
  const auto budget_left = [&] { return step.n_tokens < options_.max_num_batched_tokens; };
  // 1 and 2: decodes, then partial prefills, of running sequences. A sequence
  // preempted meanwhile has left running_, so walk a snapshot.
  const std::vector<SeqId> order = running_;
  for (const bool decodes : {true, false}) {
    for (SeqId seq : order) {
      if (!budget_left()) break;
      if (std::find(running_.begin(), running_.end(), seq) == running_.end()) continue;
      if ((sequence(seq).uncomputed() == 1) != decodes) continue;
      schedule_chunk(step, seq, /*running=*/true);
    }
  }
  // 3: admit waiting sequences in order (FCFS within a priority: one that
  // cannot get its blocks holds back the ones after it). Not in a step that
  // had to preempt: the pool is short already.
  while (budget_left() && !waiting_.empty() && static_cast<int32_t>(running_.size()) < options_.max_num_seqs &&
         step.preempted.empty()) {
    const SeqId seq = waiting_.front();
    Sequence& s = sequence(seq);
    adopt_cached_prefix(s);
    if (!schedule_chunk(step, seq, /*running=*/false)) {
      if (s.n_computed > 0) {  // give the adopted blocks back: they stay cached
        kv_.free_sequence(seq);
        s.n_computed = 0;
      }
      break;
    }
    // Counted once admitted: a sequence that waits retries its lookup each step.
    if (options_.enable_prefix_caching) {
      prefix_stats_.hit_tokens += s.n_computed;
      prefix_stats_.query_tokens += static_cast<int64_t>(s.tokens.size());
    }
    waiting_.erase(waiting_.begin());
    s.status = SeqStatus::Running;
    insert_ordered(running_, seq);
  }
  return step;
}

void Scheduler::commit(const ScheduledStep& step) {
  for (const ScheduledChunk& c : step.chunks) {
    Sequence& s = sequence(c.seq);
    s.n_computed = c.begin + c.count;
    if (!options_.enable_prefix_caching) continue;
    // Register the blocks this chunk filled (a no-op for a block that has a
    // key, or whose key another block took first). The keys may run ahead of
    // the computed blocks: admission keys the whole prompt for its lookup.
    const int64_t bs = kv_.layout().format.block_size;
    extend_keys(s, s.n_computed);
    const std::vector<int32_t>& blocks = kv_.table(c.seq).blocks;
    const size_t full = static_cast<size_t>(s.n_computed / bs);
    for (size_t b = static_cast<size_t>(c.begin / bs); b < full; ++b) {
      kv_.register_key(blocks.at(b), s.block_keys.at(b));
    }
  }
}

void Scheduler::check_invariants() const {
  kv_.check_invariants();
  int64_t live = 0;
  for (const auto& slot : slots_) live += slot != nullptr;
  if (live != static_cast<int64_t>(running_.size() + waiting_.size())) {
    throw Error("scheduler invariant broken: " + std::to_string(live) + " sequences, " +
                std::to_string(running_.size()) + " running + " + std::to_string(waiting_.size()) + " waiting");
  }
  for (const auto* queue : {&running_, &waiting_}) {
    const SeqStatus want = queue == &running_ ? SeqStatus::Running : SeqStatus::Waiting;
    for (size_t i = 0; i < queue->size(); ++i) {
      const Sequence& s = sequence((*queue)[i]);
      if (s.status != want) throw Error("scheduler invariant broken: sequence " + std::to_string(s.id) + " is in the wrong queue");
      if (kv_.length(s.id) != s.n_computed) {
        throw Error("scheduler invariant broken: sequence " + std::to_string(s.id) + " has " +
                    std::to_string(s.n_computed) + " computed tokens but " + std::to_string(kv_.length(s.id)) +
                    " in the KV cache");
      }
      if (i > 0 && before((*queue)[i], (*queue)[i - 1])) {
        throw Error("scheduler invariant broken: queue out of order at sequence " + std::to_string(s.id));
      }
    }
  }
}

}  // namespace tokamak::engine
