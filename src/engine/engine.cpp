#include "engine/engine.h"

#include <algorithm>
#include <string>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "engine/chat_session.h"
#include "engine/draft_proposer.h"
#include "engine/engine_state.h"
#include "engine/session.h"
#include "engine/stop_strings.h"
#include "io/gguf.h"
#include "kv/prefix_key.h"
#include "sampling/sampler.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::engine {
namespace {

// Completion `index`'s seed: the request's own for the first, so that n = 1
// samples exactly what a single run does; a mix of (seed, index) for the others.
uint64_t completion_seed(uint64_t seed, int32_t index) {
  if (index == 0) return seed;
  uint64_t s = kv::mix64(seed ^ kv::mix64(static_cast<uint64_t>(index)));
  if (s == sampling::kRandomSeed || s == 0) s = 1;
  return s;
}

// A salt for prefix-cache keys: blocks are only reusable by the same model
// shape in the same KV storage format.
uint64_t prefix_salt(const Model& model, const kv::KvFormat& f) {
  const ModelConfig& c = model.config();
  uint64_t h = 0;
  for (int64_t v : {int64_t{c.n_layers}, int64_t{c.n_embd}, int64_t{c.n_heads}, int64_t{c.n_kv_heads},
                    int64_t{c.head_dim}, int64_t{c.n_vocab}, static_cast<int64_t>(model.weight_bytes()),
                    static_cast<int64_t>(f.k_type), static_cast<int64_t>(f.v_type), int64_t{f.recent},
                    int64_t{f.block_size}}) {
    h = kv::mix64(h ^ static_cast<uint64_t>(v));
  }
  return h;
}

EngineOptions resolved(const Model& model, EngineOptions o) {
  o.max_model_len = default_max_model_len(model, o.max_model_len);
  if (o.threads <= 0) o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Mixed precision keeps each sequence's newest positions in a private f16
  // ring that a cached prefix does not carry: a prefix hit would read those
  // positions quantized where a miss reads them in f16, so the two settings
  // do not mix (results would depend on the cache).
  if (kv_layout_for(model.config(), o.kv_format).has_recent()) o.enable_prefix_caching = false;
  const SpeculativeOptions& spec = o.speculative;
  if (spec.enabled()) {
    spec.validate();
    // Rejected drafts are cut from the KV; an f16 window's rows they took would
    // then be read quantized, so the kept tokens' results would change.
    if (o.kv_format.recent > 0) {
      throw Error("--kv-recent " + std::to_string(o.kv_format.recent) +
                  " does not combine with speculative decoding (rejected drafts cannot leave the f16 window)");
    }
    if (spec.draft_model != nullptr && spec.draft_model->config().n_vocab != model.config().n_vocab) {
      throw Error("the draft model's vocabulary has " + std::to_string(spec.draft_model->config().n_vocab) +
                  " tokens, the target's " + std::to_string(model.config().n_vocab) +
                  ": speculation needs the same vocabulary");
    }
  }
  return o;
}

// Blocks of the pool: the memory budget, or by default room for max_num_seqs
// sequences of max_model_len tokens within half of the available memory (and
// at least one such sequence). Untouched blocks cost no RAM (huge-page backed).
// A draft model's pool has as many blocks (of draft_block_bytes each) and
// shares the budget.
int32_t pool_blocks(const kv::KvLayout& layout, const EngineOptions& o, int64_t draft_block_bytes) {
  layout.validate();
  const int64_t bs = layout.format.block_size;
  const int64_t per_seq = (o.max_model_len + bs - 1) / bs + layout.recent_blocks();
  const double own_share = static_cast<double>(layout.block_bytes()) /
                           static_cast<double>(layout.block_bytes() + draft_block_bytes);
  int64_t blocks = 0;
  if (o.kv_memory.bytes > 0 || o.kv_memory.fraction > 0) {
    blocks = kv::blocks_for_bytes(
        layout, static_cast<int64_t>(static_cast<double>(kv::resolve_kv_memory(o.kv_memory)) * own_share));
    if (blocks < per_seq) {
      throw Error("--kv-memory holds " + std::to_string(blocks) + " blocks of " + std::to_string(bs) +
                  " tokens, fewer than one sequence of max_model_len = " + std::to_string(o.max_model_len) +
                  " tokens needs (" + std::to_string(per_seq) + "): raise --kv-memory or lower --max-model-len");
    }
  } else {
    const int64_t half = kv::available_memory_bytes() / 2;
    const int64_t fits = half / (layout.block_bytes() + draft_block_bytes);
    blocks = std::max<int64_t>(per_seq, std::min<int64_t>(fits, per_seq * o.max_num_seqs));
  }
  return static_cast<int32_t>(std::min<int64_t>(blocks, (int64_t{1} << 31) - 1));
}

int64_t draft_block_bytes(const EngineOptions& o) {
  const Model* draft = o.speculative.draft_model;
  return draft != nullptr ? kv_layout_for(draft->config(), o.kv_format).block_bytes() : 0;
}

std::unique_ptr<ChatTemplate> model_chat_template(const Model& model, const Tokenizer& tokenizer) {
  std::optional<std::string> source;
  if (model.format() == ModelFormat::Gguf) source = model.gguf()->get_string("tokenizer.chat_template");
  const auto text_of = [&](int32_t id) { return id >= 0 ? tokenizer.token_text(id) : std::string(); };
  return std::make_unique<ChatTemplate>(ChatTemplate::from_source(source, text_of(tokenizer.bos()), text_of(tokenizer.eos())));
}

CompletionDelta& delta_for(RequestOutput& out, int32_t index) {
  for (CompletionDelta& d : out.completions) {
    if (d.index == index) return d;
  }
  CompletionDelta& d = out.completions.emplace_back();
  d.index = index;
  return d;
}

// Marks the engine busy for a scope; one thread drives an Engine.
class EngineThreadGuard {
 public:
  EngineThreadGuard(std::atomic<bool>& busy, const char* method) : busy_(busy) {
    if (busy_.exchange(true, std::memory_order_acquire)) {
      throw Error(std::string("Engine::") + method +
                  " while another call runs: an Engine is driven by one thread (queue work to it)");
    }
  }
  ~EngineThreadGuard() { busy_.store(false, std::memory_order_release); }
  EngineThreadGuard(const EngineThreadGuard&) = delete;
  EngineThreadGuard& operator=(const EngineThreadGuard&) = delete;

