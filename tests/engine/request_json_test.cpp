// request_from_json: each OpenAI field lands in its Request field, the
// defaults are the OpenAI API's (not the CLI's), and every bad value is an
// error naming the field and the value.
#include "engine/request_json.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace tokamak::engine {
namespace {

std::string error_of(const std::string& text) {
  try {
    request_from_json(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RequestJson, DefaultsAreOpenAis) {
  const Request r = request_from_json(R"({"prompt": "Once upon"})");
  EXPECT_EQ(r.prompt.text, "Once upon");
  EXPECT_TRUE(r.prompt.ids.empty());
  EXPECT_TRUE(r.prompt.messages.is_null());
  const sampling::SamplingParams& s = r.params.sampling;
  EXPECT_EQ(s.temperature, 1.0f);
  EXPECT_EQ(s.top_p, 1.0f);
  EXPECT_EQ(s.top_k, 0);
  EXPECT_EQ(s.min_p, 0.0f);
  EXPECT_EQ(s.typical_p, 1.0f);
  EXPECT_EQ(s.repeat_penalty, 1.0f);
  EXPECT_EQ(s.repeat_last_n, -1);
  EXPECT_EQ(s.presence_penalty, 0.0f);
  EXPECT_EQ(s.frequency_penalty, 0.0f);
  EXPECT_TRUE(s.logit_bias.empty());
  EXPECT_EQ(s.seed, sampling::kRandomSeed);
  EXPECT_EQ(s.n_probs, 0);
  EXPECT_EQ(r.params.n, 1);
  EXPECT_EQ(r.params.max_tokens, -1);
  EXPECT_TRUE(r.params.stop.empty());
  EXPECT_TRUE(r.params.stop_token_ids.empty());
  EXPECT_FALSE(r.params.ignore_eos);
  EXPECT_FALSE(r.params.logprobs);
  EXPECT_EQ(r.priority, 0);
}

TEST(RequestJson, EveryFieldLandsInItsPlace) {
  const Request r = request_from_json(
      R"({"prompt": [1, 2, 3], "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
          "seed": 9007199254740993, "stop": ["\n", "The end"], "stop_token_ids": [2], "n": 3,
          "presence_penalty": -0.5, "frequency_penalty": 1.5, "repetition_penalty": 1.1,
          "logit_bias": {"13": -100, "7": 2.5}, "ignore_eos": true, "logprobs": true, "top_logprobs": 4,
          "priority": -2})");
  EXPECT_EQ(r.prompt.ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.params.max_tokens, 7);
  const sampling::SamplingParams& s = r.params.sampling;
  EXPECT_EQ(s.temperature, 0.5f);
  EXPECT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_EQ(s.min_p, 0.05f);
  EXPECT_EQ(s.seed, 9007199254740993ull);  // beyond a double's 53 bits: read as an integer
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"\n", "The end"}));
  EXPECT_EQ(r.params.stop_token_ids, (std::vector<int32_t>{2}));
  EXPECT_EQ(r.params.n, 3);
  EXPECT_EQ(s.presence_penalty, -0.5f);
  EXPECT_EQ(s.frequency_penalty, 1.5f);
  EXPECT_EQ(s.repeat_penalty, 1.1f);
  EXPECT_EQ(s.logit_bias, (std::vector<std::pair<int32_t, float>>{{13, -100.0f}, {7, 2.5f}}));
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_TRUE(r.params.logprobs);
  EXPECT_EQ(s.n_probs, 4);
  EXPECT_EQ(r.priority, -2);
}

TEST(RequestJson, MessagesKeepTheirOrderAndExtraKeys) {
  const Request r = request_from_json(
      R"({"messages": [{"role": "system", "content": "Be brief.", "name": "x"}, {"role": "user", "content": "Hi"}]})");
  ASSERT_TRUE(r.prompt.messages.is_array());
  EXPECT_EQ(r.prompt.messages.dump(),
            R"([{"role":"system","content":"Be brief.","name":"x"},{"role":"user","content":"Hi"}])");
  EXPECT_TRUE(r.prompt.text.empty());
}

