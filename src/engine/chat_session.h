// A conversation on the Engine, turn after turn. Each turn the caller renders
// the whole conversation with the chat template; ChatSession keeps the
// conversation's tokens as far as their text agrees with that rendering and
// submits them with the new tokens as one request, whose full blocks the
// Engine's prefix cache still holds from the turn before: a turn computes its
// own new tokens (and the partial last block), not the history.
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

#include "engine/engine.h"
#include "engine/session.h"

namespace tokamak {
class ChatTemplate;
}

namespace tokamak::engine {

struct ChatTurnStats {
  int64_t reused = 0;     // conversation tokens kept from earlier turns
  int64_t prefilled = 0;  // prompt tokens added for this turn (the whole prompt = reused + prefilled)
  int64_t computed = 0;   // prompt tokens the forward pass ran (the rest came from the prefix cache)
  GenerateResult result;  // of the answer
};

class ChatSession {
 public:
  // Keeps a reference: the engine must outlive it. Turns run one at a time
  // (the engine may serve other requests meanwhile); prefix caching should be
  // on, or every turn recomputes the whole conversation.
  explicit ChatSession(Engine& engine);

  // `rendered` is the whole conversation as the template renders it, ending
  // with the generation prompt. Cuts the conversation back to where its text
  // and `rendered` agree, adds the rest (tokenized with special tokens parsed;
  // BOS first on an empty conversation when the vocabulary wants one and the
  // text does not start with it), then generates the answer through on_text.
  // `params.max_tokens` bounds the answer; `cancel`, when set by another
  // thread, ends it (StopReason::Cancelled) with its tokens so far kept. Each
  // turn samples with its own seed (params' seed mixed with the turn number).
  // Throws tokamak::Error for an empty rendering or when the prompt does not
  // fit the context; the conversation then holds what it held before, minus
  // any tokens cut.
  ChatTurnStats respond(std::string_view rendered, const GenerationParams& params,
                        const std::atomic<bool>* cancel, const std::function<void(std::string_view)>& on_text);

  const std::string& text() const { return text_; }  // what the conversation's tokens spell
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  struct Boundary {
    int64_t tokens;  // the session's first `tokens` tokens spell text_[0, bytes)
    size_t bytes;
  };
  // The text `token` stands for after `prev`: its decoded piece, or a control token's literal.
  std::string spelled(int32_t prev, int32_t token) const;
  // Forgets tokens and text after boundary `b` (an index into boundaries_).
  void cut_to(size_t b);

  Engine& engine_;
  const Tokenizer& tokenizer_;
  std::vector<int32_t> tokens_;  // the conversation: prompts and answers
  int64_t turns_ = 0;
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