 private:
  std::atomic<bool>& busy_;
};

}  // namespace

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::EndOfGeneration: return "end of generation";
    case StopReason::MaxTokens: return "max tokens";
    case StopReason::ContextFull: return "context full";
    case StopReason::StopString: return "stop string";
    case StopReason::Cancelled: return "interrupted";
  }
  return "unknown";
}

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::None: return "";
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
  }
  return "";
}

// Completion `index` of a request, its sampler having seen the prompt (prompt
// tokens count for penalties). Throws Error for invalid sampling parameters.
static std::unique_ptr<Completion> new_completion(const Tokenizer& tokenizer, int32_t n_vocab, const GenerationParams& p,
                                                  uint64_t seed, const std::vector<int32_t>& prompt, int32_t index) {
  auto c = std::make_unique<Completion>(
      Completion{-1, nullptr, TextStream(tokenizer, prompt.back()), StopStringMatcher(p.stop)});
  sampling::SamplingParams sp = p.sampling;
  sp.seed = completion_seed(seed, index);
  sp.n_probs = p.logprobs ? p.sampling.n_probs : 0;
  c->sampler = sampling::make_sampler(sp, n_vocab);
  c->spec_rng = sampling::RequestRng(kv::mix64(sp.seed ^ 0x5bec0de5bec0de5ull));
  for (int32_t t : prompt) c->sampler->accept(t);
  return c;
}

