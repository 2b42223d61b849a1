// One request as JSON, with the OpenAI API's field names, turned into an
// engine::Request: a line of `tokamak batch`'s JSONL input (and, later, the
// body the server validates). The schema is declared once, in the field table
// of request_json.cpp (name, type, range, default); every field is optional
// except the prompt, and null means the default.
//
//   {"prompt": "Once upon a time", "max_tokens": 64, "temperature": 0.7, "n": 2}
//   {"messages": [{"role": "user", "content": "Hi"}], "stop": ["\n"], "seed": 7}
//
// Defaults follow the OpenAI API, not the CLI's llama.cpp ones: temperature 1,
// top_p 1, top_k and min_p off, no penalties, a random seed, max_tokens until
// max_model_len. The penalties' window is the whole sequence, prompt included
// (OpenAI counts only the generated tokens).
#pragma once

#include <string>
#include <utility>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/request.h"

namespace tokamak::engine {

// A field with a wrong type or value; field() is its name ("temperature",
// "messages[2].content"), what() names it and the value.
class RequestFieldError : public Error {
 public:
  RequestFieldError(std::string field, const std::string& message) : Error(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// A field the table does not know: an error for `tokamak batch` (a typo would
// silently change the run), ignored by the server (as the OpenAI API does, so
// clients that send newer fields keep working).
enum class UnknownFields { Reject, Ignore };

// Parses one JSON text (a JSONL line). Throws RequestFieldError naming the
// field and the value ("temperature = -1 is outside [0, 2]"), tokamak::Error
// where the JSON is malformed ("not valid JSON: parse error at line 1, column
// 12: ...") or the request as a whole is wrong (no prompt). Nesting more than
// 32 levels below the top-level value is an error (it bounds the recursion any
// input can cause).
Request request_from_json(std::string_view text, UnknownFields unknown = UnknownFields::Reject);
// Parses JSON text with the depth limit above; throws tokamak::Error.
nlohmann::ordered_json parse_json_text(std::string_view text);
// The same for a value parsed already (an HTTP body); it must be an object.
Request request_from_object(const nlohmann::ordered_json& object, UnknownFields unknown = UnknownFields::Reject);

// One line per accepted field, "name: type, range; default", for help texts.
std::vector<std::string> request_json_fields();

}  // namespace tokamak::engine
