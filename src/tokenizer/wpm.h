// WordPiece (BERT) as llama.cpp runs GGUF "bert" vocabularies: the converter
// stores word-initial pieces with a U+2581 prefix and continuation pieces
// without "##", so a word is matched greedily, longest piece first, as
// "▁" + word.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace tokamak::wpm {

// BERT's BasicTokenizer switches (uncased BERT: both on).
struct Normalizer {
  bool lowercase = true;
  bool strip_accents = true;  // NFD, then drop combining marks (M*)
};

// The words of `text`: split at White_Space, each punctuation character, ASCII
// symbol and CJK ideograph a word of its own; control characters, U+0000 and
// U+FFFD (invalid UTF-8) dropped.
std::vector<std::string> split_words(std::string_view text, const Normalizer& normalizer);

// Appends the tokens of `text`. A word that cannot be spelled from the
// vocabulary becomes the unknown token. `max_piece_bytes`: the longest piece.
// Cost: O(n * max_piece_bytes) hash lookups.
void encode(const Vocab& vocab, std::string_view text, const Normalizer& normalizer, size_t max_piece_bytes,
            std::vector<int32_t>& out);

}  // namespace tokamak::wpm
