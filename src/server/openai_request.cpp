#include "server/openai_request.h"

#include "engine/request_json.h"
#include "server/api_error.h"

namespace tokamak::server {
namespace {

using Json = nlohmann::ordered_json;

Json parse_body(std::string_view body) {
  try {
    Json object = engine::parse_json_text(body);
    if (!object.is_object()) throw ApiError::bad_request("the body must be a JSON object, not " + object.dump().substr(0, 40));
    return object;
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError::bad_request(e.what());
  }
}

// The value of an optional field, or null.
const Json& field(const Json& object, const char* name) {
  static const Json null;
  const auto it = object.find(name);
  return it == object.end() ? null : *it;
}

// `path`: the field as the client wrote it, nested ones with their parent
// ("stream_options.include_usage"), for the message and param.
bool optional_bool(const Json& object, const char* name, const std::string& path) {
  const Json& v = field(object, name);
  if (v.is_null()) return false;
  if (!v.is_boolean()) throw ApiError::bad_request(path + " = " + v.dump().substr(0, 40) + " is not true or false", path);
  return v.get<bool>();
}
bool optional_bool(const Json& object, const char* name) { return optional_bool(object, name, name); }

// "model" may be left out (one model is served), but a name that is not the
// served one is a 404, as OpenAI answers an unknown model.
void check_model(const Json& object, const std::string& served_model) {
  const Json& v = field(object, "model");
  if (v.is_null()) return;
  if (!v.is_string()) throw ApiError::bad_request("model = " + v.dump().substr(0, 40) + " is not a string", "model");
  if (v.get_ref<const std::string&>() != served_model) {
    throw ApiError(404, "not_found_error",
                   "the model '" + v.get<std::string>().substr(0, 200) + "' does not exist; this server serves '" + served_model + "'",
                   "model", "model_not_found");
  }
}

engine::Request engine_request(const Json& object) {
  try {
    return engine::request_from_object(object, engine::UnknownFields::Ignore);
  } catch (const engine::RequestFieldError& e) {
    throw ApiError::bad_request(e.what(), e.field());
  } catch (const Error& e) {
    throw ApiError::bad_request(e.what());
  }
}

}  // namespace

ApiRequest parse_api_request(Endpoint endpoint, std::string_view body, const std::string& served_model) {
  Json object = parse_body(body);
  check_model(object, served_model);
  ApiRequest api;
  api.endpoint = endpoint;
  const bool chat = endpoint == Endpoint::ChatCompletions;
  const char* needed = chat ? "messages" : "prompt";
  const char* other = chat ? "prompt" : "messages";
  if (field(object, needed).is_null()) throw ApiError::bad_request(std::string("the request has no \"") + needed + "\"", needed);
  if (object.contains(other)) {
    throw ApiError::bad_request(std::string("\"") + other + "\" belongs to " +
                                    (chat ? "/v1/completions" : "/v1/chat/completions") + "; this route takes \"" + needed + "\"",
                                other);
  }
  // A list holding one prompt string is one prompt (clients send ["text"]);
  // several prompts in one request are not served.
  if (Json& prompt = object[needed]; !chat && prompt.is_array() && !prompt.empty() && prompt[0].is_string()) {
    if (prompt.size() > 1) {
      throw ApiError::bad_request("prompt is a list of " + std::to_string(prompt.size()) +
                                      " strings; send one request per prompt",
                                  "prompt");
    }
    prompt = Json(prompt[0]);
  }
  api.stream = optional_bool(object, "stream");
  const Json& options = field(object, "stream_options");
  if (!options.is_null()) {
    if (!options.is_object()) throw ApiError::bad_request("stream_options is not an object", "stream_options");
    if (!api.stream) throw ApiError::bad_request("stream_options needs \"stream\": true", "stream_options");
    api.include_usage = optional_bool(options, "include_usage", "stream_options.include_usage");
  }
  api.request = engine_request(object);
  api.request.params.max_tokens_must_fit = true;
  return api;
}

TokenizeRequest parse_tokenize_request(std::string_view body, const std::string& served_model) {
  const Json object = parse_body(body);
  check_model(object, served_model);
  TokenizeRequest t;
  t.add_special_tokens = field(object, "add_special_tokens").is_null() || optional_bool(object, "add_special_tokens");
  // llama-server names the text "content"; vLLM "prompt".
  Json request = Json::object();
  for (const char* name : {"prompt", "content", "messages"}) {
    const Json& v = field(object, name);
    if (v.is_null()) continue;
    if (std::string_view(name) != "messages" && !v.is_string()) {
      throw ApiError::bad_request(std::string(name) + " = " + v.dump().substr(0, 40) + " is not a string", name);
    }
    request[std::string_view(name) == "content" ? "prompt" : name] = v;
  }
  t.prompt = engine_request(request).prompt;
  return t;
}

std::vector<int32_t> parse_detokenize_request(std::string_view body, int32_t n_vocab, const std::string& served_model) {
  const Json object = parse_body(body);
  check_model(object, served_model);
  const Json& tokens = field(object, "tokens");
  if (!tokens.is_array()) throw ApiError::bad_request("the request has no \"tokens\" list", "tokens");
  std::vector<int32_t> ids;
  ids.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Json& t = tokens[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
      throw ApiError::bad_request("tokens[" + std::to_string(i) + "] = " + t.dump().substr(0, 40) +
                                      " is not a token id in [0, " + std::to_string(n_vocab) + ")",
                                  "tokens");
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

}  // namespace tokamak::server
