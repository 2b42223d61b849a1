// ChatSession on stories260K: a turn adds only the text after what the
// conversation holds (and the Engine's prefix cache computes little more than
// that), the kept tokens give the same answer as a Session prefilled from
// scratch with the same tokens (the single-sequence reference loop), and a
// rendering that diverges from the held text cuts the conversation back to
// the last token inside the common part.
#include "engine/chat_session.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/test_data.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::engine {
namespace {

std::unique_ptr<sampling::Sampler> greedy(int32_t n_vocab) {
  sampling::SamplingParams p;
  p.temperature = 0.0f;
  return sampling::make_sampler(p, n_vocab);
}

EngineOptions chat_options() {
  EngineOptions o;
  o.max_model_len = 512;
  o.max_num_seqs = 1;
  o.threads = 2;
  o.enable_prefix_caching = true;
  return o;
}

class ChatSessionTest : public ::testing::Test {
 protected:
  ChatSessionTest()
      : model_(Model::load(testing::test_data("models/stories260K/stories260K.gguf"))),
        tokenizer_(Tokenizer::from_gguf(*model_.gguf())),
        pool_(2),
        engine_(model_, tokenizer_, chat_options()),
        chat_(engine_) {
    params_.sampling.temperature = 0.0f;
    params_.max_tokens = 10;
    options_.n_predict = 10;
  }

  // One turn; the answer's text.
  std::string respond(const std::string& rendered, ChatTurnStats* stats = nullptr) {
    std::string answer;
    const ChatTurnStats s = chat_.respond(rendered, params_, nullptr, [&](std::string_view t) { answer += t; });
    if (stats) *stats = s;
    return answer;
  }

  Model model_;
  Tokenizer tokenizer_;
  ThreadPool pool_;
  Engine engine_;
  ChatSession chat_;
  GenerationParams params_;
  GenerateOptions options_;  // of the reference Session loop
};

std::string chatml(const std::vector<std::string>& turns) {  // user, assistant, user, ... then the generation prompt
  std::string s;
  for (size_t i = 0; i < turns.size(); ++i) {
    s += std::string("<|im_start|>") + (i % 2 ? "assistant" : "user") + "\n" + turns[i] + "<|im_end|>\n";
  }
  return s + "<|im_start|>assistant\n";
}

TEST_F(ChatSessionTest, EachTurnPrefillsOnlyItsNewText) {
  const std::vector<std::string> questions = {"Once upon a time", "The dog ran", "Lily smiled"};
  std::vector<std::string> turns;
  int64_t held = 0;
  for (size_t t = 0; t < questions.size(); ++t) {
    SCOPED_TRACE("turn " + std::to_string(t + 1));
    turns.push_back(questions[t]);
    const std::string rendered = chatml(turns);
    ChatTurnStats stats;
    const std::string answer = respond(rendered, &stats);
    EXPECT_EQ(stats.reused, held);
    if (t == 0) {
      EXPECT_EQ(stats.prefilled, static_cast<int64_t>(tokenizer_.encode(rendered, true, true).size()));
    } else {
      // The text after the previous answer: that answer's end of turn and the new question.
      const std::string suffix = "<|im_end|>\n<|im_start|>user\n" + questions[t] + "<|im_end|>\n<|im_start|>assistant\n";
      EXPECT_EQ(rendered.substr(rendered.size() - suffix.size()), suffix);
      EXPECT_EQ(stats.prefilled, static_cast<int64_t>(tokenizer_.encode(suffix, false, true).size()));
    }
    EXPECT_EQ(stats.result.n_generated, 10);
    EXPECT_EQ(chat_.text(), rendered + answer);
    held = stats.reused + stats.prefilled + stats.result.n_generated;
    EXPECT_EQ(chat_.size(), held);
    turns.push_back(answer);

    // A fresh session prefilled with the same prompt tokens at once answers the same.
    // The prefix cache served all but the blocks after the kept history.
    if (t > 0) {
      EXPECT_LT(stats.computed, stats.prefilled + 16);
    }
    const std::vector<int32_t>& tokens = chat_.tokens();
    const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + stats.reused + stats.prefilled);
    Session fresh(model_, pool_, 512);
    std::string fresh_answer;
    std::unique_ptr<sampling::Sampler> s = greedy(model_.config().n_vocab);
    generate(fresh, tokenizer_, *s, prompt, options_, [&](std::string_view x) { fresh_answer += x; });
    // The reference loop keeps the last answer token uncomputed (deferred).
    EXPECT_EQ(fresh.tokens(), tokens);
    EXPECT_EQ(fresh_answer, answer);
  }
}

