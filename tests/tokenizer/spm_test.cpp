// SentencePiece BPE from GGUF vocabularies, against llama.cpp's own tokenizer
// test vectors (test-tokenizer-0: add_special = false, parse_special = false),
// llama2.c's test.c, llama-tokenizer-js and the stories260K story.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "common/test_data.h"
#include "io/gguf.h"
#include "tokenizer/test_cases.h"
#include "tokenizer/tokenizer.h"

namespace tokamak {
namespace {

using testing::error_of;
using testing::llama_spm;
using testing::test_data;

// llama.cpp's models/ggml-vocab-llama-spm.gguf.inp/.out: every case, no BOS.
TEST(SpmEncode, MatchesLlamaCppVocabTestsForLlamaSpm) {
  const Tokenizer& tok = llama_spm();
  const auto cases = testing::llama_cpp_vocab_cases("models/llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_EQ(cases.size(), 46u);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(tok.encode(cases[i].text, false), cases[i].ids) << "case " << i << ": '" << cases[i].text << "'";
  }
}

TEST(SpmEncode, MatchesLlama2cTestCasesWithGgufVocab) {
  const auto cases = testing::llama2c_encode_cases();
  ASSERT_EQ(cases.size(), 5u);
  for (const auto& c : cases) EXPECT_EQ(llama_spm().encode(c.text, c.bos), c.ids) << c.text;
}

TEST(SpmEncode, MatchesLlamaTokenizerJsCasesWithGgufVocab) {
  const auto cases = testing::llama_tokenizer_js_cases();
  ASSERT_EQ(cases.size(), 12u);
  for (const auto& c : cases) EXPECT_EQ(llama_spm().encode(c.text, c.bos), c.ids) << c.text;
}

TEST(SpmEncode, Stories260KGgufStory) {
  const Tokenizer tok = Tokenizer::from_gguf(io::GgufFile::open(test_data("models/stories260K/stories260K.gguf")));
  const std::vector<int32_t> expected = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};
  EXPECT_EQ(tok.encode("Once upon a time, there was a little girl named Lily.", true), expected);
  EXPECT_EQ(tok.n_vocab(), 512);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_TRUE(tok.add_bos());  // no add_bos_token key: SPM's default
}

// A full model file (not vocabulary-only) with the same Llama 2 vocabulary.
TEST(SpmEncode, TinyRandomModelFileMatchesLlamaTokenizerJsCases) {
  const Tokenizer tok =
      Tokenizer::from_gguf(io::GgufFile::open(test_data("models/llama-2-tiny-random/llama-2-tiny-random.gguf")));
  for (const auto& c : testing::llama_tokenizer_js_cases()) EXPECT_EQ(tok.encode(c.text, c.bos), c.ids) << c.text;
}

TEST(SpmVocab, SpecialIdsAndTypesFromGguf) {
  const Tokenizer& tok = llama_spm();
  EXPECT_EQ(tok.n_vocab(), 32000);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_EQ(tok.unk(), 0);
  EXPECT_EQ(tok.eot(), -1);
  EXPECT_EQ(tok.token_type(0), TokenType::Unknown);
  EXPECT_EQ(tok.token_type(1), TokenType::Control);
  EXPECT_EQ(tok.token_type(13), TokenType::Byte);
  EXPECT_EQ(tok.token_text(13), "<0x0A>");
  EXPECT_EQ(tok.token_text(29871), "\xE2\x96\x81");
  EXPECT_TRUE(tok.is_end_of_generation(2));
  EXPECT_FALSE(tok.is_end_of_generation(1));
  EXPECT_FALSE(tok.is_end_of_generation(-1));
}

TEST(SpmVocab, LoadsIn100Milliseconds) {
  const io::GgufFile gguf = io::GgufFile::open(test_data("models/llama.cpp-vocab/ggml-vocab-llama-spm.gguf"));
  const auto t0 = std::chrono::steady_clock::now();
  const Tokenizer tok = Tokenizer::from_gguf(gguf);
  const auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(tok.n_vocab(), 32000);
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_LT(ms, 100.0);
#endif
}

// Special tokens: plain text by default (llama.cpp parse_special = false),
// whole tokens when asked; the dummy prefix follows each special token.
TEST(SpmSpecial, ControlTokensMatchOnlyWithParseSpecial) {
  const Tokenizer& tok = llama_spm();
  const std::vector<int32_t> plain = tok.encode("Hi</s>", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
  const std::vector<int32_t> hello = tok.encode("Hi", false);
  const std::vector<int32_t> there = tok.encode("there", false);
  std::vector<int32_t> expected = hello;
  expected.push_back(2);
  expected.insert(expected.end(), there.begin(), there.end());
  EXPECT_EQ(tok.encode("Hi</s>there", false, true), expected);
  EXPECT_EQ(tok.encode("<s></s>", true, true), (std::vector<int32_t>{1, 1, 2}));
}

// Characters missing from the vocabulary become their bytes' <0xNN> tokens.
TEST(SpmEncode, UnknownCharacterFallsBackToBytes) {
  const Tokenizer& tok = llama_spm();
  EXPECT_EQ(tok.encode("\xF0\x9F\xA6\x99", false), (std::vector<int32_t>{29871, 243, 162, 169, 156}));  // 🦙
  // Invalid UTF-8: a lone lead byte and a lone continuation byte still round-trip as bytes.
  const std::string bad = "a\xC3" "b\x80";
  EXPECT_EQ(tok.decode(tok.encode(bad, false)), bad);
}

// A quadratic merge loop would take minutes on this; the heap takes well under a second.
TEST(SpmEncode, LongTextEncodesInNLogNTime) {
  const Tokenizer& tok = llama_spm();
  std::string text;
  while (text.size() < (1u << 20)) text += "The llama (/ˈlɑːmə/) is a domesticated South American camelid. ";
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok.encode(text, false);
  const auto s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(ids.size(), 100000u);
  EXPECT_EQ(tok.decode(ids), text);
  EXPECT_LT(s, 30.0);
}

}  // namespace
}  // namespace tokamak
