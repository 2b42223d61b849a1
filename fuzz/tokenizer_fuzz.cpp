// libFuzzer target: encode arbitrary bytes with the stories260K vocabulary,
// through both the GGUF (llama.cpp rules) and tok512.bin (llama2.c rules)
// tokenizers, and check what must hold for any input:
//   - every id is inside the vocabulary;
//   - decode(encode(x)) == x for the GGUF vocabulary when x is valid UTF-8
//     without U+2581 and no special token is parsed (llama.cpp cuts invalid
//     UTF-8 by lead bytes alone, so an escaped space can end up inside a
//     byte-fallback run and come back as U+2581);
//   - TextStream's pieces joined equal decode() of the same ids.
//   CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DTOKAMAK_FUZZ=ON -DTOKAMAK_TESTS=OFF
//   ninja -C build/fuzz tokenizer_fuzz && TOKAMAK_TEST_DATA=/work/shared build/fuzz/tokenizer_fuzz -max_total_time=60
// The vocabularies come from $TOKAMAK_TEST_DATA (default ../shared), as for the tests.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "io/gguf.h"
#include "io/llama2c.h"
#include "tokenizer/tokenizer.h"

namespace {

std::filesystem::path data_dir() {
  const char* dir = std::getenv("TOKAMAK_TEST_DATA");
  return dir != nullptr && *dir != '\0' ? std::filesystem::path(dir) : std::filesystem::path("../shared");
}

const tokamak::Tokenizer& gguf_tokenizer() {
  static const tokamak::Tokenizer tok = tokamak::Tokenizer::from_gguf(
      tokamak::io::GgufFile::open(data_dir() / "models/stories260K/stories260K.gguf"));
  return tok;
}

const tokamak::Tokenizer& bin_tokenizer() {
  static const tokamak::Tokenizer tok = tokamak::Tokenizer::from_llama2c(
      tokamak::io::load_llama2c_tokenizer(data_dir() / "models/stories260K/tok512.bin", 512));
  return tok;
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

void check(const tokamak::Tokenizer& tok, std::string_view text, bool add_bos, bool parse_special, bool round_trip) {
  const std::vector<int32_t> ids = tok.encode(text, add_bos, parse_special);
  for (const int32_t id : ids) {
    if (id < 0 || id >= tok.n_vocab()) std::abort();
  }
  const std::string decoded = tok.decode(ids);
  if (round_trip && decoded != text) std::abort();
  tokamak::TextStream stream(tok);
  std::string streamed;
  for (const int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  if (streamed != decoded) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool add_bos = (flags & 1) != 0;
  const bool parse_special = (flags & 2) != 0;
  const bool plain = !parse_special && text.find("\xE2\x96\x81") == std::string_view::npos && valid_utf8(text);
  check(gguf_tokenizer(), text, add_bos, parse_special, plain);
  check(bin_tokenizer(), text, add_bos, parse_special, false);
  return 0;
}
