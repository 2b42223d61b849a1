// A conversation on one Session, turn after turn. Each turn the caller renders
// the whole conversation with the chat template; ChatSession keeps the
// session's tokens as far as their text agrees with that rendering and
// prefills only the rest, so a turn costs its own new tokens, not the history.
//
// The session's tokens stand for a text: prompts as rendered, answers as the
// model spelled them (a control token such as <|im_end|> by its literal, the
// way a template writes it). Where a template re-renders an earlier turn
// differently (strips thinking, drops a generation prompt), the texts diverge
// and the session is cut back to the last token that ends inside the common
// part. Cut points are token boundaries where the text is known exactly: the
// end of each prefilled segment, each prompt token whose pieces spell the
// rendered text so far, and each generated token.
//
// The new part is tokenized on its own. With an SPM vocabulary that adds a
// dummy prefix, a part that starts right after a plain-text token (an answer
// cut by -n or Ctrl-C, a template without special tokens) gets that space
// too, as llama.cpp's chat does; after a special token (the usual end of a
// turn) the tokens are those of the whole rendering.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/session.h"

namespace tokamak {
class ChatTemplate;
}

namespace tokamak::engine {

struct ChatTurnStats {
  int64_t reused = 0;     // session tokens kept from earlier turns
  int64_t prefilled = 0;  // prompt tokens added for this turn (the whole prompt = reused + prefilled)
  GenerateResult result;  // of the answer
};

class ChatSession {
 public:
  // Keeps references: both must outlive it. The session should be empty (a
  // non-empty one is cut back to nothing on the first turn: its text is unknown).
  ChatSession(Session& session, const Tokenizer& tokenizer);

  // `rendered` is the whole conversation as the template renders it, ending
  // with the generation prompt. Cuts the session back to where its text and
  // `rendered` agree, prefills the rest (tokenized with special tokens parsed;
  // BOS first on an empty session when the vocabulary wants one and the text
  // does not start with it), then generates the answer through on_text as
  // engine::generate does. Throws tokamak::Error for an empty rendering or
  // when the prompt does not fit the context; the session then holds what it
  // held before, minus any tokens cut.
  ChatTurnStats respond(std::string_view rendered, sampling::Sampler& sampler, const GenerateOptions& options,
                        const std::function<void(std::string_view)>& on_text);

  const std::string& text() const { return text_; }  // what the session's tokens spell
  int64_t size() const { return session_.size(); }

 private:
  struct Boundary {
    int64_t tokens;  // the session's first `tokens` tokens spell text_[0, bytes)
    size_t bytes;
  };
  // The text `token` stands for after `prev`: its decoded piece, or a control token's literal.
  std::string spelled(int32_t prev, int32_t token) const;
  // Forgets tokens and text after boundary `b` (an index into boundaries_).
  void cut_to(size_t b);

  Session& session_;
  const Tokenizer& tokenizer_;
  std::string text_;
  std::vector<Boundary> boundaries_;  // increasing tokens, non-decreasing bytes; {0, 0} first
};

// The text a chat template writes right after an assistant message's content,
// up to the next whitespace ("<|im_end|>" for ChatML, "<|eot_id|>" for Llama 3,
// "</s>" for Mistral); empty when it writes nothing there or cannot render a
// probe conversation (user, assistant).
std::string end_of_turn_text(const ChatTemplate& tmpl);

// Makes generation stop at the end of a turn: a special token that is not
// already end of generation goes to options.stop_tokens, a text that the
// vocabulary spells with several tokens to options.stop. Returns what was added
// ("" when nothing was needed).
std::string add_end_of_turn_stop(std::string_view end_of_turn, const Tokenizer& tokenizer,
                                 GenerateOptions& options);

}  // namespace tokamak::engine
