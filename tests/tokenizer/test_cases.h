// Readers for the tokenizer reference vectors and vocabularies in
// ../shared/models, shared by the tokenizer tests (header-only: each test file is its own executable).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_data.h"
#include "core/error.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::testing {

struct EncodeCase {
  std::string text;
  bool bos = false;
  std::vector<int32_t> ids;
};

// llama.cpp's <vocab>.gguf.inp / .out pair: texts separated by
// "\n__ggml_vocab_test__\n", one line of ids (no BOS) per text.
inline std::vector<EncodeCase> llama_cpp_vocab_cases(const std::string& gguf_relative) {
  const std::string inp = read_text_file(test_data(gguf_relative + ".inp"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<EncodeCase> cases;
  for (size_t pos = 0; pos < inp.size();) {
    size_t next = inp.find(sep, pos);
    if (next == std::string::npos) next = inp.size();
    cases.push_back({inp.substr(pos, next - pos), false, {}});
    pos = next + sep.size();
  }
  std::istringstream out(read_text_file(test_data(gguf_relative + ".out")));
  size_t i = 0;
  for (std::string line; std::getline(out, line); ++i) {
    if (i >= cases.size()) throw std::runtime_error(gguf_relative + ".out has more lines than .inp has cases");
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) cases[i].ids.push_back(id);
  }
  if (i != cases.size()) throw std::runtime_error(gguf_relative + ".out has fewer lines than .inp has cases");
  return cases;
}

// llama2c_encode_tests.json: {"cases": [{"text", "bos", "tokens"}]}.
inline std::vector<EncodeCase> llama2c_encode_cases() {
  const auto j = nlohmann::json::parse(read_text_file(test_data("models/llama2-tokenizer/llama2c_encode_tests.json")));
  std::vector<EncodeCase> cases;
  for (const auto& c : j["cases"]) cases.push_back({c["text"], c["bos"], c["tokens"]});
  return cases;
}

// llama_tokenizer_js_tests.json: testCase entries [text, ids with BOS].
inline std::vector<EncodeCase> llama_tokenizer_js_cases() {
  const auto j = nlohmann::json::parse(read_text_file(test_data("models/llama2-tokenizer/llama_tokenizer_js_tests.json")));
  std::vector<EncodeCase> cases;
  for (const auto& c : j["cases"]) {
    if (c["kind"] == "testCase") cases.push_back({c["args"][0], true, c["args"][1]});
  }
  return cases;
}

// llama3_tokenizer_js_tests.json (npm llama3-tokenizer-js): each case's kind
// and its JSON args as the file gives them.
struct JsCase {
  std::string kind;  // testEncodeAndDecode, testEncode, testDecode
  nlohmann::json args;
};
inline std::vector<JsCase> llama3_tokenizer_js_cases() {
  const auto j =
      nlohmann::json::parse(read_text_file(test_data("models/llama3.2-tokenizer/llama3_tokenizer_js_tests.json")));
  std::vector<JsCase> cases;
  for (const auto& c : j["cases"]) cases.push_back({c["kind"], c["args"]});
  return cases;
}

// The Llama 3 byte-level BPE from encoder.json + vocab.bpe, with the special
// tokens 128000.. that llama3-tokenizer-js appends; loaded once per test executable.
inline const Tokenizer& llama3_bpe() {
  static const Tokenizer tok = Tokenizer::from_bpe_files(test_data("models/llama3.2-tokenizer/encoder.json"),
                                                         test_data("models/llama3.2-tokenizer/vocab.bpe"), "llama3",
                                                         Tokenizer::llama3_special_tokens());
  return tok;
}

// llama.cpp's Llama 2 SentencePiece test vocabulary, loaded once per test executable.
inline const Tokenizer& llama_spm() {
  static const Tokenizer tok =
      Tokenizer::from_gguf(io::GgufFile::open(test_data("models/llama.cpp-vocab/ggml-vocab-llama-spm.gguf")));
  return tok;
}

// The words the pre-tokenizer `pre` cuts `text` into.
inline std::vector<std::string> pre_tokenize(std::string_view pre, std::string_view text) {
  Words words;
  PreTokenizer::from_name(pre).split(text, words);
  std::vector<std::string> out;
  for (size_t i = 0; i < words.size(); ++i) out.emplace_back(words[i]);
  return out;
}

// The message of the tokamak::Error that `f` throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace tokamak::testing
