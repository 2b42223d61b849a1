// ResponseWriter against the OpenAI API's documented shapes, for hand-built
// engine outputs on stories260K's tokenizer: a chat stream's first chunk of a
// completion carries the role and later ones only content, finish_reason is
// set on the last chunk only, the usage chunk has no choices; a whole
// response's logprobs in the completions shape (tokens, token_logprobs,
// top_logprobs as {piece: logprob}, text_offset) and the chat shape
// (content[].token/logprob/bytes/top_logprobs). Pieces are checked against
// the text they spell, offsets against the pieces' lengths summed by hand.
#include "server/openai_response.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_data.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::server {
namespace {

using engine::CompletionDelta;
using engine::FinishReason;
using engine::RequestOutput;

class OpenAiResponseTest : public ::testing::Test {
 protected:
  OpenAiResponseTest()
      : model_(Model::load(testing::test_data("models/stories260K/stories260K.gguf"))),
        tokenizer_(Tokenizer::from_gguf(*model_.gguf())),
        bos_(tokenizer_.bos()),
        story_(tokenizer_.encode(kText, /*add_bos=*/false)) {}

  static RequestOutput output(int32_t index, std::vector<int32_t> tokens, std::string text,
                              FinishReason finish = FinishReason::None, int32_t last_prompt_token = -1) {
    RequestOutput o;
    o.request_id = 3;
    o.prompt_tokens = 5;
    o.last_prompt_token = last_prompt_token;
    CompletionDelta d;
    d.index = index;
    d.token_ids = std::move(tokens);
    d.text = std::move(text);
    d.finish = finish;
    o.completions.push_back(d);
    o.finished = finish != FinishReason::None;
    return o;
  }

  // One logprob entry per token of story_: chosen -0.5 * (i + 1), alternatives tokens 1 and 2.
  std::vector<sampling::Logprobs> story_logprobs() const {
    std::vector<sampling::Logprobs> lps;
    for (size_t i = 0; i < story_.size(); ++i) {
      sampling::Logprobs lp;
      lp.chosen = {story_[i], -0.5f * static_cast<float>(i + 1)};
      lp.top = {{story_[i], lp.chosen.logprob}, {kAlt, -3.0f}};
      lps.push_back(lp);
    }
    return lps;
  }

  static constexpr const char* kText = "Once upon a time";
  static constexpr int32_t kAlt = 400;
  Model model_;
  Tokenizer tokenizer_;
  int32_t bos_;
  std::vector<int32_t> story_;
};

TEST_F(OpenAiResponseTest, ChatStreamRoleFirstThenContentThenFinish) {
  ASSERT_GE(story_.size(), 4u);
  ResponseWriter w(Endpoint::ChatCompletions, "chatcmpl-1", "stories260K", tokenizer_, 1, /*logprobs=*/false);
  std::vector<Json> chunks;
  for (const RequestOutput& o : {output(0, {story_[0]}, "Once", FinishReason::None, bos_), output(0, {story_[1]}, " upon"),
                                 output(0, {story_[2]}, ""),  // text held back: no chunk
                                 output(0, {story_[3]}, " a time", FinishReason::Stop)}) {
    for (Json& c : w.chunks(o)) chunks.push_back(std::move(c));
  }
  ASSERT_EQ(chunks.size(), 3u);
  for (const Json& c : chunks) {
    EXPECT_EQ(c.at("id"), "chatcmpl-1");
    EXPECT_EQ(c.at("object"), "chat.completion.chunk");
    EXPECT_EQ(c.at("model"), "stories260K");
    EXPECT_TRUE(c.at("created").is_number_integer());
    EXPECT_EQ(c.at("created"), chunks[0].at("created"));
    ASSERT_EQ(c.at("choices").size(), 1u);
    EXPECT_EQ(c.at("choices")[0].at("index"), 0);
    EXPECT_TRUE(c.at("choices")[0].at("logprobs").is_null());
  }
  EXPECT_EQ(chunks[0]["choices"][0]["delta"], Json({{"role", "assistant"}, {"content", "Once"}}));
  EXPECT_EQ(chunks[1]["choices"][0]["delta"], Json({{"content", " upon"}}));
  EXPECT_EQ(chunks[2]["choices"][0]["delta"], Json({{"content", " a time"}}));
  EXPECT_TRUE(chunks[0]["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(chunks[1]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(chunks[2]["choices"][0]["finish_reason"], "stop");

  const Json usage = w.usage_chunk(5, 4);
  EXPECT_EQ(usage.at("object"), "chat.completion.chunk");
  EXPECT_EQ(usage.at("id"), "chatcmpl-1");
  EXPECT_EQ(usage.at("choices"), Json::array());
  EXPECT_EQ(usage.at("usage"), Json({{"prompt_tokens", 5}, {"completion_tokens", 4}, {"total_tokens", 9}}));
}

TEST_F(OpenAiResponseTest, EachCompletionOfNGetsItsOwnRoleAndAFinishOnlyChunkEndsOne) {
  ResponseWriter w(Endpoint::ChatCompletions, "chatcmpl-2", "m", tokenizer_, 2, false);
  RequestOutput both = output(0, {story_[0]}, "Once", FinishReason::None, bos_);
  both.completions.push_back(output(1, {story_[1]}, "upon").completions[0]);
  const std::vector<Json> first = w.chunks(both);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0]["choices"][0]["index"], 0);
  EXPECT_EQ(first[1]["choices"][0]["index"], 1);
  EXPECT_EQ(first[1]["choices"][0]["delta"], Json({{"role", "assistant"}, {"content", "upon"}}));
  // A completion ending without new text (max_tokens reached on a held-back token).
  const std::vector<Json> last = w.chunks(output(1, {}, "", FinishReason::Length));
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0]["choices"][0]["index"], 1);
  EXPECT_EQ(last[0]["choices"][0]["delta"], Json::object());
  EXPECT_EQ(last[0]["choices"][0]["finish_reason"], "length");
}

