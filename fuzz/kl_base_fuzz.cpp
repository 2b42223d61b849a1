// libFuzzer target for the --kl-divergence-base reader (tools/perplexity.h,
// KlBase::open): any file must either open (and then every row it serves lies
// inside the file) or throw tokamak::Error. The input gets its FNV-1a 64
// checksum appended before it is written, so that the fuzzer explores the
// header and size checks instead of stopping at the checksum; inputs with a
// wrong checksum are exercised by the unsealed variant (first input byte odd).
//   CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DTOKAMAK_FUZZ=ON -DTOKAMAK_TESTS=OFF
//   ninja -C build/fuzz kl_base_fuzz && build/fuzz/kl_base_fuzz -max_total_time=60
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "tools/perplexity.h"

namespace {

// FNV-1a 64, written from its definition (the file's documented checksum).
uint64_t fnv1a(const uint8_t* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 0x100000001b3ull;
  return h;
}

const std::filesystem::path& scratch_file() {
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("kl_base_fuzz." + std::to_string(getpid()));
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool seal = (data[0] & 1) == 0;
  std::vector<uint8_t> bytes(data + 1, data + size);
  if (seal) {
    const uint64_t h = fnv1a(bytes.data(), bytes.size());
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(h >> (8 * i)));
  }
  if (std::FILE* f = std::fopen(scratch_file().c_str(), "wb")) {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  } else {
    __builtin_trap();
  }
  try {
    const tokamak::tools::KlBase base = tokamak::tools::KlBase::open(scratch_file());
    const tokamak::tools::ChunkPlan& plan = base.plan();
    if (base.tokens().size() != static_cast<size_t>(plan.n_chunks) * plan.n_ctx) __builtin_trap();
    // Every value of every row: ASan reports a row that reaches past the mapping.
    float sum = 0.0f;
    for (int32_t c = 0; c < plan.n_chunks; ++c) {
      for (int32_t i = 0; i < plan.n_scored(); ++i) {
        for (const float x : base.row(c, i)) sum += x;
      }
    }
    (void)sum;
  } catch (const tokamak::Error&) {
  }
  return 0;
}
