#include "engine/chat_session.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::engine {

ChatSession::ChatSession(Session& session, const Tokenizer& tokenizer)
    : session_(session), tokenizer_(tokenizer), boundaries_{{0, 0}} {}

std::string ChatSession::spelled(int32_t prev, int32_t token) const {
  if (tokenizer_.token_type(token) == TokenType::Control) return tokenizer_.token_text(token);
  return tokenizer_.decode_piece(prev, token);
}

void ChatSession::cut_to(size_t b) {
  session_.truncate(boundaries_[b].tokens);
  text_.resize(boundaries_[b].bytes);
  boundaries_.resize(b + 1);
}

ChatTurnStats ChatSession::respond(std::string_view rendered, sampling::Sampler& sampler,
                                   const GenerateOptions& options,
                                   const std::function<void(std::string_view)>& on_text) {
  if (rendered.empty()) throw Error("the chat template rendered an empty prompt");
  if (boundaries_.back().tokens != session_.size()) cut_to(0);  // tokens whose text is unknown

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
    const std::vector<int32_t>& held = session_.tokens();
    prompt.assign(held.begin() + boundaries_[b - 1].tokens, held.begin() + boundaries_[b].tokens);
    --b;
  } else {
    const int32_t bos = tokenizer_.bos();
    const std::string& bos_text = bos >= 0 ? tokenizer_.token_text(bos) : std::string();
    added_bos = boundaries_[b].tokens == 0 && tokenizer_.add_bos() && bos >= 0 &&
                !(!bos_text.empty() && rendered.starts_with(bos_text));
  }
  cut_to(b);
  const std::string_view rest = rendered.substr(boundaries_[b].bytes);
  if (prompt.empty()) prompt = tokenizer_.encode(rest, added_bos, /*parse_special=*/true);

  ChatTurnStats stats;
  const int64_t start = session_.size();
  stats.reused = start;
  stats.prefilled = static_cast<int64_t>(prompt.size());
  int32_t prev = start > 0 ? session_.tokens().back() : -1;
  try {
    stats.result = generate(session_, tokenizer_, sampler, prompt, options, on_text);
  } catch (...) {
    session_.truncate(start);  // keep the session and its text in step
    throw;
  }

  // Boundaries inside the prompt while its pieces spell `rest` exactly; its end in any case.
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
  text_.append(rest);
  if (!exact || pos != rest.size()) boundaries_.push_back({start + static_cast<int64_t>(prompt.size()), text_.size()});
  // Each generated token ends a known text.
  const std::vector<int32_t>& held = session_.tokens();
  for (int64_t i = start + static_cast<int64_t>(prompt.size()); i < session_.size(); ++i) {
    const int32_t token = held[static_cast<size_t>(i)];
    text_ += spelled(prev, token);
    boundaries_.push_back({i + 1, text_.size()});
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
