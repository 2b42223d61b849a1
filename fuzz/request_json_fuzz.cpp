// libFuzzer target: one JSONL line of `tokamak batch` (engine/request_json.h)
// from arbitrary bytes. Any input either throws tokamak::Error or yields a
// Request that holds what the schema promises (request_invariants.h).
//   CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DTOKAMAK_FUZZ=ON -DTOKAMAK_TESTS=OFF
//   ninja -C build/fuzz request_json_fuzz && build/fuzz/request_json_fuzz -max_total_time=60
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "engine/request_json.h"
#include "request_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tokamak::engine::Request r;
  try {
    r = tokamak::engine::request_from_json(text);
  } catch (const tokamak::Error&) {
    return 0;  // refused, with a message: fine
  }
  tokamak::fuzz::check_request(r);
  return 0;
}
