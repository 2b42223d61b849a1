// libFuzzer target for the llama2.c checkpoint reader.
//   CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DTOKAMAK_FUZZ=ON -DTOKAMAK_TESTS=OFF
//   ninja -C build/fuzz llama2c_fuzz && build/fuzz/llama2c_fuzz -max_total_time=60
// The reader maps a path, so each input goes through a temporary file.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "io/llama2c.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/llama2c_fuzz." + std::to_string(getpid());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    const tokamak::io::Llama2cCheckpoint ck = tokamak::io::Llama2cCheckpoint::open(path);
    float sum = 0.0f;  // touch the first and last float of every view
    for (const tokamak::io::Llama2cLayer& l : ck.layers) {
      sum += l.w2.f32()[0] + l.w2.f32()[l.w2.n_elements() - 1];
    }
    sum += ck.wcls.f32()[ck.wcls.n_elements() - 1];
    if (sum == 12345.0f) std::fputc(' ', stderr);
  } catch (const tokamak::Error&) {
  }
  return 0;
}
