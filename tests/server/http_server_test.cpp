// HttpServer in process on a free loopback port, with a real Engine and
// EngineWorker on stories260K, driven by cpp-httplib's client: /health before
// and after the model is attached, the API key, the body limit, unknown
// routes and bad fields in the OpenAI error shape, streamed responses as
// server-sent events that spell the same text as the whole response (and as
// Engine::generate on its own), and a client that hangs up mid-stream, after
// which /metrics shows its KV blocks free.
#include "server/http_server.h"

#include <httplib.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/test_data.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/engine_worker.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::server {
namespace {

using namespace std::chrono_literals;

const std::string kKey = "sk-test-7f3a";

class HttpServerTest : public ::testing::Test {
 protected:
  HttpServerTest()
      : model_(Model::load(testing::test_data("models/stories260K/stories260K.gguf"))),
        tokenizer_(Tokenizer::from_gguf(*model_.gguf())) {
    // A client gone mid-write is an error return, not a kill (tokamak serve does the same).
    std::signal(SIGPIPE, SIG_IGN);
    ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.served_model_name = "stories260K";
    o.api_key = kKey;
    o.max_request_bytes = 4096;
    o.http_threads = 8;
    http_ = std::make_unique<HttpServer>(o, metrics_);
    port_ = http_->bind();
    http_->start();
  }

  ~HttpServerTest() override {
    http_->stop();  // before the worker and the engine it serves go
  }

  static engine::EngineOptions engine_options() {
    engine::EngineOptions e;
    e.max_model_len = 2048;
    e.max_num_seqs = 8;
    e.max_num_batched_tokens = 256;
    e.threads = 1;
    e.enable_prefix_caching = false;
    return e;
  }

  void attach() {
    engine_ = std::make_unique<engine::Engine>(model_, tokenizer_, engine_options());
    worker_ = std::make_unique<EngineWorker>(*engine_, metrics_, WorkerOptions{});
    http_->attach(*engine_, *worker_);
  }

  httplib::Client client(bool with_key = true) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    c.set_connection_timeout(5, 0);
    if (with_key) c.set_bearer_token_auth(kKey);
    return c;
  }

  // The response's status and its body parsed; the test fails on no response.
  static std::pair<int, Json> json_of(const httplib::Result& r) {
    if (!r) {
      ADD_FAILURE() << "no response: " << httplib::to_string(r.error());
      return {0, Json()};
    }
    return {r->status, Json::parse(r->body, nullptr, /*allow_exceptions=*/false)};
  }

  // The OpenAI error shape: {"error": {"message": string, "type": string, "param", "code"}}.
  static void expect_error_shape(const Json& body, int status) {
    ASSERT_TRUE(body.is_object()) << body.dump();
    const Json& e = body.at("error");
    EXPECT_TRUE(e.at("message").is_string() && !e.at("message").get<std::string>().empty()) << body.dump();
    EXPECT_TRUE(e.at("type").is_string()) << body.dump();
    EXPECT_TRUE(e.contains("param") && e.contains("code")) << body.dump() << " for " << status;
  }

  // The data: payloads of a server-sent event stream, in order.
  static std::vector<std::string> sse_data(const std::string& body) {
    std::vector<std::string> data;
    size_t at = 0;
    while (at < body.size()) {
      const size_t end = body.find("\n\n", at);
      EXPECT_NE(end, std::string::npos) << "an event without its blank line: " << body.substr(at);
      if (end == std::string::npos) break;
      const std::string event = body.substr(at, end - at);
      at = end + 2;
      if (event.starts_with(":")) continue;  // a keep-alive comment
      EXPECT_TRUE(event.starts_with("data: ")) << event;
      data.push_back(event.substr(6));
    }
    return data;
  }

  // The value of an unlabelled sample in the Prometheus text, or -1.
  static double metric(const std::string& text, const std::string& name) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.starts_with(name + " ")) return std::stod(line.substr(name.size() + 1));
    }
    return -1;
  }

  Model model_;
  Tokenizer tokenizer_;
  Metrics metrics_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<EngineWorker> worker_;
  std::unique_ptr<HttpServer> http_;  // declared last: stops first
  int port_ = 0;
};