TEST(RequestJson, NullMeansTheDefaultAndShorthandsExpand) {
  const Request r = request_from_json(R"({"prompt": "x", "temperature": null, "stop": "END", "top_k": -1, "logprobs": 2})");
  EXPECT_EQ(r.params.sampling.temperature, 1.0f);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"END"}));
  EXPECT_EQ(r.params.sampling.top_k, 0);  // vLLM's -1 and tokamak's 0 both mean off
  EXPECT_TRUE(r.params.logprobs);         // the completions API's count turns logprobs on
  EXPECT_EQ(r.params.sampling.n_probs, 2);
  // Edges of the ranges are inside them.
  EXPECT_EQ(request_from_json(R"({"prompt": "", "temperature": 0, "n": 128, "max_tokens": 1})").params.n, 128);
  EXPECT_EQ(request_from_json(R"({"prompt": "x", "temperature": 2, "top_p": 0})").params.sampling.temperature, 2.0f);
}

TEST(RequestJson, BadValuesNameTheFieldAndTheValue) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt": "x", "temperature": -1})", "temperature = -1 is outside [0, 2]"},
      {R"({"prompt": "x", "temperature": "hot"})", R"(temperature = "hot" is not a number)"},
      {R"({"prompt": "x", "temperature": 1e400})", "not valid JSON: number overflow parsing '1e400'"},
      {R"({"prompt": "x", "top_p": 1.5})", "top_p = 1.5 is outside [0, 1]"},
      {R"({"prompt": "x", "min_p": -0.1})", "min_p = -0.1 is outside [0, 1]"},
      {R"({"prompt": "x", "top_k": -2})", "top_k = -2 is outside [-1, 2147483647]"},
      {R"({"prompt": "x", "n": 0})", "n = 0 is outside [1, 128]"},
      {R"({"prompt": "x", "n": 129})", "n = 129 is outside [1, 128]"},
      {R"({"prompt": "x", "n": 2.0})", "n = 2.0 is not an integer"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens = 0 is outside [1, 2147483647]"},
      {R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens = 1.5 is not an integer"},
      {R"({"prompt": "x", "seed": -1})", "seed = -1 is outside [0, 9223372036854775807]"},
      {R"({"prompt": "x", "seed": 18446744073709551615})",
       "seed = 18446744073709551615 is outside [0, 9223372036854775807]"},
      {R"({"prompt": "x", "stop": ""})", R"(stop = "" is empty)"},
      {R"({"prompt": "x", "stop": ["a", 5]})", "stop[1] = 5 is not a string"},
      {R"({"prompt": "x", "stop": {"a": 1}})", "stop = an object is neither a string nor a list of strings"},
      {R"({"prompt": "x", "stop_token_ids": [1, -3]})", "stop_token_ids[1] = -3 is outside [0, 2147483647]"},
      {R"({"prompt": "x", "presence_penalty": 2.5})", "presence_penalty = 2.5 is outside [-2, 2]"},
      {R"({"prompt": "x", "frequency_penalty": -3})", "frequency_penalty = -3 is outside [-2, 2]"},
      {R"({"prompt": "x", "repetition_penalty": 0})", "repetition_penalty = 0 must be > 0"},
      {R"({"prompt": "x", "logit_bias": {"abc": 1}})", R"(logit_bias: key "abc" is not a token id)"},
      {R"({"prompt": "x", "logit_bias": {"5": 101}})", R"(logit_bias["5"] = 101 is outside [-100, 100])"},
      {R"({"prompt": "x", "logit_bias": [1]})", "logit_bias = a list is not an object of token id -> bias"},
      {R"({"prompt": "x", "ignore_eos": 1})", "ignore_eos = 1 is not true or false"},
      {R"({"prompt": "x", "logprobs": 21})", "logprobs = 21 is outside [0, 20]"},
      {R"({"prompt": "x", "logprobs": "yes"})", R"(logprobs = "yes" is neither true/false nor a count of alternatives)"},
      {R"({"prompt": "x", "top_logprobs": 3})", R"(top_logprobs = 3 needs "logprobs": true)"},
      {R"({"prompt": 5})", "prompt = 5 is neither a string nor a list of token ids"},
      {R"({"prompt": []})", "prompt = [] is an empty list of token ids"},
      {R"({"prompt": ["a", "b"]})", "prompt = a list of strings is not supported: put one prompt on each line"},
      {R"({"prompt": [1, 2147483648]})", "prompt[1] = 2147483648 is outside [0, 2147483647]"},
      {R"({"messages": "hi"})", R"(messages = "hi" is not a list of {"role", "content"} objects)"},
      {R"({"messages": []})", "messages = [] has no message"},
      {R"({"messages": [{"role": "user"}]})", R"(messages[0] has no "content")"},
      {R"({"messages": [{"role": "user", "content": "a"}, 3]})",
       R"(messages[1] = 3 is not an object with "role" and "content")"},
      {R"({"messages": [{"role": 1, "content": "a"}]})", "messages[0].role = 1 is not a string"},
      {R"({"prompt": "x", "messages": [{"role": "user", "content": "a"}]})", "give either prompt or messages, not both"},
      {R"({"max_tokens": 5})", "the request has neither prompt nor messages"},
      {R"({"prompt": null})", "the request has neither prompt nor messages"},
      {R"({"prompt": "x", "max_token": 5})", R"(unknown field "max_token" (known: prompt, messages, max_tokens, )"},
      {R"([{"prompt": "x"}])", "a request must be a JSON object, not a list"},
      {R"("prompt")", R"(a request must be a JSON object, not "prompt")"},
      {R"({"prompt": "x",})", "not valid JSON: parse error at line 1, column 16: "},
      {R"({"prompt": "x"} {"prompt": "y"})", "not valid JSON: "},
      {"", "not valid JSON: "},
      {"{\"prompt\": \"\xff\"}", "not valid JSON: "},
  };
  for (const auto& [text, expected] : cases) {
    const std::string error = error_of(text);
    EXPECT_EQ(error.substr(0, expected.size()), expected) << "input: " << text;
  }
}

