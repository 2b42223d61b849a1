// Text <-> token ids. One class for every vocabulary kind; the kind decides how
// text is cut and merged:
//   Spm     GGUF `tokenizer.ggml.model` = "llama": SentencePiece BPE exactly as
//           llama.cpp tokenizes it (spaces -> U+2581, dummy prefix, merges by
//           score, byte fallback).
//   Llama2c llama2.c tokenizer.bin: run.c's encode (plain-space pieces, merges
//           on pieces, byte fallback = byte + 3).
// Byte-level BPE (GPT-2 style, "gpt2") is a later kind beside these two.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace tokamak {

namespace io {
class GgufFile;
struct Llama2cVocab;
}  // namespace io

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* (tokens, scores, token_type, special ids,
  // add_bos_token, add_space_prefix); works on vocabulary-only files. Throws
  // tokamak::Error naming the file and key for an unsupported model or a
  // malformed table.
  static Tokenizer from_gguf(const io::GgufFile& file);
  // <unk> = 0, <s> = 1, </s> = 2 as run.c assumes; "<0xNN>" pieces are bytes.
  static Tokenizer from_llama2c(const io::Llama2cVocab& vocab);

  // Move-only: the tables are large; share one Tokenizer by reference.
  Tokenizer(Tokenizer&&) noexcept = default;
  Tokenizer& operator=(Tokenizer&&) noexcept = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids of `text`, BOS first when `add_bos`. With `parse_special`,
  // control-token texts in `text` (e.g. "</s>") become those tokens, as in
  // llama_tokenize(..., parse_special); user-defined tokens are always matched.
  // Cost: O(n log n) in the text's length.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = false) const;

  // The bytes `token` adds to the output text after `prev_token` (-1: nothing
  // before it). U+2581 becomes a space, a byte token its raw byte, control and
  // unused tokens nothing. With add_space_prefix, the leading space of the
  // first token of a text (prev_token is BOS or -1) is dropped, undoing the
  // dummy prefix. A byte token may return part of a UTF-8 character: stream
  // through TextStream to get whole characters. Throws Error for an id out of range.
  std::string decode_piece(int32_t prev_token, int32_t token) const;
  // All pieces of `tokens` joined, the first one decoded after `prev_token`.
  std::string decode(std::span<const int32_t> tokens, int32_t prev_token = -1) const;

  int32_t n_vocab() const { return vocab_.n_vocab(); }
  int32_t bos() const { return vocab_.bos; }  // -1 when the vocabulary has none
  int32_t eos() const { return vocab_.eos; }
  int32_t unk() const { return vocab_.unk; }
  int32_t eot() const { return vocab_.eot; }
  bool add_bos() const { return vocab_.add_bos; }  // whether the model expects BOS before a prompt
  bool is_end_of_generation(int32_t token) const;

  // The stored piece, its score and type (for `tokamak tokenize` and tests).
  // Throw Error for an id out of range.
  const std::string& token_text(int32_t token) const;
  float token_score(int32_t token) const;
  TokenType token_type(int32_t token) const;

 private:
  enum class Kind { Spm, Llama2c };

  Tokenizer(Kind kind, Vocab vocab);
  void check_id(int32_t token) const;
  // Appends the tokens of one run of plain text (no special tokens in it).
  void encode_text(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const;

  Kind kind_;
  Vocab vocab_;
  // Ids matched whole in the input before BPE (control, unknown, user-defined),
  // longest text first so that a longer token wins over its prefix.
  std::vector<int32_t> special_ids_;
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
