#include "engine/chat_session.h"

#include <algorithm>
#include <cctype>
#include <chrono>

#include "core/error.h"
#include "kv/prefix_key.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::engine {

ChatSession::ChatSession(Engine& engine)
    : engine_(engine), tokenizer_(engine.tokenizer()), boundaries_{{0, 0}} {}

std::string ChatSession::spelled(int32_t prev, int32_t token) const {
  if (tokenizer_.token_type(token) == TokenType::Control) return tokenizer_.token_text(token);
  return tokenizer_.decode_piece(prev, token);
}

void ChatSession::cut_to(size_t b) {
  tokens_.resize(static_cast<size_t>(boundaries_[b].tokens));
  text_.resize(boundaries_[b].bytes);
  boundaries_.resize(b + 1);
}

ChatTurnStats ChatSession::respond(std::string_view rendered, const GenerationParams& params,
                                   const std::atomic<bool>* cancel,
                                   const std::function<void(std::string_view)>& on_text) {
  if (rendered.empty()) throw Error("the chat template rendered an empty prompt");

  // The last boundary inside the common prefix of the held text and the new one.
  const size_t common = static_cast<size_t>(
      std::mismatch(text_.begin(), text_.end(), rendered.begin(), rendered.end()).first - text_.begin());
  size_t b = static_cast<size_t>(
      std::upper_bound(boundaries_.begin(), boundaries_.end(), common,
                       [](size_t bytes, const Boundary& x) { return bytes < x.bytes; }) -
      boundaries_.begin() - 1);
  std::vector<int32_t> prompt;
  bool added_bos = false;
  if (boundaries_[b].bytes == rendered.size()) {
    // Nothing new to say: run the last kept segment again, for its logits.
    prompt.assign(tokens_.begin() + boundaries_[b - 1].tokens, tokens_.begin() + boundaries_[b].tokens);
    --b;
  } else {
    const int32_t bos = tokenizer_.bos();
    const std::string& bos_text = bos >= 0 ? tokenizer_.token_text(bos) : std::string();
    added_bos = boundaries_[b].tokens == 0 && tokenizer_.add_bos() && bos >= 0 &&
                !(!bos_text.empty() && rendered.starts_with(bos_text));
  }
  const std::string_view rest = rendered.substr(boundaries_[b].bytes);
  if (prompt.empty()) prompt = tokenizer_.encode(rest, added_bos, /*parse_special=*/true);
  const int64_t start = boundaries_[b].tokens;

  // The whole conversation is the request's prompt (admission checks it
  // against the context).
  Request request;
  request.prompt.ids.assign(tokens_.begin(), tokens_.begin() + start);
  request.prompt.ids.insert(request.prompt.ids.end(), prompt.begin(), prompt.end());
  request.params = params;
  if (turns_ > 0) request.params.sampling.seed = kv::mix64(sampling::resolve_seed(params.sampling.seed) + static_cast<uint64_t>(turns_));
  const int64_t hits_before = engine_.stats().prefix_hit_tokens;
  cut_to(b);
  const int64_t id = engine_.add_request(request);
  ++turns_;

  ChatTurnStats stats;
  stats.reused = start;
  stats.prefilled = static_cast<int64_t>(prompt.size());
  GenerateResult& result = stats.result;
  result.n_prompt = stats.prefilled;
  std::vector<int32_t> answer;
  bool finished = false;
  auto clock = std::chrono::steady_clock::now();
  while (!finished) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) engine_.abort(id);
    for (const RequestOutput& out : engine_.step()) {
      if (out.request_id != id) continue;
      for (const CompletionDelta& d : out.completions) {
        answer.insert(answer.end(), d.token_ids.begin(), d.token_ids.end());
        if (!d.text.empty()) on_text(d.text);
        if (d.finish != FinishReason::None) result.stop = d.stop;
      }
      finished = out.finished;
    }
    const auto now = std::chrono::steady_clock::now();
    const double dt = std::chrono::duration<double>(now - clock).count();
    clock = now;
    // The first step prefills (and samples the first token); each later one decodes.
    if (answer.size() <= 1 && result.prefill_seconds == 0.0) result.prefill_seconds = dt;
    else result.decode_seconds += dt, ++result.n_decoded;
  }
  result.n_generated = static_cast<int64_t>(answer.size());
  stats.computed = static_cast<int64_t>(request.prompt.ids.size()) - (engine_.stats().prefix_hit_tokens - hits_before);

  // Boundaries inside the prompt while its pieces spell `rest` exactly; its end in any case.
  int32_t prev = start > 0 ? tokens_.back() : -1;
  size_t pos = 0;
  bool exact = true;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const std::string piece = i == 0 && added_bos ? std::string() : spelled(prev, prompt[i]);
    exact = exact && rest.compare(pos, piece.size(), piece) == 0;
    if (exact) {
      pos += piece.size();
      boundaries_.push_back({start + static_cast<int64_t>(i) + 1, text_.size() + pos});
    }
    prev = prompt[i];
  }
  tokens_.insert(tokens_.end(), prompt.begin(), prompt.end());
  text_.append(rest);
  if (!exact || pos != rest.size()) boundaries_.push_back({size(), text_.size()});
  // Each generated token ends a known text.
  for (const int32_t token : answer) {
    text_ += spelled(prev, token);
    tokens_.push_back(token);
    boundaries_.push_back({size(), text_.size()});
    prev = token;
  }
  return stats;
}

std::string end_of_turn_text(const ChatTemplate& tmpl) {
  static constexpr std::string_view kProbe = "TOKAMAK_END_OF_TURN_PROBE";
  ChatTemplateInputs in;
  in.messages = nlohmann::ordered_json::array(
      {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", std::string(kProbe)}}});
  in.add_generation_prompt = false;
  in.now_unix_seconds = 0;
  std::string text;
  try {
    text = tmpl.render(in);
  } catch (const Error&) {
    return {};
  }
  const size_t at = text.rfind(kProbe);
  if (at == std::string::npos) return {};
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  auto begin = std::find_if_not(text.begin() + static_cast<std::ptrdiff_t>(at + kProbe.size()), text.end(), space);
  return std::string(begin, std::find_if(begin, text.end(), space));
}

std::string add_end_of_turn_stop(std::string_view end_of_turn, const Tokenizer& tokenizer, GenerateOptions& options) {
  if (end_of_turn.empty()) return {};
  const std::vector<int32_t> ids = tokenizer.encode(end_of_turn, /*add_bos=*/false, /*parse_special=*/true);
  if (ids.size() == 1 && (tokenizer.token_type(ids[0]) == TokenType::Control ||
                          tokenizer.token_type(ids[0]) == TokenType::UserDefined)) {
    if (tokenizer.is_end_of_generation(ids[0])) return {};
    options.stop_tokens.push_back(ids[0]);
  } else {
    options.stop.emplace_back(end_of_turn);
  }
  return std::string(end_of_turn);
}

}  // namespace tokamak::engine
