// EngineWorker on a real Engine (stories260K). The reference for what a
// submitted request streams is Engine::generate on the same request in an
// Engine of its own: the server path must add, drop or reorder nothing. The
// limits (429, 503, 400 over max_model_len, 504 past the timeout) and
// cancellation are checked by their statuses and by the KV pool emptying.
#include "server/engine_worker.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/test_data.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::server {
namespace {

using namespace std::chrono_literals;
using engine::FinishReason;
using engine::Request;
using engine::RequestResult;

// Every wait in these tests ends by this bound, pass or fail.
constexpr auto kBound = 30s;

class EngineWorkerTest : public ::testing::Test {
 protected:
  EngineWorkerTest()
      : model_(Model::load(testing::test_data("models/stories260K/stories260K.gguf"))),
        tokenizer_(Tokenizer::from_gguf(*model_.gguf())) {}

  static engine::EngineOptions options(int32_t max_num_seqs = 4, int32_t max_model_len = 256) {
    engine::EngineOptions o;
    o.max_model_len = max_model_len;
    o.max_num_seqs = max_num_seqs;
    o.max_num_batched_tokens = 256;
    o.threads = 1;
    o.enable_prefix_caching = false;
    return o;
  }

  static Request request(const std::string& prompt, int32_t max_tokens, float temperature, uint64_t seed = 0, int32_t n = 1) {
    Request r;
    r.prompt = engine::Prompt::from_text(prompt);
    r.params.max_tokens = max_tokens;
    r.params.n = n;
    r.params.sampling.temperature = temperature;
    r.params.sampling.seed = seed;
    return r;
  }

  // A request that runs many steps unless stopped: n sequences, no EOS, up to max_model_len.
  static Request long_request(int32_t n = 8) {
    Request r = request("Once upon a time", -1, 1.0f, 7, n);
    r.params.ignore_eos = true;
    return r;
  }

  // Reads a channel to its end.
  static RequestResult collect(RequestChannel& c, int32_t n) {
    RequestResult result;
    result.completions.resize(static_cast<size_t>(n));
    const auto deadline = std::chrono::steady_clock::now() + kBound;
    std::vector<engine::RequestOutput> got;
    while (c.next(got, 100ms)) {
      for (const engine::RequestOutput& o : got) engine::accumulate(result, o);
      got.clear();
      if (std::chrono::steady_clock::now() > deadline) ADD_FAILURE() << "the request did not end";
      if (std::chrono::steady_clock::now() > deadline) break;
    }
    return result;
  }

  // Polls `done` until it holds or kBound passes.
  template <typename Done>
  static bool eventually(Done done) {
    const auto deadline = std::chrono::steady_clock::now() + kBound;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }

