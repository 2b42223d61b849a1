// The C++ API (include/tokamak/) linked with libtokamak alone: the tokenizer
// against `tokamak tokenize`, greedy text against `tokamak run`, streamed
// deltas adding up to generate()'s result, and errors as tokamak::api::Error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_data.h"
#include "tokamak/tokamak.hpp"

namespace {

using tokamak::testing::run_command;
using tokamak::testing::tokamak_bin;
namespace api = tokamak::api;

std::string model_path() { return tokamak::testing::test_data("models/stories260K/stories260K.gguf").string(); }

api::SamplingParams greedy(int32_t max_tokens) {
  api::SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  return p;
}

api::Engine small_engine(const api::Model& model) {
  api::EngineOptions o;
  o.kv_memory = "16M";
  o.threads = 1;
  return api::Engine(model, o);
}

TEST(CppApi, TokenizerEqualsTokamakTokenize) {
  const api::Model model = api::Model::load(model_path());
  const auto cli = run_command({tokamak_bin().string(), "tokenize", "-m", model_path(), "-p", "Once upon a time", "--ids"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  const std::vector<int32_t> ids = model.encode("Once upon a time", model.add_bos());
  std::string json = "[";
  for (size_t i = 0; i < ids.size(); ++i) json += (i ? ", " : "") + std::to_string(ids[i]);
  EXPECT_EQ(json + "]\n", cli.out);
  EXPECT_EQ(model.decode(ids), "Once upon a time");
  EXPECT_EQ(model.n_vocab(), 512);
}

TEST(CppApi, StreamedDeltasAddUpToGreedyRun) {
  const api::Model model = api::Model::load(model_path());
  api::Engine engine = small_engine(model);
  const auto run = run_command({tokamak_bin().string(), "run", "-m", model_path(), "-p", "The cat", "-n", "30",
                                "--temp", "0", "-t", "1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const int64_t id = engine.add_request("The cat", greedy(30));
  api::RequestResult streamed;
  int steps = 0;
  for (; engine.has_unfinished() && steps < 100; ++steps) {
    for (const api::RequestOutput& o : engine.step()) {
      ASSERT_EQ(o.request_id, id);
      for (const api::CompletionDelta& d : o.completions) EXPECT_LE(d.token_ids.size(), 1u);
      api::accumulate(streamed, o);
    }
  }
  ASSERT_EQ(streamed.completions.size(), 1u);
  EXPECT_EQ(streamed.completions[0].text, run.out);
  EXPECT_EQ(streamed.completions[0].finish_reason, "length");
  EXPECT_EQ(steps, 30);  // one prefill step samples the first token, then one token a step
  const std::vector<api::RequestResult> batch = engine.generate({"The cat"}, greedy(30));
  EXPECT_EQ(batch.at(0).completions.at(0).token_ids, streamed.completions[0].token_ids);
}

TEST(CppApi, ChatTemplateIsChatMlForAModelWithoutOne) {
  const api::Model model = api::Model::load(model_path());
  EXPECT_EQ(model.apply_chat_template({{"system", "Be brief."}, {"user", "Hi"}}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(CppApi, ErrorsArePublicErrorsNamingTheValue) {
  EXPECT_THROW(
      {
        try {
          api::Model::load("/nonexistent/model.gguf");
        } catch (const api::Error& e) {
          EXPECT_STREQ(e.what(), "model file /nonexistent/model.gguf does not exist");
          throw;
        }
      },
      api::Error);
  const api::Model model = api::Model::load(model_path());
  api::EngineOptions o;
  o.kv_memory = "16M";
  o.kv_cache_dtype = "f8";
  EXPECT_THROW(api::Engine(model, o), api::Error);
  api::Engine engine = small_engine(model);
  api::SamplingParams p = greedy(4);
  p.min_p = 2.0f;
  EXPECT_THROW(engine.add_request("Once", p), api::Error);
  EXPECT_THROW(engine.add_chat_request({}, greedy(4)), api::Error);
  EXPECT_THROW(engine.add_request(std::vector<int32_t>{7, 512}, greedy(4)), api::Error);  // 512: past the vocabulary
  EXPECT_FALSE(engine.has_unfinished());
}

}  // namespace
