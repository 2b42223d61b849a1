// llama2.c tokenizer.bin: the reader's bounds checks, and encode/decode
// against run.c's reference ids (llama2.c test.c, the stories260K story).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "common/test_data.h"
#include "io/llama2c.h"
#include "tokenizer/test_cases.h"
#include "tokenizer/tokenizer.h"

namespace tokamak {
namespace {

using testing::error_of;
using testing::test_data;

Tokenizer llama2_bin() {
  return Tokenizer::from_llama2c(io::load_llama2c_tokenizer(test_data("models/llama2-tokenizer/tokenizer.bin"), 32000));
}

// Writes `bytes` to a fresh file under the test's temp dir.
std::filesystem::path write_temp(const std::string& name, const std::string& bytes) {
  const auto path = std::filesystem::temp_directory_path() / ("tokamak_llama2c_" + name + ".bin");
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

template <typename T>
void put(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s.append(b, sizeof(T));
}

std::string token_record(float score, const std::string& piece) {
  std::string s;
  put(s, score);
  put(s, static_cast<int32_t>(piece.size()));
  return s + piece;
}

TEST(Llama2cVocabReader, ReadsLlama2TokenizerBin) {
  const io::Llama2cVocab v = io::load_llama2c_tokenizer(test_data("models/llama2-tokenizer/tokenizer.bin"), 32000);
  EXPECT_EQ(v.max_token_length, 27);
  ASSERT_EQ(v.pieces.size(), 32000u);
  ASSERT_EQ(v.scores.size(), 32000u);
  EXPECT_EQ(v.pieces[1], "\n<s>\n");
  EXPECT_EQ(v.pieces[13], "<0x0A>");
  EXPECT_EQ(v.pieces[29871], " ");
  EXPECT_EQ(v.scores[29871], -1e9f);
}

TEST(Llama2cVocabReader, TruncatedTokenNamesFileAndTokenIndex) {
  std::string bytes;
  put(bytes, int32_t{4});
  bytes += token_record(0.0f, "<unk>") + token_record(-1.0f, "ab");
  bytes += token_record(-2.0f, "abcd").substr(0, 10);  // token 2's bytes cut short
  const auto path = write_temp("truncated", bytes);
  const std::string msg = error_of([&] { io::load_llama2c_tokenizer(path, 3); });
  EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("token 2 bytes"), std::string::npos) << msg;
}

TEST(Llama2cVocabReader, NegativeLengthIsRejected) {
  std::string bytes;
  put(bytes, int32_t{4});
  put(bytes, 0.0f);
  put(bytes, int32_t{-5});
  const auto path = write_temp("negative", bytes);
  const std::string msg = error_of([&] { io::load_llama2c_tokenizer(path, 1); });
  EXPECT_NE(msg.find("token 0 length is negative (-5)"), std::string::npos) << msg;
}

TEST(Llama2cVocabReader, HugeVocabSizeIsRejectedBeforeReading) {
  std::string bytes;
  put(bytes, int32_t{4});
  bytes += token_record(0.0f, "a");
  const auto path = write_temp("huge", bytes);
  const std::string msg = error_of([&] { io::load_llama2c_tokenizer(path, 2000000000); });
  EXPECT_NE(msg.find("cannot hold 2000000000 tokens"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { io::load_llama2c_tokenizer(path, 0); }).find("vocab_size must be positive"),
            std::string::npos);
}

TEST(Llama2cVocabReader, MissingFileNamesThePath) {
  const std::string msg = error_of([] { io::load_llama2c_tokenizer("/nonexistent/tokenizer.bin", 10); });
  EXPECT_NE(msg.find("/nonexistent/tokenizer.bin"), std::string::npos) << msg;
}

// llama2.c test.c: encode(text, bos=1, eos=0) with the Llama 2 tokenizer.bin.
TEST(Llama2cEncode, MatchesLlama2cTestCases) {
  const Tokenizer tok = llama2_bin();
  const auto cases = testing::llama2c_encode_cases();
  ASSERT_EQ(cases.size(), 5u);
  for (const auto& c : cases) EXPECT_EQ(tok.encode(c.text, c.bos), c.ids) << c.text;
}

// llama-tokenizer-js cases run through the llama2.c rules: the same ids, as
// none of them has invalid UTF-8.
TEST(Llama2cEncode, MatchesLlamaTokenizerJsCases) {
  const Tokenizer tok = llama2_bin();
  const auto cases = testing::llama_tokenizer_js_cases();
  ASSERT_EQ(cases.size(), 12u);
  for (const auto& c : cases) EXPECT_EQ(tok.encode(c.text, c.bos), c.ids) << c.text;
}

TEST(Llama2cEncode, Stories260KTok512Story) {
  const Tokenizer tok =
      Tokenizer::from_llama2c(io::load_llama2c_tokenizer(test_data("models/stories260K/tok512.bin"), 512));
  const std::vector<int32_t> expected = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};
  EXPECT_EQ(tok.encode("Once upon a time, there was a little girl named Lily.", true), expected);
}

TEST(Llama2cTokenizer, SpecialIdsAndTypesFollowRunC) {
  const Tokenizer tok = llama2_bin();
  EXPECT_EQ(tok.n_vocab(), 32000);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_EQ(tok.unk(), 0);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_TRUE(tok.is_end_of_generation(2));
  EXPECT_FALSE(tok.is_end_of_generation(1));
  EXPECT_EQ(tok.token_type(1), TokenType::Control);
  EXPECT_EQ(tok.token_type(0x0A + 3), TokenType::Byte);
  EXPECT_EQ(tok.token_type(29871), TokenType::Normal);
}

// A character outside the 512-token vocabulary falls back to byte + 3 per byte.
TEST(Llama2cEncode, UnknownCharacterBecomesBytePlusThree) {
  const Tokenizer tok =
      Tokenizer::from_llama2c(io::load_llama2c_tokenizer(test_data("models/stories260K/tok512.bin"), 512));
  const std::vector<int32_t> ids = tok.encode("\xE9\x95\x87", false);  // 镇
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(std::vector<int32_t>(ids.end() - 3, ids.end()), (std::vector<int32_t>{0xE9 + 3, 0x95 + 3, 0x87 + 3}));
  EXPECT_EQ(tok.decode(ids), "\xE9\x95\x87");
}

TEST(Llama2cDecode, BosDropsTheDummySpaceAndControlTokensVanish) {
  const Tokenizer tok = llama2_bin();
  const std::vector<int32_t> ids = tok.encode("I believe the meaning of life is", true);
  EXPECT_EQ(tok.decode(ids), "I believe the meaning of life is");
  EXPECT_EQ(tok.decode_piece(1, 306), "I");
  EXPECT_EQ(tok.decode_piece(306, 4658), " believe");
  EXPECT_EQ(tok.decode_piece(4658, 2), "");
  EXPECT_EQ(tok.decode_piece(4658, 1), "");
}

}  // namespace
}  // namespace tokamak