  Model model_;
  Tokenizer tokenizer_;
};

TEST_F(EngineWorkerTest, StreamedOutputsAreWhatGenerateReturns) {
  const std::vector<Request> requests = {request("Once upon a time", 40, 0.0f),
                                         request("Tom had a red ball", 40, 1.0f, 1234),
                                         request("The dog", 30, 1.0f, 99, 2)};
  std::vector<RequestResult> want;
  for (const Request& r : requests) {
    engine::Engine alone(model_, tokenizer_, options());
    want.push_back(alone.generate({r}).at(0));
  }
  engine::Engine engine(model_, tokenizer_, options());
  Metrics metrics;
  EngineWorker worker(engine, metrics, WorkerOptions{});
  // All three in flight at once: batching must not change any of them.
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (const Request& r : requests) channels.push_back(worker.submit(r));
  for (size_t i = 0; i < requests.size(); ++i) {
    channels[i]->wait_accepted();
    const RequestResult got = collect(*channels[i], requests[i].params.n);
    EXPECT_FALSE(channels[i]->error().has_value());
    EXPECT_EQ(got.prompt_tokens, want[i].prompt_tokens) << i;
    ASSERT_EQ(got.completions.size(), want[i].completions.size());
    for (size_t c = 0; c < got.completions.size(); ++c) {
      EXPECT_EQ(got.completions[c].token_ids, want[i].completions[c].token_ids) << i << "." << c;
      EXPECT_EQ(got.completions[c].text, want[i].completions[c].text) << i << "." << c;
      EXPECT_EQ(got.completions[c].finish, want[i].completions[c].finish) << i << "." << c;
    }
  }
  // Not vacuous: the reference texts are real and differ.
  EXPECT_GE(want[0].completions[0].token_ids.size(), 10u);
  EXPECT_NE(want[2].completions[0].token_ids, want[2].completions[1].token_ids);
  // The metrics saw three requests end and their tokens.
  EXPECT_TRUE(eventually([&] { return metrics.engine().generation_tokens > 0; }));
  const std::string text = metrics.render();
  EXPECT_NE(text.find("tokamak:e2e_request_latency_seconds_count 3\n"), std::string::npos) << text;
}

TEST_F(EngineWorkerTest, CancelAbortsWithinAFewStepsAndFreesTheBlocks) {
  engine::Engine engine(model_, tokenizer_, options(8, 2048));
  Metrics metrics;
  EngineWorker worker(engine, metrics, WorkerOptions{});
  const std::shared_ptr<RequestChannel> c = worker.submit(long_request());
  c->wait_accepted();
  std::vector<engine::RequestOutput> first;
  ASSERT_TRUE(c->next(first, kBound));
  ASSERT_FALSE(first.empty());
  c->cancel();
  // The engine thread publishes the tokens generated so far after every step
  // (8 per step here): read after cancel(), it is at most one step behind.
  const int64_t at_cancel = metrics.engine().generation_tokens;
  const RequestResult rest = collect(*c, 8);
  // The flag is read before every step: one step in flight, then the abort.
  EXPECT_TRUE(eventually([&] { return metrics.engine().running == 0; }));
  EXPECT_LE(metrics.engine().generation_tokens - at_cancel, 2 * 8);
  bool aborted = false;
  for (const engine::CompletionResult& r : rest.completions) aborted = aborted || r.finish == FinishReason::Abort;
  EXPECT_TRUE(aborted);
  EXPECT_LT(rest.completions[0].token_ids.size(), 100u);
  EXPECT_FALSE(c->error().has_value()) << "a cancelled request has no error to report";
  // The engine thread freed the blocks before it reported the abort.
  EXPECT_EQ(engine.kv_cache().pool().n_used(), 0);
  EXPECT_TRUE(eventually([&] { return metrics.engine().kv_usage == 0.0 && metrics.engine().running == 0; }));
  EXPECT_NE(metrics.render().find("request_success_total{finished_reason=\"abort\"} 1\n"), std::string::npos);
}

TEST_F(EngineWorkerTest, MoreThanMaxNumSeqsPlusMaxQueueIs429) {
  engine::Engine engine(model_, tokenizer_, options(1, 2048));
  Metrics metrics;
  EngineWorker worker(engine, metrics, WorkerOptions{.max_queue = 1});
  const std::shared_ptr<RequestChannel> a = worker.submit(long_request(1));
  const std::shared_ptr<RequestChannel> b = worker.submit(long_request(1));
  try {
    worker.submit(long_request(1));
    ADD_FAILURE() << "the third request was queued";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 429);
    EXPECT_EQ(e.to_json()["error"]["code"], "queue_full");
    const std::string m = e.what();
    EXPECT_NE(m.find("max_num_seqs 1 + max_queue 1"), std::string::npos) << m;
  }
  a->cancel();
  b->cancel();
  collect(*a, 1);
  collect(*b, 1);
  // Room again once they ended.
  const std::shared_ptr<RequestChannel> c = worker.submit(request("Hi", 2, 0.0f));
  EXPECT_EQ(collect(*c, 1).completions[0].token_ids.size(), 2u);
}

TEST_F(EngineWorkerTest, ShutdownAbortsPastItsDeadlineAndRefusesNewRequests) {
  engine::Engine engine(model_, tokenizer_, options(4, 2048));
  Metrics metrics;
  EngineWorker worker(engine, metrics, WorkerOptions{});
  const std::shared_ptr<RequestChannel> running = worker.submit(long_request());
  running->wait_accepted();
  worker.shutdown(0.0);  // returns once nothing is left
  EXPECT_TRUE(worker.shutting_down());
  const RequestResult got = collect(*running, 8);
  EXPECT_EQ(got.completions[0].finish, FinishReason::Abort);
  ASSERT_TRUE(running->error().has_value());
  EXPECT_EQ(running->error()->status(), 503);
  EXPECT_EQ(engine.kv_cache().pool().n_used(), 0);
  try {
    worker.submit(request("Hi", 2, 0.0f));
    ADD_FAILURE() << "accepted after shutdown";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 503);
    EXPECT_EQ(e.to_json()["error"]["code"], "shutting_down");
  }
}

