// libFuzzer target for the Jinja chat-template interpreter: arbitrary bytes as
// template text, parsed and rendered against a fixed conversation with tools.
// Any outcome but a rendered string or a tokamak::Error (crash, sanitizer
// report, other exception, timeout, memory blow-up) is a bug.
//
//   cmake -S . -B build/fuzz -G Ninja -DTOKAMAK_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++
//   ninja -C build/fuzz jinja_fuzz
//   mkdir -p /tmp/jinja_corpus && cp ../shared/fixtures/chat-templates/*.jinja /tmp/jinja_corpus/
//   build/fuzz/jinja_fuzz -max_len=16384 -timeout=10 -rss_limit_mb=2048 /tmp/jinja_corpus
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "jinja/template.h"

namespace {

using tokamak::jinja::Value;

const tokamak::jinja::Variables& context() {
  static const tokamak::jinja::Variables vars = [] {
    const auto messages = nlohmann::ordered_json::parse(R"([
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Weather in Paris? \u00e9\u65e5"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1234", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
      {"role": "tool", "tool_call_id": "call_1234", "content": "{\"temp\": 21.5}"},
      {"role": "assistant", "content": "<think>ok</think>It is 21.5C."}])");
    const auto tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {
      "name": "get_weather", "description": "Weather for a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"},
        "days": {"type": "integer", "default": 1}}, "required": ["city"]}}}])");
    return tokamak::jinja::Variables{
        {"messages", tokamak::jinja::from_json(messages)},
        {"tools", tokamak::jinja::from_json(tools)},
        {"bos_token", Value("<s>")},
        {"eos_token", Value("</s>")},
        {"add_generation_prompt", Value(true)},
    };
  }();
  return vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  tokamak::jinja::RenderOptions options;
  options.now_unix_seconds = 1768435200;
  // Small limits keep each input fast; the limits themselves are under test too.
  options.limits.max_string_bytes = size_t{1} << 18;
  options.limits.max_work = 200'000;
  try {
    const auto tmpl = tokamak::jinja::Template::parse(source);
    (void)tmpl.render(context(), options);
  } catch (const tokamak::Error&) {
    // Malformed, unsupported, raising or runaway templates end here: expected.
  }
  return 0;
}
