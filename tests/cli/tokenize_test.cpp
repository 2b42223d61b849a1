// `tokamak tokenize` against llama.cpp's tokenizer test vectors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "common/test_data.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

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
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("-m"), std::string::npos);
}

const std::string kLlama3Dir = "models/llama3.2-tokenizer/";

std::vector<std::string> llama3_argv(std::vector<std::string> more) {
  std::vector<std::string> argv = {tokamak_bin(), "tokenize", "--vocab-json", test_data(kLlama3Dir + "encoder.json"),
                                   "--merges", test_data(kLlama3Dir + "vocab.bpe")};
  argv.insert(argv.end(), more.begin(), more.end());
  return argv;
}

// ollama's example and the Llama 3 specials through --vocab-json / --merges.
TEST(TokenizeCommand, Llama3FromVocabJsonAndMerges) {
  auto r = run_command(llama3_argv({"-p", "hello world", "--ids", "--no-bos"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[15339, 1917]\n");
  r = run_command(llama3_argv({"-p", "hello world<|eot_id|>", "--ids", "--parse-special"}));
  EXPECT_EQ(r.out, "[128000, 15339, 1917, 128009]\n") << r.err;
  r = run_command(llama3_argv({"-p", "hello world"}));
  EXPECT_EQ(r.out, "128000 -> '<|begin_of_text|>'\n 15339 -> 'hello'\n  1917 -> ' world'\n") << r.err;
}

// A sample of llama.cpp's llama-bpe vectors (the library test runs all 46).
TEST(TokenizeCommand, ReproducesLlamaBpeVectorsThroughVocabJson) {
  const std::string base = "models/llama.cpp-vocab/ggml-vocab-llama-bpe.gguf";
  const std::vector<std::string> inputs = split(read_text_file(test_data(base + ".inp")), "\n__ggml_vocab_test__\n");
  const std::vector<std::string> outputs = split(read_text_file(test_data(base + ".out")), "\n");
  for (const size_t i : {0, 18, 22, 32, 43, 45}) {
    const auto r = run_command(llama3_argv({"-p", inputs[i], "--ids", "--no-bos"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, json_ids(outputs[i])) << "case " << i << ": '" << inputs[i] << "'";
  }
}

TEST(TokenizeCommand, VocabJsonErrors) {
  auto r = run_command({tokamak_bin(), "tokenize", "--vocab-json", test_data(kLlama3Dir + "encoder.json"), "-p", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--merges"), std::string::npos) << r.err;
  r = run_command(llama3_argv({"-p", "x", "--pre", "nonesuch"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("nonesuch"), std::string::npos) << r.err;
  r = run_command(llama3_argv({"-p", "x", "-m", test_data("models/stories260K/stories260K.gguf")}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not both"), std::string::npos) << r.err;
}

// stories260K with its SentencePiece vocabulary respelled as byte-level BPE
// (GPT-2 style: "▁" -> " ", <0xNN> -> byte characters, each merged piece
// the merge of its two parts, by score). The ids mean the same, so the model
// must generate the same tokens and the text must come out the same.
std::filesystem::path stories_as_byte_level_bpe() {
  static const std::filesystem::path path = [] {
    const io::GgufFile f = io::GgufFile::open(test_data("models/stories260K/stories260K.gguf"));
    io::GgufWriter w;
    for (const io::GgufKeyValue& kv : f.metadata()) {
      if (kv.key.rfind("tokenizer.", 0) != 0) w.set(kv.key, kv.value);
    }
    for (const io::GgufTensorInfo& t : f.tensors()) {
      const TensorView v = f.view(t);
      w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims), {v.data, v.n_bytes()});
    }
    const Tokenizer spm = Tokenizer::from_gguf(f);
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    for (int32_t id = 0; id < spm.n_vocab(); ++id) {
      const TokenType type = spm.token_type(id);
      std::string piece;
      if (type == TokenType::Control || type == TokenType::Unknown) {
        piece = spm.token_text(id);
      } else {
        unicode::append_byte_chars(piece, spm.decode_piece(0, id));  // prev 0: keep the leading space
      }
      tokens.push_back(piece);
      types.push_back(type == TokenType::Byte ? 1 : static_cast<int32_t>(type));
    }
    std::vector<std::string> merges;
    for (int32_t id = 0; id < spm.n_vocab(); ++id) {
      if (spm.token_type(id) != TokenType::Normal) continue;
      const std::vector<uint32_t> cps = unicode::decode_utf8(tokens[id]);
      std::string left;
      for (size_t k = 1; k < cps.size(); ++k) {  // the first split into two earlier pieces
        unicode::append_utf8(left, cps[k - 1]);
        const std::string right = tokens[id].substr(left.size());
        const auto find = [&](const std::string& s) { return std::find(tokens.begin(), tokens.begin() + id, s); };
        if (find(left) != tokens.begin() + id && find(right) != tokens.begin() + id) {
          merges.push_back(left + " " + right);
          break;
        }
      }
    }
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "gpt-2");
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_string_array("tokenizer.ggml.merges", merges);
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    const std::filesystem::path out =
        std::filesystem::path(::testing::TempDir()) / ("stories260K-bpe-" + std::to_string(getpid()) + ".gguf");
    w.write(out);
    return out;
  }();
  return path;
}

TEST(RunWithByteLevelBpe, TokenizesLikeTheSentencePieceVocabulary) {
  const auto r = run_command({tokamak_bin(), "tokenize", "-m", stories_as_byte_level_bpe().string(), "-p",
                              " Once upon a time, there was a little girl named Lily.", "--ids"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426]\n");
}

// tokamak run streams byte-level pieces: llama2.c's greedy story, with the
// leading space a byte-level vocabulary keeps (it has no dummy prefix to undo).
TEST(RunWithByteLevelBpe, GreedyStoryMatchesLlama2c) {
  const auto r = run_command({tokamak_bin(), "run", "-m", stories_as_byte_level_bpe().string(), "-n", "200",
                              "--temp", "0", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string expected = " ";
  expected += read_text_file(test_data("models/stories260K/expected_greedy_t0_n200.txt"));
  EXPECT_EQ(r.out, expected);
  std::filesystem::remove(stories_as_byte_level_bpe());
}

}  // namespace
}  // namespace tokamak
