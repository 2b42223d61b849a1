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
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"

namespace tokamak::engine {

// Parses one JSON text (a JSONL line). Throws tokamak::Error naming the field
// and the value ("temperature = -1 is outside [0, 2]"), or where the JSON is
// malformed ("not valid JSON: parse error at line 1, column 12: ..."). Nesting
// more than 32 levels below the top-level value is an error (it bounds the
// recursion any input can cause).
Request request_from_json(std::string_view text);
// The same for a value parsed already (an HTTP body); it must be an object.
Request request_from_object(const nlohmann::ordered_json& object);

// One line per accepted field, "name: type, range; default", for help texts.
std::vector<std::string> request_json_fields();

}  // namespace tokamak::engine
