// `tokamak tokenize` against llama.cpp's tokenizer test vectors.
#include <gtest/gtest.h>

#include <sstream>

#include "common/test_data.h"

namespace tokamak {
namespace {

using testing::read_text_file;
using testing::run_command;
using testing::test_data;
using testing::tokamak_bin;

std::vector<std::string> split(const std::string& text, const std::string& sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at; (at = text.find(sep, start)) != std::string::npos; start = at + sep.size()) {
    parts.push_back(text.substr(start, at - start));
  }
  parts.push_back(text.substr(start));
  return parts;
}

// "[1, 2, 3]\n" from an .out line " 1 2 3".
std::string json_ids(const std::string& out_line) {
  std::istringstream in(out_line);
  std::string json = "[";
  for (std::string id; in >> id;) json += (json.size() > 1 ? ", " : "") + id;
  return json + "]\n";
}

TEST(TokenizeCommand, ReproducesEveryLlamaSpmVector) {
  const std::string vocab = test_data("models/llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  std::vector<std::string> inputs =
      split(read_text_file(test_data("models/llama.cpp-vocab/ggml-vocab-llama-spm.gguf.inp")), "\n__ggml_vocab_test__\n");
  std::vector<std::string> outputs = split(read_text_file(test_data("models/llama.cpp-vocab/ggml-vocab-llama-spm.gguf.out")), "\n");
  if (!inputs.empty() && inputs.back().empty()) inputs.pop_back();  // the file ends with a separator
  ASSERT_GE(outputs.size(), inputs.size());
  int passed = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto r = run_command({tokamak_bin(), "tokenize", "-m", vocab, "-p", inputs[i], "--ids", "--no-bos"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, json_ids(outputs[i])) << "case " << i << ": '" << inputs[i] << "'";
    passed += r.out == json_ids(outputs[i]) ? 1 : 0;
  }
  EXPECT_EQ(passed, static_cast<int>(inputs.size()));
}

TEST(TokenizeCommand, AddsBosUnlessToldNot) {
  const std::string gguf = test_data("models/stories260K/stories260K.gguf");
  const auto with_bos = run_command({tokamak_bin(), "tokenize", "-m", gguf, "-p", "Once upon a time", "--ids"});
  EXPECT_EQ(with_bos.out, "[1, 403, 407, 261, 378]\n") << with_bos.err;
  const auto plain = run_command({tokamak_bin(), "tokenize", "-m", gguf, "-p", "Once upon a time", "--ids", "--no-bos"});
  EXPECT_EQ(plain.out, "[403, 407, 261, 378]\n");
  const auto bin = run_command({tokamak_bin(), "tokenize", "-m", test_data("models/stories260K/stories260K.bin"), "-z",
                                test_data("models/stories260K/tok512.bin"), "-p", "Once upon a time", "--ids"});
  EXPECT_EQ(bin.out, "[1, 403, 407, 261, 378]\n") << bin.err;
}

TEST(TokenizeCommand, MissingArgumentsAreUserErrors) {
  const auto r = run_command({tokamak_bin(), "tokenize", "-p", "x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("-m"), std::string::npos);
}

}  // namespace
}  // namespace tokamak
