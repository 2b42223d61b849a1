// Llama 3 byte-level BPE from encoder.json + vocab.bpe (ollama's copy of the
// Llama 3.2 tokenizer) against llama3-tokenizer-js's tests, llama.cpp's
// llama-bpe vectors (the same 128000 regular tokens) and ollama's example.
#include <gtest/gtest.h>

#include <chrono>

#include "common/test_data.h"
#include "tokenizer/test_cases.h"
#include "tokenizer/tokenizer.h"

namespace tokamak {
namespace {

using testing::error_of;
using testing::llama3_bpe;
using testing::test_data;

TEST(Llama3Bpe, VocabularyAndSpecialTokens) {
  const Tokenizer& tok = llama3_bpe();
  EXPECT_EQ(tok.kind(), Tokenizer::Kind::Bpe);
  EXPECT_EQ(tok.pre_tokenizer(), "llama3");
  EXPECT_EQ(tok.n_vocab(), 128256);
  EXPECT_EQ(tok.bos(), 128000);
  EXPECT_EQ(tok.eos(), 128001);
  EXPECT_EQ(tok.eot(), 128009);  // <|eot_id|>
  EXPECT_TRUE(tok.add_bos());
  EXPECT_EQ(tok.token_text(128006), "<|start_header_id|>");
  EXPECT_EQ(tok.token_text(128255), "<|reserved_special_token_247|>");
  EXPECT_EQ(tok.token_type(128009), TokenType::Control);
  EXPECT_EQ(tok.token_text(15339), "hello");
  for (const int32_t id : {128001, 128008, 128009}) EXPECT_TRUE(tok.is_end_of_generation(id)) << id;
  EXPECT_FALSE(tok.is_end_of_generation(128000));
  EXPECT_FALSE(tok.is_end_of_generation(13));
}

// ollama's tokenizer/bytepairencoding_test.go: "hello world" -> 15339 1917.
TEST(Llama3Bpe, HelloWorld) {
  EXPECT_EQ(llama3_bpe().encode("hello world", false), (std::vector<int32_t>{15339, 1917}));
  EXPECT_EQ(llama3_bpe().decode(std::vector<int32_t>{15339, 1917}), "hello world");
}

// Every case of llama3-tokenizer-js's defaultTests(). Its encode() always
// recognizes the special-token texts; its decode() prints them.
TEST(Llama3Bpe, MatchesLlama3TokenizerJsTests) {
  const Tokenizer& tok = llama3_bpe();
  const auto cases = testing::llama3_tokenizer_js_cases();
  ASSERT_EQ(cases.size(), 26u);
  int passed = 0;
  for (const auto& c : cases) {
    bool ok = false;
    if (c.kind == "testEncodeAndDecode") {
      const std::string text = c.args[0];
      const std::vector<int32_t> ids = c.args[1];
      const std::vector<int32_t> got = tok.encode(text, false, true);
      EXPECT_EQ(got, ids) << text;
      EXPECT_EQ(tok.decode(ids, -1, true), text);
      ok = got == ids && tok.decode(ids, -1, true) == text;
    } else if (c.kind == "testEncode") {
      const std::string text = c.args[0];
      const std::vector<int32_t> ids = c.args[1];
      // Without options the library adds both.
      const bool bos = c.args.size() < 3 || c.args[2]["bos"].get<bool>();
      const bool eos = c.args.size() < 3 || c.args[2]["eos"].get<bool>();
      std::vector<int32_t> got = tok.encode(text, bos, true);
      if (eos) got.push_back(tok.eos());
      EXPECT_EQ(got, ids) << text;
      ok = got == ids;
    } else if (c.kind == "testDecode") {
      const std::vector<int32_t> ids = c.args[0];
      const std::string text = c.args[1];
      EXPECT_EQ(tok.decode(ids, -1, true), text);
      ok = tok.decode(ids, -1, true) == text;
    } else {
      ADD_FAILURE() << "unknown case kind " << c.kind;
    }
    passed += ok ? 1 : 0;
  }
  EXPECT_EQ(passed, 26);
  std::printf("[ vectors  ] llama3 js tests  %d/%zu\n", passed, cases.size());
}

// llama.cpp's ggml-vocab-llama-bpe.gguf (absent here) holds this same
// vocabulary; its vectors run through the encoder.json tokenizer.
TEST(Llama3Bpe, MatchesLlamaCppLlamaBpeVectors) {
  const auto cases = testing::llama_cpp_vocab_cases("models/llama.cpp-vocab/ggml-vocab-llama-bpe.gguf");
  ASSERT_EQ(cases.size(), 46u);
  int passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> got = llama3_bpe().encode(cases[i].text, false);
    EXPECT_EQ(got, cases[i].ids) << "case " << i << ": '" << cases[i].text << "'";
    passed += got == cases[i].ids ? 1 : 0;
  }
  EXPECT_EQ(passed, 46);
  std::printf("[ vectors  ] llama-bpe        %d/%zu\n", passed, cases.size());
}

// Control tokens are text unless asked for; decoding drops them unless asked.
TEST(Llama3Bpe, SpecialTokensOnlyWhenAsked) {
  const Tokenizer& tok = llama3_bpe();
  const std::string text = "<|start_header_id|>user<|end_header_id|>";
  const std::vector<int32_t> plain = tok.encode(text, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 128006), 0);
  EXPECT_EQ(tok.decode(plain), text);
  const std::vector<int32_t> special = tok.encode(text, false, true);
  ASSERT_EQ(special.size(), 3u);
  EXPECT_EQ(special[0], 128006);
  EXPECT_EQ(special[2], 128007);
  EXPECT_EQ(tok.decode(special), "user");
  EXPECT_EQ(tok.decode(special, -1, true), text);
}

// Merges rank with a heap per word and words repeat: a megabyte of mixed
// text takes a fraction of a second (the budget is well under one).
TEST(Llama3Bpe, EncodesAMegabyteQuickly) {
  const Tokenizer& tok = llama3_bpe();
  std::string unit;
  for (const auto& c : testing::llama_cpp_vocab_cases("models/llama.cpp-vocab/ggml-vocab-llama-bpe.gguf")) {
    unit += c.text + "\n";
  }
  for (const auto& c : testing::llama3_tokenizer_js_cases()) {
    if (c.kind == "testEncodeAndDecode") unit += c.args[0].get<std::string>() + " ";
  }
  std::string text;
  while (text.size() < (1u << 20)) text += unit;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok.encode(text, false);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ timing   ] 1 MiB Llama 3 BPE encode: %.3f s, %zu tokens\n", s, ids.size());
  EXPECT_EQ(tok.decode(ids), text);
  EXPECT_GT(ids.size(), 200000u);
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_LT(s, 1.0);
#endif
}

TEST(Llama3Bpe, FileErrorsNameTheFile) {
  const std::string vocab = test_data("models/llama3.2-tokenizer/encoder.json");
  const std::string merges = test_data("models/llama3.2-tokenizer/vocab.bpe");
  std::string msg = testing::error_of([&] { Tokenizer::from_bpe_files(merges, merges, "llama3"); });
  EXPECT_NE(msg.find("vocab.bpe"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not JSON"), std::string::npos) << msg;
  msg = testing::error_of([&] { Tokenizer::from_bpe_files(vocab, "/nonexistent/merges.txt", "llama3"); });
  EXPECT_NE(msg.find("/nonexistent/merges.txt"), std::string::npos) << msg;
  msg = testing::error_of([&] { Tokenizer::from_bpe_files(vocab, merges, "no-such-pre"); });
  EXPECT_NE(msg.find("no-such-pre"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tokamak
