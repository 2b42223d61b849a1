// libFuzzer target for the GGUF reader: any bytes must either parse (and then
// every tensor view lies inside them) or throw tokamak::Error.
//
// Build and run (from the repository root):
//   CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DTOKAMAK_FUZZ=ON -DTOKAMAK_TESTS=OFF
//   ninja -C build/fuzz gguf_fuzz
//   mkdir -p build/fuzz/corpus && cp ../shared/fixtures/quant/{Q4_0,Q8_0,Q4_K,TQ1_0}/*.gguf build/fuzz/corpus/
//   head -c 16384 ../shared/models/stories260K/stories260K.gguf > build/fuzz/corpus/stories-header.gguf
//   build/fuzz/gguf_fuzz build/fuzz/corpus -max_total_time=120 -max_len=32768
// A crash leaves crash-<sha1> in the working directory; replay it with
//   build/fuzz/gguf_fuzz crash-<sha1>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/error.h"
#include "io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tokamak::io;
  try {
    const GgufFile f = GgufFile::parse({reinterpret_cast<const std::byte*>(data), size}, "fuzz.gguf");
    // Every byte of every tensor: ASan reports any view that reaches past the input.
    unsigned sum = 0;
    for (const GgufTensorInfo& t : f.tensors()) {
      const tokamak::TensorView v = f.view(t);
      if (v.n_bytes() != t.n_bytes || v.n_elements() <= 0) __builtin_trap();
      for (size_t i = 0; i < v.n_bytes(); ++i) sum += static_cast<unsigned>(v.data[i]);
      if (f.find_tensor(t.name) == nullptr) __builtin_trap();
    }
    // The typed getters must answer or throw Error for every key.
    for (const GgufKeyValue& kv : f.metadata()) {
      if (f.find(kv.key) == nullptr) __builtin_trap();
      try {
        (void)f.get_int(kv.key);
      } catch (const tokamak::Error&) {
      }
      try {
        (void)f.get_string(kv.key);
      } catch (const tokamak::Error&) {
      }
      try {
        (void)f.get_array(kv.key, GgufType::STRING);
      } catch (const tokamak::Error&) {
      }
      sum += static_cast<unsigned>(kv.value.array_size());
    }
    volatile unsigned sink = sum;
    (void)sink;
  } catch (const tokamak::Error&) {
  }
  return 0;
}
