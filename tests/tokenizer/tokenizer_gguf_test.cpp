// Loading tokenizers from GGUF metadata: the defaults of each kind, and
// errors for files that are not what they claim (built in memory).
#include <gtest/gtest.h>

#include "common/test_data.h"
#include "io/gguf.h"
#include "tokenizer/test_cases.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace tokamak {
namespace {

using testing::error_of;
using testing::test_data;

io::GgufFile vocab_file(const std::string& name) {
  return io::GgufFile::open(test_data("models/llama.cpp-vocab/ggml-vocab-" + name + ".gguf"));
}

// A tiny byte-level vocabulary: the 256 byte characters and "ab" from one merge.
io::GgufWriter tiny_bpe() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    unicode::append_utf8(s, unicode::kByteToChar[b]);
    tokens.push_back(s);
  }
  tokens.push_back("ab");
  io::GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "gpt-2");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_string_array("tokenizer.ggml.merges", {"a b"});
  return w;
}

Tokenizer load(const io::GgufWriter& w) {
  const std::vector<std::byte> bytes = w.to_bytes();
  return Tokenizer::from_gguf(io::GgufFile::parse(bytes, "mem.gguf"));
}

TEST(TokenizerGguf, TinyBpeMergesAndDecodes) {
  const Tokenizer tok = load(tiny_bpe());
  EXPECT_EQ(tok.kind(), Tokenizer::Kind::Bpe);
  // Words "ab" and " ab"; "Ġ" (token 32, byte 0x20) has no merge with "ab".
  const std::vector<int32_t> ids = tok.encode("ab ab", false);
  EXPECT_EQ(ids, (std::vector<int32_t>{256, 32, 256}));
  EXPECT_EQ(tok.decode(ids), "ab ab");
  EXPECT_FALSE(tok.add_bos());   // gpt-2's pre-tokenizer: no BOS unless the file says
  EXPECT_EQ(tok.bos(), 11);      // llama.cpp's default BPE BOS/EOS id when the file names none
}

TEST(TokenizerGguf, UnsupportedModelNamesFileKeyAndValue) {
  io::GgufWriter w = tiny_bpe();
  w.set_string("tokenizer.ggml.model", "t5");
  const std::string msg = error_of([&] { load(w); });
  EXPECT_NE(msg.find("mem.gguf"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tokenizer.ggml.model"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'t5'"), std::string::npos) << msg;
}

TEST(TokenizerGguf, UnknownPreTokenizerNamesIt) {
  io::GgufWriter w = tiny_bpe();
  w.set_string("tokenizer.ggml.pre", "mystery-9");
  const std::string msg = error_of([&] { load(w); });
  EXPECT_NE(msg.find("tokenizer.ggml.pre"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mystery-9"), std::string::npos) << msg;
}

TEST(TokenizerGguf, BpeWithoutMergesIsAnError) {
  io::GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
  const std::string msg = error_of([&] { load(w); });
  EXPECT_NE(msg.find("tokenizer.ggml.merges"), std::string::npos) << msg;
}

TEST(TokenizerGguf, MalformedTablesAreErrors) {
  io::GgufWriter w = tiny_bpe();
  w.set_i32_array("tokenizer.ggml.token_type", {1, 1});
  std::string msg = error_of([&] { load(w); });
  EXPECT_NE(msg.find("tokenizer.ggml.token_type has 2 entries for 257 tokens"), std::string::npos) << msg;
  w = tiny_bpe();
  w.set_string_array("tokenizer.ggml.merges", {});
  w.set_f32_array("tokenizer.ggml.scores", std::vector<float>(3, 0.0f));
  msg = error_of([&] { load(w); });
  EXPECT_NE(msg.find("tokenizer.ggml.scores has 3 entries"), std::string::npos) << msg;
}

// Merges that cannot apply (no space, or texts the vocabulary lacks) are not
// errors, as in llama.cpp; they never fire.
TEST(TokenizerGguf, UnusableMergesAreSkipped) {
  io::GgufWriter w = tiny_bpe();
  w.set_string_array("tokenizer.ggml.merges", {"ab", "x yz", "a b"});
  const Tokenizer tok = load(w);
  EXPECT_EQ(tok.encode("ab", false), (std::vector<int32_t>{256}));
  EXPECT_EQ(tok.decode(tok.encode("xyz", false)), "xyz");
}

TEST(TokenizerGguf, WordPieceDefaultsAndClsSep) {
  const Tokenizer tok = Tokenizer::from_gguf(vocab_file("bert-bge"));
  EXPECT_EQ(tok.kind(), Tokenizer::Kind::Wpm);
  EXPECT_EQ(tok.bos(), 101);  // [CLS]
  EXPECT_EQ(tok.sep(), 102);  // [SEP]
  EXPECT_EQ(tok.unk(), 100);
  EXPECT_EQ(tok.token_text(101), "[CLS]");
  // The pair BERT wraps a text in; the ids between are the .out vector's.
  EXPECT_EQ(tok.encode("Hello world", true), (std::vector<int32_t>{101, 7592, 2088, 102}));
  EXPECT_EQ(tok.decode(tok.encode("Hello world", true)), " hello world");
}

// A cased BERT keeps case and accents when the file says so.
TEST(TokenizerGguf, WordPieceNormalizerKeys) {
  const io::GgufFile bge = vocab_file("bert-bge");
  io::GgufWriter w;
  for (const io::GgufKeyValue& kv : bge.metadata()) w.set(kv.key, kv.value);
  EXPECT_EQ(load(w).encode("Hello", false), (std::vector<int32_t>{7592}));  // "▁hello"
  w.set_bool("tokenizer.ggml.normalizer.lowercase", false);
  const Tokenizer cased = load(w);
  EXPECT_NE(cased.encode("Hello", false), (std::vector<int32_t>{7592}));
  EXPECT_EQ(cased.encode("hello", false), (std::vector<int32_t>{7592}));
  EXPECT_NE(cased.encode("h\xC3\xA9llo", false), (std::vector<int32_t>{7592}));  // é kept: not "hello"
  w.set_bool("tokenizer.ggml.normalizer.strip_accents", true);
  EXPECT_EQ(load(w).encode("h\xC3\xA9llo", false), (std::vector<int32_t>{7592}));
}

TEST(TokenizerGguf, BpeKindsAndSpecialIdsFromTheFiles) {
  const Tokenizer gpt2 = Tokenizer::from_gguf(vocab_file("gpt-2"));
  EXPECT_EQ(gpt2.bos(), 50256);
  EXPECT_EQ(gpt2.eos(), 50256);
  EXPECT_TRUE(gpt2.is_end_of_generation(50256));
  EXPECT_FALSE(gpt2.add_bos());
  const Tokenizer neox = Tokenizer::from_gguf(vocab_file("gpt-neox"));
  EXPECT_EQ(neox.pre_tokenizer(), "default");  // the file has no tokenizer.ggml.pre
  const Tokenizer coder = Tokenizer::from_gguf(vocab_file("deepseek-coder"));
  EXPECT_EQ(coder.bos(), 32013);
  EXPECT_TRUE(coder.add_bos());  // add_bos_token in the file
  EXPECT_TRUE(coder.is_end_of_generation(32014));
}

}  // namespace
}  // namespace tokamak
