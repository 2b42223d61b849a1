// Byte-level BPE, WordPiece and the SentencePiece variants beyond llama.cpp's
// vectors: lossless round trips, streaming whole characters, user-defined and
// control tokens, Phi-3's strip rules.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/test_data.h"
#include "io/gguf.h"
#include "tokenizer/test_cases.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace tokamak {
namespace {

using testing::llama3_bpe;
using testing::llama_spm;
using testing::test_data;

Tokenizer vocab(const std::string& name) {
  return Tokenizer::from_gguf(io::GgufFile::open(test_data("models/llama.cpp-vocab/ggml-vocab-" + name + ".gguf")));
}

std::vector<std::string> vector_inputs() {
  std::vector<std::string> texts;
  for (auto& c : testing::llama_cpp_vocab_cases("models/llama.cpp-vocab/ggml-vocab-gpt-2.gguf")) {
    texts.push_back(std::move(c.text));
  }
  return texts;
}

// Every Unicode scalar value but the surrogates, U+2581 (SentencePiece's
// escaped space) and U+0000 when `skip_nul`, as one text.
std::string all_code_points(uint32_t stride) {
  std::string s;
  for (uint32_t cp = 1; cp <= 0x10FFFF; cp += cp < 0x3000 ? 1 : stride) {
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0x2581) continue;
    unicode::append_utf8(s, cp);
  }
  return s;
}

std::string streamed(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  TextStream stream(tok);
  std::string out;
  for (const int32_t id : ids) {
    const std::string piece = stream.push(id);
    // Whole characters only: a piece of valid text is valid UTF-8 by itself.
    const std::vector<uint32_t> cps = unicode::decode_utf8(piece);
    EXPECT_EQ(std::count(cps.begin(), cps.end(), unicode::kReplacement), 0) << "'" << piece << "'";
    out += piece;
  }
  return out + stream.flush();
}

// The code points of `text` whose bytes all have byte-level tokens in `tok`
// (Falcon lacks some control bytes, StarCoder the lead byte 0xF1, and most
// vocabularies the bytes UTF-8 never uses).
std::string spellable(const Tokenizer& tok, const std::string& text) {
  std::string out;
  for (const uint32_t cp : unicode::decode_utf8(text)) {
    std::string bytes;
    unicode::append_utf8(bytes, cp);
    bool ok = true;
    for (const char b : bytes) {
      std::string ch;
      unicode::append_utf8(ch, unicode::kByteToChar[static_cast<unsigned char>(b)]);
      ok = ok && tok.find_token(ch) >= 0;
    }
    if (ok) out += bytes;
  }
  return out;
}

// Byte-level BPE loses nothing it can spell: decode(encode(x)) == x, and
// streaming gives the same bytes.
TEST(BpeRoundTrip, EveryByteLevelVocabulary) {
  for (const std::string name : {"gpt-2", "mpt", "gpt-neox", "falcon", "starcoder", "refact", "deepseek-llm",
                                 "deepseek-coder"}) {
    const Tokenizer tok = vocab(name);
    const std::string all = spellable(tok, all_code_points(13));
    EXPECT_GT(all.size(), 250000u) << name;
    for (const std::string& input : vector_inputs()) {
      const std::string text = spellable(tok, input);
      const std::vector<int32_t> ids = tok.encode(text, false);
      EXPECT_EQ(tok.decode(ids), text) << name << ": '" << text << "'";
      EXPECT_EQ(streamed(tok, ids), text) << name;
    }
    EXPECT_TRUE(tok.decode(tok.encode(all, false)) == all) << name;  // (not EXPECT_EQ: megabytes of diff)
  }
}

TEST(BpeRoundTrip, Llama3EveryCodePoint) {
  const std::string all = all_code_points(1);
  EXPECT_TRUE(llama3_bpe().decode(llama3_bpe().encode(all, false)) == all);
}

// "🦙Ꙋ" is 9468 99 247 | 166 247 232: byte-level pieces cut both characters;
// the stream says nothing until a character is whole.
TEST(BpeStream, HoldsPartialCharacters) {
  const Tokenizer& tok = llama3_bpe();
  TextStream stream(tok);
  const std::vector<std::string> expected = {"", "", "\xF0\x9F\xA6\x99", "", "", "\xEA\x99\x8A"};
  const std::vector<int32_t> ids = {9468, 99, 247, 166, 247, 232};
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(stream.push(ids[i]), expected[i]) << i;
  EXPECT_EQ(stream.flush(), "");
}