Engine::Engine(const Model& model, const Tokenizer& tokenizer, const EngineOptions& options)
    : model_(model),
      tokenizer_(tokenizer),
      options_(resolved(model, options)),
      chat_template_(model_chat_template(model, tokenizer)),
      pool_(options_.threads),
      kv_(kv_layout_for(model, options_.kv_format),
          pool_blocks(kv_layout_for(model, options_.kv_format), options_, draft_block_bytes(options_))),
      forward_(model, pool_, options_.matmul),
      scheduler_(kv_, SchedulerOptions{options_.max_num_seqs, options_.max_num_batched_tokens,
                                       options_.enable_prefix_caching, prefix_salt(model, options_.kv_format)}),
      policy_(options_.speculative),
      drafts_(std::make_unique<Drafts>()),
      epoch_(std::chrono::steady_clock::now()) {
  if (options_.reserve_kv_memory) kv_.pool().reserve_memory();
  if (model.parallel() != nullptr) kv_.start_journal();  // the other ranks' pools follow this one
  const SpeculativeOptions& spec = options_.speculative;
  if (spec.draft_model != nullptr) {
    // The draft's pool holds as many tokens as the target's.
    proposer_ = std::make_unique<DraftModelProposer>(*spec.draft_model, pool_, options_.kv_format, kv_.pool().n_blocks(),
                                                     options_.matmul, options_.reserve_kv_memory);
  } else if (spec.ngram > 0) {
    proposer_ = make_ngram_proposer(spec.ngram);
  }
  if (proposer_) stats_.spec_accepted_per_position.assign(static_cast<size_t>(spec.draft_max), 0);
}

Engine::~Engine() = default;

double Engine::now() const { return seconds_since(epoch_); }

std::vector<int32_t> Engine::tokenize_prompt(const Prompt& prompt) const {
  if (!prompt.ids.empty()) return prompt.ids;
  if (!prompt.messages.is_null()) {
    ChatTemplateInputs inputs;
    inputs.messages = prompt.messages;
    const std::string rendered = chat_template_->render(inputs);
    const int32_t bos = tokenizer_.bos();
    const std::string bos_text = bos >= 0 ? tokenizer_.token_text(bos) : std::string();
    // The template usually writes BOS itself; add it only when it did not.
    const bool add_bos = tokenizer_.add_bos() && bos >= 0 && !(!bos_text.empty() && rendered.starts_with(bos_text));
    return tokenizer_.encode(rendered, add_bos, /*parse_special=*/true);
  }
  return tokenizer_.encode(prompt.text, tokenizer_.add_bos());
}

int32_t default_max_model_len(const Model& model, int32_t requested) {
  if (requested < 0) throw Error("max_model_len must be positive, got " + std::to_string(requested));
  return requested > 0 ? requested : std::min(model.config().n_ctx_train, 4096);
}

