// bpe::Merges on its own: the rank scan used for short words and the heap
// used for long ones must make the same merges, word for word.
#include <gtest/gtest.h>

#include <random>

#include "common/test_data.h"
#include "io/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/test_cases.h"

namespace tokamak {
namespace {

using testing::test_data;

struct Loaded {
  Vocab vocab;
  bpe::Merges merges;
};

Loaded load(const std::string& name) {
  const io::GgufFile f = io::GgufFile::open(test_data("models/llama.cpp-vocab/ggml-vocab-" + name + ".gguf"));
  Loaded l;
  l.vocab.pieces = f.get_array("tokenizer.ggml.tokens", io::GgufType::STRING)->strings;
  l.vocab.scores.assign(l.vocab.pieces.size(), 0.0f);
  l.vocab.types.assign(l.vocab.pieces.size(), TokenType::Normal);
  l.vocab.build_index();
  l.merges = bpe::Merges::build(l.vocab, f.get_array("tokenizer.ggml.merges", io::GgufType::STRING)->strings);
  return l;
}

std::vector<std::string> sample_words(std::string_view pre) {
  std::string text;
  for (const auto& c : testing::llama_cpp_vocab_cases("models/llama.cpp-vocab/ggml-vocab-gpt-2.gguf")) text += c.text;
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const int len = 1 + static_cast<int>(rng() % 60);
    for (int k = 0; k < len; ++k) text += static_cast<char>("aeiouststhnr etaoin"[rng() % 19]);
  }
  text += std::string(100, ' ') + "x" + std::string(77, 'a') + " " + std::string(50, '\n');
  return testing::pre_tokenize(pre, text);
}

TEST(BpeMerges, ScanAndHeapAgree) {
  for (const auto& [name, pre] : {std::pair{"gpt-2", "gpt-2"}, std::pair{"deepseek-llm", "deepseek-llm"}}) {
    const Loaded l = load(name);
    EXPECT_GT(l.merges.size(), 40000u);
    int long_words = 0;
    for (const std::string& w : sample_words(pre)) {
      bpe::Merges::Scratch scan, heap;
      scan.short_word_bytes = size_t{1} << 30;
      heap.short_word_bytes = 0;
      std::vector<int32_t> a, b;
      l.merges.encode_word(l.vocab, w, false, scan, a);
      l.merges.encode_word(l.vocab, w, false, heap, b);
      ASSERT_EQ(a, b) << name << ": '" << w << "'";
      long_words += w.size() > 32 ? 1 : 0;
    }
    EXPECT_GT(long_words, 100) << name;
  }
}

// The cache returns what merging returns: one scratch, filled on the first
// pass and hit on the second, against a fresh scratch (an empty cache) per word.
TEST(BpeMerges, CachedWordsAreTheSame) {
  const Loaded l = load("gpt-2");
  const std::vector<std::string> words = sample_words("gpt-2");
  std::vector<int32_t> uncached, first, again;
  for (const std::string& w : words) {
    bpe::Merges::Scratch fresh;
    l.merges.encode_word(l.vocab, w, false, fresh, uncached);
  }
  bpe::Merges::Scratch scratch;
  for (const std::string& w : words) l.merges.encode_word(l.vocab, w, false, scratch, first);
  for (const std::string& w : words) l.merges.encode_word(l.vocab, w, false, scratch, again);
  EXPECT_EQ(first, uncached);
  EXPECT_EQ(again, uncached);
}

}  // namespace
}  // namespace tokamak
