#include <filesystem>
#include <optional>

#include "api/model_impl.h"
#include "io/gguf.h"
#include "io/llama2c.h"
#include "tokamak/tokamak.hpp"

namespace tokamak::api {
namespace {

Tokenizer tokenizer_for(const tokamak::Model& model, const std::filesystem::path& path,
                        const std::string& tokenizer_path) {
  if (model.format() == ModelFormat::Gguf) {
    if (!tokenizer_path.empty()) {
      throw Error("tokenizer_path '" + tokenizer_path + "' is for llama2.c checkpoints; " + path.string() +
                  " is a GGUF file with its own vocabulary");
    }
    Tokenizer tokenizer = Tokenizer::from_gguf(*model.gguf());
    if (tokenizer.n_vocab() != model.config().n_vocab) {
      throw Error(path.string() + ": the tokenizer has " + std::to_string(tokenizer.n_vocab()) +
                  " tokens but the model " + std::to_string(model.config().n_vocab));
    }
    return tokenizer;
  }
  const std::filesystem::path vocab =
      tokenizer_path.empty() ? path.parent_path() / "tokenizer.bin" : std::filesystem::path(tokenizer_path);
  if (!std::filesystem::exists(vocab)) {
    throw Error(path.string() + " is a llama2.c checkpoint and its tokenizer " + vocab.string() +
                " does not exist (pass tokenizer_path)");
  }
  return Tokenizer::from_llama2c(io::load_llama2c_tokenizer(vocab, model.config().n_vocab));
}

ChatTemplate chat_template_for(const tokamak::Model& model, const Tokenizer& tokenizer) {
  std::optional<std::string> source;
  if (model.format() == ModelFormat::Gguf) source = model.gguf()->get_string("tokenizer.chat_template");
  const auto text_of = [&](int32_t id) { return id >= 0 ? tokenizer.token_text(id) : std::string(); };
  return ChatTemplate::from_source(source, text_of(tokenizer.bos()), text_of(tokenizer.eos()));
}

}  // namespace

const char* version() { return TOKAMAK_VERSION; }

Error::~Error() = default;

Model Model::load(const std::string& path, const std::string& tokenizer_path) {
  return translate_errors([&] {
    if (path.empty()) throw Error("model path is empty");
    if (!std::filesystem::exists(path)) throw Error("model file " + path + " does not exist");
    tokamak::Model model = tokamak::Model::load(path);
    Tokenizer tokenizer = tokenizer_for(model, path, tokenizer_path);
    ChatTemplate chat_template = chat_template_for(model, tokenizer);
    return Model(std::make_shared<const Impl>(Impl{std::move(model), std::move(tokenizer), std::move(chat_template)}));
  });
}

Model::Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

int32_t Model::n_vocab() const { return impl_->model.config().n_vocab; }
int32_t Model::n_ctx_train() const { return impl_->model.config().n_ctx_train; }
int32_t Model::bos() const { return impl_->tokenizer.bos(); }
int32_t Model::eos() const { return impl_->tokenizer.eos(); }
bool Model::add_bos() const { return impl_->tokenizer.add_bos(); }

std::vector<int32_t> Model::encode(std::string_view text, bool add_bos, bool parse_special) const {
  return translate_errors([&] { return impl_->tokenizer.encode(text, add_bos, parse_special); });
}

std::string Model::decode(std::span<const int32_t> ids, int32_t prev) const {
  return translate_errors([&] { return impl_->tokenizer.decode(ids, prev); });
}

std::string Model::apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  return translate_errors([&] {
    ChatTemplateInputs inputs;
    for (const ChatMessage& m : messages) inputs.messages.push_back({{"role", m.role}, {"content", m.content}});
    inputs.add_generation_prompt = add_generation_prompt;
    return impl_->chat_template.render(inputs);
  });
}

}  // namespace tokamak::api
