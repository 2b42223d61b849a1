#include "engine/request_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.h"

namespace tokamak::engine {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxDepth = 32;
constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int32_t kMaxN = 128;          // OpenAI's limit
constexpr int32_t kMaxTopLogprobs = 20; // OpenAI's limit
constexpr size_t kMaxStops = 64;        // each string is matched against every piece of text

// A value as an error message shows it: scalars as JSON (strings cut at 40
// bytes), containers by their kind.
std::string shown(const Json& v) {
  if (v.is_array()) return v.empty() ? "[]" : "a list";
  if (v.is_object()) return v.empty() ? "{}" : "an object";
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    // Cut at a character boundary so that the message stays valid UTF-8.
    size_t cut = std::min<size_t>(s.size(), 40);
    while (cut < s.size() && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    return cut < s.size() ? Json(s.substr(0, cut)).dump() + "..." : v.dump();
  }
  return v.dump();
}

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

[[noreturn]] void fail(std::string_view field, const Json& v, std::string_view why) {
  throw RequestFieldError(std::string(field), std::string(field) + " = " + shown(v) + " " + std::string(why));
}

double number(const Json& v, std::string_view field, double lo, double hi) {
  if (!v.is_number()) fail(field, v, "is not a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    fail(field, v, "is outside [" + number_text(lo) + ", " + number_text(hi) + "]");
  }
  return x;
}

int64_t integer(const Json& v, std::string_view field, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) fail(field, v, "is not an integer");
  const bool too_big = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi);
  const int64_t x = too_big ? hi : v.get<int64_t>();
  if (too_big || x < lo || x > hi) fail(field, v, "is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

bool boolean(const Json& v, std::string_view field) {
  if (!v.is_boolean()) fail(field, v, "is not true or false");
  return v.get<bool>();
}

std::vector<int32_t> token_ids(const Json& v, std::string_view field) {
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    ids.push_back(static_cast<int32_t>(integer(v[i], std::string(field) + "[" + std::to_string(i) + "]", 0, kMaxInt32)));
  }
  return ids;
}

void set_prompt(const Json& v, Request& r) {
  if (v.is_string()) {
    r.prompt = Prompt::from_text(v.get<std::string>());
    return;
  }
  if (!v.is_array()) fail("prompt", v, "is neither a string nor a list of token ids");
  if (v.empty()) fail("prompt", v, "is an empty list of token ids");
  if (v[0].is_string()) fail("prompt", v, "of strings is not supported: put one prompt on each line");
  r.prompt = Prompt::from_ids(token_ids(v, "prompt"));
}

void set_messages(const Json& v, Request& r) {
  if (!v.is_array()) fail("messages", v, "is not a list of {\"role\", \"content\"} objects");
  if (v.empty()) fail("messages", v, "has no message");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const Json& m = v[i];
    if (!m.is_object()) fail(at, m, "is not an object with \"role\" and \"content\"");
    for (const char* key : {"role", "content"}) {
      const auto it = m.find(key);
      if (it == m.end()) throw RequestFieldError(at, at + " has no \"" + key + "\"");
      if (!it->is_string()) fail(at + "." + key, *it, "is not a string");
    }
  }
  r.prompt = Prompt::from_messages(v);
}

void set_stop(const Json& v, Request& r) {
  const Json list = v.is_string() ? Json::array({v}) : v;
  if (!list.is_array()) fail("stop", v, "is neither a string nor a list of strings");
  if (list.size() > kMaxStops) fail("stop", v, "has " + std::to_string(list.size()) + " strings, more than " + std::to_string(kMaxStops));
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = v.is_string() ? "stop" : "stop[" + std::to_string(i) + "]";
    if (!list[i].is_string()) fail(at, list[i], "is not a string");
    if (list[i].get_ref<const std::string&>().empty()) fail(at, list[i], "is empty");
    r.params.stop.push_back(list[i].get<std::string>());
  }
}