TEST_F(HttpServerTest, HealthIs503UntilTheModelIsAttached) {
  auto [status, body] = json_of(client(false).Get("/health"));
  EXPECT_EQ(status, 503);
  expect_error_shape(body, status);
  EXPECT_EQ(body["error"]["code"], "loading");
  std::tie(status, body) = json_of(client().Get("/v1/models"));
  EXPECT_EQ(status, 503);
  attach();
  std::tie(status, body) = json_of(client(false).Get("/health"));
  EXPECT_EQ(status, 200);
  std::tie(status, body) = json_of(client().Get("/v1/models"));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["object"], "list");
  EXPECT_EQ(body["data"][0]["id"], "stories260K");
  EXPECT_EQ(body["data"][0]["max_model_len"], 2048);
}

TEST_F(HttpServerTest, TheKeyIsRequiredExceptForHealthAndMetrics) {
  attach();
  auto [status, body] = json_of(client(false).Get("/v1/models"));
  EXPECT_EQ(status, 401);
  expect_error_shape(body, status);
  EXPECT_EQ(body["error"]["code"], "invalid_api_key");
  for (const std::string wrong : {"sk-test-7f3b", "sk-test-7f3", "sk-test-7f3aa", "x"}) {
    httplib::Client c = client(false);
    c.set_bearer_token_auth(wrong);
    std::tie(status, body) = json_of(c.Get("/v1/models"));
    EXPECT_EQ(status, 401) << wrong;
    EXPECT_EQ(body["error"]["code"], "invalid_api_key") << wrong;
  }
  std::tie(status, body) = json_of(client(false).Post("/v1/completions", R"({"prompt": "a"})", "application/json"));
  EXPECT_EQ(status, 401);
  EXPECT_EQ(client().Get("/v1/models")->status, 200);
  EXPECT_EQ(client(false).Get("/health")->status, 200);
  EXPECT_EQ(client(false).Get("/metrics")->status, 200);
}

TEST_F(HttpServerTest, LimitsRoutesAndFieldsAnswerInTheErrorShape) {
  attach();
  // 413: a body over max_request_bytes (4096 here).
  const std::string big = R"({"prompt": ")" + std::string(5000, 'a') + R"("})";
  auto [status, body] = json_of(client().Post("/v1/completions", big, "application/json"));
  EXPECT_EQ(status, 413);
  expect_error_shape(body, status);
  EXPECT_NE(body["error"]["message"].get<std::string>().find("4096"), std::string::npos) << body.dump();
  // 404: no such route.
  std::tie(status, body) = json_of(client().Get("/v1/engines"));
  EXPECT_EQ(status, 404);
  expect_error_shape(body, status);
  EXPECT_EQ(body["error"]["code"], "route_not_found");
  // 400 naming the field; 404 for another model.
  std::tie(status, body) =
      json_of(client().Post("/v1/completions", R"({"prompt": "a", "temperature": 9})", "application/json"));
  EXPECT_EQ(status, 400);
  expect_error_shape(body, status);
  EXPECT_EQ(body["error"]["param"], "temperature");
  std::tie(status, body) =
      json_of(client().Post("/v1/chat/completions", R"({"model": "gpt-4o", "messages": []})", "application/json"));
  EXPECT_EQ(status, 404);
  EXPECT_EQ(body["error"]["code"], "model_not_found");
  // /tokenize and /detokenize invert each other on this vocabulary.
  std::tie(status, body) = json_of(client().Post("/tokenize", R"({"prompt": "Once upon a time"})", "application/json"));
  ASSERT_EQ(status, 200);
  EXPECT_EQ(body["tokens"].get<std::vector<int32_t>>(), tokenizer_.encode("Once upon a time", tokenizer_.add_bos()));
  EXPECT_EQ(body["count"], body["tokens"].size());
  Json detok = {{"tokens", tokenizer_.encode("Once upon a time", false)}};
  std::tie(status, body) = json_of(client().Post("/detokenize", detok.dump(), "application/json"));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["prompt"], "Once upon a time");
  std::tie(status, body) = json_of(client().Post("/detokenize", R"({"tokens": [512]})", "application/json"));
  EXPECT_EQ(status, 400);
}

