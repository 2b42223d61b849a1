#include "server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <csignal>
#include <random>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/connection_pool.h"
#include "server/engine_worker.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::server {

struct HttpServer::Backend {
  const engine::Engine& engine;
  EngineWorker& worker;
};

namespace {

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(json_text(e.to_json()), "application/json");
}

// Counts an API request as active while its handler runs.
struct ActiveScope {
  std::atomic<int64_t>& active;
  explicit ActiveScope(std::atomic<int64_t>& a) : active(a) { ++active; }
  ~ActiveScope() { --active; }
};

// Runs a route; its ApiErrors become their status and body, anything else a 500.
Handler guarded(std::atomic<int64_t>& active, Handler handler) {
  return [&active, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    const ActiveScope scope(active);
    try {
      handler(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, "server_error", std::string("internal error: ") + e.what()));
    }
  };
}

// Compares in time that depends only on the lengths, not on where the first
// difference is (a key guessed byte by byte learns nothing from the timing).
bool same_secret(const std::string& given, const std::string& key) {
  unsigned diff = given.size() == key.size() ? 0u : 1u;
  for (size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned char>(given[i]) ^ static_cast<unsigned char>(key[i % key.size()]);
  return diff == 0;
}

// "cmpl-" / "chatcmpl-" and 24 random hex digits.
std::string request_id(Endpoint endpoint) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  char hex[25];
  std::snprintf(hex, sizeof hex, "%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  return (endpoint == Endpoint::ChatCompletions ? "chatcmpl-" : "cmpl-") + std::string(hex);
}

// What a stream has sent, for its usage chunk.
struct StreamState {
  std::shared_ptr<RequestChannel> channel;
  ResponseWriter writer;
  bool include_usage = false;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// One call of the chunked content provider: waits up to a second for outputs
// and writes their chunks, or a keep-alive comment when none came (a write to
// a closed connection fails, which is how a silent client's departure shows).
// False ends the response: the client went away, and the request is cancelled.
bool write_stream(StreamState& s, httplib::DataSink& sink) {
  const auto send = [&](const std::string& text) {
    if (sink.write(text.data(), text.size())) return true;
    s.channel->cancel();
    return false;
  };
  std::vector<engine::RequestOutput> outputs;
  const bool more = s.channel->next(outputs, std::chrono::milliseconds(1000));
  for (const engine::RequestOutput& o : outputs) {
    s.prompt_tokens = o.prompt_tokens;
    for (const engine::CompletionDelta& d : o.completions) s.completion_tokens += static_cast<int64_t>(d.token_ids.size());
    for (const Json& chunk : s.writer.chunks(o)) {
      if (!send(sse_event(chunk))) return false;
    }
  }
  if (more) return outputs.empty() ? send(": keep-alive\n\n") : true;
  // The request ended: an error it ended with (timeout, shutdown), usage, [DONE].
  if (const std::optional<ApiError> e = s.channel->error()) {
    if (!send(sse_event(e->to_json()))) return false;
  }
  if (s.include_usage && !send(sse_event(s.writer.usage_chunk(s.prompt_tokens, s.completion_tokens)))) return false;
  if (!send("data: [DONE]\n\n")) return false;
  sink.done();
  return true;
}

}  // namespace

HttpServer::HttpServer(ServerOptions options, Metrics& metrics)
    : options_(std::move(options)), metrics_(metrics), http_(std::make_unique<httplib::Server>()) {
  // Debian's httplib sends without MSG_NOSIGNAL: a write to a client that
  // left would kill the process with SIGPIPE instead of failing.
  std::signal(SIGPIPE, SIG_IGN);
  const size_t threads = static_cast<size_t>(options_.http_threads);
  http_->new_task_queue = [threads] { return new ConnectionPool(threads); };
  http_->set_payload_max_length(options_.max_request_bytes);
  // A chunk per token: without TCP_NODELAY, Nagle's algorithm holds a small
  // write back until the previous one is acknowledged (delayed ACK: ~40 ms).
  http_->set_tcp_nodelay(true);
  install_routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  const int port = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                                      : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0) {
    throw Error("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                " (address in use, or not an address of this machine)");
  }
  return port;
}

void HttpServer::start() {
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  // stop() before the loop runs would be lost (httplib stops only a running
  // server), and the join in stop() would wait forever.
  while (!http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::attach(const engine::Engine& engine, EngineWorker& worker) {
  backend_storage_ = std::make_unique<Backend>(Backend{engine, worker});
  backend_.store(backend_storage_.get());
}

void HttpServer::drain(double timeout) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  while (active_.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void HttpServer::stop() {
  if (!thread_.joinable()) return;
  http_->stop();
  thread_.join();
}

const HttpServer::Backend& HttpServer::backend() const {
  const Backend* b = backend_.load();
  if (b == nullptr) throw ApiError(503, "service_unavailable", "the model is still loading", std::nullopt, "loading");
  return *b;
}

void HttpServer::install_routes() {
  httplib::Server& http = *http_;
  const std::string& served = options_.served_model_name;

  // The key guards every route but /health and /metrics (probes and scrapers carry none).
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || req.path == "/health" || req.path == "/metrics") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    const std::string header = req.get_header_value("Authorization");
    const std::string bearer = "Bearer ";
    const bool ok = header.starts_with(bearer) && same_secret(header.substr(bearer.size()), options_.api_key);
    if (ok) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "authentication_error",
                             header.empty() ? "no API key: send the header \"Authorization: Bearer KEY\""
                                            : "the API key is not valid",
                             std::nullopt, "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib answers itself (no route, a body over the limit, a
  // malformed request) get the API's error shape too.
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      send_error(res, ApiError(404, "not_found_error", "no route " + req.method + " " + req.path.substr(0, 200), std::nullopt,
                               "route_not_found"));
    } else if (res.status == 413) {
      send_error(res, ApiError(413, "invalid_request_error",
                               "the request body is larger than the server's limit of " +
                                   std::to_string(options_.max_request_bytes) + " bytes (--max-request-bytes)",
                               std::nullopt, "request_too_large"));
    } else {
      send_error(res, ApiError(res.status, "invalid_request_error", "the HTTP request is malformed"));
    }
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (backend_.load() == nullptr) {
      send_error(res, ApiError(503, "service_unavailable", "the model is still loading", std::nullopt, "loading"));
    } else if (backend_.load()->worker.shutting_down()) {
      send_error(res, ApiError(503, "service_unavailable", "the server is shutting down", std::nullopt, "shutting_down"));
    } else {
      res.set_content("{}", "application/json");
    }
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });
  http.Get("/v1/models", guarded(active_, [this, &served](const httplib::Request&, httplib::Response& res) {
             const Backend& b = backend();
             const Json model = {{"id", served},
                                 {"object", "model"},
                                 {"created", 0},
                                 {"owned_by", "tokamak"},
                                 {"max_model_len", b.engine.max_model_len()}};
             res.set_content(json_text({{"object", "list"}, {"data", Json::array({model})}}), "application/json");
           }));

  for (const Endpoint endpoint : {Endpoint::Completions, Endpoint::ChatCompletions}) {
    const char* path = endpoint == Endpoint::Completions ? "/v1/completions" : "/v1/chat/completions";
    http.Post(path, guarded(active_, [this, endpoint, &served](const httplib::Request& req, httplib::Response& res) {
                const Backend& b = backend();
                ApiRequest api = parse_api_request(endpoint, req.body, served);
                const int32_t n = api.request.params.n;
                const bool logprobs = api.request.params.logprobs;
                std::shared_ptr<RequestChannel> channel = b.worker.submit(std::move(api.request));
                channel->wait_accepted();
                ResponseWriter writer(endpoint, request_id(endpoint), served, b.engine.tokenizer(), n, logprobs);
                if (api.stream) {
                  auto state = std::make_shared<StreamState>(StreamState{channel, std::move(writer), api.include_usage});
                  res.set_header("Cache-Control", "no-cache");
                  ++active_;  // until httplib releases the provider: the stream is written
                  res.set_chunked_content_provider(
                      "text/event-stream",
                      [state](size_t, httplib::DataSink& sink) { return write_stream(*state, sink); },
                      [this, state](bool success) {
                        if (!success) state->channel->cancel();
                        --active_;
                      });
                  return;
                }
                engine::RequestResult result;
                result.completions.resize(static_cast<size_t>(n));
                int32_t last_prompt_token = -1;
                std::vector<engine::RequestOutput> outputs;
                while (channel->next(outputs, std::chrono::milliseconds(1000))) {
                  for (const engine::RequestOutput& o : outputs) {
                    if (o.last_prompt_token >= 0) last_prompt_token = o.last_prompt_token;
                    engine::accumulate(result, o);
                  }
                  outputs.clear();
                }
                if (const std::optional<ApiError> e = channel->error()) throw *e;
                res.set_content(json_text(writer.full(result, last_prompt_token)), "application/json");
              }));
  }

  http.Post("/tokenize", guarded(active_, [this, &served](const httplib::Request& req, httplib::Response& res) {
              const Backend& b = backend();
              const TokenizeRequest t = parse_tokenize_request(req.body, served);
              std::vector<int32_t> ids;
              try {
                ids = t.prompt.messages.is_null() && !t.add_special_tokens
                          ? b.engine.tokenizer().encode(t.prompt.text, /*add_bos=*/false)
                          : b.engine.tokenize_prompt(t.prompt);
              } catch (const Error& e) {
                throw ApiError::bad_request(e.what());
              }
              const Json body = {{"count", ids.size()}, {"max_model_len", b.engine.max_model_len()}, {"tokens", ids}};
              res.set_content(json_text(body), "application/json");
            }));
  http.Post("/detokenize", guarded(active_, [this, &served](const httplib::Request& req, httplib::Response& res) {
              const Backend& b = backend();
              const std::vector<int32_t> ids =
                  parse_detokenize_request(req.body, b.engine.tokenizer().n_vocab(), served);
              res.set_content(json_text({{"prompt", b.engine.tokenizer().decode(ids)}}), "application/json");
            }));
}

}  // namespace tokamak::server