TEST(RequestJson, LongStringValuesAreCutInMessages) {
  const std::string long_value(100, 'a');
  EXPECT_EQ(error_of(R"({"prompt": "x", "temperature": ")" + long_value + R"("})"),
            "temperature = \"" + std::string(40, 'a') + "\"... is not a number");
  // A cut never splits a UTF-8 character: 39 ASCII bytes, then a 2-byte one at bytes 39-40.
  const std::string utf8 = std::string(39, 'a') + "\xC3\xA9" + "bbb";
  EXPECT_EQ(error_of(R"({"prompt": "x", "temperature": ")" + utf8 + R"("})"),
            "temperature = \"" + std::string(39, 'a') + "\"... is not a number");
}

TEST(RequestJson, DeepNestingIsRefusedWhileParsing) {
  const std::string deep = R"({"prompt": "x", "logit_bias": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_EQ(error_of(deep), "the JSON nests deeper than 32 levels");
  // 32 levels below the top-level object are still parsed (and refused by the field's type); 33 are not.
  const auto nested = [](size_t n) {
    return R"({"prompt": "x", "logit_bias": )" + std::string(n, '[') + std::string(n, ']') + "}";
  };
  EXPECT_EQ(error_of(nested(32)), "logit_bias = a list is not an object of token id -> bias");
  EXPECT_EQ(error_of(nested(33)), "the JSON nests deeper than 32 levels");
}

TEST(RequestJson, FieldListNamesEveryField) {
  const std::vector<std::string> fields = request_json_fields();
  ASSERT_GE(fields.size(), 10u);
  EXPECT_EQ(fields[0].substr(0, 8), "prompt: ");
  bool has_n = false;
  for (const std::string& f : fields) has_n = has_n || f.starts_with("n: ");
  EXPECT_TRUE(has_n);
}

}  // namespace
}  // namespace tokamak::engine
