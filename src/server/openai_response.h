// Response bodies of the OpenAI routes: a whole completion (stream: false),
// the chunks of a stream (server-sent events), usage. JSON is dumped with
// invalid UTF-8 replaced (U+FFFD): a token's piece can be part of a character.
//
//   completion: {"id", "object": "text_completion", "created", "model", "choices": [{"index", "text",
//                "logprobs", "finish_reason"}], "usage"}
//   chat:       {"id", "object": "chat.completion", ..., "choices": [{"index", "message": {"role",
//                "content"}, "logprobs", "finish_reason"}], "usage"}
//   chunks:     the same with "object": "text_completion" / "chat.completion.chunk", per choice a "text" or
//               a "delta"; finish_reason null until the choice's last chunk
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "server/openai_request.h"

namespace tokamak {
class Tokenizer;
}

namespace tokamak::server {

using Json = nlohmann::ordered_json;

// JSON text with invalid UTF-8 replaced instead of throwing.
std::string json_text(const Json& value);
// One server-sent event: "data: <json>\n\n".
std::string sse_event(const Json& value);

// Builds the bodies of one request; keeps, per completion, the token before
// the next one (a piece decodes differently after BOS) and the text offset.
class ResponseWriter {
 public:
  ResponseWriter(Endpoint endpoint, std::string id, std::string model, const Tokenizer& tokenizer, int32_t n,
                 bool logprobs);

  // The chunks of one step's output, one per changed completion (a chat
  // stream's first chunk of a completion also carries the role).
  std::vector<Json> chunks(const engine::RequestOutput& output);
  // The final usage chunk of a stream.
  Json usage_chunk(int64_t prompt_tokens, int64_t completion_tokens) const;
  // The whole response of a finished request.
  Json full(const engine::RequestResult& result, int32_t last_prompt_token);

 private:
  struct Cursor {
    int32_t prev_token = -1;
    int64_t text_offset = 0;
    bool started = false;
  };
  Json envelope(const char* object) const;
  Json logprobs(Cursor& cursor, const std::vector<int32_t>& tokens, const std::vector<sampling::Logprobs>& lps) const;

  Endpoint endpoint_;
  std::string id_;
  std::string model_;
  int64_t created_;
  const Tokenizer& tokenizer_;
  bool logprobs_;
  std::vector<Cursor> cursors_;
};

Json usage_json(int64_t prompt_tokens, int64_t completion_tokens);

}  // namespace tokamak::server
