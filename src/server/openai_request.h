// The bodies of the OpenAI routes, validated: a completions or chat request
// becomes an engine::Request plus what only the HTTP layer uses (stream,
// include_usage); /tokenize and /detokenize bodies their own structs. Pure
// functions of the bytes (no HTTP, no engine), so the fuzz target drives
// exactly what the server runs. Errors are ApiErrors: 400 naming the field and
// the value, 404 for a model name the server does not serve.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"

namespace tokamak::server {

enum class Endpoint { Completions, ChatCompletions };

struct ApiRequest {
  Endpoint endpoint = Endpoint::Completions;
  engine::Request request;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the token counts
};

// `served_model`: the name /v1/models lists; a "model" field must equal it.
ApiRequest parse_api_request(Endpoint endpoint, std::string_view body, const std::string& served_model);

// POST /tokenize: {"prompt": "text"} or {"messages": [...]}, and
// "add_special_tokens" (default true: BOS as the model wants it).
struct TokenizeRequest {
  engine::Prompt prompt;
  bool add_special_tokens = true;
};
TokenizeRequest parse_tokenize_request(std::string_view body, const std::string& served_model);

// POST /detokenize: {"tokens": [ids]}; ids are checked against n_vocab.
std::vector<int32_t> parse_detokenize_request(std::string_view body, int32_t n_vocab, const std::string& served_model);

}  // namespace tokamak::server
