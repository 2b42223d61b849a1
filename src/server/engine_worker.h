// The engine thread of the server: the only thread that calls the Engine.
// HTTP threads submit a request and get a RequestChannel back; the engine
// thread adds queued requests, aborts cancelled and timed-out ones, steps,
// and hands every step's outputs to their channels.
//
//   HTTP thread: submit ─► incoming ─┐                 ┌─► channel.outputs ─► next() ─► SSE / JSON
//                cancel ─► flag ─────┤   engine thread │
//                                    └─► add / abort ─► step() ─┘ (and Metrics)
//
// Limits: at most max_num_seqs + max_queue requests are in flight (queued
// here, waiting or running in the engine); more is a 429. After shutdown()
// begins every submit is a 503, and requests still running at the deadline
// are aborted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/metrics.h"

namespace tokamak::server {

class RequestChannel {
 public:
  // Blocks until the engine thread added the request (returns) or refused it
  // (throws its ApiError: 400 for a prompt over max_model_len, ...).
  void wait_accepted();
  // Moves the outputs that arrived since the last call into `out`, waiting up
  // to `timeout` for the first. False once the request has ended and every
  // output was taken.
  bool next(std::vector<engine::RequestOutput>& out, std::chrono::milliseconds timeout);
  // The error that ended an accepted request early (504 past the request
  // timeout, 503 aborted at shutdown), if one did.
  std::optional<ApiError> error() const;
  // The client went away: the engine thread aborts the request at its next
  // iteration, which frees its KV blocks.
  void cancel() { cancelled_.store(true); }

 private:
  friend class EngineWorker;
  enum class State { Queued, Running, Ended };
  void accept(int64_t id);
  void push(engine::RequestOutput output);
  void end(std::optional<ApiError> error);

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  State state_ = State::Queued;
  std::deque<engine::RequestOutput> outputs_;
  std::optional<ApiError> error_;
  std::atomic<bool> cancelled_{false};
  // The engine thread's own fields.
  engine::Request request_;
  int64_t id_ = -1;
  double arrival_ = 0.0;
  std::vector<double> last_token_;  // per completion; < 0 before its first token
  engine::FinishReason finish_ = engine::FinishReason::None;
};

struct WorkerOptions {
  int32_t max_queue = 256;         // in flight beyond max_num_seqs
  double request_timeout = 600.0;  // seconds from arrival; the request is aborted past it
};

class EngineWorker {
 public:
  EngineWorker(engine::Engine& engine, Metrics& metrics, WorkerOptions options);
  ~EngineWorker();  // aborts what runs and joins the thread
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  // Queues a request; throws ApiError 429 when the queue is full, 503 when
  // shutting down.
  std::shared_ptr<RequestChannel> submit(engine::Request request);
  // Refuses new requests from now on, lets in-flight ones run until
  // `timeout` seconds, aborts the rest; returns once none is left.
  void shutdown(double timeout);
  bool shutting_down() const { return draining_.load(); }

 private:
  void run();
  double now() const;
  // One iteration's bookkeeping, on the engine thread.
  void admit(std::vector<std::shared_ptr<RequestChannel>>& incoming);
  void abort_cancelled(bool past_deadline);
  void dispatch(std::vector<engine::RequestOutput>& outputs);
  void publish_gauges();
  // A request ended: one fewer in flight (shutdown() waits for none).
  void release();

  engine::Engine& engine_;
  Metrics& metrics_;
  WorkerOptions options_;
  std::chrono::steady_clock::time_point epoch_;
  int64_t capacity_;

  std::mutex mutex_;  // guards incoming_, in_flight_, stop_, deadline_
  std::condition_variable wake_;
  std::vector<std::shared_ptr<RequestChannel>> incoming_;
  int64_t in_flight_ = 0;  // submitted, not yet ended
  bool stop_ = false;
  std::optional<double> deadline_;  // shutdown: abort what still runs after it
  std::atomic<bool> draining_{false};
  std::condition_variable drained_;

  std::unordered_map<int64_t, std::shared_ptr<RequestChannel>> live_;  // engine thread only: by engine id
  std::thread thread_;
};

}  // namespace tokamak::server
