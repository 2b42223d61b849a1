// Text <-> token ids. One class for every vocabulary kind; the kind decides how
// text is cut and merged:
//   Spm     GGUF `tokenizer.ggml.model` = "llama": SentencePiece BPE exactly as
//           llama.cpp tokenizes it (spaces -> U+2581, dummy prefix, merges by
//           score, byte fallback). Llama 2, Phi-3, Baichuan, Mistral 7B...
//   Llama2c llama2.c tokenizer.bin: run.c's encode (plain-space pieces, merges
//           on pieces, byte fallback = byte + 3).
//   Bpe     GGUF "gpt2", or vocab.json + merges files: byte-level BPE (GPT-2,
//           Llama 3, Qwen2, StarCoder, Falcon, DeepSeek...): a pre-tokenizer
//           chosen by `tokenizer.ggml.pre` cuts words, merges apply by rank.
//   Wpm     GGUF "bert": WordPiece (BERT, BGE embeddings).
// Special tokens are cut out of the text first: user-defined ones always,
// control ones only when the caller asks (parse_special), as llama.cpp does.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab.h"
#include "tokenizer/wpm.h"

namespace tokamak {

namespace io {
class GgufFile;
struct Llama2cVocab;
}  // namespace io

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* (model "llama" | "gpt2" | "bert", pre, tokens,
  // scores, token_type, merges, special ids, add_bos_token,
  // add_space_prefix); works on vocabulary-only files. Throws tokamak::Error
  // naming the file and key for an unsupported model or pre-tokenizer or a
  // malformed table.
  static Tokenizer from_gguf(const io::GgufFile& file);
  // <unk> = 0, <s> = 1, </s> = 2 as run.c assumes; "<0xNN>" pieces are bytes.
  static Tokenizer from_llama2c(const io::Llama2cVocab& vocab);

  // Byte-level BPE from the pair of files GPT-2 and its ports ship: a JSON
  // object {"piece": id} (vocab.json, encoder.json) and merges, one
  // "left right" per line by rank (merges.txt, vocab.bpe; a "#version" first
  // line is skipped). `special_tokens` are appended after the highest id as
  // control tokens, in order. BOS/EOS are found by text (<|begin_of_text|>,
  // <|end_of_text|>, <|endoftext|>, <s>, </s>). `pre` names the pre-tokenizer
  // as tokenizer.ggml.pre does. Errors name the file and the entry.
  static Tokenizer from_bpe_files(const std::filesystem::path& vocab_json, const std::filesystem::path& merges,
                                  std::string_view pre, const std::vector<std::string>& special_tokens = {});
  // Llama 3.1 / 3.2's 256 special tokens, ids 128000.. in order:
  // <|begin_of_text|>, <|end_of_text|>, <|reserved_special_token_0|>, ...
  static std::vector<std::string> llama3_special_tokens();

  // Move-only: the tables are large; share one Tokenizer by reference.
  Tokenizer(Tokenizer&&) noexcept = default;
  Tokenizer& operator=(Tokenizer&&) noexcept = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids of `text`, BOS first when `add_bos` (WordPiece: [CLS] first
  // and [SEP] last, BERT's pair). With `parse_special`,
  // control-token texts in `text` (e.g. "</s>") become those tokens, as in
  // llama_tokenize(..., parse_special); user-defined tokens are always matched.
  // Cost: O(n log n) in the text's length (plus one scan of the text per
  // special token that can match).
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = false) const;

  // The bytes `token` adds to the output text after `prev_token` (-1: nothing
  // before it). SPM: U+2581 becomes a space, a byte token its raw byte;
  // byte-level BPE: each character becomes the byte it stands for; control
  // and unused tokens give nothing unless `render_special` (then their text).
  // With add_space_prefix, the leading space of the first token of a text
  // (prev_token is BOS or -1) is dropped, undoing the dummy prefix. A piece
  // may end inside a UTF-8 character: stream through TextStream to get whole
  // characters. Throws Error for an id out of range.
  std::string decode_piece(int32_t prev_token, int32_t token, bool render_special = false) const;
  // All pieces of `tokens` joined, the first one decoded after `prev_token`.
  std::string decode(std::span<const int32_t> tokens, int32_t prev_token = -1, bool render_special = false) const;

  int32_t n_vocab() const { return vocab_.n_vocab(); }
  int32_t bos() const { return vocab_.bos; }  // -1 when the vocabulary has none
  int32_t eos() const { return vocab_.eos; }
  int32_t unk() const { return vocab_.unk; }
  int32_t eot() const { return vocab_.eot; }
  int32_t sep() const { return vocab_.sep; }
  bool add_bos() const { return vocab_.add_bos; }  // whether the model expects BOS before a prompt
  // EOS, EOT and the other tokens that end a reply (<|eot_id|>, <|im_end|>, <|end|>...).
  bool is_end_of_generation(int32_t token) const;
  // The piece id of `text` when it is a token, else -1.
  int32_t find_token(std::string_view text) const { return vocab_.find(text); }

  enum class Kind { Spm, Llama2c, Bpe, Wpm };
  Kind kind() const { return kind_; }
  // The pre-tokenizer's name for Bpe ("llama3", "gpt-2", ...), else "".
  std::string_view pre_tokenizer() const { return pre_ ? std::string_view(pre_->name()) : std::string_view(); }

  // The stored piece, its score and type (for `tokamak tokenize` and tests).
  // Throw Error for an id out of range.
  const std::string& token_text(int32_t token) const;
  float token_score(int32_t token) const;
  TokenType token_type(int32_t token) const;

 private:
  struct Fragment;
  struct EncodeState;

  Tokenizer(Kind kind, Vocab vocab);
  void check_id(int32_t token) const;
  // Cuts `text` at the special tokens that may match; see encode().
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  // Appends the tokens of one run of plain text (no special tokens in it).
  void encode_text(std::string_view text, bool space_prefix, EncodeState& state, std::vector<int32_t>& out) const;
  void encode_bpe(std::string_view text, EncodeState& state, std::vector<int32_t>& out) const;
  // Finishes a vocabulary: end-of-generation ids, EOT by text.
  void find_end_tokens();

  Kind kind_;
  Vocab vocab_;
  // Ids matched whole in the input before BPE (control, unknown, user-defined),
  // longest text first so that a longer token wins over its prefix.
  std::vector<int32_t> special_ids_;
  // Bpe only.
  std::optional<PreTokenizer> pre_;
  bpe::Merges merges_;
  // Wpm only.
  wpm::Normalizer normalizer_;
  size_t max_piece_bytes_ = 0;
};

// Incremental detokenizer for streaming: push() returns the text that is
// complete so far and never ends inside a UTF-8 character, even when byte
// tokens spell one character over several tokens. Bytes that can never form a
// valid character are passed through as they are. Keeps a pointer to the
// tokenizer, which must outlive it.
class TextStream {
 public:
  // `prev_token`: the token before the first pushed one (the prompt's last, or BOS; -1: none).
  explicit TextStream(const Tokenizer& tokenizer, int32_t prev_token = -1);

  std::string push(int32_t token);  // throws Error for an id out of range
  std::string flush();              // whatever is held back, complete or not

 private:
  const Tokenizer* tokenizer_;
  int32_t prev_;
  std::string pending_;  // decoded bytes not yet returned: an unfinished UTF-8 tail
};

}  // namespace tokamak