int64_t Engine::add_request(const Request& request) {
  const EngineThreadGuard guard(busy_, "add_request()");
  const GenerationParams& p = request.params;
  std::vector<int32_t> prompt = tokenize_prompt(request.prompt);
  const int32_t n_vocab = model_.config().n_vocab;
  if (prompt.empty()) throw Error("the prompt is empty and the vocabulary has no BOS token to start from");
  for (int32_t t : prompt) {
    if (t < 0 || t >= n_vocab) {
      throw Error("prompt token id " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    }
  }
  const int64_t len = static_cast<int64_t>(prompt.size());
  if (len >= options_.max_model_len) {
    throw Error("the prompt has " + std::to_string(len) + " tokens; the context size max_model_len = " +
                std::to_string(options_.max_model_len) + " leaves no room to generate (raise --max-model-len; -c for run and chat)");
  }
  const int64_t bs = kv_.layout().format.block_size;
  const int64_t blocks = (len + 1 + bs - 1) / bs + kv_.layout().recent_blocks();
  if (blocks > kv_.pool().n_blocks()) {
    throw Error("the prompt has " + std::to_string(len) + " tokens; the KV pool holds only " +
                std::to_string(kv_.pool().n_blocks() * bs) + " (raise --kv-memory)");
  }
  if (p.max_tokens_must_fit && p.max_tokens > 0 && len + p.max_tokens > options_.max_model_len) {
    throw Error("the prompt has " + std::to_string(len) + " tokens and max_tokens = " + std::to_string(p.max_tokens) +
                ": " + std::to_string(len + p.max_tokens) + " tokens, over the context size max_model_len = " +
                std::to_string(options_.max_model_len) + " (lower max_tokens or shorten the prompt)");
  }
  if (p.n < 1 || p.n > 1024) throw Error("n = " + std::to_string(p.n) + " is outside [1, 1024]");
  if (p.max_tokens < -1 || p.max_tokens == 0) {
    throw Error("max_tokens = " + std::to_string(p.max_tokens) + " must be positive (or -1: until max_model_len)");
  }

  auto r = std::make_unique<RequestState>();
  r->id = next_request_id_;
  r->params = p;
  if (!request.prompt.messages.is_null()) {
    // A chat turn ends at the template's end-of-turn marker.
    GenerateOptions eot;
    add_end_of_turn_stop(end_of_turn_text(*chat_template_), tokenizer_, eot);
    for (int32_t t : eot.stop_tokens) r->params.stop_token_ids.push_back(t);
    for (std::string& s : eot.stop) r->params.stop.push_back(std::move(s));
  }
  r->seed = sampling::resolve_seed(p.sampling.seed);
  // Completion 0 now (validating the parameters); the others at the fork.
  auto c = new_completion(tokenizer_, n_vocab, r->params, r->seed, prompt, 0);
  r->prompt = prompt;
  c->seq = scheduler_.add(r->id, 0, std::move(prompt), request.priority, request.arrival_time.value_or(now()));
  r->completions.push_back(std::move(c));
  stats_.prompt_tokens += len;
  const int64_t id = next_request_id_++;
  requests_.emplace(id, std::move(r));
  return id;
}

Engine::RequestState* Engine::find_request(int64_t id) {
  const auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

bool Engine::abort(int64_t request_id) {
  const EngineThreadGuard guard(busy_, "abort()");
  RequestState* r = find_request(request_id);
  if (r == nullptr) return false;
  RequestOutput out;
  out.request_id = r->id;
  out.prompt_tokens = static_cast<int64_t>(r->prompt.size());
  for (size_t i = 0; i < r->completions.size(); ++i) {
    Completion& c = *r->completions[i];
    if (c.seq < 0) continue;
    release_speculation(c.seq);
    scheduler_.finish(c.seq);
    c.seq = -1;
    c.finish = FinishReason::Abort;
    CompletionDelta d;
    d.index = static_cast<int32_t>(i);
    d.finish = FinishReason::Abort;
    d.stop = StopReason::Cancelled;
    out.completions.push_back(std::move(d));
  }
  out.finished = true;
  pending_aborts_.push_back(std::move(out));
  erase_request(request_id);
  return true;
}

void Engine::erase_request(int64_t id) { requests_.erase(id); }

bool Engine::has_unfinished() const { return !requests_.empty() || !pending_aborts_.empty(); }

RequestOutput& Engine::output_for(const RequestState& r, std::vector<RequestOutput>& outputs) {
  for (RequestOutput& o : outputs) {
    if (o.request_id == r.id) return o;
  }
  RequestOutput& o = outputs.emplace_back();
  o.request_id = r.id;
  o.prompt_tokens = static_cast<int64_t>(r.prompt.size());
  o.last_prompt_token = r.prompt.back();
  return o;
}

void Engine::finish_completion(RequestState& r, int32_t index, StopReason why, RequestOutput& out) {
  Completion& c = *r.completions[static_cast<size_t>(index)];
  CompletionDelta& d = delta_for(out, index);
  if (!c.stops.stopped()) {
    // An unfinished UTF-8 tail may still complete a stop string; else what the
    // matcher held back as a possible stop prefix is text after all.
    const StopStringMatcher::Output tail = c.stops.push(c.stream.flush());
    d.text += tail.text;
    if (tail.stopped) why = StopReason::StopString;
    else d.text += c.stops.flush();
  }
  const FinishReason reason = why == StopReason::Cancelled                                    ? FinishReason::Abort
                              : why == StopReason::MaxTokens || why == StopReason::ContextFull ? FinishReason::Length
                                                                                               : FinishReason::Stop;
  release_speculation(c.seq);
  scheduler_.finish(c.seq);
  c.seq = -1;
  c.finish = reason;
  d.finish = reason;
  d.stop = why;
  // Before the fork (a request aborted or out of KV during its prefill) the
  // first completion is the whole request.
  if (++r.n_finished == static_cast<int32_t>(r.completions.size())) out.finished = true;
}

void Engine::fork_completions(RequestState& r) {
  const SeqId parent = r.completions[0]->seq;
  for (int32_t i = 1; i < r.params.n; ++i) {
    auto c = new_completion(tokenizer_, model_.config().n_vocab, r.params, r.seed, r.prompt, i);
    c->seq = scheduler_.fork(parent, i);
    r.completions.push_back(std::move(c));
  }
  r.forked = true;
}

void Engine::sample(RequestState& r, int32_t index, std::span<const float> logits, RequestOutput& out) {
  Completion& c = *r.completions[static_cast<size_t>(index)];
  Sequence& s = scheduler_.sequence(c.seq);
  const int32_t token = c.sampler->sample(logits);
  s.tokens.push_back(token);
  const sampling::Logprobs logprobs = r.params.logprobs ? c.sampler->last_logprobs() : sampling::Logprobs{};
  emit(r, index, token, r.params.logprobs ? &logprobs : nullptr, static_cast<int64_t>(s.tokens.size()), out);
}

bool Engine::emit(RequestState& r, int32_t index, int32_t token, const sampling::Logprobs* logprobs, int64_t length,
                  RequestOutput& out) {
  Completion& c = *r.completions[static_cast<size_t>(index)];
  ++c.n_generated;
  ++stats_.generated_tokens;
  CompletionDelta& d = delta_for(out, index);
  d.token_ids.push_back(token);
  if (logprobs != nullptr) d.logprobs.push_back(*logprobs);

  const GenerationParams& p = r.params;
  const bool end = (!p.ignore_eos && tokenizer_.is_end_of_generation(token)) ||
                   (p.stop_at_bos && token == tokenizer_.bos()) ||
                   std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end();
  StopReason why;
  if (end) {
    why = StopReason::EndOfGeneration;
  } else {
    const StopStringMatcher::Output text = c.stops.push(c.stream.push(token));
    d.text += text.text;
    if (text.stopped) why = StopReason::StopString;
    else if (p.max_tokens > 0 && c.n_generated >= p.max_tokens) why = StopReason::MaxTokens;
    else if (length >= options_.max_model_len) why = StopReason::ContextFull;
    else return false;
  }
  finish_completion(r, index, why, out);
  return true;
}

std::vector<RequestOutput> Engine::step() {
  const EngineThreadGuard guard(busy_, "step()");
  const auto start = std::chrono::steady_clock::now();
  std::vector<RequestOutput> outputs = std::move(pending_aborts_);
  pending_aborts_.clear();
  ScheduledStep plan = scheduler_.schedule();
  stats_.preemptions = scheduler_.preemptions();
  for (SeqId seq : plan.preempted) release_speculation(seq);
  for (SeqId seq : plan.cannot_fit) {
    const Sequence& s = scheduler_.sequence(seq);
    RequestState& r = *find_request(s.request_id);
    finish_completion(r, s.index, StopReason::ContextFull, output_for(r, outputs));
  }
  if (!plan.chunks.empty()) {
    Drafts& drafts = *drafts_;
    if (proposer_) draft(plan, drafts);
    else drafts.of_chunk.assign(plan.chunks.size(), -1);
    // The batch: each chunk's tokens, then its drafts (each wants logits).
    batch_.clear();
    std::vector<size_t> first_row(plan.chunks.size(), 0);
    size_t n_rows = 0;
    for (size_t i = 0; i < plan.chunks.size(); ++i) {
      const ScheduledChunk& c = plan.chunks[i];
      const Sequence& s = scheduler_.sequence(c.seq);
      for (int64_t t = c.begin; t < c.begin + c.count; ++t) {
        batch_.add(s.tokens[static_cast<size_t>(t)], static_cast<int32_t>(t), c.seq,
                   c.want_logits && t + 1 == c.begin + c.count);
      }
      first_row[i] = n_rows;
      n_rows += c.want_logits ? 1 : 0;
      if (drafts.of_chunk[i] < 0) continue;
      const std::vector<int32_t>& d = drafts.proposals[static_cast<size_t>(drafts.of_chunk[i])].tokens;
      for (size_t j = 0; j < d.size(); ++j) {
        batch_.add(d[j], static_cast<int32_t>(c.begin + c.count + static_cast<int64_t>(j)), c.seq, true);
      }
      n_rows += d.size();
    }
    const auto forward_start = std::chrono::steady_clock::now();
    const std::span<const float> logits = forward_.run(batch_, kv_);
    const double forward_seconds = seconds_since(forward_start);
    stats_.forward_seconds += forward_seconds;
    policy_.observe_forward(batch_.size(), forward_seconds);
    stats_.computed_tokens += batch_.size();
    stats_.peak_used_blocks = std::max(stats_.peak_used_blocks, kv_.pool().n_used());

    // Verification first: the kept tokens enter their sequences before the
    // commit keys their blocks for the prefix cache.
    const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
    std::vector<std::vector<int32_t>> kept(plan.chunks.size());
    std::vector<std::vector<sampling::Logprobs>> kept_logprobs(plan.chunks.size());
    for (size_t i = 0; i < plan.chunks.size(); ++i) {
      if (drafts.of_chunk[i] < 0) continue;
      ScheduledChunk& c = plan.chunks[i];
      const Proposal& proposal = drafts.proposals[static_cast<size_t>(drafts.of_chunk[i])];
      const Sequence& s = scheduler_.sequence(c.seq);
      const std::span<const float> rows = logits.subspan(first_row[i] * n_vocab, (proposal.tokens.size() + 1) * n_vocab);
      c.count += verify(*find_request(s.request_id), s.index, c, proposal, rows, kept[i], kept_logprobs[i]);
    }
    scheduler_.commit(plan);

    for (size_t i = 0; i < plan.chunks.size(); ++i) {
      const ScheduledChunk& c = plan.chunks[i];
      if (!c.want_logits) continue;
      const Sequence& s = scheduler_.sequence(c.seq);
      RequestState& r = *find_request(s.request_id);
      RequestOutput& out = output_for(r, outputs);
      const int32_t index = s.index;
      if (drafts.of_chunk[i] >= 0) {
        // Kept token j is the sequence's token begin + 1 + j.
        for (size_t j = 0; j < kept[i].size(); ++j) {
          const sampling::Logprobs* lp = j < kept_logprobs[i].size() ? &kept_logprobs[i][j] : nullptr;
          if (emit(r, index, kept[i][j], lp, c.begin + 2 + static_cast<int64_t>(j), out)) break;
        }
        continue;
      }
      const std::span<const float> logits_row = logits.subspan(first_row[i] * n_vocab, n_vocab);
      if (r.params.n > 1 && !r.forked) {
        fork_completions(r);  // every completion samples its first token from this row
        for (int32_t k = 0; k < r.params.n; ++k) sample(r, k, logits_row, out);
      } else {
        sample(r, index, logits_row, out);
      }
    }
  }
  for (const RequestOutput& o : outputs) {
    if (o.finished) erase_request(o.request_id);
  }
  ++stats_.steps;
  const PrefixCacheStats& ps = scheduler_.prefix_stats();
  stats_.prefix_lookups = ps.lookups;
  stats_.prefix_hit_tokens = ps.hit_tokens;
  stats_.prefix_evictions = kv_.pool().evictions();
  stats_.step_seconds += seconds_since(start);
  return outputs;
}

void accumulate(RequestResult& result, const RequestOutput& output) {
  result.prompt_tokens = output.prompt_tokens;
  for (const CompletionDelta& d : output.completions) {
    CompletionResult& c = result.completions.at(static_cast<size_t>(d.index));
    c.token_ids.insert(c.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
    c.text += d.text;
    c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    if (d.finish != FinishReason::None) {
      c.finish = d.finish;
      c.stop = d.stop;
    }
  }
}

std::vector<RequestResult> Engine::generate(const std::vector<Request>& requests) {
  std::unordered_map<int64_t, size_t> slot;  // request id -> index in results
  std::vector<RequestResult> results(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const int64_t id = add_request(requests[i]);
    slot[id] = i;
    results[i].request_id = id;
    results[i].completions.resize(static_cast<size_t>(requests[i].params.n));
  }
  size_t left = requests.size();
  while (left > 0 && has_unfinished()) {
    for (const RequestOutput& o : step()) {
      const auto it = slot.find(o.request_id);
      if (it == slot.end()) continue;
      accumulate(results[it->second], o);
      if (o.finished) --left;
    }
  }
  return results;
}

}  // namespace tokamak::engine
