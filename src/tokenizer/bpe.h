// Byte-level BPE merges (GPT-2 style): a word's bytes become their byte-level
// characters (see unicode::kByteToChar), then the adjacent pair with the
// lowest merge rank is merged, leftmost first among equal ranks, until no
// pair has a rank.
//
// Symbols are token ids. A text that merges name but the vocabulary lacks
// gets an id past the vocabulary, so the merge table is keyed by a pair of
// ints, never by strings.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace tokamak::bpe {

class Merges {
 public:
  // `merges[rank]` is "left right" (split at the first space after the
  // first byte); an entry without such a space can never apply and is
  // skipped; for a repeated pair the lowest rank counts. `vocab` must have
  // its index built. Cost: O(merges) hash inserts.
  static Merges build(const Vocab& vocab, std::span<const std::string> merges);

  size_t size() const { return table_.size(); }

  // Reusable memory for encode_word(); one per thread.
  struct Scratch {
    struct Symbol {
      int32_t id;
      int32_t prev, next;
      uint32_t len;  // bytes of the word it covers; 0 once merged into its left neighbour
    };
    struct Candidate {
      int32_t rank;
      int32_t left, right;
      int32_t result;                // the merged symbol
      uint32_t left_len, right_len;  // stale when either side has grown or died since
    };
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
    std::string spelled;
  };

  // Appends the tokens of one pre-tokenized word (raw UTF-8 bytes). With
  // `ignore_merges`, a word whose byte-level spelling is a token is that token.
  // A symbol left over that is not a token becomes the tokens of its
  // single bytes, where such tokens exist (llama.cpp's fallback).
  // Cost: O(n log n) for an n-byte word.
  void encode_word(const Vocab& vocab, std::string_view word, bool ignore_merges, Scratch& scratch,
                   std::vector<int32_t>& out) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void emit(const Vocab& vocab, int32_t symbol, std::vector<int32_t>& out) const;

  std::unordered_map<uint64_t, Merge> table_;  // (left, right) -> rank and merged symbol
  std::array<int32_t, 256> byte_symbol_{};     // byte -> symbol of its byte-level character
  int32_t n_vocab_ = 0;
  std::vector<std::string> extra_text_;        // symbol n_vocab_ + i: a text that is not a token
};

}  // namespace tokamak::bpe
