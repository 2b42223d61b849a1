// tokamak serve's HTTP front: cpp-httplib, one thread per connection (its
// thread pool, sized for every request the worker admits plus spare), routes
// for the OpenAI API, /tokenize, /detokenize, /health and /metrics.
//
// Lifecycle: bind() and start() before the model loads, so /health answers
// 503 "loading" meanwhile (and every API route 503 too); attach() when the
// Engine runs; stop() once the worker has drained.
//
// HTTP threads do no model work: they validate, submit to the EngineWorker,
// and turn its outputs into JSON or server-sent events. A stream whose client
// went away (a failed write, or a failed keep-alive comment while waiting)
// cancels its request. Constructing one ignores SIGPIPE for the process (a
// write to a closed connection must fail, not kill).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "server/metrics.h"

namespace httplib {
class Server;
}

namespace tokamak::engine {
class Engine;
}

namespace tokamak::server {

class EngineWorker;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port
  std::string served_model_name;     // what /v1/models lists and "model" must match
  std::string api_key;               // empty: no key needed
  size_t max_request_bytes = 1 << 20;
  int http_threads = 64;             // connections served at once
};

class HttpServer {
 public:
  HttpServer(ServerOptions options, Metrics& metrics);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port. Throws tokamak::Error
  // naming host and port when it cannot.
  int bind();
  // Serves on a thread of its own.
  void start();
  // From now on the API routes run on `engine` through `worker` (both outlive stop()).
  void attach(const engine::Engine& engine, EngineWorker& worker);
  // Waits until no response is being written (a stream's last chunks go out
  // after its request ended), at most `timeout` seconds.
  void drain(double timeout);
  void stop();

 private:
  struct Backend;
  void install_routes();
  const Backend& backend() const;  // throws ApiError 503 while loading

  ServerOptions options_;
  Metrics& metrics_;
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<Backend> backend_storage_;
  std::atomic<const Backend*> backend_{nullptr};
  // API requests whose response is not written yet: handlers running, streams open.
  std::atomic<int64_t> active_{0};
  std::thread thread_;
};

}  // namespace tokamak::server