void set_logit_bias(const Json& v, Request& r) {
  if (!v.is_object()) fail("logit_bias", v, "is not an object of token id -> bias");
  for (const auto& [key, bias] : v.items()) {
    const std::string at = "logit_bias[\"" + key + "\"]";
    int64_t id = -1;
    if (!key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos) id = std::stoll(key);
    if (id < 0 || id > kMaxInt32) throw RequestFieldError("logit_bias", "logit_bias: key \"" + key + "\" is not a token id");
    r.params.sampling.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(number(bias, at, -100, 100)));
  }
}

// logprobs: true/false (the chat API), or a count of alternatives (the
// completions API), which also turns them on.
void set_logprobs(const Json& v, Request& r) {
  if (v.is_boolean()) {
    r.params.logprobs = v.get<bool>();
    return;
  }
  if (!v.is_number_integer()) fail("logprobs", v, "is neither true/false nor a count of alternatives");
  r.params.sampling.n_probs = static_cast<int>(integer(v, "logprobs", 0, kMaxTopLogprobs));
  r.params.logprobs = true;
}

struct Field {
  std::string_view name;
  std::string_view doc;
  void (*apply)(const Json& v, Request& r);
};

// The schema: every accepted field, its type, range and default.
const Field kFields[] = {
    {"prompt", "string, or a list of token ids; this or messages", set_prompt},
    {"messages", "list of {\"role\": string, \"content\": string}, rendered with the model's chat template", set_messages},
    {"max_tokens", "integer >= 1; default: until max_model_len",
     [](const Json& v, Request& r) { r.params.max_tokens = static_cast<int32_t>(integer(v, "max_tokens", 1, kMaxInt32)); }},
    {"max_completion_tokens", "integer >= 1: the chat API's newer name of max_tokens",
     [](const Json& v, Request& r) {
       r.params.max_tokens = static_cast<int32_t>(integer(v, "max_completion_tokens", 1, kMaxInt32));
     }},
    {"temperature", "number in [0, 2]; 0 = greedy; default 1",
     [](const Json& v, Request& r) { r.params.sampling.temperature = static_cast<float>(number(v, "temperature", 0, 2)); }},
    {"top_p", "number in [0, 1]; default 1 (off)",
     [](const Json& v, Request& r) { r.params.sampling.top_p = static_cast<float>(number(v, "top_p", 0, 1)); }},
    {"top_k", "integer >= -1; 0 or -1 = off (default)",
     [](const Json& v, Request& r) {
       r.params.sampling.top_k = static_cast<int>(std::max<int64_t>(0, integer(v, "top_k", -1, kMaxInt32)));
     }},
    {"min_p", "number in [0, 1]; default 0 (off)",
     [](const Json& v, Request& r) { r.params.sampling.min_p = static_cast<float>(number(v, "min_p", 0, 1)); }},
    {"seed", "integer in [0, 2^63 - 1]; default random",
     [](const Json& v, Request& r) {
       r.params.sampling.seed = static_cast<uint64_t>(integer(v, "seed", 0, std::numeric_limits<int64_t>::max()));
     }},
    {"stop", "string or list of up to 64 non-empty strings; not included in the text", set_stop},
    {"stop_token_ids", "list of token ids that end a completion",
     [](const Json& v, Request& r) {
       if (!v.is_array()) fail("stop_token_ids", v, "is not a list of token ids");
       r.params.stop_token_ids = token_ids(v, "stop_token_ids");
     }},
    {"n", "integer in [1, 128]: completions of the prompt; default 1",
     [](const Json& v, Request& r) { r.params.n = static_cast<int32_t>(integer(v, "n", 1, kMaxN)); }},
    {"presence_penalty", "number in [-2, 2]; default 0",
     [](const Json& v, Request& r) {
       r.params.sampling.presence_penalty = static_cast<float>(number(v, "presence_penalty", -2, 2));
     }},
    {"frequency_penalty", "number in [-2, 2]; default 0",
     [](const Json& v, Request& r) {
       r.params.sampling.frequency_penalty = static_cast<float>(number(v, "frequency_penalty", -2, 2));
     }},
    {"repetition_penalty", "number in (0, 10]; default 1 (off)",
     [](const Json& v, Request& r) {
       const double x = number(v, "repetition_penalty", 0, 10);
       if (x == 0) fail("repetition_penalty", v, "must be > 0");
       r.params.sampling.repeat_penalty = static_cast<float>(x);
     }},
    {"logit_bias", "object of token id (a string) -> number in [-100, 100]", set_logit_bias},
    {"ignore_eos", "true or false: generate past end-of-text; default false",
     [](const Json& v, Request& r) { r.params.ignore_eos = boolean(v, "ignore_eos"); }},
    {"logprobs", "true or false, or an integer in [0, 20] (alternatives per token); default false", set_logprobs},
    {"top_logprobs", "integer in [0, 20]: alternatives per token; needs logprobs",
     [](const Json& v, Request& r) {
       r.params.sampling.n_probs = static_cast<int>(integer(v, "top_logprobs", 0, kMaxTopLogprobs));
     }},
    {"user", "string: the end user's id (accepted, not used)",
     [](const Json& v, Request&) {
       if (!v.is_string()) fail("user", v, "is not a string");
     }},
    {"priority", "integer; lower runs first; default 0",
     [](const Json& v, Request& r) {
       r.priority = static_cast<int32_t>(integer(v, "priority", std::numeric_limits<int32_t>::min(), kMaxInt32));
     }},
};

