// Chat templates: a conversation (OpenAI-style messages) to the prompt text a
// model was trained on, by rendering the model's Jinja template
// (GGUF `tokenizer.chat_template`) the way Hugging Face transformers does.
// A model without a template gets ChatML, as llama-server does:
//   <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "jinja/template.h"

namespace tokamak {

struct ChatTemplateInputs {
  // [{"role": ..., "content": ..., optional "tool_calls", "name", ...}]. Ordered
  // JSON keeps key order, which tojson output depends on.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  bool add_generation_prompt = true;
  // Tool definitions; absent means `tools` is undefined in the template (as when
  // transformers is called without tools).
  std::optional<nlohmann::ordered_json> tools;
  // More template variables (e.g. {"enable_thinking": false}); the variables
  // above and bos_token/eos_token take precedence over same-named entries.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  // The clock strftime_now() reads (Unix seconds, UTC); nullopt: the current time.
  std::optional<int64_t> now_unix_seconds;
};

class ChatTemplate {
 public:
  // `source` is the model's template text; nullopt or empty selects ChatML.
  // Throws jinja::TemplateError (a tokamak::Error) when the text does not parse
  // or uses an unsupported construct, with its line and column.
  static ChatTemplate from_source(std::optional<std::string_view> source, std::string bos_token,
                                  std::string eos_token);
  static ChatTemplate chatml(std::string bos_token = {}, std::string eos_token = {});

  bool is_chatml_fallback() const { return fallback_; }
  const std::string& source() const { return source_; }

  // Throws jinja::TemplateError: the template raised (kind Raised, with the
  // template's message), used an undefined value, or hit a limit.
  std::string render(const ChatTemplateInputs& inputs, const jinja::RenderLimits& limits = {}) const;

 private:
  ChatTemplate(std::string source, jinja::Template tmpl, std::string bos, std::string eos, bool fallback)
      : source_(std::move(source)), template_(std::move(tmpl)), bos_(std::move(bos)), eos_(std::move(eos)),
        fallback_(fallback) {}

  std::string source_;
  jinja::Template template_;
  std::string bos_;
  std::string eos_;
  bool fallback_ = false;
};

}  // namespace tokamak
