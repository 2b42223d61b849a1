// The public Engine over engine::Engine: options and parameters in vLLM's
// vocabulary are mapped onto the internal ones, outputs copied into the
// public structs (a step's deltas are small: a token and its text each).
#include "tokamak/engine.hpp"

#include <unordered_map>

#include "api/model_impl.h"
#include "engine/draft_proposer.h"
#include "engine/engine.h"
#include "kernels/kv_format.h"
#include "kv/kv_memory.h"

namespace tokamak::api {
namespace {

engine::EngineOptions internal_options(const EngineOptions& o) {
  engine::EngineOptions e;
  if (!o.kv_memory.empty()) e.kv_memory = kv::parse_kv_memory(o.kv_memory);
  e.max_model_len = o.max_model_len;
  e.max_num_seqs = o.max_num_seqs;
  e.max_num_batched_tokens = o.max_num_batched_tokens;
  e.enable_prefix_caching = o.enable_prefix_caching;
  const std::optional<kernels::KvType> type = kernels::kv_type_from_name(o.kv_cache_dtype);
  if (!type) throw Error("kv_cache_dtype '" + o.kv_cache_dtype + "' is not one of f32, f16, bf16, q8, q4");
  e.kv_format.k_type = e.kv_format.v_type = *type;
  e.kv_format.block_size = o.block_size;
  if (o.threads < 0) throw Error("threads = " + std::to_string(o.threads) + " must be >= 0 (0: all cores)");
  e.threads = o.threads;
  e.speculative.ngram = o.prompt_lookup;
  e.speculative.draft_max = o.num_speculative_tokens;
  e.speculative.draft_min = std::min(e.speculative.draft_min, o.num_speculative_tokens);
  return e;
}

engine::GenerationParams internal_params(const SamplingParams& p, const tokamak::Model& model) {
  engine::GenerationParams g;
  sampling::SamplingParams& s = g.sampling;
  s.temperature = p.temperature;
  s.top_p = p.top_p;
  s.top_k = p.top_k < 0 ? 0 : p.top_k;  // vLLM's -1 and 0 both mean off
  s.min_p = p.min_p;
  s.repeat_penalty = p.repetition_penalty;
  s.repeat_last_n = -1;  // vLLM's penalties see the whole sequence
  s.presence_penalty = p.presence_penalty;
  s.frequency_penalty = p.frequency_penalty;
  s.seed = p.seed.value_or(sampling::kRandomSeed);
  if (p.logprobs < -1) throw Error("logprobs = " + std::to_string(p.logprobs) + " must be >= 0 (or -1: none)");
  s.n_probs = p.logprobs > 0 ? p.logprobs : 0;
  g.logprobs = p.logprobs >= 0;
  g.n = p.n;
  g.max_tokens = p.max_tokens;
  g.stop = p.stop;
  g.stop_token_ids = p.stop_token_ids;
  g.ignore_eos = p.ignore_eos;
  g.stop_at_bos = model.format() == ModelFormat::Llama2c;  // as `tokamak run` (and llama2.c's run.c) do
  return g;
}

std::vector<TokenLogprobs> public_logprobs(const std::vector<sampling::Logprobs>& in) {
  std::vector<TokenLogprobs> out;
  out.reserve(in.size());
  for (const sampling::Logprobs& l : in) {
    TokenLogprobs& t = out.emplace_back();
    t.chosen = {l.chosen.token, l.chosen.logprob};
    for (const sampling::TokenLogprob& k : l.top) t.top.push_back({k.token, k.logprob});
  }
  return out;
}

RequestOutput public_output(const engine::RequestOutput& in) {
  RequestOutput out{in.request_id, in.prompt_tokens, {}, in.finished};
  for (const engine::CompletionDelta& d : in.completions) {
    out.completions.push_back({d.index, d.token_ids, d.text, public_logprobs(d.logprobs),
                               std::string(engine::finish_reason_name(d.finish))});
  }
  return out;
}

}  // namespace

void accumulate(RequestResult& result, const RequestOutput& output) {
  result.request_id = output.request_id;
  result.prompt_tokens = output.prompt_tokens;
  for (const CompletionDelta& d : output.completions) {
    if (d.index < 0) throw Error("completion index " + std::to_string(d.index) + " is negative");
    while (result.completions.size() <= static_cast<size_t>(d.index)) {
      const auto index = static_cast<int32_t>(result.completions.size());
      result.completions.emplace_back().index = index;
    }
    Completion& c = result.completions[static_cast<size_t>(d.index)];
    c.token_ids.insert(c.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
    c.text += d.text;
    c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    if (!d.finish_reason.empty()) c.finish_reason = d.finish_reason;
  }
}

struct Engine::Impl {
  Model model;  // keeps the weights, tokenizer and template alive for `engine`
  std::unique_ptr<Model> draft;  // the speculative_model, alive as long as `engine`
  engine::Engine engine;

  Impl(const Model& m, const EngineOptions& o)
      : model(m), draft(load_draft(m, o)), engine(m.impl_->model, m.impl_->tokenizer, options_with(o, draft.get())) {}

  // The draft model of options.speculative_model, checked against the
  // target's vocabulary; null without one.
  static std::unique_ptr<Model> load_draft(const Model& target, const EngineOptions& o) {
    if (o.speculative_model.empty()) return nullptr;
    auto d = std::make_unique<Model>(Model::load(o.speculative_model));
    try {
      engine::check_same_vocabulary(target.impl_->tokenizer, d->impl_->tokenizer);
    } catch (const tokamak::Error& e) {
      throw Error("speculative_model " + o.speculative_model + ": " + e.what());
    }
    return d;
  }
  static engine::EngineOptions options_with(const EngineOptions& o, const Model* d) {
    engine::EngineOptions e = internal_options(o);
    if (d != nullptr) e.speculative.draft_model = &d->impl_->model;
    return e;
  }

  int64_t add(engine::Prompt prompt, const SamplingParams& params) {
    engine::Request r;
    r.prompt = std::move(prompt);
    r.params = internal_params(params, model.impl_->model);
    return engine.add_request(r);
  }
};

Engine::Engine(const Model& model, const EngineOptions& options)
    : impl_(translate_errors([&] { return std::make_unique<Impl>(model, options); })) {}
Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

int64_t Engine::add_request(std::string_view prompt, const SamplingParams& params) {
  return translate_errors([&] { return impl_->add(engine::Prompt::from_text(std::string(prompt)), params); });
}

int64_t Engine::add_request(std::span<const int32_t> prompt_ids, const SamplingParams& params) {
  return translate_errors([&] {
    if (prompt_ids.empty()) throw Error("the prompt has no token ids");
    return impl_->add(engine::Prompt::from_ids({prompt_ids.begin(), prompt_ids.end()}), params);
  });
}

int64_t Engine::add_chat_request(const std::vector<ChatMessage>& messages, const SamplingParams& params) {
  return translate_errors([&] {
    if (messages.empty()) throw Error("messages = [] has no message");
    nlohmann::ordered_json json = nlohmann::ordered_json::array();
    for (const ChatMessage& m : messages) json.push_back({{"role", m.role}, {"content", m.content}});
    return impl_->add(engine::Prompt::from_messages(std::move(json)), params);
  });
}

bool Engine::abort(int64_t request_id) {
  return translate_errors([&] { return impl_->engine.abort(request_id); });
}

bool Engine::has_unfinished() const { return impl_->engine.has_unfinished(); }

std::vector<RequestOutput> Engine::step() {
  return translate_errors([&] {
    std::vector<RequestOutput> out;
    for (const engine::RequestOutput& o : impl_->engine.step()) out.push_back(public_output(o));
    return out;
  });
}

std::vector<RequestResult> Engine::generate(const std::vector<std::string>& prompts, const SamplingParams& params) {
  return translate_errors([&] {
    std::vector<RequestResult> results(prompts.size());
    std::unordered_map<int64_t, size_t> slot;  // request id -> index in results
    for (size_t i = 0; i < prompts.size(); ++i) {
      results[i].request_id = impl_->add(engine::Prompt::from_text(prompts[i]), params);
      slot[results[i].request_id] = i;
    }
    size_t left = prompts.size();
    while (left > 0 && impl_->engine.has_unfinished()) {
      for (const engine::RequestOutput& o : impl_->engine.step()) {
        const auto it = slot.find(o.request_id);
        if (it == slot.end()) continue;  // a request queued before this call
        accumulate(results[it->second], public_output(o));
        if (o.finished) --left;
      }
    }
    return results;
  });
}

int32_t Engine::max_model_len() const { return impl_->engine.max_model_len(); }
const Model& Engine::model() const { return impl_->model; }

}  // namespace tokamak::api
