// tokamak's public C++ API: a model file loaded with its tokenizer and chat
// template. Nothing here exposes the engine's internals: a Model is a handle
// to a shared, immutable implementation (the weights stay memory-mapped).
//
//   tokamak::api::Model model = tokamak::api::Model::load("stories260K.gguf");
//   std::vector<int32_t> ids = model.encode("Once upon a time");
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

// The library's exported names keep default visibility in programs built
// with -fvisibility=hidden (a Python extension, for one).
#define TOKAMAK_API __attribute__((visibility("default")))

namespace tokamak::api {

// Every failure of the API: a message that names what was wrong and the value
// (the file, the field, the parameter).
class TOKAMAK_API Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  ~Error() override;  // out of line: one type identity, the library's, in every program
};

// One turn of a conversation, as the OpenAI API writes it.
struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

class TOKAMAK_API Model {
 public:
  // Loads a GGUF file (its own vocabulary and chat template) or a llama2.c
  // checkpoint (tokenizer_path; empty: tokenizer.bin beside it). Throws Error naming the file. Thread safe.
  static Model load(const std::string& path, const std::string& tokenizer_path = {});

  // Copies share the loaded model (cheap); a Model lives as long as any copy or Engine uses it.
  Model(const Model&) = default;
  Model& operator=(const Model&) = default;
  ~Model();

  // Every const method below is safe to call from many threads at once.
  int32_t n_vocab() const;
  int32_t n_ctx_train() const;                   // the context length the model was trained with
  int32_t bos() const;                           // -1 when the vocabulary has none
  int32_t eos() const;
  bool add_bos() const;                          // whether prompts start with BOS
  // Token ids of text (BOS first when add_bos); parse_special matches control-token texts such as "</s>".
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = false) const;
  // The text of ids (prev: the token before them, -1 for none). Throws Error for an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids, int32_t prev = -1) const;
  // The prompt text of a conversation through the model's chat template (ChatML when the file has none).
  // Throws Error when the template fails (its message and line).
  std::string apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;

  struct Impl;  // the loaded model; opaque outside the library

 private:
  explicit Model(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
  friend class Engine;
};

}  // namespace tokamak::api
