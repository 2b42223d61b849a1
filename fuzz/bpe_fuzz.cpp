// libFuzzer target for byte-level BPE and the other GGUF tokenizer kinds.
// The first byte picks a vocabulary and the flags, the rest is the text.
// What must hold for any input:
//   - every id is inside the vocabulary;
//   - byte-level BPE without special tokens is lossless up to invalid UTF-8:
//     decode(encode(x)) is x with each byte that does not start a well-formed
//     character replaced by U+FFFD (these vocabularies spell all 256 bytes);
//   - TextStream's pieces joined equal decode() of the same ids;
//   - the pre-tokenizer's words joined are the (U+FFFD-cleaned) text;
//   - bpe::Merges makes the same merges by rank scan and by heap.
//   CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DTOKAMAK_FUZZ=ON -DTOKAMAK_TESTS=OFF
//   ninja -C build/fuzz bpe_fuzz && TOKAMAK_TEST_DATA=/work/shared build/fuzz/bpe_fuzz -max_total_time=60
// The vocabularies come from $TOKAMAK_TEST_DATA (default ../shared), as for the tests.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "io/gguf.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

std::filesystem::path data_dir() {
  const char* dir = std::getenv("TOKAMAK_TEST_DATA");
  return dir != nullptr && *dir != '\0' ? std::filesystem::path(dir) : std::filesystem::path("../shared");
}

tokamak::Tokenizer gguf(const char* name) {
  return tokamak::Tokenizer::from_gguf(
      tokamak::io::GgufFile::open(data_dir() / "models/llama.cpp-vocab" / (std::string("ggml-vocab-") + name + ".gguf")));
}

// Vocabularies with every byte spelled, one per pre-tokenizer family, then
// WordPiece (not lossless, only checked for ids and streaming).
const tokamak::Tokenizer& vocabulary(unsigned which) {
  static const tokamak::Tokenizer llama3 = tokamak::Tokenizer::from_bpe_files(
      data_dir() / "models/llama3.2-tokenizer/encoder.json", data_dir() / "models/llama3.2-tokenizer/vocab.bpe",
      "llama3", tokamak::Tokenizer::llama3_special_tokens());
  static const tokamak::Tokenizer gpt2 = gguf("gpt-2");
  static const tokamak::Tokenizer deepseek_llm = gguf("deepseek-llm");
  static const tokamak::Tokenizer deepseek_coder = gguf("deepseek-coder");
  static const tokamak::Tokenizer bert = gguf("bert-bge");
  const tokamak::Tokenizer* all[] = {&llama3, &gpt2, &deepseek_llm, &deepseek_coder, &bert};
  return *all[which % 5];
}

// GPT-2's vocabulary and merges as a bare bpe::Merges.
struct BareMerges {
  tokamak::Vocab vocab;
  tokamak::bpe::Merges merges;
  BareMerges() {
    const tokamak::io::GgufFile f =
        tokamak::io::GgufFile::open(data_dir() / "models/llama.cpp-vocab/ggml-vocab-gpt-2.gguf");
    vocab.pieces = f.get_array("tokenizer.ggml.tokens", tokamak::io::GgufType::STRING)->strings;
    vocab.scores.assign(vocab.pieces.size(), 0.0f);
    vocab.types.assign(vocab.pieces.size(), tokamak::TokenType::Normal);
    vocab.build_index();
    merges = tokamak::bpe::Merges::build(vocab, f.get_array("tokenizer.ggml.merges", tokamak::io::GgufType::STRING)->strings);
  }
};

std::string cleaned(std::string_view text) {
  std::string out;
  for (const uint32_t cp : tokamak::unicode::decode_utf8(text)) tokamak::unicode::append_utf8(out, cp);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const tokamak::Tokenizer& tok = vocabulary(flags & 7);
  const bool add_bos = (flags & 8) != 0;
  const bool parse_special = (flags & 16) != 0;

  const std::vector<int32_t> ids = tok.encode(text, add_bos, parse_special);
  for (const int32_t id : ids) {
    if (id < 0 || id >= tok.n_vocab()) std::abort();
  }
  const std::string decoded = tok.decode(ids);
  const bool byte_level = tok.kind() == tokamak::Tokenizer::Kind::Bpe;
  if (byte_level && !parse_special && decoded != cleaned(text)) std::abort();

  tokamak::TextStream stream(tok);
  std::string streamed;
  for (const int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  if (streamed != decoded) std::abort();

  if (byte_level) {
    static const tokamak::PreTokenizer pres[] = {
        tokamak::PreTokenizer::from_name("llama3"), tokamak::PreTokenizer::from_name("gpt-2"),
        tokamak::PreTokenizer::from_name("deepseek-llm"), tokamak::PreTokenizer::from_name("deepseek-coder")};
    tokamak::Words words;
    pres[(flags & 7) % 5].split(text, words);
    if (words.bytes != cleaned(text)) std::abort();
    static const BareMerges bare;
    for (size_t i = 0; i < words.size(); ++i) {
      if (words[i].empty()) std::abort();
      tokamak::bpe::Merges::Scratch scan, heap;
      scan.short_word_bytes = size_t{1} << 30;
      heap.short_word_bytes = 0;
      std::vector<int32_t> a, b;
      bare.merges.encode_word(bare.vocab, words[i], false, scan, a);
      bare.merges.encode_word(bare.vocab, words[i], false, heap, b);
      if (a != b) std::abort();
    }
  }
  return 0;
}
