// Every vocabulary in ../shared/models/llama.cpp-vocab against llama.cpp's own
// test vectors (<vocab>.gguf.inp / .out), with test-tokenizer-0's settings:
// add_special = false (no BOS/CLS/SEP), parse_special = false.
#include <gtest/gtest.h>

#include <filesystem>
#include <ostream>
#include <set>

#include "common/test_data.h"
#include "io/gguf.h"
#include "tokenizer/test_cases.h"
#include "tokenizer/tokenizer.h"

namespace tokamak {
namespace {

using testing::test_data;

struct VocabCase {
  const char* gguf;     // the vocabulary file
  const char* vectors;  // whose .inp/.out to run (the same file, or one with an identical vocabulary)
  Tokenizer::Kind kind;
  const char* pre;      // expected pre-tokenizer name for BPE
};

// gtest prints a parameter with this (else as raw bytes).
void PrintTo(const VocabCase& c, std::ostream* os) { *os << c.gguf << " with " << c.vectors << "'s vectors"; }

std::string vocab_path(const char* name) { return std::string("models/llama.cpp-vocab/ggml-vocab-") + name + ".gguf"; }

// Runs every case; returns how many matched, and reports each mismatch.
int run_cases(const Tokenizer& tok, const std::vector<testing::EncodeCase>& cases, const std::string& label) {
  int passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> got = tok.encode(cases[i].text, false);
    EXPECT_EQ(got, cases[i].ids) << label << " case " << i << ": '" << cases[i].text << "'";
    passed += got == cases[i].ids ? 1 : 0;
  }
  return passed;
}

class LlamaCppVocab : public ::testing::TestWithParam<VocabCase> {};

TEST_P(LlamaCppVocab, MatchesEveryTestVector) {
  const VocabCase& c = GetParam();
  const Tokenizer tok = Tokenizer::from_gguf(io::GgufFile::open(test_data(vocab_path(c.gguf))));
  EXPECT_EQ(tok.kind(), c.kind);
  EXPECT_EQ(tok.pre_tokenizer(), c.pre);
  const auto cases = testing::llama_cpp_vocab_cases(vocab_path(c.vectors));
  ASSERT_EQ(cases.size(), 46u);
  const int passed = run_cases(tok, cases, c.gguf);
  EXPECT_EQ(passed, 46) << c.gguf << ": " << passed << "/46";
  std::printf("[ vectors  ] %-16s %d/%zu\n", c.gguf, passed, cases.size());
}

// Phi-3's first 32000 pieces and scores are Llama 2's, so plain text (no
// special-token texts in it) must tokenize as llama-spm's vectors say.
INSTANTIATE_TEST_SUITE_P(
    All, LlamaCppVocab,
    ::testing::Values(VocabCase{"llama-spm", "llama-spm", Tokenizer::Kind::Spm, ""},
                      VocabCase{"phi-3", "llama-spm", Tokenizer::Kind::Spm, ""},
                      VocabCase{"bert-bge", "bert-bge", Tokenizer::Kind::Wpm, ""},
                      VocabCase{"gpt-2", "gpt-2", Tokenizer::Kind::Bpe, "gpt-2"},
                      VocabCase{"mpt", "mpt", Tokenizer::Kind::Bpe, "mpt"},
                      VocabCase{"falcon", "falcon", Tokenizer::Kind::Bpe, "falcon"},
                      VocabCase{"starcoder", "starcoder", Tokenizer::Kind::Bpe, "starcoder"},
                      VocabCase{"refact", "refact", Tokenizer::Kind::Bpe, "refact"},
                      VocabCase{"deepseek-llm", "deepseek-llm", Tokenizer::Kind::Bpe, "deepseek-llm"},
                      VocabCase{"deepseek-coder", "deepseek-coder", Tokenizer::Kind::Bpe, "deepseek-coder"}),
    [](const ::testing::TestParamInfo<VocabCase>& info) {
      std::string name = info.param.gguf;
      for (char& ch : name) ch = ch == '-' ? '_' : ch;
      return name;
    });

// No vocabulary with vectors is left out of the list above.
TEST(LlamaCppVocabDir, EveryGgufWithVectorsIsTested) {
  const std::set<std::string> tested = {"llama-spm", "bert-bge", "gpt-2", "mpt", "falcon",
                                        "starcoder", "refact", "deepseek-llm", "deepseek-coder"};
  int n_gguf = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test_data("models/llama.cpp-vocab"))) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".gguf") continue;
    ++n_gguf;
    const std::string name = file.substr(11, file.size() - 11 - 5);  // ggml-vocab-<name>.gguf
    if (std::filesystem::exists(entry.path().string() + ".inp")) {
      EXPECT_TRUE(tested.count(name)) << file;
    }
  }
  EXPECT_EQ(n_gguf, 12);
}

// Every vocabulary file loads, whatever its kind.
TEST(LlamaCppVocabDir, EveryGgufLoads) {
  for (const auto& entry : std::filesystem::directory_iterator(test_data("models/llama.cpp-vocab"))) {
    if (entry.path().extension() != ".gguf") continue;
    const Tokenizer tok = Tokenizer::from_gguf(io::GgufFile::open(entry.path()));
    EXPECT_GT(tok.n_vocab(), 30000) << entry.path();
    const std::vector<int32_t> ids = tok.encode("Hello world", false);
    EXPECT_FALSE(ids.empty()) << entry.path();
  }
}

}  // namespace
}  // namespace tokamak
