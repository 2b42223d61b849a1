// SentencePiece-style BPE: cut a text into starting symbols, then repeatedly
// merge the adjacent pair whose concatenation is the token with the highest
// score (ties: the leftmost pair), until no pair is a token.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace tokamak::spm {

enum class Rules {
  // llama.cpp's llm_tokenizer_spm: one symbol per UTF-8 character (its length
  // from the lead byte alone), any score merges, a final symbol that is not a
  // token becomes its bytes' fallback tokens.
  LlamaCpp,
  // llama2.c run.c: one symbol per lead byte plus up to 3 continuation bytes;
  // a character not in the vocabulary becomes byte tokens (whose "<0xNN>"
  // pieces take part in later merges); only scores above -1e10 merge.
  Llama2c,
};

// Appends the tokens of `text`, which the caller has already prefixed and
// escaped. Cost: O(n log n) for n bytes (a heap of candidate pairs; each merge
// adds at most two). Throws Error when a byte has no token and there is no
// unknown token to stand in for it.
void encode(const Vocab& vocab, std::string_view text, Rules rules, std::vector<int32_t>& out);

}  // namespace tokamak::spm
