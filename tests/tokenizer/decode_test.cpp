// Detokenizing: pieces, round trips through encode, streaming whole UTF-8
// characters out of byte tokens, and bad ids.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/test_data.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/llama2c.h"
#include "tokenizer/test_cases.h"
#include "tokenizer/tokenizer.h"

namespace tokamak {
namespace {

using testing::error_of;
using testing::llama_spm;
using testing::test_data;

std::vector<std::string> vocab_test_inputs() {
  std::vector<std::string> texts;
  for (auto& c : testing::llama_cpp_vocab_cases("models/llama.cpp-vocab/ggml-vocab-llama-spm.gguf")) {
    texts.push_back(std::move(c.text));
  }
  return texts;
}

TEST(Decode, PiecesTurnU2581IntoSpaceAndBytesIntoRawBytes) {
  const Tokenizer& tok = llama_spm();
  EXPECT_EQ(tok.decode_piece(306, 4658), " believe");  // "▁believe" after "▁I"
  EXPECT_EQ(tok.decode_piece(1, 306), "I");            // first piece after BOS loses the dummy space
  EXPECT_EQ(tok.decode_piece(-1, 306), "I");           // ... and at the start of a text
  EXPECT_EQ(tok.decode_piece(306, 13), "\n");          // <0x0A>
  EXPECT_EQ(tok.decode_piece(306, 3), std::string(1, '\0'));  // <0x00>
  EXPECT_EQ(tok.decode_piece(306, 1), "");             // control tokens print nothing
  EXPECT_EQ(tok.decode_piece(306, 2), "");
  EXPECT_EQ(tok.decode_piece(306, 0), "\xE2\x96\x85");  // <unk>: llama.cpp's U+2585
}

// decode(encode(x)) == x for every llama.cpp test input, with and without BOS.
TEST(Decode, RoundTripsLlamaCppVocabTestInputs) {
  const Tokenizer& tok = llama_spm();
  const std::vector<std::string> cases = vocab_test_inputs();
  ASSERT_EQ(cases.size(), 46u);
  for (const std::string& text : cases) {
    EXPECT_EQ(tok.decode(tok.encode(text, false)), text);
    EXPECT_EQ(tok.decode(tok.encode(text, true)), text);
  }
}

TEST(Decode, RoundTripsThroughLlama2cTokenizerBin) {
  const Tokenizer tok =
      Tokenizer::from_llama2c(io::load_llama2c_tokenizer(test_data("models/llama2-tokenizer/tokenizer.bin"), 32000));
  for (const std::string& text : vocab_test_inputs()) EXPECT_EQ(tok.decode(tok.encode(text, true)), text);
}

// 🦙 (F0 9F A6 99) is not in the vocabulary: four byte tokens, and the stream
// says nothing until the fourth one completes the character.
TEST(TextStream, HoldsByteFallbackUntilTheCharacterIsComplete) {
  const Tokenizer& tok = llama_spm();
  const std::vector<int32_t> ids = tok.encode("\xF0\x9F\xA6\x99\xEA\x99\x8A!", true);  // 🦙Ꙋ!
  ASSERT_EQ(ids, (std::vector<int32_t>{1, 29871, 243, 162, 169, 156, 237, 156, 141, 29991}));
  TextStream stream(tok);
  std::vector<std::string> out;
  for (const int32_t id : ids) out.push_back(stream.push(id));
  EXPECT_EQ(out, (std::vector<std::string>{"", "", "", "", "", "\xF0\x9F\xA6\x99", "", "", "\xEA\x99\x8A", "!"}));
  EXPECT_EQ(stream.flush(), "");
}

TEST(TextStream, ContinuesAfterThePromptsLastToken) {
  const Tokenizer& tok = llama_spm();
  TextStream stream(tok, 306);  // the prompt ended with "▁I": the next space is kept
  EXPECT_EQ(stream.push(4658), " believe");
}

TEST(TextStream, FlushReturnsAnUnfinishedCharacter) {
  const Tokenizer& tok = llama_spm();
  TextStream stream(tok, 306);
  EXPECT_EQ(stream.push(243), "");  // F0: a 4-byte lead
  EXPECT_EQ(stream.push(162), "");  // 9F
  EXPECT_EQ(stream.flush(), "\xF0\x9F");
  EXPECT_EQ(stream.flush(), "");
}

// Bytes that can never become a character are not held back forever.
TEST(TextStream, PassesInvalidUtf8Through) {
  const Tokenizer& tok = llama_spm();
  TextStream stream(tok, 306);
  EXPECT_EQ(stream.push(0x80 + 3), "\x80");     // a lone continuation byte
  EXPECT_EQ(stream.push(0xE4 + 3), "");         // a 3-byte lead...
  EXPECT_EQ(stream.push(29874), "\xE4" "a");    // ...cut short by "a"
  EXPECT_EQ(stream.push(0xFF + 3), "\xFF");     // never valid in UTF-8
}

TEST(Decode, OutOfRangeIdsThrowNamingTheId) {
  const Tokenizer& tok = llama_spm();
  EXPECT_NE(error_of([&] { tok.decode_piece(-1, 32000); }).find("token id 32000"), std::string::npos);
  EXPECT_NE(error_of([&] { tok.decode_piece(1, -7); }).find("token id -7"), std::string::npos);
  EXPECT_NE(error_of([&] { tok.token_text(40000); }).find("40000"), std::string::npos);
  TextStream stream(tok, 306);
  EXPECT_EQ(stream.push(243), "");
  EXPECT_THROW(stream.push(123456), Error);
  EXPECT_EQ(stream.push(162), "");  // the stream is unharmed
  EXPECT_EQ(stream.push(169), "");
  EXPECT_EQ(stream.push(156), "\xF0\x9F\xA6\x99");
}

// Phi-3's "</s>" is a user-defined token: matched whole even without
// parse_special, while its control tokens (<|user|>) need parse_special.
TEST(SpecialTokens, UserDefinedAlwaysMatchedControlOnlyWhenAsked) {
  const Tokenizer tok =
      Tokenizer::from_gguf(io::GgufFile::open(test_data("models/llama.cpp-vocab/ggml-vocab-phi-3.gguf")));
  EXPECT_EQ(tok.token_type(2), TokenType::UserDefined);
  EXPECT_EQ(tok.token_text(32010), "<|user|>");
  EXPECT_EQ(tok.eos(), 32000);
  const std::vector<int32_t> a = tok.encode("a", false);
  const std::vector<int32_t> b = tok.encode("b", false);
  std::vector<int32_t> expected = a;
  expected.push_back(2);
  expected.insert(expected.end(), b.begin(), b.end());
  EXPECT_EQ(tok.encode("a</s>b", false), expected);
  const std::vector<int32_t> plain = tok.encode("<|user|>", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 32010), 0);
  EXPECT_EQ(tok.encode("<|user|>", false, true), (std::vector<int32_t>{32010}));
  // The dummy prefix after a special token stays in the text: only the text's
  // start (or BOS) drops it, as llama.cpp's detokenizer does.
  EXPECT_EQ(tok.encode("<|user|>hi", false, true), (std::vector<int32_t>{32010, tok.encode("hi", false)[0]}));
  EXPECT_EQ(tok.decode(tok.encode("<|user|>hi", false, true)), " hi");
}

}  // namespace
}  // namespace tokamak
