// libFuzzer target for the llama2.c tokenizer.bin reader, then a Tokenizer
// built from whatever it accepted: encode a fixed text, decode every id.
//   CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DTOKAMAK_FUZZ=ON -DTOKAMAK_TESTS=OFF
//   ninja -C build/fuzz tokenizer_bin_fuzz && build/fuzz/tokenizer_bin_fuzz -max_total_time=60
// Input: 2 bytes of vocab_size (1..1024), then the file's bytes. The reader
// maps a path, so each input goes through a temporary file.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "io/llama2c.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int32_t vocab_size = 1 + ((data[0] | (data[1] << 8)) & 1023);
  static const std::string path = "/tmp/tokenizer_bin_fuzz." + std::to_string(getpid());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data + 2, 1, size - 2, f);
  std::fclose(f);
  try {
    const tokamak::io::Llama2cVocab vocab = tokamak::io::load_llama2c_tokenizer(path, vocab_size);
    if (vocab.pieces.size() != static_cast<size_t>(vocab_size)) std::abort();
    const tokamak::Tokenizer tok = tokamak::Tokenizer::from_llama2c(vocab);
    for (const int32_t id : tok.encode("Once upon a time \xF0\x9F\xA6\x99 \xE2\x96\x81<s>\n", true, true)) {
      if (id < 0 || id >= tok.n_vocab()) std::abort();
    }
    std::string text;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) text += tok.decode_piece(id - 1, id);
  } catch (const tokamak::Error&) {
  }
  return 0;
}