TEST_F(EngineWorkerTest, APromptOverMaxModelLenIsRefusedAtAcceptance) {
  engine::Engine engine(model_, tokenizer_, options(4, 32));
  Metrics metrics;
  EngineWorker worker(engine, metrics, WorkerOptions{});
  const std::string prompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her dog.";
  const size_t tokens = tokenizer_.encode(prompt, tokenizer_.add_bos()).size();
  ASSERT_GT(tokens, 32u);
  const std::shared_ptr<RequestChannel> c = worker.submit(request(prompt, 4, 0.0f));
  try {
    c->wait_accepted();
    ADD_FAILURE() << "accepted a prompt of " << tokens << " tokens";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    const std::string m = e.what();
    EXPECT_NE(m.find(std::to_string(tokens)), std::string::npos) << m;
    EXPECT_NE(m.find("32"), std::string::npos) << m;
  }
  // It holds no place in the queue: a good request still runs.
  const std::shared_ptr<RequestChannel> ok = worker.submit(request("Hi", 3, 0.0f));
  ok->wait_accepted();
  EXPECT_EQ(collect(*ok, 1).completions[0].token_ids.size(), 3u);
}

// OpenAI's (and vLLM's) rule, which the server asks of the Engine: a prompt
// plus max_tokens beyond max_model_len is refused, naming the numbers, and
// one that fits exactly runs to its max_tokens.
TEST_F(EngineWorkerTest, PromptPlusMaxTokensOverMaxModelLenIsRefusedWhenTheyMustFit) {
  engine::Engine engine(model_, tokenizer_, options(4, 32));
  Metrics metrics;
  EngineWorker worker(engine, metrics, WorkerOptions{});
  const int32_t prompt = static_cast<int32_t>(tokenizer_.encode("Once upon a time", tokenizer_.add_bos()).size());
  Request over = request("Once upon a time", 32 - prompt + 1, 0.0f);
  over.params.max_tokens_must_fit = true;
  const std::shared_ptr<RequestChannel> refused = worker.submit(over);
  try {
    refused->wait_accepted();
    ADD_FAILURE() << "accepted " << prompt << " + " << over.params.max_tokens << " tokens with max_model_len 32";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    const std::string m = e.what();
    EXPECT_NE(m.find("max_tokens = " + std::to_string(32 - prompt + 1)), std::string::npos) << m;
    EXPECT_NE(m.find("33 tokens"), std::string::npos) << m;
    EXPECT_NE(m.find("max_model_len = 32"), std::string::npos) << m;
  }
  Request fits = request("Once upon a time", 32 - prompt, 0.0f);
  fits.params.max_tokens_must_fit = true;
  fits.params.ignore_eos = true;
  const std::shared_ptr<RequestChannel> ok = worker.submit(fits);
  ok->wait_accepted();
  EXPECT_EQ(collect(*ok, 1).completions[0].token_ids.size(), static_cast<size_t>(32 - prompt));
}

TEST_F(EngineWorkerTest, RequestTimeoutAbortsWith504) {
  engine::Engine engine(model_, tokenizer_, options(8, 2048));
  Metrics metrics;
  EngineWorker worker(engine, metrics, WorkerOptions{.max_queue = 4, .request_timeout = 0.005});
  const std::shared_ptr<RequestChannel> c = worker.submit(long_request());
  c->wait_accepted();
  const RequestResult got = collect(*c, 8);
  EXPECT_EQ(got.completions[0].finish, FinishReason::Abort);
  EXPECT_LT(got.completions[0].token_ids.size(), 2000u);
  ASSERT_TRUE(c->error().has_value());
  EXPECT_EQ(c->error()->status(), 504);
  EXPECT_EQ(c->error()->to_json()["error"]["code"], "request_timeout");
  EXPECT_EQ(engine.kv_cache().pool().n_used(), 0);
}

}  // namespace
}  // namespace tokamak::server
