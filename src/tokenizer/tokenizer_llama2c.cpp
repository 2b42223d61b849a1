// A Tokenizer from a llama2.c tokenizer.bin (io::load_llama2c_tokenizer).
#include <cmath>
#include <string>
#include <utility>

#include "core/error.h"
#include "io/llama2c.h"
#include "tokenizer/tokenizer.h"

namespace tokamak {

Tokenizer Tokenizer::from_llama2c(const io::Llama2cVocab& source) {
  const size_t n = source.pieces.size();
  if (n == 0 || n > static_cast<size_t>(INT32_MAX) || source.scores.size() != n) {
    throw Error("llama2.c tokenizer: " + std::to_string(n) + " pieces and " + std::to_string(source.scores.size()) +
                " scores");
  }
  Vocab vocab;
  vocab.pieces = source.pieces;
  vocab.scores = source.scores;
  vocab.types.assign(n, TokenType::Normal);
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(vocab.scores[i])) throw Error("llama2.c tokenizer: token " + std::to_string(i) + " has a NaN score");
    if (parse_byte_piece(vocab.pieces[i]) >= 0) vocab.types[i] = TokenType::Byte;
  }
  const auto n_vocab = static_cast<int32_t>(n);
  // run.c hard-codes <unk> = 0, <s> = 1, </s> = 2 (pieces "<unk>", "\n<s>\n", "\n</s>\n").
  vocab.unk = 0;
  vocab.bos = n_vocab > 1 ? 1 : -1;
  vocab.eos = n_vocab > 2 ? 2 : -1;
  vocab.types[0] = TokenType::Unknown;
  if (vocab.bos >= 0) vocab.types[1] = TokenType::Control;
  if (vocab.eos >= 0) vocab.types[2] = TokenType::Control;
  Tokenizer tokenizer(Kind::Llama2c, std::move(vocab));
  // run.c's byte fallback is the byte + 3, whatever the pieces there say.
  for (int b = 0; b < 256; ++b) {
    if (b + 3 < n_vocab) tokenizer.vocab_.byte_token[b] = b + 3;
  }
  tokenizer.find_end_tokens();
  return tokenizer;
}

}  // namespace tokamak
