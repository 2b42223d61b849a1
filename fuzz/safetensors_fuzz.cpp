// libFuzzer target for the safetensors reader: any bytes must either parse
// (and then every tensor lies inside them and reads as floats where it is a
// float type) or throw tokamak::Error.
//
// Build and run (from the repository root):
//   CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DTOKAMAK_FUZZ=ON -DTOKAMAK_TESTS=OFF
//   ninja -C build/fuzz safetensors_fuzz
//   mkdir -p build/fuzz/st_corpus && printf '\x38\0\0\0\0\0\0\0{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}  \0\x3c\0\xc0' > build/fuzz/st_corpus/seed.safetensors
//   build/fuzz/safetensors_fuzz build/fuzz/st_corpus -max_total_time=120 -max_len=4096
// A crash leaves crash-<sha1> in the working directory; replay it with
//   build/fuzz/safetensors_fuzz crash-<sha1>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tokamak::io;
  try {
    const SafetensorsFile f = SafetensorsFile::parse({reinterpret_cast<const std::byte*>(data), size}, "fuzz.safetensors");
    unsigned sum = 0;
    std::vector<float> row;
    for (const SafetensorsTensor& t : f.tensors()) {
      if (f.find(t.name) != &t) __builtin_trap();
      if (t.data.size() != t.end - t.begin) __builtin_trap();
      if (t.data.size() != static_cast<size_t>(t.n_elements()) * safetensors_dtype_size(t.dtype)) __builtin_trap();
      for (std::byte b : t.data) sum += static_cast<unsigned>(b);
      try {
        row.resize(static_cast<size_t>(t.n_elements()));
        read_f32(t, 0, t.n_elements(), row.data());
      } catch (const tokamak::Error&) {
      }
    }
    volatile unsigned sink = sum;
    (void)sink;
  } catch (const tokamak::Error&) {
  }
  return 0;
}
