// parse_api_request and the /tokenize, /detokenize bodies against the OpenAI
// API's documented rules: each route's required field, 400s naming the field
// (param) and the value (message), 404 model_not_found for another model's
// name, unknown fields ignored.
#include "server/openai_request.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/api_error.h"

namespace tokamak::server {
namespace {

const std::string kServed = "stories260K";

// The error a body gets on a route; status 0 when it was accepted.
struct Refusal {
  int status = 0;
  nlohmann::ordered_json error;  // the "error" object of the body
  std::string message() const { return error.value("message", ""); }
  nlohmann::ordered_json param() const { return error.at("param"); }
};

template <typename Parse>
Refusal refusal_of(Parse parse) {
  try {
    parse();
  } catch (const ApiError& e) {
    return {e.status(), e.to_json().at("error")};
  }
  return {};
}

Refusal completions(const std::string& body) {
  return refusal_of([&] { parse_api_request(Endpoint::Completions, body, kServed); });
}
Refusal chat(const std::string& body) {
  return refusal_of([&] { parse_api_request(Endpoint::ChatCompletions, body, kServed); });
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

TEST(OpenAiRequest, EachRouteNeedsItsOwnPromptField) {
  Refusal r = chat(R"({"prompt": "Hi"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.param(), "messages") << r.message();
  EXPECT_EQ(r.error.at("type"), "invalid_request_error");
  r = completions(R"({"messages": [{"role": "user", "content": "Hi"}]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.param(), "prompt") << r.message();
  // Both given: the other route's field is named.
  r = completions(R"({"prompt": "Hi", "messages": [{"role": "user", "content": "Hi"}]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.param(), "messages") << r.message();
  EXPECT_TRUE(contains(r.message(), "/v1/chat/completions")) << r.message();
  r = chat(R"({"messages": null})");
  EXPECT_EQ(r.param(), "messages") << r.message();
}

TEST(OpenAiRequest, WrongTypesAndRangesNameTheFieldAndTheValue) {
  struct Case {
    const char* body;
    const char* param;
    const char* value;  // as the message shows it
  };
  const Case cases[] = {
      {R"({"prompt": "a", "temperature": 2.5})", "temperature", "2.5"},
      {R"({"prompt": "a", "temperature": "hot"})", "temperature", "\"hot\""},
      {R"({"prompt": "a", "top_p": -0.1})", "top_p", "-0.1"},
      {R"({"prompt": "a", "max_tokens": 0})", "max_tokens", "0"},
      {R"({"prompt": "a", "max_tokens": 1.5})", "max_tokens", "1.5"},
      {R"({"prompt": "a", "n": 129})", "n", "129"},
      {R"({"prompt": "a", "presence_penalty": 3})", "presence_penalty", "3"},
      {R"({"prompt": "a", "frequency_penalty": -2.01})", "frequency_penalty", "-2.01"},
      {R"({"prompt": "a", "logprobs": 21})", "logprobs", "21"},
      {R"({"prompt": "a", "seed": -1})", "seed", "-1"},
      {R"({"prompt": "a", "stop": [""]})", "stop[0]", "\"\""},
      {R"({"prompt": "a", "user": 7})", "user", "7"},
      {R"({"prompt": "a", "stream": "yes"})", "stream", "\"yes\""},
      {R"({"prompt": "a", "logit_bias": {"5": 101}})", "logit_bias[\"5\"]", "101"},
      {R"({"prompt": "a", "model": 3})", "model", "3"},
      {R"({"prompt": 7})", "prompt", "7"},
  };
  for (const Case& c : cases) {
    const Refusal r = completions(c.body);
    EXPECT_EQ(r.status, 400) << c.body;
    EXPECT_EQ(r.param(), c.param) << c.body << ": " << r.message();
    EXPECT_TRUE(contains(r.message(), std::string(c.param) + " = " + c.value)) << c.body << ": " << r.message();
  }
  // The chat API's message fields are named with their index.
  const Refusal r = chat(R"({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": 5}]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.param(), "messages[1].content") << r.message();
}

TEST(OpenAiRequest, MalformedJsonAndNonObjectsAre400) {
  for (const std::string body : {R"({"prompt": "a",})", "", "[1, 2]", "\"text\"", R"({"prompt": "a")"}) {
    const Refusal r = completions(body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_FALSE(r.message().empty()) << body;
  }
  EXPECT_TRUE(contains(completions(R"({"prompt": "a",})").message(), "not valid JSON"));
  EXPECT_TRUE(contains(completions("[1, 2]").message(), "JSON object")) << completions("[1, 2]").message();
}

TEST(OpenAiRequest, AnotherModelsNameIs404ModelNotFound) {
  Refusal r = completions(R"({"model": "gpt-4o", "prompt": "a"})");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.error.at("code"), "model_not_found");
  EXPECT_EQ(r.param(), "model");
  EXPECT_TRUE(contains(r.message(), "gpt-4o") && contains(r.message(), kServed)) << r.message();
  r = refusal_of([] { parse_tokenize_request(R"({"model": "x", "prompt": "a"})", kServed); });
  EXPECT_EQ(r.status, 404);
  r = refusal_of([] { parse_detokenize_request(R"({"model": "x", "tokens": [1]})", 512, kServed); });
  EXPECT_EQ(r.status, 404);
  // The served name, or none, is accepted.
  EXPECT_EQ(completions(R"({"model": "stories260K", "prompt": "a"})").status, 0);
  EXPECT_EQ(completions(R"({"prompt": "a"})").status, 0);
}

TEST(OpenAiRequest, FieldsAreReadAndUnknownOnesIgnored) {
  const ApiRequest api = parse_api_request(
      Endpoint::Completions,
      R"({"prompt": "Once", "max_tokens": 5, "temperature": 0.25, "seed": 42, "n": 3, "stop": "x",
          "best_of": 2, "echo": false, "suffix": null, "some_future_field": {"a": [1]}})",
      kServed);
  EXPECT_EQ(api.endpoint, Endpoint::Completions);
  EXPECT_EQ(api.request.prompt.text, "Once");
  EXPECT_EQ(api.request.params.max_tokens, 5);
  EXPECT_EQ(api.request.params.sampling.temperature, 0.25f);
  EXPECT_EQ(api.request.params.sampling.seed, 42u);
  EXPECT_EQ(api.request.params.n, 3);
  EXPECT_EQ(api.request.params.stop, std::vector<std::string>{"x"});
  EXPECT_FALSE(api.stream);
  EXPECT_FALSE(api.include_usage);

  const ApiRequest c = parse_api_request(
      Endpoint::ChatCompletions,
      R"({"messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 9, "logprobs": true,
          "top_logprobs": 2, "response_format": {"type": "text"}, "tools": []})",
      kServed);
  EXPECT_EQ(c.endpoint, Endpoint::ChatCompletions);
  ASSERT_TRUE(c.request.prompt.messages.is_array());
  EXPECT_EQ(c.request.prompt.messages.at(0).at("content"), "Hi");
  EXPECT_EQ(c.request.params.max_tokens, 9);  // max_completion_tokens is max_tokens
  EXPECT_TRUE(c.request.params.logprobs);
  EXPECT_EQ(c.request.params.sampling.n_probs, 2);
}