const Field* find_field(std::string_view name) {
  for (const Field& f : kFields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string field_names() {
  std::string out;
  for (const Field& f : kFields) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

}  // namespace

Request request_from_object(const Json& object, UnknownFields unknown) {
  if (!object.is_object()) throw Error("a request must be a JSON object, not " + shown(object));
  Request r;
  // The OpenAI API's defaults, where tokamak's SamplingParams has llama.cpp's.
  sampling::SamplingParams& s = r.params.sampling;
  s.temperature = 1.0f;
  s.top_k = 0;
  s.top_p = 1.0f;
  s.min_p = 0.0f;
  s.repeat_last_n = -1;
  bool has_prompt = false;
  for (const auto& [key, value] : object.items()) {
    const Field* f = find_field(key);
    if (f == nullptr && unknown == UnknownFields::Ignore) continue;
    if (f == nullptr) throw RequestFieldError(key, "unknown field \"" + key + "\" (known: " + field_names() + ")");
    if (value.is_null()) continue;
    if (key == "prompt" || key == "messages") {
      if (has_prompt) throw RequestFieldError(key, "give either prompt or messages, not both");
      has_prompt = true;
    }
    f->apply(value, r);
  }
  if (!has_prompt) throw Error("the request has neither prompt nor messages");
  if (s.n_probs > 0 && !r.params.logprobs) {
    throw RequestFieldError("top_logprobs", "top_logprobs = " + std::to_string(s.n_probs) + " needs \"logprobs\": true");
  }
  return r;
}

Json parse_json_text(std::string_view text) {
  // The parser is iterative, but destroying or printing a value recurses:
  // cap the depth while parsing.
  const Json::parser_callback_t depth_guard = [](int depth, Json::parse_event_t, Json&) {
    if (depth > kMaxDepth) throw Error("the JSON nests deeper than " + std::to_string(kMaxDepth) + " levels");
    return true;
  };
  Json object;
  try {
    object = Json::parse(text.begin(), text.end(), depth_guard);
  } catch (const Json::exception& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
    // (or out_of_range.406 for a number beyond a double)
    const std::string what = e.what();
    const size_t at = what.find("] ");
    throw Error("not valid JSON: " + (at == std::string::npos ? what : what.substr(at + 2)));
  }
  return object;
}

Request request_from_json(std::string_view text, UnknownFields unknown) {
  return request_from_object(parse_json_text(text), unknown);
}

std::vector<std::string> request_json_fields() {
  std::vector<std::string> out;
  for (const Field& f : kFields) out.push_back(std::string(f.name) + ": " + std::string(f.doc));
  return out;
}

}  // namespace tokamak::engine