TEST_F(ChatSessionTest, ADivergingRenderingCutsBackToTheCommonText) {
  const std::string first = "A: Once upon a time\nB:";
  ChatTurnStats one;
  const std::string answer = respond(first, &one);
  ASSERT_FALSE(answer.starts_with("\n"));
  // The template drops the answer (as templates drop thinking): the prompt of
  // turn 1 is kept whole, the answer's tokens are cut.
  const std::string second = first + "\nA: The dog ran\nB:";
  ChatTurnStats two;
  respond(second, &two);
  EXPECT_EQ(two.reused, one.prefilled);
  EXPECT_EQ(two.prefilled, static_cast<int64_t>(tokenizer_.encode("\nA: The dog ran\nB:", false, true).size()));
  EXPECT_EQ(chat_.text().substr(0, second.size()), second);

  // Divergence inside a prompt: the tokens whose pieces spell the common text stay.
  const std::string third = "A: Once upon a day\nB:";
  ChatTurnStats three;
  respond(third, &three);
  const std::vector<int32_t> kept = tokenizer_.encode("A: Once upon a", true, true);
  const std::vector<int32_t>& tokens = chat_.tokens();
  EXPECT_EQ(three.reused, static_cast<int64_t>(kept.size()));
  EXPECT_EQ(std::vector<int32_t>(tokens.begin(), tokens.begin() + three.reused), kept);
  EXPECT_EQ(chat_.text().substr(0, third.size()), third);
}

TEST_F(ChatSessionTest, NothingNewRunsTheLastTokenAgain) {
  const std::string first = chatml({"Once upon a time"});
  const std::string answer = respond(first);
  const int64_t held = chat_.size();
  ChatTurnStats again;
  respond(first + answer, &again);
  EXPECT_EQ(again.reused, held - 1);
  EXPECT_EQ(again.prefilled, 1);
  EXPECT_THROW(respond(""), Error);
}

TEST_F(ChatSessionTest, APromptOverTheContextLeavesTheSessionAsItsTextSays) {
  respond(chatml({"Once upon a time"}));
  std::string huge = chatml({"Once upon a time"});
  for (int i = 0; i < 300; ++i) huge += " more words";
  EXPECT_THROW(respond(huge), Error);
  EXPECT_TRUE(huge.starts_with(chat_.text()));
  ChatTurnStats stats;
  respond(chatml({"Once upon a time", "x", "Hi"}), &stats);  // and goes on
  EXPECT_GT(stats.reused, 0);
}

TEST(EndOfTurn, RealTemplatesAndChatML) {
  EXPECT_EQ(end_of_turn_text(ChatTemplate::chatml()), "<|im_end|>");
  const auto dir = testing::test_data("fixtures/chat-templates");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", "<|im_end|>"},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", "<|eot_id|>"},
      {"google-gemma-2-2b-it.jinja", "<end_of_turn>"},
      {"microsoft-Phi-3.5-mini-instruct.jinja", "<|end|>"},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "</s>"},
  };
  for (const auto& [file, want] : cases) {
    const ChatTemplate t = ChatTemplate::from_source(testing::read_text_file(dir / file), "<s>", "</s>");
    EXPECT_EQ(end_of_turn_text(t), want) << file;
  }
  // A template that raises on the probe, or writes nothing after the answer.
  EXPECT_EQ(end_of_turn_text(ChatTemplate::from_source("{{ raise_exception('no') }}", "", "")), "");
  EXPECT_EQ(end_of_turn_text(ChatTemplate::from_source(
                "{% for m in messages %}{{ m.content }}\n{% endfor %}", "", "")),
            "");
}

TEST(EndOfTurn, AStopStringUnlessTheVocabularyEndsThere) {
  const Model model = Model::load(testing::test_data("models/stories260K/stories260K.gguf"));
  const Tokenizer tokenizer = Tokenizer::from_gguf(*model.gguf());
  GenerateOptions options;
  EXPECT_EQ(add_end_of_turn_stop("<|im_end|>", tokenizer, options), "<|im_end|>");
  EXPECT_EQ(options.stop, std::vector<std::string>{"<|im_end|>"});
  EXPECT_EQ(add_end_of_turn_stop("</s>", tokenizer, options), "");  // EOS already ends generation
  EXPECT_EQ(add_end_of_turn_stop("", tokenizer, options), "");
  EXPECT_EQ(options.stop.size(), 1u);
  EXPECT_TRUE(options.stop_tokens.empty());
}

}  // namespace
}  // namespace tokamak::engine
