// A Tokenizer from a GGUF file's tokenizer.ggml.* keys. Every array length, id
// and type is checked here, so encode/decode can index the tables freely.
#include <algorithm>
#include <cctype>
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

// tokenizer.ggml.scores as floats: F32 in most files, I32 in a few.
void read_scores(const io::GgufFile& file, size_t n, std::vector<float>& scores) {
  const std::string& name = file.name();
  scores.assign(n, 0.0f);
  const io::GgufValue* v = file.find("tokenizer.ggml.scores");
  if (v == nullptr) return;
  const bool ok = v->type == io::GgufType::ARRAY &&
                  (v->elem_type == io::GgufType::F32 || v->elem_type == io::GgufType::I32);
  if (!ok) throw Error(name + ": tokenizer.ggml.scores is not an array of F32 or I32");
  if (v->array_size() != n) {
    throw Error(name + ": tokenizer.ggml.scores has " + std::to_string(v->array_size()) + " entries for " +
                std::to_string(n) + " tokens");
  }
  for (size_t i = 0; i < n; ++i) {
    scores[i] = v->elem_type == io::GgufType::F32 ? static_cast<float>(v->floats[i]) : static_cast<float>(v->ints[i]);
    if (std::isnan(scores[i])) throw Error(name + ": tokenizer.ggml.scores[" + std::to_string(i) + "] is NaN");
  }
}

// llama.cpp keeps per-token strip rules out of GGUF and sets them by model
// name; Phi-3's special tokens swallow the spaces after them.
void set_strip_rules(const io::GgufFile& file, const std::vector<int32_t>& specials, Vocab& vocab) {
  std::string model = file.get_string("general.name").value_or("");
  std::transform(model.begin(), model.end(), model.begin(), [](unsigned char c) { return std::tolower(c); });
  if (model.find("phi-3") == std::string::npos && model.find("phi3") == std::string::npos) return;
  vocab.strip.assign(vocab.pieces.size(), 0);
  for (const int32_t id : specials) vocab.strip[id] |= Vocab::kStripRight;
  if (const int32_t id = vocab.find("</s>"); id >= 0) vocab.strip[id] |= Vocab::kStripRight;
  for (const char* text : {"<unk>", "<s>", "<|endoftext|>"}) {
    if (const int32_t id = vocab.find(text); id >= 0) vocab.strip[id] = 0;
  }
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const io::GgufFile& file) {
  const std::string& name = file.name();
  const std::optional<std::string> model = file.get_string("tokenizer.ggml.model");
  if (!model) throw Error(name + ": no tokenizer.ggml.model key: the file has no vocabulary");
  Kind kind;
  if (*model == "llama") {
    kind = Kind::Spm;
  } else if (*model == "gpt2") {
    kind = Kind::Bpe;
  } else if (*model == "bert") {
    kind = Kind::Wpm;
  } else {
    throw Error(name + ": tokenizer.ggml.model '" + *model +
                "' is not supported (known: 'llama' SentencePiece, 'gpt2' byte-level BPE, 'bert' WordPiece)");
  }

  const io::GgufValue* tokens = file.get_array("tokenizer.ggml.tokens", io::GgufType::STRING);
  if (tokens == nullptr) throw Error(name + ": no tokenizer.ggml.tokens array");
  const size_t n = tokens->strings.size();
  if (n == 0 || n >= static_cast<size_t>(INT32_MAX) / 2) {
    throw Error(name + ": tokenizer.ggml.tokens has " + std::to_string(n) + " entries");
  }
  const auto n_vocab = static_cast<int32_t>(n);

  Vocab vocab;
  vocab.pieces = tokens->strings;
  read_scores(file, n, vocab.scores);
  vocab.types.assign(n, TokenType::Normal);
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

  // Defaults per kind, as llama.cpp assumes them when a key is absent.
  std::optional<PreTokenizer> pre;
  switch (kind) {
    case Kind::Spm:
      vocab.bos = special_id(file, "tokenizer.ggml.bos_token_id", 1, n_vocab);
      vocab.eos = special_id(file, "tokenizer.ggml.eos_token_id", 2, n_vocab);
      vocab.unk = special_id(file, "tokenizer.ggml.unknown_token_id", 0, n_vocab);
      vocab.add_bos = true;
      vocab.add_space_prefix = true;
      break;
    case Kind::Bpe: {
      const std::string pre_name = file.get_string("tokenizer.ggml.pre").value_or("default");
      try {
        pre = PreTokenizer::from_name(pre_name);
      } catch (const Error& e) {
        throw Error(name + ": tokenizer.ggml.pre: " + e.what());
      }
      vocab.bos = special_id(file, "tokenizer.ggml.bos_token_id", 11, n_vocab);
      vocab.eos = special_id(file, "tokenizer.ggml.eos_token_id", 11, n_vocab);
      vocab.unk = special_id(file, "tokenizer.ggml.unknown_token_id", -1, n_vocab);
      vocab.add_bos = pre->add_bos();
      vocab.add_space_prefix = false;
      break;
    }
    case Kind::Wpm:
      vocab.bos = special_id(file, "tokenizer.ggml.bos_token_id", 101, n_vocab);  // [CLS]
      vocab.eos = special_id(file, "tokenizer.ggml.eos_token_id", -1, n_vocab);
      vocab.unk = special_id(file, "tokenizer.ggml.unknown_token_id", 100, n_vocab);
      vocab.sep = special_id(file, "tokenizer.ggml.seperator_token_id", 102, n_vocab);  // (sic) llama.cpp's key
      vocab.add_bos = true;
      vocab.add_space_prefix = false;
      break;
    case Kind::Llama2c:
      break;
  }
  vocab.eot = special_id(file, "tokenizer.ggml.eot_token_id", -1, n_vocab);
  vocab.add_bos = file.get_bool("tokenizer.ggml.add_bos_token").value_or(vocab.add_bos);
  vocab.add_space_prefix = file.get_bool("tokenizer.ggml.add_space_prefix").value_or(vocab.add_space_prefix);

  Tokenizer tokenizer(kind, std::move(vocab));
  set_strip_rules(file, tokenizer.special_ids_, tokenizer.vocab_);
  if (kind == Kind::Bpe) {
    const io::GgufValue* merges = file.get_array("tokenizer.ggml.merges", io::GgufType::STRING);
    if (merges == nullptr) throw Error(name + ": tokenizer.ggml.model is 'gpt2' but there is no tokenizer.ggml.merges");
    tokenizer.pre_ = std::move(pre);
    tokenizer.merges_ = bpe::Merges::build(tokenizer.vocab_, merges->strings);
  }
  if (kind == Kind::Wpm) {
    // BERT's BasicTokenizer: uncased unless the file says; accents go with case.
    tokenizer.normalizer_.lowercase = file.get_bool("tokenizer.ggml.normalizer.lowercase").value_or(true);
    tokenizer.normalizer_.strip_accents =
        file.get_bool("tokenizer.ggml.normalizer.strip_accents").value_or(tokenizer.normalizer_.lowercase);
  }
  tokenizer.find_end_tokens();
  return tokenizer;
}

}  // namespace tokamak