TEST_F(OpenAiResponseTest, CompletionsStreamChunksCarryText) {
  ResponseWriter w(Endpoint::Completions, "cmpl-1", "m", tokenizer_, 1, false);
  const std::vector<Json> a = w.chunks(output(0, {story_[0]}, "Once", FinishReason::None, bos_));
  const std::vector<Json> b = w.chunks(output(0, {story_[1]}, " upon", FinishReason::Length));
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].at("object"), "text_completion");
  EXPECT_EQ(a[0]["choices"][0]["text"], "Once");
  EXPECT_FALSE(a[0]["choices"][0].contains("delta"));
  EXPECT_TRUE(a[0]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(b[0]["choices"][0]["text"], " upon");
  EXPECT_EQ(b[0]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(w.usage_chunk(1, 2).at("object"), "text_completion");
}

TEST_F(OpenAiResponseTest, CompletionsLogprobsShape) {
  engine::RequestResult result;
  result.prompt_tokens = 6;
  engine::CompletionResult c;
  c.token_ids = story_;
  c.text = kText;
  c.logprobs = story_logprobs();
  c.finish = FinishReason::Length;
  result.completions = {c};
  ResponseWriter w(Endpoint::Completions, "cmpl-2", "m", tokenizer_, 1, /*logprobs=*/true);
  const Json body = w.full(result, bos_);
  EXPECT_EQ(body.at("object"), "text_completion");
  EXPECT_EQ(body.at("usage"),
            Json({{"prompt_tokens", 6}, {"completion_tokens", story_.size()}, {"total_tokens", 6 + story_.size()}}));
  const Json& choice = body.at("choices").at(0);
  EXPECT_EQ(choice.at("text"), kText);
  EXPECT_EQ(choice.at("finish_reason"), "length");
  const Json& lp = choice.at("logprobs");
  ASSERT_EQ(lp.at("tokens").size(), story_.size());
  ASSERT_EQ(lp.at("token_logprobs").size(), story_.size());
  ASSERT_EQ(lp.at("top_logprobs").size(), story_.size());
  ASSERT_EQ(lp.at("text_offset").size(), story_.size());
  // The pieces spell the text (the first one's leading space dropped after
  // BOS), and each offset is the length of the pieces before it.
  std::string spelled;
  for (size_t i = 0; i < story_.size(); ++i) {
    EXPECT_EQ(lp["text_offset"][i], spelled.size()) << i;
    spelled += lp["tokens"][i].get<std::string>();
    EXPECT_FLOAT_EQ(lp["token_logprobs"][i].get<float>(), -0.5f * static_cast<float>(i + 1)) << i;
    const Json& top = lp["top_logprobs"][i];
    ASSERT_TRUE(top.is_object()) << i;
    ASSERT_EQ(top.size(), 2u) << top.dump();
    EXPECT_FLOAT_EQ(top.at(lp["tokens"][i].get<std::string>()).get<float>(), -0.5f * static_cast<float>(i + 1));
  }
  EXPECT_EQ(spelled, kText);
  EXPECT_EQ(lp["tokens"][0], "Once");
}

TEST_F(OpenAiResponseTest, ChatLogprobsShape) {
  engine::RequestResult result;
  result.prompt_tokens = 2;
  engine::CompletionResult c;
  c.token_ids = story_;
  c.text = kText;
  c.logprobs = story_logprobs();
  c.finish = FinishReason::Stop;
  result.completions = {c, c};
  ResponseWriter w(Endpoint::ChatCompletions, "chatcmpl-3", "m", tokenizer_, 2, /*logprobs=*/true);
  const Json body = w.full(result, bos_);
  EXPECT_EQ(body.at("object"), "chat.completion");
  EXPECT_EQ(body.at("usage").at("completion_tokens"), 2 * story_.size());
  ASSERT_EQ(body.at("choices").size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    const Json& choice = body["choices"][k];
    EXPECT_EQ(choice.at("index"), k);
    EXPECT_EQ(choice.at("message"), Json({{"role", "assistant"}, {"content", kText}}));
    EXPECT_EQ(choice.at("finish_reason"), "stop");
    const Json& content = choice.at("logprobs").at("content");
    ASSERT_EQ(content.size(), story_.size());
    std::string spelled;
    for (size_t i = 0; i < content.size(); ++i) {
      const Json& t = content[i];
      const std::string token = t.at("token");
      spelled += token;
      EXPECT_FLOAT_EQ(t.at("logprob").get<float>(), -0.5f * static_cast<float>(i + 1));
      // bytes: the token's UTF-8 bytes as integers.
      ASSERT_EQ(t.at("bytes").size(), token.size());
      for (size_t b = 0; b < token.size(); ++b) EXPECT_EQ(t["bytes"][b], static_cast<unsigned char>(token[b]));
      ASSERT_EQ(t.at("top_logprobs").size(), 2u);
      EXPECT_EQ(t["top_logprobs"][0].at("token"), token);
      EXPECT_FLOAT_EQ(t["top_logprobs"][1].at("logprob").get<float>(), -3.0f);
      EXPECT_TRUE(t["top_logprobs"][1].at("bytes").is_array());
    }
    EXPECT_EQ(spelled, kText);
  }
}

TEST_F(OpenAiResponseTest, InvalidUtf8InAPieceIsReplacedNotThrown) {
  // A byte token holding the first byte of a two-byte character: alone it is
  // not UTF-8.
  int32_t lead = -1;
  for (int32_t id = 0; id < tokenizer_.n_vocab() && lead < 0; ++id) {
    if (tokenizer_.decode_piece(bos_, id) == "\xC3") lead = id;
  }
  ASSERT_GE(lead, 0) << "stories260K has byte tokens";
  engine::RequestResult result;
  engine::CompletionResult c;
  c.token_ids = {lead};
  c.text = "\xC3";
  sampling::Logprobs lp;
  lp.chosen = {lead, -1.0f};
  lp.top = {{lead, -1.0f}};
  c.logprobs = {lp};
  result.completions = {c};
  for (const Endpoint e : {Endpoint::Completions, Endpoint::ChatCompletions}) {
    ResponseWriter w(e, "x", "m", tokenizer_, 1, true);
    std::string text;
    ASSERT_NO_THROW(text = json_text(w.full(result, bos_)));
    EXPECT_NE(text.find("\xEF\xBF\xBD"), std::string::npos) << text;  // U+FFFD
    EXPECT_EQ(text.find("\xC3\""), std::string::npos) << text;
    // The parsed body is valid JSON again.
    EXPECT_TRUE(Json::accept(text));
  }
  EXPECT_THROW((void)Json({{"text", "\xC3"}}).dump(), Json::type_error);  // what json_text guards against
  EXPECT_EQ(sse_event(Json({{"a", 1}})), "data: {\"a\":1}\n\n");
}

}  // namespace
}  // namespace tokamak::server