// DeepSeek stores single byte-level characters such as "ø" as user-defined
// tokens; like every user-defined token they match whole in raw text and
// decode as stored.
TEST(BpeSpecial, UserDefinedTokensMatchRawText) {
  const Tokenizer tok = vocab("deepseek-llm");
  EXPECT_EQ(tok.token_type(100002), TokenType::UserDefined);
  EXPECT_EQ(tok.token_text(100002), "\xC3\xB8");
  EXPECT_EQ(tok.encode("\xC3\xB8", false), (std::vector<int32_t>{100002}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{100002}), "\xC3\xB8");
  // The control <｜end▁of▁sentence｜> only with parse_special.
  const std::string eos = tok.token_text(100001);
  EXPECT_EQ(tok.encode(eos, false, true), (std::vector<int32_t>{100001}));
  EXPECT_GT(tok.encode(eos, false).size(), 1u);
  EXPECT_TRUE(tok.is_end_of_generation(100001));
}

// MPT's runs of spaces are user-defined tokens: "    Hello" starts with the 4-space token.
TEST(BpeSpecial, MptSpaceRuns) {
  const Tokenizer tok = vocab("mpt");
  const std::vector<int32_t> ids = tok.encode("    Hello", false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(tok.token_text(ids[0]), "    ");
  EXPECT_EQ(tok.token_type(ids[0]), TokenType::UserDefined);
}

// Phi-3: the first 32000 pieces are Llama 2's; </s> is user-defined (always
// matched) and the chat tokens strip the spaces after them (llama.cpp sets
// RSTRIP by model name), so the text after one gets the dummy prefix.
TEST(Phi3, StripRulesAndUserDefinedEos) {
  const Tokenizer tok = vocab("phi-3");
  const auto spm = [](const std::string& s) { return llama_spm().encode(s, false); };
  const auto cat = [](std::vector<int32_t> a, std::initializer_list<int32_t> b, const std::vector<int32_t>& c) {
    a.insert(a.end(), b);
    a.insert(a.end(), c.begin(), c.end());
    return a;
  };
  EXPECT_EQ(tok.encode("<|user|>\n  Hi", false, true), cat({}, {32010}, spm("Hi")));
  EXPECT_EQ(tok.encode("Hi<|end|>\nthere", false, true), cat(spm("Hi"), {32007}, spm("there")));
  // <s> keeps the spaces after it (its RSTRIP is cleared): they become "▁▁there".
  EXPECT_EQ(tok.encode("<s> there", false, true), cat({}, {1}, spm(" there")));
  // </s> is user-defined: matched even without parse_special, and strips.
  EXPECT_EQ(tok.encode("Hi</s> there", false), cat(spm("Hi"), {2}, spm("there")));
  // Without parse_special the control texts are plain text.
  EXPECT_EQ(tok.encode("<|user|>", false), spm("<|user|>"));
  EXPECT_EQ(tok.eos(), 32000);
  EXPECT_EQ(tok.eot(), 32007);  // <|end|>, found by its text
  EXPECT_TRUE(tok.is_end_of_generation(32007));
  EXPECT_TRUE(tok.is_end_of_generation(32000));
  // Plain-text tokenization is not affected by the rules: llama-spm's vectors
  // are checked in llama_cpp_vocab_test.
}

// llama.cpp's test-tokenizer-1-spm: the text of every normal token encodes
// back to text that decodes the same, and every code point survives.
TEST(SpmVariants, EveryTokenAndCodePointRoundTrips) {
  const std::string all = all_code_points(7);
  for (const std::string name : {"llama-spm", "phi-3", "baichuan"}) {
    const Tokenizer tok = vocab(name);
    int checked = 0;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      if (tok.token_type(id) != TokenType::Normal) continue;
      const std::string text = tok.decode(std::vector<int32_t>{id});
      const std::string back = tok.decode(tok.encode(text, false, true));
      EXPECT_EQ(back, text) << name << " token " << id;
      if (back != text) break;
      ++checked;
    }
    EXPECT_GT(checked, 31000) << name;
    EXPECT_TRUE(tok.decode(tok.encode(all, false)) == all) << name;
  }
}

// Baichuan is a plain SentencePiece vocabulary for llama.cpp: no pre key, the
// dummy prefix on, 256 byte tokens at 393.., scores by merge order.
TEST(SpmVariants, BaichuanLoadsAsSentencePiece) {
  const Tokenizer tok = vocab("baichuan");
  EXPECT_EQ(tok.kind(), Tokenizer::Kind::Spm);
  EXPECT_EQ(tok.n_vocab(), 64000);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_EQ(tok.token_text(393), "<0x00>");
  // A character missing from the vocabulary falls back to its bytes.
  const std::vector<int32_t> ids = tok.encode("\xF0\x9F\xA6\x99", false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(tok.decode(ids), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(tok.decode_piece(-1, 393 + 'A'), "A");
}

}  // namespace
}  // namespace tokamak
