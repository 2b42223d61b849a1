#include "tools/synthetic_vocab.h"

#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"

namespace tokamak {
namespace {

// SentencePiece token types (tokenizer.ggml.token_type).
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6;
constexpr const char* kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's word boundary

// The k-th string over a..z of the given length (k in [0, 26^length)).
std::string letters(int64_t k, int length) {
  std::string s(static_cast<size_t>(length), 'a');
  for (int i = length - 1; i >= 0; --i, k /= 26) s[static_cast<size_t>(i)] = static_cast<char>('a' + k % 26);
  return s;
}

}  // namespace

void set_synthetic_vocab(io::GgufWriter& w, int32_t n_vocab) {
  if (n_vocab < kMinSyntheticVocab) {
    throw Error("a synthetic vocabulary needs at least " + std::to_string(kMinSyntheticVocab) + " tokens, got " +
                std::to_string(n_vocab));
  }
  const auto n = static_cast<size_t>(n_vocab);
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {kUnknown, kControl, kControl};
  pieces.reserve(n);
  types.reserve(n);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    pieces.emplace_back(buf);
    types.push_back(kByte);
  }
  if (pieces.size() < n) {
    pieces.emplace_back(kSpace);  // a lone word boundary: spaces before digits and punctuation
    types.push_back(kNormal);
  }
  for (int length = 1; pieces.size() < n; ++length) {
    int64_t count = 1;
    for (int i = 0; i < length; ++i) count *= 26;
    for (int64_t k = 0; k < count && pieces.size() < n; ++k) {
      const std::string s = letters(k, length);
      pieces.push_back(kSpace + s);
      types.push_back(kNormal);
      if (pieces.size() < n) {
        pieces.push_back(s);
        types.push_back(kNormal);
      }
    }
  }
  std::vector<float> scores(n, 0.0f);
  for (size_t i = kMinSyntheticVocab; i < n; ++i) scores[i] = -static_cast<float>(i - kMinSyntheticVocab);

  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", std::move(pieces));
  w.set_f32_array("tokenizer.ggml.scores", std::move(scores));
  w.set_i32_array("tokenizer.ggml.token_type", std::move(types));
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
}

}  // namespace tokamak