TEST_F(HttpServerTest, AStreamSpellsTheWholeResponseAndEndsWithDone) {
  attach();
  const int max_tokens = 40;
  engine::Request r;
  r.prompt = engine::Prompt::from_text("Once upon a time");
  r.params.max_tokens = max_tokens;
  r.params.sampling.temperature = 0.0f;
  engine::Engine alone(model_, tokenizer_, engine_options());
  const engine::RequestResult want = alone.generate({r}).at(0);
  ASSERT_GE(want.completions[0].token_ids.size(), 20u);

  const Json request = {{"model", "stories260K"}, {"prompt", "Once upon a time"}, {"max_tokens", max_tokens},
                        {"temperature", 0}};
  auto [status, whole] = json_of(client().Post("/v1/completions", request.dump(), "application/json"));
  ASSERT_EQ(status, 200) << whole.dump();
  EXPECT_EQ(whole["object"], "text_completion");
  EXPECT_EQ(whole["choices"][0]["text"], want.completions[0].text);
  EXPECT_EQ(whole["usage"]["prompt_tokens"], want.prompt_tokens);
  EXPECT_EQ(whole["usage"]["completion_tokens"], want.completions[0].token_ids.size());

  Json streamed_request = request;
  streamed_request["stream"] = true;
  streamed_request["stream_options"] = {{"include_usage", true}};
  const httplib::Result res = client().Post("/v1/completions", streamed_request.dump(), "application/json");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  const std::vector<std::string> data = sse_data(res->body);
  ASSERT_GE(data.size(), 3u);
  EXPECT_EQ(data.back(), "[DONE]");
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 2 < data.size(); ++i) {
    const Json chunk = Json::parse(data[i], nullptr, false);
    ASSERT_FALSE(chunk.is_discarded()) << data[i];
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_EQ(chunk["id"], Json::parse(data[0])["id"]);
    text += chunk["choices"][0]["text"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, whole["choices"][0]["text"]);
  EXPECT_EQ(finish, "length");
  const Json usage = Json::parse(data[data.size() - 2]);
  EXPECT_EQ(usage["choices"], Json::array());
  EXPECT_EQ(usage["usage"], whole["usage"]);

  // The chat route: role in the first chunk, the deltas spell the message.
  const Json chat = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}}, {"max_tokens", 24},
                     {"temperature", 0}};
  auto [chat_status, chat_whole] = json_of(client().Post("/v1/chat/completions", chat.dump(), "application/json"));
  ASSERT_EQ(chat_status, 200) << chat_whole.dump();
  Json chat_streamed = chat;
  chat_streamed["stream"] = true;
  const httplib::Result chat_res = client().Post("/v1/chat/completions", chat_streamed.dump(), "application/json");
  ASSERT_TRUE(chat_res);
  const std::vector<std::string> chat_data = sse_data(chat_res->body);
  ASSERT_GE(chat_data.size(), 2u);
  EXPECT_EQ(chat_data.back(), "[DONE]");
  std::string content;
  for (size_t i = 0; i + 1 < chat_data.size(); ++i) {
    const Json chunk = Json::parse(chat_data[i]);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    EXPECT_EQ(chunk["choices"][0]["delta"].contains("role"), i == 0) << chat_data[i];
    content += chunk["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(content, chat_whole["choices"][0]["message"]["content"]);
  EXPECT_FALSE(content.empty());
}

TEST_F(HttpServerTest, AClientThatHangsUpMidStreamHasItsRequestAbortedAndBlocksFreed) {
  attach();
  const Json request = {{"prompt", "Once upon a time"}, {"max_tokens", 2000}, {"ignore_eos", true}, {"n", 4},
                        {"stream", true}};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = request.dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Authorization", "Bearer " + kKey);
  size_t received = 0;
  req.content_receiver = [&](const char*, size_t n, uint64_t, uint64_t) {
    received += n;
    return false;  // hang up after the first piece
  };
  const httplib::Result res = client().send(req);
  EXPECT_FALSE(res);
  EXPECT_GT(received, 0u);
  // Within the bound, /metrics shows nothing running and no block held.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  std::string text;
  while (std::chrono::steady_clock::now() < deadline) {
    text = client(false).Get("/metrics")->body;
    if (metric(text, "tokamak:num_requests_running") == 0 && metric(text, "tokamak:kv_cache_usage_perc") == 0 &&
        text.find("request_success_total{finished_reason=\"abort\"} 1\n") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(metric(text, "tokamak:num_requests_running"), 0) << text;
  EXPECT_EQ(metric(text, "tokamak:kv_cache_usage_perc"), 0) << text;
  EXPECT_NE(text.find("request_success_total{finished_reason=\"abort\"} 1\n"), std::string::npos) << text;
  // Aborted well before its 4 x 2000 tokens.
  EXPECT_LT(metric(text, "tokamak:generation_tokens_total"), 4 * 2000) << text;
  EXPECT_EQ(engine_->kv_cache().pool().n_used(), 0);
}

}  // namespace
}  // namespace tokamak::server