TEST(OpenAiRequest, APromptListOfOneStringIsOnePrompt) {
  const ApiRequest api = parse_api_request(Endpoint::Completions, R"({"prompt": ["Once upon"]})", kServed);
  EXPECT_EQ(api.request.prompt.text, "Once upon");
  EXPECT_TRUE(api.request.prompt.ids.empty());
  const Refusal r = completions(R"({"prompt": ["Once", "upon"]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.param(), "prompt");
  EXPECT_TRUE(contains(r.message(), "2 strings")) << r.message();
  // Token ids stay token ids.
  EXPECT_EQ(parse_api_request(Endpoint::Completions, R"({"prompt": [1, 2, 3]})", kServed).request.prompt.ids,
            (std::vector<int32_t>{1, 2, 3}));
}

TEST(OpenAiRequest, StreamOptionsNeedStream) {
  Refusal r = completions(R"({"prompt": "a", "stream_options": {"include_usage": true}})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.param(), "stream_options");
  r = completions(R"({"prompt": "a", "stream": false, "stream_options": {"include_usage": true}})");
  EXPECT_EQ(r.param(), "stream_options");
  r = completions(R"({"prompt": "a", "stream": true, "stream_options": 1})");
  EXPECT_EQ(r.param(), "stream_options");
  // A nested field is named by its path, as the client wrote it.
  r = completions(R"({"prompt": "a", "stream": true, "stream_options": {"include_usage": "yes"}})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.param(), "stream_options.include_usage");
  EXPECT_TRUE(contains(r.message(), "stream_options.include_usage = \"yes\"")) << r.message();
  const ApiRequest on =
      parse_api_request(Endpoint::Completions, R"({"prompt": "a", "stream": true, "stream_options": {"include_usage": true}})", kServed);
  EXPECT_TRUE(on.stream);
  EXPECT_TRUE(on.include_usage);
  const ApiRequest off = parse_api_request(Endpoint::Completions, R"({"prompt": "a", "stream": true})", kServed);
  EXPECT_TRUE(off.stream);
  EXPECT_FALSE(off.include_usage);
}

TEST(OpenAiRequest, TokenizeBodies) {
  TokenizeRequest t = parse_tokenize_request(R"({"prompt": "Once upon"})", kServed);
  EXPECT_EQ(t.prompt.text, "Once upon");
  EXPECT_TRUE(t.add_special_tokens);
  t = parse_tokenize_request(R"({"content": "Hi", "add_special_tokens": false})", kServed);  // llama-server's name
  EXPECT_EQ(t.prompt.text, "Hi");
  EXPECT_FALSE(t.add_special_tokens);
  t = parse_tokenize_request(R"({"messages": [{"role": "user", "content": "Hi"}]})", kServed);
  ASSERT_TRUE(t.prompt.messages.is_array());
  EXPECT_EQ(t.prompt.messages.size(), 1u);
  Refusal r = refusal_of([] { parse_tokenize_request(R"({"prompt": [1, 2]})", kServed); });
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.param(), "prompt");
  r = refusal_of([] { parse_tokenize_request(R"({"prompt": "a", "add_special_tokens": 1})", kServed); });
  EXPECT_EQ(r.param(), "add_special_tokens");
  r = refusal_of([] { parse_tokenize_request(R"({})", kServed); });
  EXPECT_EQ(r.status, 400);
}

TEST(OpenAiRequest, DetokenizeIdsMustBeInTheVocabulary) {
  EXPECT_EQ(parse_detokenize_request(R"({"tokens": [0, 1, 511]})", 512, kServed), (std::vector<int32_t>{0, 1, 511}));
  EXPECT_TRUE(parse_detokenize_request(R"({"tokens": []})", 512, kServed).empty());
  struct Case {
    const char* body;
    const char* shown;
  };
  for (const Case& c : {Case{R"({"tokens": [1, 512]})", "tokens[1] = 512"}, Case{R"({"tokens": [-1]})", "tokens[0] = -1"},
                        Case{R"({"tokens": [1.5]})", "tokens[0] = 1.5"}, Case{R"({"tokens": ["a"]})", "tokens[0] = \"a\""},
                        Case{R"({"tokens": [18446744073709551615]})", "tokens[0] = 18446744073709551615"}}) {
    const Refusal r = refusal_of([&] { parse_detokenize_request(c.body, 512, kServed); });
    EXPECT_EQ(r.status, 400) << c.body;
    EXPECT_EQ(r.param(), "tokens") << c.body;
    EXPECT_TRUE(contains(r.message(), c.shown) && contains(r.message(), "[0, 512)")) << c.body << ": " << r.message();
  }
  const Refusal r = refusal_of([] { parse_detokenize_request(R"({"ids": [1]})", 512, kServed); });
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.param(), "tokens");
}

}  // namespace
}  // namespace tokamak::server
