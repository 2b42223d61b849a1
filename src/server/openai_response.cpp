#include "server/openai_response.h"

#include <chrono>

#include "tokenizer/tokenizer.h"

namespace tokamak::server {

std::string json_text(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string sse_event(const Json& value) { return "data: " + json_text(value) + "\n\n"; }

Json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

namespace {

Json finish_json(engine::FinishReason finish) {
  return finish == engine::FinishReason::None ? Json(nullptr) : Json(engine::finish_reason_name(finish));
}

Json bytes_json(const std::string& piece) {
  Json bytes = Json::array();
  for (const char c : piece) bytes.push_back(static_cast<unsigned char>(c));
  return bytes;
}

}  // namespace

ResponseWriter::ResponseWriter(Endpoint endpoint, std::string id, std::string model, const Tokenizer& tokenizer,
                               int32_t n, bool logprobs)
    : endpoint_(endpoint),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      tokenizer_(tokenizer),
      logprobs_(logprobs),
      cursors_(static_cast<size_t>(n)) {}

Json ResponseWriter::envelope(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]};
// completions: {"tokens", "token_logprobs", "top_logprobs": [{piece: logprob}], "text_offset"}.
Json ResponseWriter::logprobs(Cursor& cursor, const std::vector<int32_t>& tokens,
                              const std::vector<sampling::Logprobs>& lps) const {
  const bool chat = endpoint_ == Endpoint::ChatCompletions;
  Json content = Json::array(), pieces = Json::array(), token_logprobs = Json::array(), tops = Json::array(),
       offsets = Json::array();
  for (size_t i = 0; i < tokens.size() && i < lps.size(); ++i) {
    const std::string piece = tokenizer_.decode_piece(cursor.prev_token, tokens[i]);
    const sampling::Logprobs& lp = lps[i];
    if (chat) {
      Json top = Json::array();
      for (const sampling::TokenLogprob& t : lp.top) {
        const std::string alt = tokenizer_.decode_piece(cursor.prev_token, t.token);
        top.push_back({{"token", alt}, {"logprob", t.logprob}, {"bytes", bytes_json(alt)}});
      }
      content.push_back(
          {{"token", piece}, {"logprob", lp.chosen.logprob}, {"bytes", bytes_json(piece)}, {"top_logprobs", top}});
    } else {
      Json top = Json::object();
      for (const sampling::TokenLogprob& t : lp.top) top[tokenizer_.decode_piece(cursor.prev_token, t.token)] = t.logprob;
      pieces.push_back(piece);
      token_logprobs.push_back(lp.chosen.logprob);
      tops.push_back(top);
      offsets.push_back(cursor.text_offset);
    }
    cursor.text_offset += static_cast<int64_t>(piece.size());
    cursor.prev_token = tokens[i];
  }
  if (chat) return {{"content", content}};
  return {{"tokens", pieces}, {"token_logprobs", token_logprobs}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

std::vector<Json> ResponseWriter::chunks(const engine::RequestOutput& output) {
  const bool chat = endpoint_ == Endpoint::ChatCompletions;
  std::vector<Json> out;
  for (const engine::CompletionDelta& d : output.completions) {
    Cursor& cursor = cursors_.at(static_cast<size_t>(d.index));
    if (!cursor.started) cursor.prev_token = output.last_prompt_token;
    // A step that sampled a token whose text is held back (a partial stop
    // string or character) and finished nothing has nothing to say.
    if (d.text.empty() && d.finish == engine::FinishReason::None && cursor.started && !logprobs_) continue;
    Json choice = {{"index", d.index}};
    if (chat) {
      Json delta = Json::object();
      if (!cursor.started) delta["role"] = "assistant";
      if (!d.text.empty() || !cursor.started) delta["content"] = d.text;
      choice["delta"] = delta;
    } else {
      choice["text"] = d.text;
    }
    choice["logprobs"] = logprobs_ ? logprobs(cursor, d.token_ids, d.logprobs) : Json(nullptr);
    choice["finish_reason"] = finish_json(d.finish);
    cursor.started = true;
    Json chunk = envelope(chat ? "chat.completion.chunk" : "text_completion");
    chunk["choices"] = Json::array({std::move(choice)});
    out.push_back(std::move(chunk));
  }
  return out;
}

Json ResponseWriter::usage_chunk(int64_t prompt_tokens, int64_t completion_tokens) const {
  Json chunk = envelope(endpoint_ == Endpoint::ChatCompletions ? "chat.completion.chunk" : "text_completion");
  chunk["choices"] = Json::array();
  chunk["usage"] = usage_json(prompt_tokens, completion_tokens);
  return chunk;
}

Json ResponseWriter::full(const engine::RequestResult& result, int32_t last_prompt_token) {
  const bool chat = endpoint_ == Endpoint::ChatCompletions;
  Json choices = Json::array();
  int64_t completion_tokens = 0;
  for (size_t i = 0; i < result.completions.size(); ++i) {
    const engine::CompletionResult& c = result.completions[i];
    Cursor cursor;
    cursor.prev_token = last_prompt_token;
    Json choice = {{"index", static_cast<int64_t>(i)}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = logprobs_ ? logprobs(cursor, c.token_ids, c.logprobs) : Json(nullptr);
    choice["finish_reason"] = finish_json(c.finish);
    choices.push_back(std::move(choice));
    completion_tokens += static_cast<int64_t>(c.token_ids.size());
  }
  Json body = envelope(chat ? "chat.completion" : "text_completion");
  body["choices"] = std::move(choices);
  body["usage"] = usage_json(result.prompt_tokens, completion_tokens);
  return body;
}

}  // namespace tokamak::server
