// The token table every tokenizer kind shares: pieces, scores, types, the
// piece -> id index and the special ids. Built once at load; read-only after.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tokamak {

// GGUF `tokenizer.ggml.token_type` values (SentencePiece piece types).
enum class TokenType : uint8_t {
  Normal = 1,
  Unknown = 2,
  Control = 3,       // <s>, </s>: never text; matched in input only with parse_special
  UserDefined = 4,   // always matched whole in the input before BPE
  Unused = 5,
  Byte = 6,          // "<0xNN>": one raw byte
};

struct Vocab {
  std::vector<std::string> pieces;  // [n_vocab] as stored (SPM: U+2581 for a space)
  std::vector<float> scores;        // [n_vocab] merge priority, higher merges first
  std::vector<TokenType> types;     // [n_vocab]
  std::array<int32_t, 256> byte_token{};  // byte -> its fallback token, -1 if none

  // Special tokens matched in the input may swallow the spaces beside them
  // (Phi-3's chat tokens strip the spaces that follow them).
  enum Strip : uint8_t { kStripLeft = 1, kStripRight = 2 };
  std::vector<uint8_t> strip;  // [n_vocab] Strip bits, or empty when no token strips

  int32_t bos = -1, eos = -1, unk = -1, eot = -1;  // -1: the vocabulary has none
  int32_t sep = -1;              // WordPiece: [SEP], appended after a prompt's tokens
  bool add_bos = true;           // the model expects BOS before a prompt
  bool add_space_prefix = true;  // SPM's dummy prefix: encode "Hi" as "▁Hi"
  std::vector<int32_t> eog;      // tokens that end generation (eos, eot, <|im_end|>, ...), sorted

  int32_t n_vocab() const { return static_cast<int32_t>(pieces.size()); }
  bool valid(int32_t id) const { return id >= 0 && id < n_vocab(); }
  // The id whose piece is `piece`; the last such id on duplicates (as llama.cpp
  // indexes). -1 when absent. Empty pieces are never found.
  int32_t find(std::string_view piece) const;
  // Fills the index and byte_token (from "<0xNN>" pieces, else the one-byte
  // piece, else unk). Call after pieces are final.
  void build_index();

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> index_;
};

// "<0x0A>" -> 10; -1 if `piece` is not exactly "<0xNN>" with hex digits.
int parse_byte_piece(std::string_view piece);

}  // namespace tokamak
