#include "tokenizer/chat_template.h"

#include <ctime>

namespace tokamak {

namespace {

// Hugging Face's default ChatML template; llama-server renders the same text.
constexpr std::string_view kChatML =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

}  // namespace

ChatTemplate ChatTemplate::from_source(std::optional<std::string_view> source, std::string bos_token,
                                       std::string eos_token) {
  if (!source || source->empty()) return chatml(std::move(bos_token), std::move(eos_token));
  std::string text(*source);
  jinja::Template t = jinja::Template::parse(text);
  return ChatTemplate(std::move(text), std::move(t), std::move(bos_token), std::move(eos_token), false);
}

ChatTemplate ChatTemplate::chatml(std::string bos_token, std::string eos_token) {
  std::string text(kChatML);
  jinja::Template t = jinja::Template::parse(text);
  return ChatTemplate(std::move(text), std::move(t), std::move(bos_token), std::move(eos_token), true);
}

std::string ChatTemplate::render(const ChatTemplateInputs& inputs, const jinja::RenderLimits& limits) const {
  jinja::Variables vars;
  if (inputs.extra.is_object()) {
    for (auto it = inputs.extra.begin(); it != inputs.extra.end(); ++it) {
      vars.emplace_back(it.key(), jinja::from_json(it.value()));
    }
  }
  vars.emplace_back("messages", jinja::from_json(inputs.messages));
  vars.emplace_back("bos_token", jinja::Value(bos_));
  vars.emplace_back("eos_token", jinja::Value(eos_));
  vars.emplace_back("add_generation_prompt", jinja::Value(inputs.add_generation_prompt));
  if (inputs.tools) vars.emplace_back("tools", jinja::from_json(*inputs.tools));
  jinja::RenderOptions options;
  options.limits = limits;
  options.now_unix_seconds = inputs.now_unix_seconds ? *inputs.now_unix_seconds
                                                     : static_cast<int64_t>(std::time(nullptr));
  return template_.render(vars, options);
}

}  // namespace tokamak
