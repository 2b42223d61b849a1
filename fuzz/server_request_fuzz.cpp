// libFuzzer target: the bodies of the server's POST routes
// (server/openai_request.h). The first byte picks the route (mod 4:
// /v1/completions, /v1/chat/completions, /tokenize, /detokenize), the rest is
// the body. Every input either
//   - throws ApiError 400 (a bad field) or 404 (code model_not_found) whose
//     error body json_text() dumps, with a non-empty message, or
//   - yields what the route promises: a completions prompt as text or ids, a
//     chat prompt as messages, include_usage only with stream, the ranges of
//     request_invariants.h; a tokenize prompt as text or messages; detokenize
//     ids inside the vocabulary.
// Anything else thrown escapes and libFuzzer reports it.
//   CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DTOKAMAK_FUZZ=ON -DTOKAMAK_TESTS=OFF
//   ninja -C build/fuzz server_request_fuzz
//   mkdir -p /tmp/server_fuzz_corpus   # libFuzzer adds what it finds to the first folder, not to the seeds
//   build/fuzz/server_request_fuzz -runs=10000000 /tmp/server_fuzz_corpus fuzz/corpus/server_request
#include <cstdint>
#include <string>
#include <string_view>

#include "request_invariants.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

namespace {

using tokamak::fuzz::require;
namespace server = tokamak::server;

const std::string kServed = "stories260K";
constexpr int32_t kVocab = 512;

void check_error(const server::ApiError& e) {
  require(e.status() == 400 || e.status() == 404);
  const server::Json body = e.to_json();
  const std::string text = server::json_text(body);  // must not throw
  require(!text.empty());
  const server::Json& error = body.at("error");
  require(error.at("message").is_string() && !error.at("message").get_ref<const std::string&>().empty());
  if (e.status() == 404) require(error.at("code") == "model_not_found" && error.at("param") == "model");
}

void check_route(uint8_t route, std::string_view body) {
  switch (route % 4) {
    case 0:
    case 1: {
      const server::Endpoint endpoint = route % 4 == 0 ? server::Endpoint::Completions : server::Endpoint::ChatCompletions;
      const server::ApiRequest api = server::parse_api_request(endpoint, body, kServed);
      require(api.endpoint == endpoint);
      require(!api.include_usage || api.stream);
      const tokamak::engine::Prompt& p = api.request.prompt;
      if (endpoint == server::Endpoint::ChatCompletions) {
        require(!p.messages.is_null() && p.ids.empty());
      } else {
        require(p.messages.is_null());
      }
      tokamak::fuzz::check_request(api.request);
      break;
    }
    case 2: {
      const server::TokenizeRequest t = server::parse_tokenize_request(body, kServed);
      require(t.prompt.ids.empty());
      if (!t.prompt.messages.is_null()) require(t.prompt.messages.is_array() && !t.prompt.messages.empty() && t.prompt.text.empty());
      break;
    }
    default:
      for (const int32_t id : server::parse_detokenize_request(body, kVocab, kServed)) require(id >= 0 && id < kVocab);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    check_route(data[0], body);
  } catch (const server::ApiError& e) {
    check_error(e);
  }
  return 0;
}
