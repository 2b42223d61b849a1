// A Tokenizer from a GGUF file's tokenizer.ggml.* keys. Every array length, id
// and type is checked here, so encode/decode can index the tables freely.
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "core/error.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace tokamak {

namespace {

// The special id under `key`, or `fallback` when absent. Like llama.cpp, an id
// outside the vocabulary (0xFFFFFFFF is common for "none") keeps the fallback.
int32_t special_id(const io::GgufFile& file, const char* key, int32_t fallback, int32_t n_vocab) {
  const std::optional<int64_t> v = file.get_int(key);
  const int64_t id = v.has_value() && *v >= 0 && *v < n_vocab ? *v : fallback;
  return id >= 0 && id < n_vocab ? static_cast<int32_t>(id) : -1;
}

TokenType token_type_from_gguf(const std::string& file, int64_t value, size_t index) {
  // 0 (undefined) appears in some converted files; llama.cpp encodes such tokens as normal ones.
  if (value == 0) return TokenType::Normal;
  if (value < 1 || value > 6) {
    throw Error(file + ": tokenizer.ggml.token_type[" + std::to_string(index) + "] = " + std::to_string(value) +
                " is not a token type (1..6)");
  }
  return static_cast<TokenType>(value);
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const io::GgufFile& file) {
  const std::string& name = file.name();
  const std::optional<std::string> model = file.get_string("tokenizer.ggml.model");
  if (!model) throw Error(name + ": no tokenizer.ggml.model key: the file has no vocabulary");
  if (*model != "llama") {
    throw Error(name + ": tokenizer.ggml.model '" + *model +
                "' is not supported (only the SentencePiece vocabulary 'llama' is, so far)");
  }

  const io::GgufValue* tokens = file.get_array("tokenizer.ggml.tokens", io::GgufType::STRING);
  if (tokens == nullptr) throw Error(name + ": no tokenizer.ggml.tokens array");
  const size_t n = tokens->strings.size();
  if (n == 0 || n > static_cast<size_t>(INT32_MAX)) {
    throw Error(name + ": tokenizer.ggml.tokens has " + std::to_string(n) + " entries");
  }
  const auto n_vocab = static_cast<int32_t>(n);

  Vocab vocab;
  vocab.pieces = tokens->strings;
  vocab.scores.assign(n, 0.0f);
  vocab.types.assign(n, TokenType::Normal);
  if (const io::GgufValue* scores = file.get_array("tokenizer.ggml.scores", io::GgufType::F32)) {
    if (scores->floats.size() != n) {
      throw Error(name + ": tokenizer.ggml.scores has " + std::to_string(scores->floats.size()) + " entries for " +
                  std::to_string(n) + " tokens");
    }
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(scores->floats[i])) throw Error(name + ": tokenizer.ggml.scores[" + std::to_string(i) + "] is NaN");
      vocab.scores[i] = static_cast<float>(scores->floats[i]);
    }
  }
  if (const io::GgufValue* types = file.get_array("tokenizer.ggml.token_type", io::GgufType::I32)) {
    if (types->ints.size() != n) {
      throw Error(name + ": tokenizer.ggml.token_type has " + std::to_string(types->ints.size()) +
                  " entries for " + std::to_string(n) + " tokens");
    }
    for (size_t i = 0; i < n; ++i) vocab.types[i] = token_type_from_gguf(name, types->ints[i], i);
  }
  for (size_t i = 0; i < n; ++i) {
    if (vocab.types[i] == TokenType::Byte && parse_byte_piece(vocab.pieces[i]) < 0) {
      throw Error(name + ": byte token " + std::to_string(i) + " has the piece '" + vocab.pieces[i] +
                  "', not <0xNN>");
    }
  }

  // SentencePiece's defaults, as llama.cpp uses for "llama" vocabularies.
  vocab.bos = special_id(file, "tokenizer.ggml.bos_token_id", 1, n_vocab);
  vocab.eos = special_id(file, "tokenizer.ggml.eos_token_id", 2, n_vocab);
  vocab.unk = special_id(file, "tokenizer.ggml.unknown_token_id", 0, n_vocab);
  vocab.eot = special_id(file, "tokenizer.ggml.eot_token_id", -1, n_vocab);
  vocab.add_bos = file.get_bool("tokenizer.ggml.add_bos_token").value_or(true);
  vocab.add_space_prefix = file.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  return Tokenizer(Kind::Spm, std::move(vocab));
}

}  // namespace tokamak
